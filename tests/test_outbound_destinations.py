"""LLM requests never go to the server's own or its private network's services unless an
admin listed the host (issue 28, F-06: endpoint base URLs at 127.0.0.1:<port>/admin,
[::1]:6379, 2130706433 and 169.254.169.254 were accepted and fetched, and "cannot connect" vs
"HTTP 404" mapped open ports). Checked where a base URL is written (a 400 naming base_url),
where a client is made and where an endpoint is tested; nothing is sent to a refused host."""

from __future__ import annotations

import pytest

from core.app_errors import InvalidInput
from llm.endpoints import Endpoint
from llm.outbound import destination_problem
from tests.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.django_db

REFUSED = [
    ("http://127.0.0.1:8000/admin", "loopback"),
    ("http://[::1]:6379/v1", "loopback"),
    ("http://2130706433/v1", "loopback"),  # 127.0.0.1 written as one number
    ("http://localhost:9/v1", "loopback"),
    ("http://169.254.169.254/v1", "link-local"),
    ("http://10.0.0.5:8000/v1", "private"),
    ("http://192.168.1.2/v1", "private"),
    ("http://100.64.0.1/v1", "shared"),
    ("http://0.0.0.0:8000/v1", "unspecified"),
    ("http://[::ffff:127.0.0.1]:8000/v1", "loopback"),
]


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_private_and_local_addresses_are_refused_unless_listed(url, why):
    problem = destination_problem(url, allowed=[])
    assert problem is not None and why in problem and "OUTBOUND_ALLOWED_HOSTS" in problem


def test_a_listed_host_or_host_and_port_is_allowed_and_nothing_else():
    assert destination_problem("http://127.0.0.1:8000/v1", allowed=["127.0.0.1:8000"]) is None
    assert destination_problem("http://127.0.0.1:8001/v1", allowed=["127.0.0.1:8000"]) is not None
    assert destination_problem("http://localhost:5/v1", allowed=["LOCALHOST"]) is None
    assert destination_problem("http://[::1]:8000/v1", allowed=["[::1]:8000"]) is None
    assert destination_problem("http://[::1]:8000/v1", allowed=["::1"]) is None
    assert destination_problem("http://10.0.0.5:8000/v1", allowed=["10.0.0.5"]) is None
    # A public address needs no listing; a name that does not resolve is left to the request.
    assert destination_problem("http://8.8.8.8/v1", allowed=[]) is None
    assert destination_problem("http://no-such-host.invalid/v1", allowed=[]) is None


def test_an_endpoint_record_at_the_metadata_address_is_a_400_naming_base_url(admin_client_):
    from llm.models import EndpointRecord

    response = admin_client_.post(
        "/api/llm/endpoints/",
        {"name": "metadata", "base_url": "http://169.254.169.254/v1", "model": "m"},
        content_type="application/json",
    )
    assert response.status_code == 400 and "base_url" in response.json(), response.content
    assert not EndpointRecord.objects.filter(name="metadata").exists()


def test_nothing_is_sent_to_a_local_server_the_admin_did_not_list(settings):
    from llm.checks import endpoint_check
    from llm.client import LLMClient

    settings.OUTBOUND_ALLOWED_HOSTS = []
    with ScriptedLLM() as server:
        endpoint = Endpoint(role="generate", base_url=server.base_url, api_key="k", model="m")
        check = endpoint_check(endpoint, roles=["generate"], timeout=5)
        assert not check.reachable and check.error.startswith("not sent:") and "loopback" in check.error
        with pytest.raises(InvalidInput) as caught:
            LLMClient(endpoint)
        assert list(caught.value.fields) == ["base_url"]
        assert server.requests == []
        # Listed, the same server is reached.
        settings.OUTBOUND_ALLOWED_HOSTS = [server.base_url.split("//")[1].split("/")[0]]
        assert endpoint_check(endpoint, roles=["generate"], timeout=5).reachable
        assert server.requests


def test_a_targets_error_page_is_reduced_to_its_status_and_a_bounded_text():
    """A target's HTML error page is not reflected whole into the endpoint check (and the
    run errors, ``_describe``): markup and control characters go, at most 300 characters stay."""
    from llm.checks import endpoint_check
    from llm.outbound import TARGET_WORDS_MAX
    from tests.scripted_llm import Raw

    page = "<html><head><title>Admin</title></head><body>" + "<p>secret row\x07</p>" * 400 + "</body></html>"
    with ScriptedLLM() as server:
        server.default = lambda body: Raw(page, code=404, content_type="text/html")
        endpoint = Endpoint(role="generate", base_url=server.base_url, api_key="k", model="m")
        check = endpoint_check(endpoint, roles=["generate"], timeout=5)
    assert check.error.startswith("HTTP 404: ")
    words = check.error[len("HTTP 404: ") :]
    assert "<" not in check.error and "\x07" not in check.error and len(words) <= TARGET_WORDS_MAX
