"""The product against a real inference server: vLLM (CPU build) serving SmolLM2-135M-Instruct
on 127.0.0.1 (tests/real_servers.py). Marked ``real_server``: `make test-real` runs them.

What is checked is the product's handling of what a real server really answers: the
structured-output path it uses, the context it learns, a prompt that cannot fit, an unknown
model, runs whose every request ends in a usable outcome with true counts and statuses, the
reward endpoint within its deadline. A 135M model's verdicts are poor and are not judged."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from judging.models import Generation, JudgeRun, Judgment
from judging.services import (
    generation_run_create,
    generation_run_execute,
    judge_run_create,
    judge_run_execute,
    language_model_register,
)
from llm import capabilities as caps
from llm.checks import endpoint_check
from llm.client import LLMClient
from llm.constants import OUTCOMES
from llm.endpoint_services import endpoint_record_create, endpoint_record_test
from llm.endpoints import Endpoint
from llm.models import LedgerEntry
from llm.request import LLMRequest
from mining.models import Procedure
from tests.real_servers import RealServer, roles_point_at

pytestmark = [pytest.mark.real_server, pytest.mark.django_db(transaction=True)]

USABLE = {"ok", "parse_failed", "truncated", "refused", "too_long"}  # every outcome but api_error


@pytest.fixture
def roles(settings, vllm: RealServer):
    """Every LLM role pointed at the real server. The judge's answer budget is what
    JUDGE_MAX_TOKENS=200 would set: a 135M model under a grammar often writes until it is cut
    off, and each token costs ~50 ms here."""
    return roles_point_at(settings, vllm, max_tokens={"how2score_judge": 200})


def _endpoint(vllm: RealServer, **fields) -> Endpoint:
    return Endpoint(role="how2score_judge", base_url=vllm.base_url, api_key="", model=vllm.model, **fields)


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 40}, "confident": {"type": "boolean"}},
    "required": ["answer", "confident"],
    "additionalProperties": False,
}


def test_the_endpoint_check_finds_json_schema_and_the_context_of_the_real_server(vllm):
    check = endpoint_check(_endpoint(vllm), roles=["how2score_judge"], timeout=120)
    assert check.reachable, check.error
    assert check.structured_output == "json_schema" and check.rejected == {}
    assert (check.context_length, check.context_source) == (vllm.context_length, "/models")
    assert check.served_model == vllm.model


def test_the_endpoint_records_test_button_reports_the_real_server(vllm):
    record = endpoint_record_create(name="real-vllm", base_url=vllm.base_url, model=vllm.model)
    record = endpoint_record_test(record=record, timeout=120)
    assert record.last_test_ok is True, record.last_test_message
    assert "structured output: json_schema" in record.last_test_message
    assert f"context {vllm.context_length} tokens (/models)" in record.last_test_message


def test_a_structured_call_follows_the_schema_on_the_real_server(vllm):
    request = LLMRequest(
        stage="llm_check",
        messages=[{"role": "user", "content": "Is water wet? Answer in JSON."}],
        params={"temperature": 0, "max_tokens": 60},
        schema=SCHEMA,
    )
    result = LLMClient(_endpoint(vllm)).complete(request, run="real-test")
    assert result.outcome in ("ok", "truncated"), result.error
    assert result.path == "json_schema"
    if result.ok:
        assert set(result.value) == {"answer", "confident"}
    entry = LedgerEntry.objects.get(key=result.key)
    assert entry.tokens_in > 0 and entry.tokens_out > 0 and entry.cost_usd is None  # a local model has no price


def test_a_prompt_longer_than_the_context_is_too_long_and_json_schema_stays(vllm):
    long_text = "The quick brown fox jumps over the lazy dog. " * 800  # ~8,000 tokens for a 4,096 context
    request = LLMRequest(
        stage="llm_check",
        messages=[{"role": "user", "content": long_text + "Answer in JSON."}],
        params={"temperature": 0, "max_tokens": 40},
        schema=SCHEMA,
    )
    client = LLMClient(_endpoint(vllm))
    result = client.complete(request)
    assert result.outcome == "too_long", (result.outcome, result.error)
    assert str(vllm.context_length) in result.error
    learned = caps.capabilities_get(vllm.base_url, vllm.model)
    assert learned.unsupported == {} and learned.context_length == vllm.context_length
    # asked again in a new call: refused before sending, since the server's count is known now
    served_before = LedgerEntry.objects.get(key=result.key).attempts
    again = client.complete(request)
    assert again.outcome == "too_long" and served_before == 1
    short = LLMRequest(
        stage="llm_check",
        messages=[{"role": "user", "content": "Is fire hot? Answer in JSON."}],
        params={"temperature": 0, "max_tokens": 40},
        schema=SCHEMA,
    )
    assert client.complete(short).path == "json_schema"


def test_a_budget_larger_than_the_context_is_fitted_instead_of_refused(vllm):
    caps.learn_context(caps.endpoint_key(vllm.base_url, vllm.model), vllm.context_length, "/models")
    request = LLMRequest(
        stage="generate",
        messages=[{"role": "user", "content": "List three colours."}],
        params={"temperature": 0, "max_tokens": 5000},  # vLLM alone answers 400 to this
    )
    result = LLMClient(_endpoint(vllm)).complete(request)
    assert result.outcome in ("ok", "truncated"), result.error


def test_an_unknown_model_is_an_api_error_that_names_it(vllm):
    request = LLMRequest(stage="generate", messages=[{"role": "user", "content": "hi"}], params={"max_tokens": 5})
    endpoint = Endpoint(role="generate", base_url=vllm.base_url, api_key="", model="no-such-model")
    result = LLMClient(endpoint).complete(request)
    assert result.outcome == "api_error" and "404" in result.error and "no-such-model" in result.error
    assert caps.capabilities_get(vllm.base_url, "no-such-model").unsupported == {}


def _two_procedures() -> list[int]:
    return list(Procedure.objects.filter(split="bench").order_by("id").values_list("id", flat=True)[:2])


def test_generate_and_judge_two_procedures_on_the_real_server(vllm, roles, demo, capsys):
    model = language_model_register(
        name="smollm2-real", role="generate", base_url=vllm.base_url, model=vllm.model, max_tokens=120
    )
    procedures = _two_procedures()
    generation = generation_run_create(
        name="real-gen", language_model=model, procedure_ids=procedures, concurrency=2, start=False
    )
    generation_run_execute(run_id=generation.pk)
    generation.refresh_from_db()
    generations = list(Generation.objects.filter(run=generation))
    assert len(generations) == 2 and {g.outcome for g in generations} <= USABLE
    assert generation.status in ("done", "done_with_failures")
    assert (generation.status == "done") == all(g.outcome == "ok" for g in generations)

    judge = judge_run_create(
        name="real-judge", generation_run=generation, judge="smollm2-judge", concurrency=2, start=False
    )
    judge_run_execute(run_id=judge.pk)
    judge.refresh_from_db()
    judgments = list(Judgment.objects.filter(run=judge))
    usable = Generation.objects.filter(run=generation, outcome="ok").count()
    assert len(judgments) == usable
    assert {j.outcome for j in judgments} <= USABLE
    for j in judgments:  # a label only with a verdict, and a reason without one
        assert (j.has_failure is not None) == (j.outcome == "ok")
        assert j.outcome == "ok" or j.reasoning
    entries = LedgerEntry.objects.filter(run__startswith="judge-run")
    assert entries.exists() and set(entries.values_list("path", flat=True)) == {"json_schema"}
    assert set(entries.values_list("outcome", flat=True)) <= set(OUTCOMES) - {"api_error"}
    # the judge prompt (~3,500 tokens) leaves little of the 4,096 context: every budget fitted it
    for entry in entries:
        usage = (entry.response or {}).get("usage") or {}
        assert usage["prompt_tokens"] + usage["completion_tokens"] <= vllm.context_length
    assert judge.status in ("done", "done_with_failures")
    assert (judge.status == "done") == all(j.outcome == "ok" for j in judgments)

    call_command("bench_run", "status", "real-judge")
    status = json.loads(capsys.readouterr().out)
    assert status["status"] == judge.status
    assert status["outcomes"]["api_error"] == 0
    assert sum(status["outcomes"][o] for o in OUTCOMES) == len(judgments)


def test_the_reward_endpoint_answers_a_batch_from_the_real_judge(vllm, roles, demo, researcher):
    from rest_framework.test import APIClient

    from core.services import api_token_create

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher).secret}")
    procedure = Procedure.objects.filter(split="bench").order_by("id").first()
    assert procedure is not None
    items = [
        {
            "goal": procedure.goal,
            "resources": procedure.resources,
            "reference_steps": procedure.steps,
            "completion": "\n".join(f"{i}. {step}" for i, step in enumerate(procedure.steps, 1)),
        },
        {
            "goal": procedure.goal,
            "resources": procedure.resources,
            "reference_steps": procedure.steps,
            "completion": "I cannot help with that.",
        },
    ]
    response = client.post("/api/reward", data=json.dumps(items), content_type="application/json")
    assert response.status_code == 200, response.content[:500]
    rewards = response.json()
    rewards = rewards.get("rewards", rewards) if isinstance(rewards, dict) else rewards
    assert len(rewards) == 2
    for reward in rewards:
        assert reward["status"] in ("judged", "cached", "no_steps", "failed")
        if reward["status"] == "failed":
            assert reward.get("reason")
    assert not JudgeRun.objects.exists()  # the reward endpoint runs no judge run
