"""Issue 19 walked as a researcher, an admin and an annotator would: what each page, the
Prolific draft and the API state must agree, and hostile or repeated requests are answered
without a 500."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from annotate.models import Participation
from annotate.testing import study_make
from prolific.publish_services import prolific_draft

pytestmark = pytest.mark.django_db


def _text(html: bytes) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html.decode()))


def _consent_terms(study, pid: str, n: int) -> tuple[int, str]:
    client = Client(REMOTE_ADDR=f"198.51.100.{n}")  # one address each: the entry is rate-limited per address
    response = client.get(reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": pid})
    text = _text(client.get(response["Location"]).content)
    minutes = re.search(r"Expected time: about (\d+) minute", text)
    pay = re.search(r"Pay: ([0-9.]+) USD", text)
    assert minutes is not None and pay is not None, text
    return int(minutes.group(1)), pay.group(1)


@pytest.mark.parametrize(
    "settings_",
    [
        # every main item, checks mixed in at a rate where participants' seeds meet 1 or 2 checks,
        # a qualification test before them
        dict(
            n_items=12,
            n_attention=3,
            n_gold=2,
            attention_check_rate=0.1,
            max_items_per_annotator=None,
            min_seconds=30,
            payment_per_item=Decimal("0.35"),
        ),
        # at most 5 items each, a minimum longer than the kind's typical time
        dict(
            n_items=10,
            n_attention=2,
            attention_check_rate=0.25,
            max_items_per_annotator=5,
            min_seconds=120,
            payment_per_item=Decimal("0.20"),
        ),
    ],
)
def test_prolific_draft_consent_page_and_study_page_state_the_same_time_and_pay(settings_, researcher_client, settings):
    settings.PROLIFIC_SITE_URL = "https://studio.example.org"
    study = study_make(annotators_per_item=3, **settings_)
    draft = prolific_draft(study=study)
    seen = {_consent_terms(study, f"reader-{i}", i + 1) for i in range(12)}
    assert Participation.objects.filter(study=study).count() == 12
    # Every participant is told the same terms, and they are Prolific's.
    assert seen == {(draft.estimated_minutes, draft.reward)}
    panel = _text(researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content)
    assert f"{draft.estimated_minutes} min" in panel and draft.reward in panel


@pytest.mark.parametrize(
    "rate,main,checks,limit",
    [(0.1, 12, 3, None), (0.25, 10, 2, 5), (0.2, 7, 5, None), (0.5, 3, 4, 4), (0.0, 5, 2, None)],
)
def test_checks_most_is_the_most_any_seed_meets(rate, main, checks, limit):
    from annotate.participation.attention_plan import checks_met, checks_most

    met = {checks_met(seed, rate, main_items=main, check_items=checks, limit=limit) for seed in range(400)}
    assert max(met) == checks_most(rate, main_items=main, check_items=checks, limit=limit)


# --------------------------------------------------------------------------- Prolific: double clicks


@pytest.fixture
def prolific(settings):
    from tests.scripted_prolific import ScriptedProlific

    server = ScriptedProlific().start()
    settings.PROLIFIC_API_URL = server.base_url
    settings.PROLIFIC_API_TOKEN = server.token
    settings.PROLIFIC_RETRY_BASE_SECONDS = 0.01
    settings.PROLIFIC_RETRY_MAX_SECONDS = 0.5
    settings.PROLIFIC_SITE_URL = "https://studio.example.org"
    yield server
    server.stop()


@pytest.mark.sqlite  # concurrent requests under SQLite's one writer
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_publish_clicks_send_one_publish_transition(prolific, researcher):
    import threading

    from django.db import connection

    from prolific.errors import ProlificConflict
    from prolific.publish_services import prolific_study_publish, prolific_study_publish_now

    if connection.vendor == "sqlite":
        connection.close()
    study = study_make(n_items=4, annotators_per_item=2, payment_per_item=Decimal("0.10"))
    prolific_study_publish(study=study, user=researcher)
    prolific.latency = 0.4  # the first click's request is still in flight when the second arrives
    barrier, outcomes = threading.Barrier(3), []

    def click():
        try:
            barrier.wait()
            prolific_study_publish_now(study=study, user=researcher)
            outcomes.append("published")
        except ProlificConflict:
            outcomes.append("refused")
        except Exception as exc:  # pragma: no cover - shown in the assert
            outcomes.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=click) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["published", "refused", "refused"]
    assert len(prolific.calls("POST", "/transition/")) == 1
    study.prolific_link.refresh_from_db()
    assert study.prolific_link.status == "ACTIVE" and study.prolific_link.published_at is not None


def test_the_sync_says_who_released_a_returned_or_timed_out_participant(prolific, researcher):
    from annotate.participation.services import participation_consent, participation_enter
    from annotate.testing import annotate_next
    from prolific.publish_services import prolific_study_publish, prolific_study_publish_now
    from prolific.sync_services import prolific_submissions_sync

    study = study_make(n_items=6, annotators_per_item=2, max_items_per_annotator=3, payment_per_item=Decimal("0.10"))
    prolific_study_publish(study=study, user=researcher)
    link = prolific_study_publish_now(study=study, user=researcher)
    participants = {}
    for pid, status in (("gone", "RETURNED"), ("slow", "TIMED-OUT")):
        p = participation_consent(
            participation=participation_enter(
                study=study, pid=pid, prolific_study_id=link.prolific_id, session_id=f"s-{pid}"
            )
        )
        annotate_next(p)
        participants[pid] = p
        prolific.add_submission(link.prolific_id, pid, status)
    prolific_submissions_sync(study=study, user=researcher)
    reasons = {pid: Participation.objects.get(pk=p.pk).state_reason for pid, p in participants.items()}
    assert "researcher" not in reasons["gone"] and "researcher" not in reasons["slow"]
    assert reasons["gone"].startswith("returned on Prolific") and "sync" in reasons["gone"]
    assert reasons["slow"].startswith("timed out on Prolific") and "sync" in reasons["slow"]


def test_no_prolific_token_is_a_409_saying_where_to_save_one_not_a_bad_gateway(prolific, researcher, settings):
    """Nothing was asked of Prolific: a missing token is the caller's state to fix, not Prolific failing."""
    from core.services import api_token_create

    settings.PROLIFIC_API_TOKEN = ""
    study = study_make(n_items=4, annotators_per_item=1, payment_per_item=Decimal("0.25"))
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher, label='walk').secret}")
    response = client.post(f"/api/studies/{study.slug}/prolific/publish/", {}, content_type="application/json")
    assert response.status_code == 409, response.content
    assert response.json()["code"] == "prolific_no_token" and "Prolific token page" in response.json()["what_to_do"]
    assert not prolific.requests


def test_an_unreadable_saved_token_says_to_save_it_again_not_that_prolific_refused_it(prolific, researcher, settings):
    from core.services import api_token_create
    from prolific.token_services import prolific_token_save

    prolific_token_save(user=researcher, token=prolific.token)
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher, label='walk').secret}")
    settings.SECRET_KEY = "another-secret-key-" + "y" * 40
    study = study_make(n_items=4, annotators_per_item=1, payment_per_item=Decimal("0.25"))
    response = client.post(f"/api/studies/{study.slug}/prolific/publish/", {}, content_type="application/json")
    assert response.status_code == 409, response.content
    body = response.json()
    assert body["code"] == "prolific_token_unreadable" and "again" in body["what_to_do"]
    assert "Prolific refused" not in body["what_to_do"] and not prolific.requests


@pytest.mark.parametrize(
    "retry_after,says",
    [
        ("99999999999999999999", "more than a day"),
        ("1e300", "more than a day"),
        ("7200", "2 hours"),
        ("600", "10 minutes"),
    ],
)
def test_a_long_retry_after_is_told_in_sane_units(prolific, researcher, retry_after, says):
    from prolific.client import ProlificError
    from prolific.publish_services import prolific_study_publish

    study = study_make(n_items=4, annotators_per_item=1, payment_per_item=Decimal("0.25"))
    prolific.then(429, {"error": {"detail": "slow down"}}, {"retry-after": retry_after}, match="studies/")
    with pytest.raises(ProlificError) as exc:
        prolific_study_publish(study=study, user=researcher)
    told = f"{exc.value.message} {exc.value.what_to_do}"
    assert exc.value.kind == "rate_limited" and says in told, told
    assert not re.search(r"\d{7,}", told), told  # no 20-digit waits


# --------------------------------------------------------------------------- endpoint records: an honest Test


@pytest.mark.parametrize(
    "answer,ok,format_claimed",
    [
        ('{"ok": true}', True, "structured output: json_schema;"),
        # a 200 whose choice holds no message: nothing usable came back
        ("RAW:" + '{"id": "x", "object": "chat.completion", "model": "m", "choices": [null]}', False, None),
        # the endpoint took response_format but answered prose: it does not follow json_schema
        ("Sorry, I cannot help with that.", True, "json_schema accepted but not followed"),
    ],
)
def test_an_endpoint_records_test_is_ok_only_for_a_usable_answer(answer, ok, format_claimed):
    from llm.endpoint_services import endpoint_record_create, endpoint_record_test
    from tests.scripted_llm import Raw, Reply, ScriptedLLM

    with ScriptedLLM() as server:
        reply = Raw(answer[4:]) if answer.startswith("RAW:") else Reply(content=answer)
        server.default = lambda body: reply
        record = endpoint_record_create(name="walk", base_url=server.base_url, model="m", api_key="sk-walk-1234")
        record = endpoint_record_test(record=record, timeout=5)
    assert record.last_test_ok is ok, record.last_test_message
    if format_claimed:
        assert format_claimed in record.last_test_message
    if answer == "Sorry, I cannot help with that.":
        assert "structured output: json_schema;" not in record.last_test_message


# --------------------------------------------------------------------------- API lists page like every other


def test_models_and_endpoint_records_lists_are_paginated(researcher_client, admin_client_):
    from judging.models import LanguageModel
    from llm.endpoint_services import endpoint_record_create

    LanguageModel.objects.bulk_create([LanguageModel(name=f"walk-{i:03d}", role="generate") for i in range(55)])
    for i in range(3):
        endpoint_record_create(name=f"walk-{i}", base_url=f"http://gpu-{i + 1}.example.org:8000/v1", model="m")
    first = researcher_client.get("/api/judging/models/").json()
    assert first["count"] == LanguageModel.objects.count() and len(first["results"]) == 50 and first["next"]
    second = researcher_client.get(first["next"]).json()
    assert len(second["results"]) == first["count"] - 50
    assert not {m["name"] for m in first["results"]} & {m["name"] for m in second["results"]}
    records = admin_client_.get("/api/llm/endpoints/").json()
    assert records["count"] == 3 and {r["name"] for r in records["results"]} == {"walk-0", "walk-1", "walk-2"}
    schema = admin_client_.get("/api/schema/?format=json").json()
    for path in ("/api/judging/models/", "/api/llm/endpoints/"):
        ref = schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        assert ref.split("/")[-1].startswith("Paginated"), ref


# --------------------------------------------------------------------------- the study page's times and pay


def test_study_page_hourly_pay_says_why_it_is_missing_and_times_carry_their_n(researcher_client):
    from annotate.participation.reservations import assignment_next
    from annotate.participation.submissions import annotation_submit
    from annotate.testing import ONE_FAILURE, annotator_start, backdate, read_everything

    study = study_make(n_items=3, annotators_per_item=1, payment_per_item=Decimal("0.30"))
    page = _text(researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content)
    assert "set a payment per item" not in page  # it is set: nothing has been timed yet
    assert "no annotation timed yet" in page
    p = annotator_start(study, "timer-1")
    for _ in range(2):
        a = assignment_next(participation=p)
        assert a is not None
        read_everything(p, a)
        backdate(a, 60)
        annotation_submit(participation=p, public_id=a.public_id, answer=ONE_FAILURE)
    page = _text(researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content)
    assert re.search(r"Median active time per item \(wall\)\s*\d+ s \(60 s\), n = 2 annotations", page), page[
        page.find("Median active") :
    ][:200]
    unpaid = study_make(n_items=2, name="Unpaid walk")
    assert "set a payment per item" in _text(
        researcher_client.get(reverse("annotate:study_detail", args=[unpaid.slug])).content
    )


# --------------------------------------------------------------------------- Prolific failing mid-flow


def test_a_401_on_the_second_page_of_submissions_fails_the_sync_clearly_and_a_later_sync_recovers(prolific, researcher):
    from annotate.participation.services import participation_consent, participation_enter
    from prolific.client import ProlificError
    from prolific.models import ProlificSubmission
    from prolific.publish_services import prolific_study_publish, prolific_study_publish_now
    from prolific.sync_services import prolific_submissions_sync

    study = study_make(n_items=6, annotators_per_item=2, max_items_per_annotator=2, payment_per_item=Decimal("0.10"))
    prolific_study_publish(study=study, user=researcher)
    link = prolific_study_publish_now(study=study, user=researcher)
    for pid, status in (("p1", "ACTIVE"), ("p2", "ACTIVE"), ("p3", "RETURNED")):  # page size 2: p3 on page 2
        participation_consent(
            participation=participation_enter(
                study=study, pid=pid, prolific_study_id=link.prolific_id, session_id=f"s-{pid}"
            )
        )
        prolific.add_submission(link.prolific_id, pid, status)
    prolific.then(401, {"error": {"detail": "Invalid token."}}, match="page=2")
    with pytest.raises(ProlificError) as exc:
        prolific_submissions_sync(study=study, user=researcher)
    assert exc.value.kind == "auth" and "token" in exc.value.what_to_do
    link.refresh_from_db()
    assert "token" in link.last_error
    result = prolific_submissions_sync(study=study, user=researcher)
    assert result.seen == 3 and result.released_participants == 1
    assert ProlificSubmission.objects.filter(link=link).count() == 3
    assert Participation.objects.get(study=study, annotator__pid="p3").state == "returned"
    link.refresh_from_db()
    assert link.last_error == ""


def test_places_count_main_items_per_annotator_so_attention_checks_do_not_leave_items_short(settings):
    settings.PROLIFIC_SITE_URL = "https://studio.example.org"
    # 10 main items, k = 3, at most 5 items each of which up to 2 are checks (rate 0.25): each
    # participant is given at least 3 main items, so 10 places (not 6) reach 30 main slots.
    study = study_make(
        n_items=10,
        n_attention=2,
        attention_check_rate=0.25,
        max_items_per_annotator=5,
        annotators_per_item=3,
        payment_per_item=Decimal("0.20"),
    )
    draft = prolific_draft(study=study)
    assert (draft.items_per_annotator, draft.places) == (3, 10)
    assert draft.reward_cents == 100  # 5 items × 0.20: checks are items a participant does


def test_serve_on_another_port_gives_the_demo_and_its_worker_that_address(monkeypatch):
    """`serve --port 8799`: the demo's annotator link and the URLs the worker and scheduler build
    (a Prolific draft without PROLIFIC_SITE_URL) name port 8799, not the default 8000."""
    from annotate.links import default_base_url
    from core.management.commands.serve import Command

    monkeypatch.delenv("HOST", raising=False)
    monkeypatch.delenv("PORT", raising=False)
    Command.address_export({"host": "127.0.0.1", "port": "8799"})
    try:
        assert default_base_url() == "http://127.0.0.1:8799"
    finally:
        monkeypatch.delenv("HOST", raising=False)
        monkeypatch.delenv("PORT", raising=False)


# --------------------------------------------------------------------------- the Prolific token by API


def test_a_researcher_saves_their_prolific_token_through_the_api_and_publishes(prolific, researcher, settings):
    """Every step scriptable: the Prolific token too (never shown back), then publish."""
    from core.services import api_token_create
    from prolific.models import ProlificCredential

    settings.PROLIFIC_API_TOKEN = ""
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher, label='walk').secret}")
    url = "/api/prolific/token/"
    assert client.get(url).json()["saved"] is False
    bad = client.put(url, {"token": "has spaces in it"}, content_type="application/json")
    assert bad.status_code == 400 and "token" in bad.json()
    assert client.put(url, {"token": ["nested"]}, content_type="application/json").status_code == 400
    saved = client.put(url, {"token": prolific.token}, content_type="application/json")
    assert saved.status_code == 200 and saved.json()["saved"] and saved.json()["last4"] == prolific.token[-4:]
    assert prolific.token not in saved.content.decode() and prolific.token not in client.get(url).content.decode()
    assert ProlificCredential.objects.filter(user=researcher).count() == 1
    study = study_make(n_items=4, annotators_per_item=1, payment_per_item=Decimal("0.25"))
    published = client.post(f"/api/studies/{study.slug}/prolific/publish/", {}, content_type="application/json")
    assert published.status_code == 201, published.content
    assert client.delete(url).json()["saved"] is False and not ProlificCredential.objects.exists()
    assert Client().put(url, {"token": prolific.token}, content_type="application/json").status_code == 401


def test_a_bonus_preview_that_pays_no_one_is_answered_but_not_stored(prolific, researcher, researcher_client):
    from core.services import api_token_create
    from prolific.models import ProlificBonusBatch
    from prolific.publish_services import prolific_study_publish, prolific_study_publish_now

    study = study_make(n_items=4, annotators_per_item=1, payment_per_item=Decimal("0.25"))
    prolific_study_publish(study=study, user=researcher)
    prolific_study_publish_now(study=study, user=researcher)
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher, label='walk').secret}")
    for _ in range(3):  # nobody completed yet: repeated previews leave nothing behind
        answer = client.post(
            f"/api/studies/{study.slug}/prolific/bonus/preview/",
            {"per_item": "0.10", "quota": 0},
            content_type="application/json",
        )
        assert answer.status_code == 200, answer.content
        assert answer.json()["id"] is None and answer.json()["n_participants"] == 0
    page = researcher_client.post(
        reverse("prolific:bonus_preview", args=[study.slug]), {"per_item": "0.10"}, follow=True
    )
    assert "nobody" in _text(page.content).lower()
    assert not ProlificBonusBatch.objects.exists()
