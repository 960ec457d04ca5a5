"""POST /api/reward: How2Score from the configured judge, format and length rewards, batches, tokens."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from core.services import api_token_create
from judging.metrics import length_reward
from judging.tokens import procedure_tokens
from tests.scripted_llm import Reply, ScriptedLLM, judge_role_point_at

pytestmark = pytest.mark.django_db(transaction=True)

REFERENCE = ["Heat oil in a large pot.", "Fry pork pieces in the oil until golden.", "Simmer for about 2 hours."]
GOOD = (
    "<think>Three steps.</think>\n1. Heat oil in a large pot.\n2. Fry the pork until golden.\n3. Simmer for two hours."
)
BAD = "1. Fry the pork.\n3. Serve it raw."


@pytest.fixture
def judge(settings):
    with ScriptedLLM() as server:

        def answer(body):
            text = body["messages"][0]["content"]
            failures = [{"failure": "Serves raw pork.", "L1_steps": [3], "L2_steps": [2]}] if "raw" in text else []
            return Reply(json.dumps({"reasoning": "checked", "critical_failures": failures}))

        server.default = answer
        judge_role_point_at(settings, server)
        yield server


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher).secret}")
    return client


def _item(completion):
    return {
        "goal": "Prepare a pork stew.",
        "resources": ["oil", "pork"],
        "reference_steps": REFERENCE,
        "completion": completion,
    }


def test_reward_for_one_completion(api, judge):
    body = api.post("/api/reward", _item(GOOD), format="json").json()
    steps = ["Heat oil in a large pot.", "Fry the pork until golden.", "Simmer for two hours."]
    expected_length = length_reward(procedure_tokens(steps), procedure_tokens(REFERENCE))
    assert body == {
        "how2score": 1,
        "format": 1,
        "length": pytest.approx(expected_length),
        "total": pytest.approx(2 + expected_length),
    }
    sent = judge.chat_requests()[0]["messages"][0]["content"]
    assert "1. Heat oil in a large pot." in sent and "<think>" not in sent  # the judge sees parsed steps only


def test_batch_of_completions(api, judge):
    body = api.post("/api/reward", {"items": [_item(GOOD), _item(BAD), _item("")]}, format="json").json()
    good, bad, empty = body["items"]
    assert good["how2score"] == 1 and good["format"] == 1
    assert bad["how2score"] == 0 and bad["format"] == 0  # numbering 1, 3 is not consecutive
    assert empty == {
        "how2score": 0,
        "format": 0,
        "length": pytest.approx(length_reward(0, procedure_tokens(REFERENCE))),
        "total": pytest.approx(length_reward(0, procedure_tokens(REFERENCE))),
    }
    assert len(judge.chat_requests()) == 2  # nothing to judge for the empty completion


def test_unusable_judge_answer_is_null_not_a_verdict(api, judge):
    judge.default = lambda body: Reply("no idea")
    body = api.post("/api/reward", _item(GOOD), format="json").json()
    assert body["how2score"] is None and body["total"] is None and body["status"] == "failed"


def test_repeated_completion_is_not_judged_twice(api, judge):
    api.post("/api/reward", _item(GOOD), format="json")
    api.post("/api/reward", _item(GOOD), format="json")
    assert len(judge.chat_requests()) == 1


def test_bad_input_names_the_field(api, judge):
    response = api.post(
        "/api/reward",
        {"items": [_item(GOOD), {"goal": "x", "reference_steps": [], "completion": "1. a"}]},
        format="json",
    )
    assert response.status_code == 400
    errors = response.json()["items"]  # keyed by the position of the bad item
    assert list(errors) == ["1"] and "reference_steps" in errors["1"]


def test_token_is_required(judge):
    assert APIClient().post("/api/reward", _item(GOOD), format="json").status_code == 401


def _answer_no_failure(body):
    return Reply(json.dumps({"reasoning": "checked", "critical_failures": []}))


def test_a_judge_endpoint_changed_through_the_product_serves_the_next_call(api, judge, settings):
    """The reward endpoint reuses the judge endpoint it resolved (REWARD_ENDPOINT_CACHE_SECONDS),
    but a record assigned to the judge role in this process is used by the very next call."""
    from llm.endpoint_services import endpoint_record_create, endpoint_role_assign

    settings.REWARD_ENDPOINT_CACHE_SECONDS = 3600
    api.post("/api/reward", _item(GOOD), format="json")
    assert len(judge.chat_requests()) == 1
    with ScriptedLLM() as other:
        other.default = _answer_no_failure
        record = endpoint_record_create(name="judge-two", base_url=other.base_url, model="how2judge")
        endpoint_role_assign(role="how2score_judge", record=record)
        body = api.post("/api/reward", _item(GOOD + " "), format="json").json()
        assert body["how2score"] == 1
        assert len(other.chat_requests()) == 1 and len(judge.chat_requests()) == 1


def test_a_change_made_by_another_process_is_seen_within_the_cache_seconds(api, judge, settings):
    """A change this process hears nothing of (another web process saved it: here a queryset
    update, which sends no signal) is seen once the resolution is older than the setting."""
    import time

    from llm.endpoint_services import endpoint_record_create, endpoint_role_assign
    from llm.models import EndpointRecord

    settings.REWARD_ENDPOINT_CACHE_SECONDS = 1
    with ScriptedLLM() as first, ScriptedLLM() as second:
        first.default = second.default = _answer_no_failure
        record = endpoint_record_create(name="judge-moving", base_url=first.base_url, model="how2judge")
        endpoint_role_assign(role="how2score_judge", record=record)
        before = time.monotonic()  # the endpoint is resolved during the call: after this
        api.post("/api/reward", _item(GOOD), format="json")
        after = time.monotonic()  # ... and before this
        EndpointRecord.objects.filter(pk=record.pk).update(base_url=second.base_url)
        api.post("/api/reward", _item(GOOD + " a"), format="json")
        if time.monotonic() - before < 1:  # the resolution was surely under a second old: the first server
            assert len(first.chat_requests()) == 2 and not second.chat_requests()
        time.sleep(max(0.0, 1.05 - (time.monotonic() - after)))
        api.post("/api/reward", _item(GOOD + " b"), format="json")
        assert len(second.chat_requests()) == 1
