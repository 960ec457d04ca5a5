"""POST /api/reward with an RL trainer's batch (a list of items): rewards in order, each with
its status (judged, cached, no_steps, failed with a reason), one ledger lookup per batch,
identical requests sent once, uncached items judged together under the endpoint's shared
limits, the batch size bounded by a setting, hostile items refused by index and field."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from core.models import ApiToken
from core.services import api_token_create
from llm.models import LedgerEntry
from tests.scripted_llm import Reply, ScriptedLLM, judge_role_point_at

pytestmark = pytest.mark.django_db(transaction=True)

REFERENCE = ["Heat oil in a large pot.", "Fry pork pieces in the oil until golden.", "Simmer for about 2 hours."]


def _completion(n: int) -> str:
    return f"1. Heat oil in pot {n}.\n2. Fry the pork until golden.\n3. Simmer for two hours."


RAW = "1. Fry the pork.\n2. Serve it raw.\n3. Eat."


def _item(completion: str, goal: str = "Prepare a pork stew.") -> dict:
    return {"goal": goal, "resources": ["oil", "pork"], "reference_steps": REFERENCE, "completion": completion}


def _answer(body):
    text = body["messages"][0]["content"]
    if "unparseable" in text:
        return Reply("no idea")
    failures = [{"failure": "Serves raw pork.", "L1_steps": [3], "L2_steps": [2]}] if "raw" in text else []
    return Reply(json.dumps({"reasoning": "checked", "critical_failures": failures}))


@pytest.fixture
def judge(settings):
    with ScriptedLLM() as server:
        server.default = _answer
        judge_role_point_at(settings, server)
        yield server


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher).secret}")
    return client


def test_a_list_of_items_gets_a_list_of_rewards_in_order_each_with_its_status(api, judge):
    api.post("/api/reward", [_item(_completion(0))], format="json")  # now in the ledger
    response = api.post(
        "/api/reward",
        [
            _item(_completion(1)),
            _item(RAW),
            _item(""),
            _item(_completion(0)),
            _item(_completion(2), goal="An unparseable goal."),
        ],
        format="json",
    )
    assert response.status_code == 200
    judged, raw, empty, cached, failed = response.json()
    assert (judged["status"], judged["how2score"]) == ("judged", 1)
    assert (raw["status"], raw["how2score"]) == ("judged", 0)
    assert (empty["status"], empty["how2score"]) == ("no_steps", 0)
    assert (cached["status"], cached["how2score"]) == ("cached", 1)
    assert failed["status"] == "failed" and failed["how2score"] is None
    assert "parse_failed" in failed["reason"]  # why there is no verdict, never a silent 0
    assert failed["total"] is None  # no verdict, no reward (the old sum only when asked for)
    assert all("reason" not in r for r in (judged, raw, empty, cached))


def test_the_batch_reads_the_ledger_once_and_writes_it_in_one_group(api, judge):
    api.post("/api/reward", [_item(_completion(0))], format="json")
    items = [_item(_completion(n)) for n in range(6)]
    with CaptureQueriesContext(connection) as queries:
        response = api.post("/api/reward", items, format="json")
    assert [r["status"] for r in response.json()] == ["cached"] + ["judged"] * 5
    ledger_reads = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith("SELECT") and LedgerEntry._meta.db_table in q["sql"]
    ]
    inserts = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "COPY")) and LedgerEntry._meta.db_table in q["sql"]
    ]
    # One lookup for the whole batch, not one per item; the write knows from it which keys are
    # new (no second lookup before the insert).
    assert len(ledger_reads) == 1
    assert len(inserts) == 1  # the five new answers in one statement (COPY on PostgreSQL)
    assert LedgerEntry.objects.filter(run="reward-endpoint").count() == 6


def test_a_reward_call_sorts_nothing(api, judge):
    """The token is found by its unique digest and the ledger's answers go into a dict: neither
    lookup asks the database to sort (the models' default orderings would, on every call)."""
    api.post("/api/reward", [_item(_completion(0))], format="json")
    with CaptureQueriesContext(connection) as queries:
        response = api.post("/api/reward", [_item(_completion(0)), _item(_completion(1))], format="json")
    assert [r["status"] for r in response.json()] == ["cached", "judged"]
    per_call = [
        q["sql"]
        for q in queries.captured_queries
        if ApiToken._meta.db_table in q["sql"] or LedgerEntry._meta.db_table in q["sql"]
    ]
    assert len(per_call) >= 2  # the token's lookup and the ledger's, at least
    assert not [sql for sql in per_call if "ORDER BY" in sql.upper()]


def test_identical_completions_in_a_batch_are_judged_once(api, judge):
    body = api.post("/api/reward", [_item(_completion(7))] * 4, format="json").json()
    assert [r["how2score"] for r in body] == [1, 1, 1, 1]
    assert len(judge.chat_requests()) == 1


def test_uncached_items_go_to_the_judge_together(api, settings):
    with ScriptedLLM(latency=0.3) as server:
        server.default = _answer
        judge_role_point_at(settings, server)
        body = api.post("/api/reward", [_item(_completion(n)) for n in range(8)], format="json").json()
    assert [r["status"] for r in body] == ["judged"] * 8
    assert server.max_in_flight > 1  # not one by one


def test_concurrent_callers_share_the_endpoint_limit(researcher, settings):
    settings.LLM_MAX_CONCURRENCY = 2
    with ScriptedLLM(latency=0.2) as server:
        server.default = _answer
        judge_role_point_at(settings, server)
        secret = api_token_create(user=researcher).secret
        answers: list = []

        def caller(k: int) -> None:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
            answers.append(
                client.post("/api/reward", [_item(_completion(10 * k + n)) for n in range(3)], format="json").json()
            )
            connection.close()

        threads = [threading.Thread(target=caller, args=(k,)) for k in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(r["status"] for body in answers for r in body) == ["judged"] * 9
    assert len(server.chat_requests()) == 9
    assert server.max_in_flight <= 2  # LLM_MAX_CONCURRENCY holds across callers


def test_the_items_form_lists_its_failed_items(api, judge):
    body = api.post(
        "/api/reward", {"items": [_item(_completion(1)), _item(_completion(2), goal="unparseable")]}, format="json"
    ).json()
    assert "status" not in body["items"][0]  # the old form is unchanged for a usable verdict
    assert body["items"][1]["status"] == "failed" and body["items"][1]["how2score"] is None
    assert [f["index"] for f in body["failed"]] == [1] and "parse_failed" in body["failed"][0]["reason"]


def test_a_batch_beyond_the_limit_is_refused_by_name_before_anything_is_sent(api, judge, settings):
    settings.REWARD_MAX_BATCH = 3
    for body in ([_item(_completion(n)) for n in range(4)], {"items": [_item(_completion(n)) for n in range(4)]}):
        response = api.post("/api/reward", body, format="json")
        assert response.status_code == 400
        message = response.json()["items"][0]
        assert "REWARD_MAX_BATCH" in message and "at most 3" in message and "has 4" in message
    assert judge.chat_requests() == []
    assert api.post("/api/reward", [_item(_completion(n)) for n in range(3)], format="json").status_code == 200


def test_an_empty_list_is_refused(api, judge):
    response = api.post("/api/reward", [], format="json")
    assert response.status_code == 400 and "items" in response.json()


@pytest.mark.parametrize(
    "bad, field",
    [
        ("a string", "non_field_errors"),
        ({**_item("1. a"), "completion": ["not", "text"]}, "completion"),
        ({**_item("1. a"), "reference_steps": "one step"}, "reference_steps"),
        ({**_item("1. a"), "reference_steps": [{"step": 1}]}, "reference_steps"),
        ({**_item("1. a"), "goal": "x" * 100_001}, "goal"),
        ({**_item("1. a"), "completion": "1. a\x00b"}, "completion"),
        ({**_item("1. a"), "reference_steps": ["s"] * 201}, "reference_steps"),
        ({k: v for k, v in _item("1. a").items() if k != "goal"}, "goal"),
    ],
)
def test_a_hostile_item_is_refused_naming_its_index_and_field(api, judge, bad, field):
    response = api.post("/api/reward", [_item(_completion(1)), _item(_completion(2)), bad], format="json")
    assert response.status_code == 400
    body = response.json()
    if "items" in body:  # refused by the item's serializer: errors keyed by position, then field
        assert list(body["items"]) == ["2"] and field in body["items"]["2"]
    else:  # refused while reading the JSON (core/strict_json.py): the path of the value
        assert body["code"] == "parse_error" and f"[2].{field}" in body
    assert judge.chat_requests() == []  # nothing judged for a refused batch


def test_a_judge_error_is_a_failed_item_with_its_reason(api, settings):
    with ScriptedLLM() as server:
        from tests.scripted_llm import Status

        server.default = lambda body: Status(400, "model not loaded")
        judge_role_point_at(settings, server)
        body = api.post("/api/reward", [_item(_completion(1)), _item("")], format="json").json()
    assert body[0]["status"] == "failed" and body[0]["how2score"] is None
    assert "api_error" in body[0]["reason"] and "model not loaded" in body[0]["reason"]
    assert body[1]["status"] == "no_steps"


def test_a_failed_answer_asked_again_replaces_the_entry_and_keeps_the_failure_in_its_history(api, settings):
    from tests.scripted_llm import Status

    with ScriptedLLM() as server:  # one server: its address is part of the ledger key
        server.default = lambda body: Status(400, "model not loaded")
        judge_role_point_at(settings, server)
        first = api.post("/api/reward", [_item(_completion(2))], format="json").json()
        server.default = _answer
        again = api.post("/api/reward", [_item(_completion(2)), _item(_completion(3))], format="json").json()
    assert first[0]["status"] == "failed"
    assert [r["status"] for r in again] == ["judged", "judged"]
    entries = LedgerEntry.objects.filter(run="reward-endpoint").order_by("created_at")
    assert [e.outcome for e in entries] == ["ok", "ok"]
    replaced = [e for e in entries if e.history]
    assert len(replaced) == 1 and replaced[0].history[0]["outcome"] == "api_error"
