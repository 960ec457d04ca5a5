"""Endpoint records: added, tested and assigned on the admin pages, then used by the next run
without a restart; reassigned, retired, seeded from the environment; the key never shown,
logged or stored in plain text; roles; hostile input refused naming the field."""

from __future__ import annotations

import json
import logging
from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from llm.client import LLMClient
from llm.endpoint_services import (
    EndpointFieldError,
    endpoint_record_create,
    endpoint_record_retire,
    endpoint_records_seed_from_env,
    endpoint_role_assign,
)
from llm.endpoints import EndpointNotConfigured, endpoint_from_overrides, endpoint_get, endpoint_require
from llm.models import EndpointRecord, EndpointRoleAssignment, LedgerEntry, LLMJob
from llm.request import LLMRequest
from llm.services import llm_job_create, llm_job_execute, llm_job_resume
from tests.scripted_llm import Reply, ScriptedLLM, Status

pytestmark = pytest.mark.django_db(transaction=True)

KEY_A = "sk-live-AAAA-0123456789abcdef-wxyz"
KEY_B = "sk-live-BBBB-fedcba9876543210-5678"
CHECK_OK = json.dumps({"ok": True})


def _unconfigured(settings):
    """Nothing in the environment: every role resolves to nothing unless a record is assigned."""
    empty = {"base_url": "", "api_key": "", "model": "", "temperature": None, "max_tokens": None}
    settings.LLM_DEFAULT_ENDPOINT = dict(empty)
    settings.LLM_ROLES = {role: dict(empty) for role in settings.LLM_ROLES}


def _server(**kwargs) -> ScriptedLLM:
    server = ScriptedLLM(**kwargs)
    server.default = lambda body: Reply(
        CHECK_OK if body.get("response_format") else "Step one.", prompt_tokens=1000, completion_tokens=100
    )
    return server


def _add(client: Client, **fields) -> EndpointRecord:
    data = {
        "name": "gpu-a",
        "base_url": "",
        "model": "model-a",
        "api_key": "",
        "api_key_env": "",
        "max_concurrency": "",
        "requests_per_minute": "",
        "tokens_per_minute": "",
        "price_input": "",
        "price_output": "",
    }
    data.update(fields)
    response = client.post(reverse("llm_endpoint_add"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    return EndpointRecord.objects.get(name=data["name"])


def _run_job(role: str = "generate", text: str = "Write one step.") -> LLMJob:
    job = llm_job_create(
        run=f"test:{text}",
        role=role,
        start=False,
        requests=[LLMRequest(stage="generate", messages=[{"role": "user", "content": text}])],
    )
    assert llm_job_execute(job_id=job.pk) == "done"
    job.refresh_from_db()
    return job


def test_a_record_added_tested_and_assigned_on_the_pages_is_used_by_the_next_run_without_a_restart(
    settings, admin_client_
):
    _unconfigured(settings)
    with _server() as a, _server() as b:
        with pytest.raises(EndpointNotConfigured):
            endpoint_require("generate")
        record = _add(admin_client_, base_url=a.base_url, api_key=KEY_A, price_input="2", price_output="8")
        assert record.api_key_label == "saved, ending in …wxyz" and record.source.startswith(
            "added on the LLM pages by ada"
        )

        # Test: the llm_check request, through the client, with the stored key.
        response = admin_client_.post(reverse("llm_endpoint_test", args=[record.pk]))
        assert response.status_code == 302
        record.refresh_from_db()
        assert record.last_test_ok is True and record.last_test_latency_ms is not None
        assert "json_schema" in record.last_test_message and '{"ok": true}' in record.last_test_message
        assert a.authorizations == [f"Bearer {KEY_A}"]
        assert a.chat_requests()[0]["model"] == "model-a"

        response = admin_client_.post(reverse("llm_endpoint_role_assign"), {"role": "generate", "record": record.pk})
        assert response.status_code == 302
        job = _run_job()
        assert len(a.chat_requests()) == 2 and a.authorizations[-1] == f"Bearer {KEY_A}"
        assert job.endpoint_record_id == record.pk
        entry = LedgerEntry.objects.get(key=job.keys[0])
        assert entry.base_url == a.base_url and entry.model == "model-a"
        # The record's prices: 1000 in * 2/1M + 100 out * 8/1M.
        assert entry.cost_usd == Decimal("0.002800")

        # A second record, reassigned: the next run goes there; the first job stays with its record.
        second = _add(admin_client_, name="gpu-b", base_url=b.base_url, model="model-b", api_key=KEY_B)
        admin_client_.post(reverse("llm_endpoint_role_assign"), {"role": "generate", "record": second.pk})
        job_b = _run_job(text="Another step.")
        assert len(b.chat_requests()) == 1 and b.chat_requests()[0]["model"] == "model-b"
        assert b.authorizations == [f"Bearer {KEY_B}"] and len(a.chat_requests()) == 2
        assert job_b.endpoint_record_id == second.pk
        LedgerEntry.objects.filter(key=job.keys[0]).update(outcome="api_error")  # the first job has a failure again
        LLMJob.objects.filter(pk=job.pk).update(status="done_with_failures")
        llm_job_resume(job=job, enqueue=False)
        llm_job_execute(job_id=job.pk)
        assert len(a.chat_requests()) == 3 and len(b.chat_requests()) == 1  # asked again where its keys point

        # Retired: no role uses it; the role falls back to its (empty) environment.
        response = admin_client_.post(reverse("llm_endpoint_retire", args=[second.pk]))
        assert response.status_code == 302
        second.refresh_from_db()
        assert second.retired and second.retired_at is not None
        assert not EndpointRoleAssignment.objects.filter(role="generate").exists()
        with pytest.raises(EndpointNotConfigured):
            llm_job_create(
                run="after-retire",
                role="generate",
                start=False,
                requests=[LLMRequest(stage="generate", messages=[{"role": "user", "content": "x"}])],
            )
        assert EndpointRecord.objects.filter(pk=second.pk).exists()  # never deleted: job_b points at it
        page = admin_client_.get(reverse("llm_endpoints")).content.decode()
        assert "retired" in page
        # A retired record cannot be assigned until it is unretired.
        with pytest.raises(EndpointFieldError, match="retired"):
            endpoint_role_assign(role="generate", record=second)
        admin_client_.post(reverse("llm_endpoint_retire", args=[second.pk]), {"action": "unretire"})
        endpoint_role_assign(role="generate", record=second)
        assert endpoint_get("generate").base_url == b.base_url


@pytest.mark.parametrize(
    "answer, expected",
    [
        (Status(401, f"Incorrect API key provided: {KEY_A}"), ("HTTP 401", "check the API key")),
        (Status(500, "internal error"), ("HTTP 500", "The server failed")),
        (None, ("cannot connect", "Nothing answered at that address")),
    ],
)
def test_a_failing_endpoint_test_stores_the_error_and_what_to_do_never_the_key(
    settings, admin_client_, answer, expected
):
    _unconfigured(settings)
    with _server() as server:
        server.default = lambda body: answer
        url = server.base_url if answer is not None else "http://127.0.0.1:9/v1"
        record = _add(admin_client_, base_url=url, api_key=KEY_A)
        admin_client_.post(reverse("llm_endpoint_test", args=[record.pk]))
        record.refresh_from_db()
        assert record.last_test_ok is False and record.last_test_at is not None
        for part in expected:
            assert part in record.last_test_message
        assert KEY_A not in record.last_test_message
        page = admin_client_.get(reverse("llm_endpoint_edit", args=[record.pk])).content.decode()
        assert expected[0] in page and KEY_A not in page


def test_the_key_never_appears_in_pages_api_logs_or_the_database(settings, admin_client_, researcher_client, caplog):
    _unconfigured(settings)
    caplog.set_level(logging.DEBUG)
    with _server() as server:
        record = _add(admin_client_, base_url=server.base_url, api_key=KEY_A)
        admin_client_.post(reverse("llm_endpoint_test", args=[record.pk]))
        admin_client_.post(reverse("llm_endpoint_role_assign"), {"role": "generate", "record": record.pk})
        _run_job()
        server.default = lambda body: Status(401, f"Incorrect API key provided: {KEY_A}")
        admin_client_.post(reverse("llm_endpoint_test", args=[record.pk]))
        refused = llm_job_create(
            run="refused",
            role="generate",
            start=False,
            requests=[LLMRequest(stage="generate", messages=[{"role": "user", "content": "no"}])],
        )
        llm_job_execute(job_id=refused.pk)
    failed = LedgerEntry.objects.get(key=refused.keys[0])
    assert failed.outcome == "api_error" and "401" in failed.error and "Incorrect API key" in failed.error
    assert server.authorizations and all(a == f"Bearer {KEY_A}" for a in server.authorizations)
    pages = [
        admin_client_.get(reverse(name, args=args)).content.decode()
        for name, args in (
            ("llm_endpoints", []),
            ("llm_endpoint_edit", [record.pk]),
            ("system", []),
            ("llm_overview", []),
        )
    ]
    apis = [
        client.get(url).content.decode()
        for client in (admin_client_, researcher_client)
        for url in ("/api/llm/endpoints/", f"/api/llm/endpoints/{record.pk}/", "/api/llm/roles/")
    ]
    for text in pages + apis:
        assert KEY_A not in text and KEY_A[-12:] not in text
    assert "saved, ending in …wxyz" in pages[0] and "saved, ending in …wxyz" in apis[0]
    assert KEY_A not in caplog.text
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM llm_endpointrecord")
        rows = cursor.fetchall()
        cursor.execute("SELECT * FROM llm_ledgerentry")
        rows += cursor.fetchall()
    assert rows and KEY_A not in repr(rows)
    # The edit form never sends the key back (a password field without its value).
    assert 'name="api_key"' in pages[1] and 'value="sk-' not in pages[1]


def test_saving_the_form_without_a_key_keeps_the_stored_key_and_a_variable_replaces_it(
    settings, admin_client_, monkeypatch
):
    _unconfigured(settings)
    record = _add(admin_client_, base_url="http://127.0.0.1:1/v1", api_key=KEY_A)
    form = {
        "name": "gpu-a",
        "base_url": "http://127.0.0.1:1/v1",
        "model": "model-a",
        "api_key": "",
        "api_key_env": "",
        "max_concurrency": "4",
        "requests_per_minute": "",
        "tokens_per_minute": "",
        "price_input": "",
        "price_output": "",
    }
    assert admin_client_.post(reverse("llm_endpoint_edit", args=[record.pk]), form).status_code == 302
    record.refresh_from_db()
    assert record.api_key_kind == "stored" and record.max_concurrency == 4
    endpoint_role_assign(role="generate", record=record)
    assert endpoint_get("generate").api_key == KEY_A
    monkeypatch.setenv("GPU_A_API_KEY", "from-the-environment-123")
    form["api_key_env"] = "GPU_A_API_KEY"
    admin_client_.post(reverse("llm_endpoint_edit", args=[record.pk]), form)
    record.refresh_from_db()
    assert (
        record.api_key_kind == "env"
        and record.api_key_encrypted == ""
        and record.api_key_label == "from $GPU_A_API_KEY"
    )
    assert endpoint_get("generate").api_key == "from-the-environment-123"  # read now, no restart


def test_record_limits_apply_to_the_client_and_overrides_still_win(settings):
    _unconfigured(settings)
    # A GPU box on the private network, listed by the admin (llm/outbound.py).
    settings.OUTBOUND_ALLOWED_HOSTS = [*settings.OUTBOUND_ALLOWED_HOSTS, "10.0.0.5", "10.0.0.1"]
    record = endpoint_record_create(
        name="limited",
        base_url="http://10.0.0.5:8000/v1/",
        model="m",
        api_key=KEY_A,
        max_concurrency=3,
        requests_per_minute=60,
    )
    endpoint_role_assign(role="how2score_judge", record=record)
    endpoint = endpoint_get("how2score_judge")
    client = LLMClient(endpoint)
    try:
        assert client.limits.concurrency == 3 and client.limits.requests_per_minute == 60
    finally:
        client.close()
    # A run's model override keeps the record's URL and key, not its prices (they are per model).
    other_model = endpoint_from_overrides("how2score_judge", {"model": "m2"})
    assert other_model.base_url == record.base_url and other_model.api_key == KEY_A and other_model.price_input is None
    # A run's base URL override to another host never carries the record's key.
    elsewhere = endpoint_from_overrides("how2score_judge", {"base_url": "http://elsewhere.invalid/v1"})
    assert (
        elsewhere.base_url == "http://elsewhere.invalid/v1" and elsewhere.api_key == "" and elsewhere.record_id is None
    )


def test_environment_seeds_the_first_records_once(settings):
    default = {
        "base_url": "http://llm.local:8000/v1",
        "api_key": "env-default-key-123",
        "model": "qwen3-8b",
        "temperature": None,
        "max_tokens": None,
    }
    judge = {**default, "base_url": "http://judge.local:8000/v1", "model": "how2judge"}
    settings.LLM_DEFAULT_ENDPOINT = dict(default)
    settings.LLM_ROLES = {role: dict(judge if role == "how2score_judge" else default) for role in settings.LLM_ROLES}
    from llm import demo as llm_demo

    summary = llm_demo.load()
    assert "2 endpoint record(s) seeded" in summary
    default_record = EndpointRecord.objects.get(name="default")
    judge_record = EndpointRecord.objects.get(name="how2score_judge")
    assert default_record.source == "from LLM_BASE_URL, LLM_MODEL, LLM_API_KEY"
    assert judge_record.source == "from JUDGE_BASE_URL, JUDGE_MODEL, LLM_API_KEY"
    assert default_record.api_key_env == "LLM_API_KEY" and default_record.api_key_encrypted == ""
    assignments = dict(EndpointRoleAssignment.objects.values_list("role", "record__name"))
    assert assignments["how2score_judge"] == "how2score_judge"
    assert {assignments[r] for r in settings.LLM_ROLES if r != "how2score_judge"} == {"default"}
    # Idempotent: nothing new, and an admin's unassignment stays.
    endpoint_role_assign(role="generate", record=None)
    assert endpoint_records_seed_from_env() == []
    assert EndpointRecord.objects.count() == 2 and not EndpointRoleAssignment.objects.filter(role="generate").exists()
    # The System page says where each role's endpoint comes from.


def test_system_page_names_the_record_or_the_environment_variable_of_each_role(settings, admin_client_):
    default = {
        "base_url": "http://llm.local:8000/v1",
        "api_key": "",
        "model": "qwen3-8b",
        "temperature": None,
        "max_tokens": None,
    }
    settings.LLM_DEFAULT_ENDPOINT = dict(default)
    settings.LLM_ROLES = {
        role: dict(default, model="how2judge") if role == "how2score_judge" else dict(default)
        for role in settings.LLM_ROLES
    }
    record = endpoint_record_create(name="judge-gpu", base_url="http://gpu:8000/v1", model="how2judge")
    endpoint_role_assign(role="how2score_judge", record=record)
    page = admin_client_.get(reverse("system")).content.decode()
    assert "endpoint record &#x27;judge-gpu&#x27;" in page or "endpoint record 'judge-gpu'" in page
    assert "environment: LLM_BASE_URL, LLM_MODEL" in page
    assert "JUDGE_MODEL" in page  # the environment names another endpoint for the judge; the record is used


def test_researchers_and_anonymous_users_cannot_change_endpoints(settings, researcher_client):
    _unconfigured(settings)
    record = endpoint_record_create(name="r", base_url="http://127.0.0.1:1/v1", model="m")
    for url in (reverse("llm_endpoints"), reverse("llm_endpoint_add"), reverse("llm_endpoint_edit", args=[record.pk])):
        assert researcher_client.get(url).status_code == 403
        anonymous = Client().get(url)
        assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
    for url in (
        reverse("llm_endpoint_test", args=[record.pk]),
        reverse("llm_endpoint_retire", args=[record.pk]),
        reverse("llm_endpoint_role_assign"),
    ):
        assert researcher_client.post(url, {"role": "generate", "record": record.pk}).status_code == 403
    assert not EndpointRoleAssignment.objects.exists()
    # The API: researchers read (no key), cannot write; anonymous calls are 401.
    assert researcher_client.get("/api/llm/endpoints/").status_code == 200
    for url, body in (
        ("/api/llm/endpoints/", {"name": "x", "base_url": "http://h/v1", "model": "m"}),
        (f"/api/llm/endpoints/{record.pk}/test/", {}),
        (f"/api/llm/endpoints/{record.pk}/retire/", {}),
        ("/api/llm/roles/", {"role": "generate", "record": record.pk}),
    ):
        assert researcher_client.post(url, body, content_type="application/json").status_code == 403
        assert Client().post(url, body, content_type="application/json").status_code == 401
    assert (
        researcher_client.patch(
            f"/api/llm/endpoints/{record.pk}/", {"model": "z"}, content_type="application/json"
        ).status_code
        == 403
    )
    assert Client().get("/api/llm/endpoints/").status_code == 401
    record.refresh_from_db()
    assert not record.retired and record.model == "m" and EndpointRecord.objects.count() == 1


HOSTILE = [
    ("base_url", "ftp://files.example.org/v1", "http:// or https://"),
    ("base_url", "javascript:alert(1)", "http:// or https://"),
    ("base_url", "http://user:pw@host/v1", "credentials"),
    ("base_url", "http://host/v1\x00", "NUL"),
    ("base_url", "http://" + "h" * 600 + "/v1", "at most 500"),
    ("name", "bad\x00name", "NUL"),
    ("model", "m" * 201, "at most 200"),
    ("api_key_env", "NOT A NAME", "environment variable name"),
    ("api_key_env", "SECRET_KEY", "server's own secrets"),
    ("api_key_env", "DATABASE_URL", "server's own secrets"),
    ("api_key_env", "PROLIFIC_API_TOKEN", "server's own secrets"),
    ("api_key_env", "HOME", "LLM_API_KEY_ENV_ALLOWED"),
    ("api_key", "sk-with space", "spaces"),
    ("max_concurrency", "0", "from 1"),
    ("requests_per_minute", "-5", "from 1"),
    ("tokens_per_minute", "1e999", "from 1"),
    ("max_concurrency", "99999999999", "from 1"),
    ("price_input", "NaN", "between 0"),
    ("price_output", "-1", "between 0"),
]


@pytest.mark.parametrize("field, value, message", HOSTILE)
def test_hostile_values_are_form_errors_and_api_400s_naming_the_field(settings, admin_client_, field, value, message):
    _unconfigured(settings)
    data = {
        "name": "ok-name",
        "base_url": "http://127.0.0.1:1/v1",
        "model": "m",
        "api_key": "",
        "api_key_env": "",
        "max_concurrency": "",
        "requests_per_minute": "",
        "tokens_per_minute": "",
        "price_input": "",
        "price_output": "",
    }
    data[field] = value
    response = admin_client_.post(reverse("llm_endpoint_add"), data)
    assert response.status_code == 400
    page = response.content.decode()
    assert message.split()[0] in page
    if "\x00" in value:  # refused before any view by the request checks, naming the field
        assert field in page
    else:  # the form is shown again, with the error under the field
        assert f'id="id_{field}"' in page and 'class="errorlist' in page
    api = admin_client_.post("/api/llm/endpoints/", {k: v for k, v in data.items()}, content_type="application/json")
    assert api.status_code == 400, api.content
    assert field in api.json() or "field" in api.json()
    assert not EndpointRecord.objects.exists()


def test_api_adds_tests_assigns_and_retires_a_record(settings, admin_client_):
    _unconfigured(settings)
    with _server() as server:
        created = admin_client_.post(
            "/api/llm/endpoints/",
            {
                "name": "api-gpu",
                "base_url": server.base_url,
                "model": "model-a",
                "api_key": KEY_A,
                "max_concurrency": 8,
                "price_input": "1.5",
                "price_output": None,
            },
            content_type="application/json",
        )
        assert created.status_code == 201, created.content
        body = created.json()
        assert (
            body["api_key"] == "saved, ending in …wxyz"
            and "api_key_encrypted" not in body
            and body["max_concurrency"] == 8
        )
        pk = body["id"]
        tested = admin_client_.post(f"/api/llm/endpoints/{pk}/test/").json()
        assert tested["last_test_ok"] is True and server.authorizations == [f"Bearer {KEY_A}"]
        roles = admin_client_.post(
            "/api/llm/roles/", {"role": "generate", "record": pk}, content_type="application/json"
        )
        assert roles.status_code == 200
        assert {r["role"]: r["record"] for r in roles.json()}["generate"] == pk
        _run_job()
        assert len(server.chat_requests()) == 2
        changed = admin_client_.patch(
            f"/api/llm/endpoints/{pk}/", {"requests_per_minute": 30}, content_type="application/json"
        ).json()
        assert changed["requests_per_minute"] == 30 and changed["api_key"] == "saved, ending in …wxyz"
        # The base URL of a record with an unfinished job cannot change (its answers are keyed by it).
        job = llm_job_create(
            run="pending",
            role="generate",
            start=False,
            requests=[LLMRequest(stage="generate", messages=[{"role": "user", "content": "later"}])],
        )
        refused = admin_client_.patch(
            f"/api/llm/endpoints/{pk}/", {"base_url": "http://127.0.0.1:2/v1"}, content_type="application/json"
        )
        assert (
            refused.status_code == 400 and "base_url" in refused.json() and str(job.pk) in refused.json()["base_url"][0]
        )
        unknown = admin_client_.post(
            "/api/llm/roles/", {"role": "no-such-role", "record": pk}, content_type="application/json"
        )
        assert unknown.status_code == 400 and "role" in unknown.json()
        retired = admin_client_.post(f"/api/llm/endpoints/{pk}/retire/").json()
        assert retired["retired"] is True and retired["roles"] == []


def test_schema_renders_the_endpoint_record_api(admin_client_):
    schema = admin_client_.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert "/api/llm/endpoints/" in paths and "/api/llm/roles/" in paths and "/api/llm/endpoints/{id}/test/" in paths


def test_an_error_report_from_inside_a_save_never_shows_the_key(settings, monkeypatch, rf):
    """A failure while the key is in local variables (the form's data, the cleaned fields)
    writes a technical report without it."""
    import sys

    from core.error_reports import MaskingExceptionReporter

    _unconfigured(settings)

    def broken_save(self, *args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(EndpointRecord, "save", broken_save)
    try:
        endpoint_record_create(name="x", base_url="http://127.0.0.1:1/v1", model="m", api_key=KEY_A)
    except RuntimeError:
        report = MaskingExceptionReporter(rf.post("/llm/endpoints/new/"), *sys.exc_info())
        text = report.get_traceback_text() + report.get_traceback_html()
    else:  # pragma: no cover
        raise AssertionError("the save did not fail")
    assert "the database went away" in text and "endpoint_record_create" in text
    assert KEY_A not in text


def test_llm_check_and_the_llm_page_use_the_role_records(settings, admin_client_, capsys):
    from django.core.management import call_command

    _unconfigured(settings)
    with _server() as server:
        record = endpoint_record_create(name="checked", base_url=server.base_url, model="model-c", api_key=KEY_A)
        endpoint_role_assign(role="how2score_judge", record=record)
        call_command("llm_check", "--role", "how2score_judge")
        assert f"OK    {server.base_url}  model=model-c" in capsys.readouterr().out
        assert server.authorizations == [f"Bearer {KEY_A}"]
        endpoint_role_assign(role="generate", record=record)
        _run_job()
    page = admin_client_.get(reverse("llm_overview")).content.decode()
    assert "record checked" in page and reverse("llm_endpoints") in page


def test_seeding_never_takes_a_name_an_admin_gave(settings):
    default = {
        "base_url": "http://llm.local:8000/v1",
        "api_key": "",
        "model": "m",
        "temperature": None,
        "max_tokens": None,
    }
    settings.LLM_DEFAULT_ENDPOINT = dict(default)
    settings.LLM_ROLES = {role: dict(default) for role in settings.LLM_ROLES}
    endpoint_record_create(name="default", base_url="http://mine:1/v1", model="x")
    endpoint_record_create(name="default (from the environment)", base_url="http://mine:2/v1", model="x")
    [seeded] = endpoint_records_seed_from_env()
    assert seeded.name == "default (from the environment, 3)" and seeded.api_key_env == ""
    assert seeded.source == "from LLM_BASE_URL, LLM_MODEL"  # no key in the environment
