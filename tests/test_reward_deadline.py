"""POST /api/reward answers within its deadline (REWARD_DEADLINE_SECONDS, or the caller's shorter
``deadline_seconds``): the items the judge has not answered by then are ``failed`` with reason
``deadline``, retries stop, and an answer that arrives later is kept in the ledger for the next
identical request. An item without a verdict has no ``total`` unless the caller asks for the old
sum (``total_without_verdict=components``); the OpenAPI schema says so."""

from __future__ import annotations

import json
import time

import pytest
import yaml
from rest_framework.test import APIClient

from core.services import api_token_create
from judging.tokens import procedure_tokens
from llm.models import LedgerEntry
from tests.scripted_llm import Reply, ScriptedLLM, Status, judge_role_point_at

pytestmark = pytest.mark.django_db(transaction=True)

REFERENCE = ["Heat oil in a large pot.", "Fry pork pieces in the oil until golden.", "Simmer for about 2 hours."]
SLOW_SECONDS = 5.0  # how long the scripted judge takes over a "slow" goal


def _completion(n: int) -> str:
    return f"1. Heat oil in pot {n}.\n2. Fry the pork until golden.\n3. Simmer for two hours."


def _item(completion: str, goal: str = "Prepare a pork stew.") -> dict:
    return {"goal": goal, "resources": ["oil", "pork"], "reference_steps": REFERENCE, "completion": completion}


def _answer(body):
    text = body["messages"][0]["content"]
    if "slow" in text:  # this request alone is slow (the server answers the others at once)
        time.sleep(SLOW_SECONDS)
    if "unparseable" in text:
        return Reply("no idea")
    return Reply(json.dumps({"reasoning": "checked", "critical_failures": []}))


@pytest.fixture
def judge(settings):
    settings.REWARD_DEADLINE_SECONDS = 60
    with ScriptedLLM() as server:
        server.default = _answer
        judge_role_point_at(settings, server)
        yield server


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher).secret}")
    # What a running server has loaded before a trainer's first call (the URL configuration's
    # imports, the tokenizer), so that the times measured here are the request's own.
    assert client.post("/api/reward", [], format="json").status_code == 400
    procedure_tokens(REFERENCE)
    return client


def _wait_for(condition, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def _late_answer_stored(n: int) -> None:
    """Wait for the slow request's late answer to reach the ledger (a test leaves nothing behind)."""
    assert _wait_for(lambda: LedgerEntry.objects.filter(outcome="ok").count() == n, SLOW_SECONDS + 10)


def test_items_not_judged_by_the_deadline_are_failed_deadline_and_the_answer_comes_by_then(api, judge):
    started = time.monotonic()
    response = api.post(
        "/api/reward?deadline_seconds=1",
        [_item(_completion(1)), _item(_completion(2), goal="A slow goal."), _item("")],
        format="json",
    )
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    fast, slow, empty = response.json()
    assert elapsed < SLOW_SECONDS - 1  # the response did not wait for the slow judge answer
    assert (fast["status"], fast["how2score"]) == ("judged", 1)
    assert (empty["status"], empty["how2score"]) == ("no_steps", 0)
    assert (slow["status"], slow["reason"], slow["how2score"], slow["total"]) == ("failed", "deadline", None, None)
    # Only the answer that came in time was written by the request itself.
    assert list(LedgerEntry.objects.values_list("outcome", flat=True)) == ["ok"]
    _late_answer_stored(2)


def test_the_late_answer_is_kept_and_answers_the_next_identical_request(api, judge):
    body = api.post("/api/reward?deadline_seconds=1", [_item(_completion(2), goal="A slow goal.")], format="json")
    assert body.json()[0]["reason"] == "deadline"
    # The request on the wire runs on; its ok answer reaches the ledger under the reward's label.
    _late_answer_stored(1)
    assert LedgerEntry.objects.get().run == "reward-endpoint"
    again = api.post("/api/reward", [_item(_completion(2), goal="A slow goal.")], format="json").json()
    assert (again[0]["status"], again[0]["how2score"]) == ("cached", 1)
    assert len(judge.chat_requests()) == 1  # not asked twice


def test_the_setting_is_the_deadline_when_the_caller_names_none(api, judge, settings):
    settings.REWARD_DEADLINE_SECONDS = 1
    started = time.monotonic()
    body = api.post("/api/reward", {"items": [_item(_completion(3), goal="A slow goal.")]}, format="json").json()
    assert time.monotonic() - started < SLOW_SECONDS - 1
    assert body["failed"] == [{"index": 0, "reason": "deadline"}]
    _late_answer_stored(1)


def _settled(server, quiet: float = 0.25, limit: float = 5.0) -> int:
    """The server's count of requests once none has arrived for ``quiet`` seconds."""
    count, stable_since, started = len(server.chat_requests()), time.monotonic(), time.monotonic()
    while time.monotonic() - stable_since < quiet and time.monotonic() - started < limit:
        time.sleep(0.02)
        now = len(server.chat_requests())
        if now != count:
            count, stable_since = now, time.monotonic()
    return count


def test_the_deadline_stops_retries_between_attempts_and_writes_nothing(api, judge, settings):
    settings.LLM_MAX_ATTEMPTS = 100
    settings.LLM_BACKOFF_BASE_SECONDS = 0.3
    settings.LLM_BACKOFF_MAX_SECONDS = 0.3
    judge.default = lambda body: Status(503, "model is loading")
    body = api.post("/api/reward?deadline_seconds=1", _item(_completion(4)), format="json").json()
    assert (body["status"], body["reason"], body["total"]) == ("failed", "deadline", None)
    # An attempt already on its way when the deadline passed may still land (on a loaded
    # machine, after the response): count once nothing has arrived for 0.25 s.
    asked = _settled(judge)
    time.sleep(1.5)
    assert len(judge.chat_requests()) == asked  # interrupted between attempts: no further retry
    assert not LedgerEntry.objects.exists()  # nothing half-written: the next request asks again


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "inf", "1e309", "61"])
def test_a_hostile_deadline_is_refused_naming_the_field(api, judge, value):
    response = api.post(f"/api/reward?deadline_seconds={value}", [_item(_completion(5))], format="json")
    assert response.status_code == 400
    assert "deadline_seconds" in response.json()
    assert judge.chat_requests() == []


def test_a_deadline_above_the_setting_names_the_setting(api, judge):
    response = api.post("/api/reward?deadline_seconds=120", [_item(_completion(5))], format="json")
    assert response.status_code == 400
    assert "REWARD_DEADLINE_SECONDS" in str(response.json()["deadline_seconds"])


def test_an_item_without_a_verdict_has_no_total(api, judge):
    items = [_item(_completion(6)), _item(_completion(7), goal="An unparseable goal."), _item("")]
    judged, failed, empty = api.post("/api/reward", items, format="json").json()
    assert failed["status"] == "failed" and failed["how2score"] is None and failed["total"] is None
    assert failed["format"] == 1 and failed["length"] > 0  # the components are still there
    assert judged["total"] == pytest.approx(1 + judged["format"] + judged["length"])
    # No steps is How2Score 0 by rule, a verdict: its total is the sum.
    assert empty["total"] == pytest.approx(empty["format"] + empty["length"])
    one = api.post("/api/reward", _item(_completion(7), goal="An unparseable goal."), format="json").json()
    assert one["total"] is None


def test_the_old_sum_is_given_when_asked_for(api, judge):
    items = [_item(_completion(7), goal="An unparseable goal."), {**_item(_completion(8), goal="unparseable")}]
    items[1]["with_score"] = True
    failed, scored = api.post("/api/reward?total_without_verdict=components", items, format="json").json()
    assert failed["status"] == "failed" and failed["total"] == pytest.approx(failed["format"] + failed["length"])
    assert scored["total"] == pytest.approx(scored["format"] + scored["length"] + scored["score"])


@pytest.mark.parametrize("value", ["sum", "NULL", "components,null"])
def test_a_bad_total_without_verdict_is_refused_naming_the_field(api, judge, value):
    response = api.post(f"/api/reward?total_without_verdict={value}", [_item(_completion(9))], format="json")
    assert response.status_code == 400 and "total_without_verdict" in response.json()
    assert judge.chat_requests() == []


def test_the_schema_says_total_may_be_null_and_lists_the_query(researcher_client):
    schema = yaml.safe_load(researcher_client.get("/api/schema/").content)
    reward = schema["components"]["schemas"]["Reward"]["properties"]
    assert reward["total"].get("nullable") is True
    params = {p["name"] for p in schema["paths"]["/api/reward/"]["post"]["parameters"]}
    assert {"deadline_seconds", "total_without_verdict"} <= params
