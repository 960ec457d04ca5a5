"""The API root (``GET /api/``) lists every endpoint of the API that takes no path parameter,
derived from the URL configuration: each such path of the OpenAPI schema is there, and each
entry answers."""

from __future__ import annotations

import pytest
import yaml
from django.test import Client

from core.services import api_token_create

pytestmark = pytest.mark.django_db


def _root(client) -> dict[str, str]:
    response = client.get("/api/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def test_every_schema_path_without_path_parameters_is_in_the_api_root(researcher_client):
    schema = yaml.safe_load(researcher_client.get("/api/schema/").content)
    paths = {path for path in schema["paths"] if "{" not in path}
    listed = {url.removeprefix("http://testserver") for url in _root(researcher_client).values()}
    assert paths, "the schema lists no path"
    assert paths - listed == set()


@pytest.mark.parametrize(
    "name", ["studies", "judging/models", "llm/endpoints", "llm/roles", "leaderboard", "reward", "prolific/token"]
)
def test_the_endpoints_the_root_used_to_leave_out_are_listed(researcher_client, name):
    root = _root(researcher_client)
    assert name in root
    assert root[name].removeprefix("http://testserver").rstrip("/") == f"/api/{name}"


def test_the_root_lists_no_documentation_page_and_no_path_with_parameters(researcher_client):
    root = _root(researcher_client)
    assert not {"schema", "docs", "redoc", ""} & set(root)
    assert all("<" not in url and "(" not in url and "{" not in url for url in root.values())


def test_every_entry_of_the_root_answers(admin_user):
    """Each entry is routed to a view that answers an admin's token: a list or a report (200),
    a 400 naming the query parameters it needs (leaderboard/compare), or a 405 for a POST-only
    endpoint (reward); never a 404."""
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=admin_user, label='root').secret}")
    for name, url in _root(client).items():
        response = client.get(url, HTTP_ACCEPT="application/json")
        assert response.status_code in (200, 400, 405), (name, response.status_code, response.content[:300])
