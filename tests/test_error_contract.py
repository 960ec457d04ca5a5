"""One way to refuse (docs/api.md, "Errors"): every refusal of the API has one body — ``code``
and ``detail`` always, each refused field with its problems, ``what_to_do`` when there is
advice — whether a service raised it, DRF refused it, the JSON parser, the hostile-request
middleware or Prolific; the OpenAPI schema says so; and no page or API view guesses a refusal
from a bare ``ValueError``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from core.app_errors import AppError, Conflict, InvalidInput, UpstreamFailed
from prolific.client import ProlificError
from prolific.errors import ProlificInvalid, ProlificNotReady
from prolific.webhooks import WebhookRefused

ROOT = Path(__file__).resolve().parent.parent


def _shape(body: dict, code: str) -> None:
    assert body["code"] == code, body
    assert isinstance(body["detail"], str) and body["detail"], body


def test_every_member_of_the_family_answers_code_detail_and_its_fields():
    field_only = InvalidInput(fields={"seed": "expected a non-negative integer"})
    assert field_only.body() == {
        "code": "invalid_input",
        "detail": "seed: expected a non-negative integer",
        "seed": ["expected a non-negative integer"],
    }
    finer = Conflict("run 7 is done", code="run_state")
    assert (finer.status, finer.body()) == (409, {"code": "run_state", "detail": "run 7 is done"})
    assert Conflict.code == "conflict"  # a finer code belongs to the instance, not the class
    advised = AppError("no model", what_to_do="set LLM_ROLES", status=503, code="unavailable")
    assert advised.body()["what_to_do"] == "set LLM_ROLES" and advised.status == 503


def test_prolifics_errors_are_members_with_their_codes_and_statuses():
    settings_kind = ProlificError("no_token", "no Prolific token is saved")
    assert isinstance(settings_kind, UpstreamFailed) and settings_kind.status == 409  # settings to fix, not a wait
    failing = ProlificError("unavailable", "Prolific answered 500", status_code=500)
    assert failing.status == 502
    body = failing.body()
    _shape(body, "prolific_unavailable")
    assert body["upstream_status"] == 500 and body["what_to_do"] == ProlificError.WHAT_TO_DO["unavailable"]
    invalid = ProlificInvalid("per_item", "must be a positive amount")
    assert invalid.status == 400 and invalid.body()["per_item"] == ["must be a positive amount"]
    assert ProlificNotReady("payment_per_item", "set it first").status == 409
    refused = WebhookRefused(403, "X-Prolific-Request-Signature", "does not match")
    assert refused.status == 403 and refused.body()["code"] == "webhook_refused"


@pytest.mark.django_db
@pytest.mark.sqlite
def test_drfs_own_refusals_take_the_same_shape(researcher_client, admin_client_):
    anonymous = Client().get("/api/studies/")
    assert anonymous.status_code in (401, 403)
    _shape(anonymous.json(), "not_authenticated")
    missing = researcher_client.get("/api/studies/no-such-study/")
    assert missing.status_code == 404
    _shape(missing.json(), "not_found")
    wrong_method = researcher_client.delete("/api/llm/endpoints/")
    assert wrong_method.status_code in (403, 405)
    assert wrong_method.json()["code"] in ("permission_denied", "method_not_allowed")
    # A serializer's refusal (a value of the wrong type), naming the field under code invalid_input.
    refused = admin_client_.post(
        "/api/llm/endpoints/",
        {"name": 5, "base_url": "http://127.0.0.1:9/v1", "model": "m"},
        content_type="application/json",
    )
    assert refused.status_code == 400
    _shape(refused.json(), "invalid_input")
    assert "name" in refused.json()
    # The strict JSON parser: a key given twice.
    twice = admin_client_.post("/api/llm/endpoints/", '{"name": "a", "name": "b"}', content_type="application/json")
    assert twice.status_code == 400
    _shape(twice.json(), "parse_error")
    assert "name" in twice.json()
    # The hostile-request middleware, before any view: a NUL in a query parameter.
    nul = researcher_client.get("/api/studies/", {"search": "a\x00b"})
    assert nul.status_code == 400
    _shape(nul.json(), "invalid_input")
    assert nul.json()["search"]


@pytest.mark.django_db
@pytest.mark.sqlite
def test_the_schema_declares_the_one_error_body(researcher_client):
    schema = researcher_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    error = schema["components"]["schemas"]["ApiError"]
    assert set(error["required"]) == {"code", "detail"} and "what_to_do" in error["properties"]
    refusals = [
        answer
        for path in schema["paths"].values()
        for operation in path.values()
        if isinstance(operation, dict)
        for status, answer in operation.get("responses", {}).items()
        if status.startswith(("4", "5"))
    ]
    assert len(refusals) > 100
    for answer in refusals:
        body = answer["content"]["application/json"]["schema"]
        refs = {body.get("$ref")} | {alternative.get("$ref") for alternative in body.get("anyOf", [])}
        own = {ref.rsplit("/", 1)[-1] for ref in refs if ref}
        assert own & {"ApiError", "LaunchError", "ProlificFailure"}, answer


def test_no_page_or_api_view_catches_a_bare_value_error():
    """Services refuse with the family (InvalidInput and Conflict are ValueErrors for older
    callers); a view that caught ValueError would turn a programming error into a refusal."""
    offenders = []
    for path in ROOT.glob("*/**/*.py"):
        if path.name not in ("views.py", "apis.py") and not re.search(r"_(views|apis)\.py$", path.name):
            continue
        if ".venv" in path.parts or "tests" in path.parts:
            continue
        text = path.read_text()
        for line_no, line in enumerate(text.splitlines(), 1):
            if re.search(r"except \(?[^)]*\bValueError\b[^:]*\bas\b", line):  # shown as a refusal
                offenders.append(f"{path.relative_to(ROOT)}:{line_no}: {line.strip()}")
    assert offenders == []
