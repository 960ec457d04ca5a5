"""The LLM client through the real openai client over HTTP against the scripted server:
outcomes, retries that can succeed, structured-output fallback, the ledger as cache."""

from __future__ import annotations

import json
import time

import pytest

from judging.how2score import JUDGE_SCHEMA
from llm.client import LLMClient
from llm.endpoints import Endpoint
from llm.models import LedgerEntry
from llm.request import LLMRequest
from tests.scripted_llm import Reply, ScriptedLLM, Status, last_user_message

pytestmark = pytest.mark.django_db

VERDICT = {
    "reasoning": "L2 skips the waiting period.",
    "critical_failures": [{"failure": "no 30-day wait", "L1_steps": [4], "L2_steps": []}],
}


@pytest.fixture(autouse=True)
def fast_retries(settings):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    settings.LLM_BACKOFF_MAX_SECONDS = 0.05


@pytest.fixture
def server():
    with ScriptedLLM() as scripted:
        yield scripted


def _client(server: ScriptedLLM, model: str = "gpt-5") -> LLMClient:
    return LLMClient(Endpoint(role="how2score_judge", base_url=server.base_url, api_key="sk-test", model=model))


def _judge(text: str = "judge this") -> LLMRequest:
    return LLMRequest(
        stage="how2score_judge",
        messages=[{"role": "user", "content": text}],
        params={"temperature": 0},
        schema=JUDGE_SCHEMA,
    )


def test_structured_answer_is_ok_and_sent_with_a_strict_json_schema(server):
    server.queue(Reply(json.dumps(VERDICT), prompt_tokens=1000, completion_tokens=200))
    result = _client(server).complete(_judge(), run="judge-run:1")
    assert result.ok and result.value == VERDICT and result.path == "json_schema"
    sent = server.chat_requests()[0]["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"] == {"name": "how2score_judge", "schema": JUDGE_SCHEMA, "strict": True}
    entry = LedgerEntry.objects.get(key=result.key)
    assert (entry.outcome, entry.tokens_in, entry.tokens_out, entry.run) == ("ok", 1000, 200, "judge-run:1")
    # gpt-5 at 1.25 USD / 10 USD per million tokens: 1000 * 1.25e-6 + 200 * 10e-6 = 0.00325
    assert str(entry.cost_usd) == "0.003250"


def test_429_with_retry_after_then_success(server):
    server.queue(Status(429, "slow down", {"retry-after": "0.3"}), Reply(json.dumps(VERDICT)))
    started = time.monotonic()
    result = _client(server).complete(_judge())
    assert result.ok and result.attempts == 2
    assert time.monotonic() - started >= 0.3  # waited as the server asked
    assert len(server.chat_requests()) == 2


def test_retry_after_ms_is_honoured(server):
    server.queue(Status(429, "slow down", {"retry-after-ms": "250"}), Reply(json.dumps(VERDICT)))
    started = time.monotonic()
    assert _client(server).complete(_judge()).ok
    assert time.monotonic() - started >= 0.25


def test_500_then_success(server):
    server.queue(Status(500, "boom"), Status(503, "busy"), Reply(json.dumps(VERDICT)))
    result = _client(server).complete(_judge())
    assert result.ok and result.attempts == 3


def test_persistent_server_errors_end_as_api_error_not_a_verdict(server, settings):
    settings.LLM_MAX_ATTEMPTS = 3
    server.default = lambda body: Status(500, "down")
    result = _client(server).complete(_judge())
    assert result.outcome == "api_error" and result.value is None
    assert "500" in result.error
    assert len(server.chat_requests()) == 3


def test_401_is_not_retried(server):
    server.queue(Status(401, "bad key"))
    result = _client(server).complete(_judge())
    assert result.outcome == "api_error" and len(server.chat_requests()) == 1


def test_malformed_json_is_re_asked_with_the_parse_error(server):
    server.queue(
        Reply(
            '{"reasoning": "cut',
        ),
        Reply("```json\n" + json.dumps(VERDICT) + "\n```"),
    )
    result = _client(server).complete(_judge())
    assert result.ok and result.value == VERDICT
    first, second = server.chat_requests()
    assert first["messages"] != second["messages"]  # not the identical request again
    assert second["messages"][-2] == {"role": "assistant", "content": '{"reasoning": "cut'}
    assert "could not be used" in last_user_message(second)


def test_answer_that_breaks_the_schema_is_re_asked_and_fails_cleanly(server, settings):
    settings.LLM_PARSE_REASKS = 1
    wrong = json.dumps(
        {"reasoning": "fine", "critical_failures": [{"failure": "x", "L1_steps": ["four"], "L2_steps": []}]}
    )
    server.default = lambda body: Reply(wrong)
    result = _client(server).complete(_judge())
    assert result.outcome == "parse_failed" and result.value is None
    assert "critical_failures/0/L1_steps/0" in result.error
    assert len(server.chat_requests()) == 2
    assert "critical_failures/0/L1_steps/0" in last_user_message(server.chat_requests()[1])


def test_truncated_answer_is_retried_once_with_a_larger_budget(server):
    server.queue(Reply('{"reasoning": "long', finish_reason="length"), Reply(json.dumps(VERDICT)))
    request = LLMRequest(
        stage="how2score_judge",
        messages=[{"role": "user", "content": "x"}],
        params={"max_tokens": 300},
        schema=JUDGE_SCHEMA,
    )
    result = _client(server).complete(request)
    assert result.ok
    assert [r["max_tokens"] for r in server.chat_requests()] == [300, 600]


def test_truncated_twice_ends_as_truncated(server):
    server.default = lambda body: Reply("1. Mix", finish_reason="length")
    request = LLMRequest(stage="generate", messages=[{"role": "user", "content": "x"}], params={"max_tokens": 10})
    result = _client(server).complete(request)
    assert result.outcome == "truncated" and result.value is None and result.text == "1. Mix"


def test_refusal_is_its_own_outcome(server):
    server.queue(Reply(refusal="I can't help with that."))
    result = _client(server).complete(_judge())
    assert result.outcome == "refused" and result.value is None and "can't help" in result.error


def test_server_that_rejects_json_schema_falls_back_to_json_mode():
    with ScriptedLLM(reject_json_schema=True) as server:
        server.default = lambda body: Reply("Here you go:\n" + json.dumps(VERDICT) + "\nDone.")
        client = _client(server, model="local-model")
        result = client.complete(_judge("first"))
        assert result.ok and result.path == "json_object"
        second = client.complete(_judge("second"))
        assert second.path == "json_object"
        kinds = [(r.get("response_format") or {}).get("type") for r in server.chat_requests()]
        assert kinds == ["json_schema", "json_object", "json_object"]  # the endpoint is remembered
    assert LedgerEntry.objects.get(key=result.key).path == "json_object"
    assert LedgerEntry.objects.get(key=result.key).cost_usd is None  # no price known: unknown, not 0


def test_reasoning_prefix_is_dropped_before_parsing(server):
    server.queue(Reply("<think>The steps {look} fine.</think>\n" + json.dumps(VERDICT)))
    assert _client(server).complete(_judge()).value == VERDICT


def test_text_stage_returns_the_text(server):
    server.queue(Reply("1. Heat oil.\n2. Fry pork."))
    request = LLMRequest(stage="generate", messages=[{"role": "user", "content": "Write 2 steps"}])
    result = _client(server).complete(request)
    assert result.ok and result.value == "1. Heat oil.\n2. Fry pork." and result.path == "text"
    assert "response_format" not in server.chat_requests()[0]


def test_repeated_request_is_answered_from_the_ledger_without_a_network_call(server):
    server.queue(Reply(json.dumps(VERDICT)))
    client = _client(server)
    first = client.complete(_judge())
    again = client.complete(_judge())
    assert not first.cached and again.cached and again.value == VERDICT
    assert len(server.chat_requests()) == 1


def test_changing_the_prompt_or_model_or_parameters_invalidates_the_key():
    request = _judge("same")
    assert request.key("gpt-5") == _judge("same").key("gpt-5")
    assert request.key("gpt-5") != request.key("how2judge")
    assert request.key("gpt-5") != _judge("other").key("gpt-5")
    warmer = LLMRequest(
        stage=request.stage, messages=request.messages, params={"temperature": 0.6}, schema=JUDGE_SCHEMA
    )
    assert warmer.key("gpt-5") != request.key("gpt-5")


def test_api_errors_are_not_cached_so_a_rerun_asks_again(server, settings):
    settings.LLM_MAX_ATTEMPTS = 1
    server.queue(Status(500, "down"), Reply(json.dumps(VERDICT)))
    client = _client(server)
    assert client.complete(_judge()).outcome == "api_error"
    result = client.complete(_judge())
    assert result.ok and not result.cached
    assert LedgerEntry.objects.get(key=result.key).outcome == "ok"


def test_plain_prompt_goes_to_the_completions_endpoint_with_its_stop_sequence(server):
    server.queue(Reply("1. Heat oil.\n2. Fry pork."))
    request = LLMRequest(
        stage="generate",
        messages=[],
        prompt="Goal:\nStew\n\nExactly 2 steps:\n",
        params={"temperature": 0, "stop": ["\n\n"]},
    )
    result = _client(server).complete(request)
    assert result.ok and result.value == "1. Heat oil.\n2. Fry pork."
    sent = server.chat_requests()[0]
    assert sent["prompt"].startswith("Goal:") and sent["stop"] == ["\n\n"] and "messages" not in sent
    assert request.key("m") != LLMRequest(stage="generate", messages=[], prompt="other", params=request.params).key("m")
