"""The Prolific REST API: a study taken from its items to paid participants by script with an
API token, against the scripted Prolific server; the roles (anonymous 401, no role 403);
hostile values refused naming the field; Prolific's failures as 502 with what to do; the
schema."""

from __future__ import annotations

from decimal import Decimal

import pytest
import yaml
from django.test import Client
from django.urls import reverse

from annotate.models import ParticipationState
from annotate.participation.services import participation_consent, participation_enter
from annotate.testing import annotate_next, study_make
from core.services import api_token_create
from prolific import constants as C
from prolific.token_services import prolific_token_save
from tests.scripted_prolific import ScriptedProlific

pytestmark = pytest.mark.django_db


@pytest.fixture
def prolific(settings):
    server = ScriptedProlific().start()
    settings.PROLIFIC_API_URL = server.base_url
    settings.PROLIFIC_API_TOKEN = ""
    settings.PROLIFIC_RETRY_BASE_SECONDS = 0.01
    settings.PROLIFIC_RETRY_MAX_SECONDS = 0.5
    settings.PROLIFIC_SITE_URL = ""
    yield server
    server.stop()


@pytest.fixture
def api(researcher, prolific) -> Client:
    prolific_token_save(user=researcher, token=prolific.token)
    secret = api_token_create(user=researcher, label="script").secret
    return Client(HTTP_AUTHORIZATION=f"Token {secret}")


def _study():
    return study_make(
        n_items=4, annotators_per_item=1, max_items_per_annotator=None, payment_per_item=Decimal("0.25"), min_seconds=0
    )


def _url(name: str, study, **kw) -> str:
    return reverse(name, kwargs={"slug": study.slug, **kw})


def test_a_script_takes_a_study_from_draft_to_paid_participants(api, prolific):
    study = _study()
    state = api.get(_url("api-prolific-state", study)).json()
    assert state["link"] is None and state["draft"]["places"] == 1 and state["draft"]["reward_cents"] == 100
    assert state["token"]["saved"] is True and "token" not in str(state["token"].get("last4", "")).lower()
    assert "{{%PROLIFIC_PID%}}" in state["draft"]["external_study_url"]

    created = api.post(_url("api-prolific-publish", study), {}, content_type="application/json")
    assert created.status_code == 201, created.content
    prolific_id = created.json()["prolific_id"]
    assert prolific.studies[prolific_id]["total_available_places"] == 1
    assert api.post(_url("api-prolific-publish", study), {}, content_type="application/json").status_code == 409

    refused = api.post(_url("api-prolific-publish-now", study), {}, content_type="application/json")
    assert refused.status_code == 400 and "confirm" in refused.json()
    assert not prolific.calls("POST", "/transition/")
    published = api.post(_url("api-prolific-publish-now", study), {"confirm": "yes"}, content_type="application/json")
    assert published.status_code == 200 and published.json()["status"] == "ACTIVE"

    p = participation_consent(
        participation=participation_enter(study=study, pid="worker1", prolific_study_id=prolific_id, session_id="s1")
    )
    while annotate_next(p) is not None:
        pass
    p.refresh_from_db()
    assert p.state == ParticipationState.COMPLETED
    prolific.add_submission(prolific_id, "worker1", C.AWAITING_REVIEW)
    prolific.add_submission(prolific_id, "quitter", C.RETURNED)

    synced = api.post(_url("api-prolific-sync", study))
    assert synced.status_code == 200 and synced.json()["seen"] == 2
    rows = api.get(_url("api-prolific-submissions", study)).json()
    assert rows["count"] == 2
    by_pid = {r["participant_id"]: r for r in rows["results"]}
    assert by_pid["worker1"]["product_state"] == "completed" and by_pid["quitter"]["product_state"] == ""

    reviewed = api.post(_url("api-prolific-review", study), {"confirm": "yes"}, content_type="application/json")
    assert reviewed.status_code == 200 and reviewed.json()["approved"] == 1
    assert prolific.status_of("worker1") == C.APPROVED

    preview = api.post(
        _url("api-prolific-bonus-preview", study), {"per_item": "0.10", "quota": 1}, content_type="application/json"
    )
    assert preview.status_code == 201
    batch = preview.json()
    assert batch["n_participants"] == 1 and batch["total_cents"] == 30 and batch["state"] == "preview"
    pay_url = _url("api-prolific-bonus-pay", study, pk=batch["id"])
    assert api.post(pay_url, {}, content_type="application/json").status_code == 400
    paid = api.post(pay_url, {"confirm": "yes"}, content_type="application/json")
    assert paid.status_code == 200 and paid.json()["state"] == "paid"
    again = api.post(pay_url, {"confirm": "yes"}, content_type="application/json")
    assert again.status_code == 409 and len(prolific.pay_calls) == 1

    log = api.get(_url("api-prolific-log", study)).json()
    assert log["count"] == len(prolific.requests)
    assert prolific.token not in str(log)


def test_prolifics_failure_is_a_502_with_what_to_do(api, prolific):
    study = _study()
    for _ in range(4):
        prolific.then(500, {"error": {"detail": "down"}})
    response = api.post(_url("api-prolific-publish", study), {}, content_type="application/json")
    assert response.status_code == 502
    body = response.json()
    assert body["code"] == "prolific_unavailable" and body["what_to_do"] == "Prolific is failing; try again later."
    assert body["upstream_status"] == 500


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"per_item": "0.10", "quota": -1}, "quota"),
        ({"per_item": "ten", "quota": 0}, "per_item"),
        ({"per_item": "1e9", "quota": 0}, "per_item"),
        ({"per_item": "1e999999999", "quota": 0}, "per_item"),
        ({"per_item": "sNaN", "quota": 0}, "per_item"),
        ({"per_item": "0.10", "quota": 10**12}, "quota"),
        ({"per_item": ["0.10"], "quota": 0}, "per_item"),
        ({"quota": 0}, "per_item"),
    ],
)
def test_a_hostile_bonus_rule_is_a_400_naming_the_field(api, prolific, payload, field):
    study = _study()
    assert api.post(_url("api-prolific-publish", study), {}, content_type="application/json").status_code == 201
    response = api.post(_url("api-prolific-bonus-preview", study), payload, content_type="application/json")
    assert response.status_code == 400 and field in response.json()


def test_a_hostile_review_body_is_a_400_naming_the_field(api, prolific):
    study = _study()
    url = _url("api-prolific-review", study)
    assert "policy" in api.post(url, {"confirm": "yes", "policy": "ban"}, content_type="application/json").json()
    short = api.post(url, {"confirm": "yes", "policy": "reject", "message": "no"}, content_type="application/json")
    assert short.status_code == 400 and "message" in short.json()


def test_review_before_publishing_is_a_409(api, prolific):
    study = _study()
    response = api.post(_url("api-prolific-review", study), {"confirm": "yes"}, content_type="application/json")
    assert response.status_code == 409 and "publish" in response.json()["detail"]


def test_the_api_needs_a_login_and_the_researcher_role(client, prolific, django_user_model):
    study = _study()
    urls = [
        ("get", _url("api-prolific-state", study)),
        ("post", _url("api-prolific-publish", study)),
        ("post", _url("api-prolific-sync", study)),
        ("get", _url("api-prolific-submissions", study)),
        ("get", _url("api-prolific-log", study)),
        ("post", _url("api-prolific-bonus-pay", study, pk=1)),
    ]
    for method, url in urls:
        assert getattr(client, method)(url).status_code == 401, url
    nobody = django_user_model.objects.create_user(username="nobody", password="nobody-Password-1")
    secret = api_token_create(user=nobody, label="x").secret
    other = Client(HTTP_AUTHORIZATION=f"Token {secret}")
    for method, url in urls:
        assert getattr(other, method)(url).status_code == 403, url
    assert not prolific.requests


def test_the_openapi_schema_describes_the_prolific_endpoints(researcher_client):
    schema = yaml.safe_load(researcher_client.get("/api/schema/").content)
    paths = schema["paths"]
    for path in (
        "/api/studies/{slug}/prolific/",
        "/api/studies/{slug}/prolific/publish/",
        "/api/studies/{slug}/prolific/publish-now/",
        "/api/studies/{slug}/prolific/sync/",
        "/api/studies/{slug}/prolific/review/",
        "/api/studies/{slug}/prolific/bonus/preview/",
        "/api/studies/{slug}/prolific/bonus/{id}/pay/",
        "/api/studies/{slug}/prolific/submissions/",
        "/api/studies/{slug}/prolific/log/",
    ):
        assert path in paths, path
    pay = paths["/api/studies/{slug}/prolific/bonus/{id}/pay/"]["post"]
    assert {"200", "400", "401", "403", "409", "502"} <= set(pay["responses"])
