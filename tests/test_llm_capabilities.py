"""What the client learns of an endpoint and how it fits requests to it: a rejection is
classified by its words (llama.cpp's 500 for json_schema falls back, vLLM's 400 for a long
prompt is too_long and changes nothing), budgets fit the context, a truncated answer is asked
again only with a larger budget that fits, a slow endpoint is told from a down one.

The answers of real servers are quoted from what they were measured to send
(../shared/REAL-SERVERS.md); the real servers themselves run in tests/real_servers/."""

from __future__ import annotations

import json
from typing import Any

import pytest

from judging.how2score import JUDGE_SCHEMA
from llm import capabilities as caps
from llm.checks import endpoint_check
from llm.client import LLMClient
from llm.endpoints import Endpoint
from llm.models import LedgerEntry
from llm.request import SCHEMA_INSTRUCTION, LLMRequest
from llm.run_watch import CircuitBreaker, RunWatch, breaker_message
from tests.scripted_llm import Reply, ScriptedLLM, Status

pytestmark = pytest.mark.django_db

VERDICT = {"reasoning": "fine", "critical_failures": []}
# llama-cpp-python's server (0.3.36) to response_format json_schema: HTTP 500 with this body.
LLAMA_CPP_JSON_SCHEMA_500 = "Input should be 'text' or 'json_object'"
# vLLM (0.32, CPU build) to a prompt longer than its context: HTTP 400 with this message.
VLLM_OVERFLOW = (
    "This model's maximum context length is 4096 tokens. However, your prompt contains at least 4097 input "
    "tokens and requested 4096 output tokens. (parameter=input_tokens, value=4097)"
)


@pytest.fixture(autouse=True)
def fast_retries(settings):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    settings.LLM_BACKOFF_MAX_SECONDS = 0.05


@pytest.fixture
def server():
    with ScriptedLLM() as scripted:
        yield scripted


def _endpoint(server: ScriptedLLM, **fields) -> Endpoint:
    return Endpoint(role="how2score_judge", base_url=server.base_url, api_key="", model="smol", **fields)


def _judge(text: str = "judge this", max_tokens: int = 4096) -> LLMRequest:
    return LLMRequest(
        stage="how2score_judge",
        messages=[{"role": "user", "content": text}],
        params={"temperature": 0, "max_tokens": max_tokens},
        schema=JUDGE_SCHEMA,
    )


@pytest.mark.parametrize(
    ("status", "words", "kind"),
    [
        (500, LLAMA_CPP_JSON_SCHEMA_500, caps.REJECTION_FORMAT),
        (400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported", caps.REJECTION_FORMAT),
        (400, VLLM_OVERFLOW, caps.REJECTION_CONTEXT),
        (400, "max_tokens=5000 cannot be greater than max_model_len=4096", caps.REJECTION_BUDGET),
        (400, "Input should be a valid number (param: body.temperature)", caps.REJECTION_OTHER),
        (401, "Incorrect API key provided", caps.REJECTION_AUTH),
        (404, "The model `x` does not exist.", caps.REJECTION_NOT_FOUND),
        (500, "CUDA out of memory", caps.REJECTION_OTHER),
    ],
)
def test_a_rejection_is_classified_by_its_words_not_its_status(status, words, kind):
    assert caps.rejection_kind(status, words) == kind


def test_a_budget_too_large_beside_a_prompt_that_fits_is_asked_again_with_one_that_fits(server):
    openai_words = (
        "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens "
        "(1000 in the messages, 8000 in the completion). Please reduce the length of the messages or completion."
    )
    server.queue(Status(400, openai_words))
    server.default = lambda body: Reply(json.dumps(VERDICT))
    result = LLMClient(_endpoint(server)).complete(_judge("fits", max_tokens=8000))
    assert result.ok
    assert server.chat_requests()[1]["max_tokens"] <= 8192 - 1000


def test_context_numbers_are_read_from_the_servers_words():
    assert caps.context_numbers(VLLM_OVERFLOW) == (4096, 4097)
    # llama-cpp-python's server, a judge prompt beyond its default n_ctx
    llama = "Requested tokens (3512) exceed context window of 2048"
    assert caps.rejection_kind(400, llama) == caps.REJECTION_CONTEXT
    assert caps.context_numbers(llama) == (2048, 3512)
    assert caps.context_numbers("max_tokens=5000 cannot be greater than max_model_len=4096")[0] == 4096


def test_llama_cpp_500_for_json_schema_falls_back_to_json_mode_with_the_schema_in_the_prompt(server):
    server.on(
        lambda b: (b.get("response_format") or {}).get("type") == "json_schema", Status(500, LLAMA_CPP_JSON_SCHEMA_500)
    )
    server.default = lambda body: Reply(json.dumps(VERDICT))
    client = LLMClient(_endpoint(server))
    result = client.complete(_judge("first"))
    assert result.ok and result.path == "json_object"
    sent = server.chat_requests()
    assert [r["response_format"]["type"] for r in sent] == ["json_schema", "json_object"]
    # JSON mode cannot enforce the schema, so the prompt states it (after the prompt's own text)
    last_user = sent[1]["messages"][-1]["content"]
    assert last_user.startswith("first") and SCHEMA_INSTRUCTION in last_user and '"critical_failures"' in last_user
    # learned for every later request, by any client of this endpoint
    later = LLMClient(_endpoint(server)).complete(_judge("second"))
    assert later.ok and len(server.chat_requests()) == 3
    assert server.chat_requests()[2]["response_format"]["type"] == "json_object"
    learned = caps.capabilities_get(server.base_url, "smol")
    assert learned.structured_output == "json_object" and "json_schema" in learned.unsupported


def test_a_context_overflow_is_too_long_and_never_changes_the_format(server):
    server.queue(Status(400, VLLM_OVERFLOW))
    server.default = lambda body: Reply(json.dumps(VERDICT))
    client = LLMClient(_endpoint(server))
    result = client.complete(_judge("a very long prompt"))
    assert result.outcome == "too_long"
    assert "4096" in result.error and "4097" in result.error
    assert LedgerEntry.objects.get(key=result.key).outcome == "too_long"
    assert len(server.chat_requests()) == 1  # not re-sent to fail the same way
    learned = caps.capabilities_get(server.base_url, "smol")
    assert learned.context_length == 4096 and learned.unsupported == {}
    assert client.complete(_judge("a short prompt")).path == "json_schema"


@pytest.mark.parametrize(
    "words", ["Input should be a valid number (param: body.temperature)", "invalid api key", "unknown field"]
)
def test_validation_and_auth_errors_are_api_errors_and_never_change_the_format(server, words):
    server.queue(Status(400, words))
    result = LLMClient(_endpoint(server)).complete(_judge())
    assert result.outcome == "api_error" and words in result.error
    assert caps.capabilities_get(server.base_url, "smol").unsupported == {}


def test_the_budget_is_fitted_to_the_context_left_beside_the_prompt(server):
    server.default = lambda body: Reply(json.dumps(VERDICT))
    client = LLMClient(_endpoint(server, context_length=2048))
    client.complete(_judge("x" * 4000, max_tokens=4096))  # ~1,000 estimated prompt tokens
    sent = server.chat_requests()[0]["max_tokens"]
    assert 0 < sent < 2048 - 1000
    # the server's own count calibrates the estimate: 10 prompt tokens reported
    assert caps.capabilities_get(server.base_url, "smol").token_ratio is not None


def test_a_prompt_that_cannot_fit_a_calibrated_endpoint_is_too_long_without_being_sent(server):
    server.default = lambda body: Reply(json.dumps(VERDICT), prompt_tokens=1030)
    client = LLMClient(_endpoint(server, context_length=2048))
    assert client.complete(_judge("y" * 4000, max_tokens=64)).ok  # learns ~1 token per 4 characters
    result = client.complete(_judge("z" * 12_000, max_tokens=64))
    assert result.outcome == "too_long" and "2048" in result.error
    assert len(server.chat_requests()) == 1


def test_a_truncated_answer_is_asked_again_only_with_a_larger_budget_that_fits(server):
    server.default = lambda body: Reply('{"reasoning": "cut', finish_reason="length", prompt_tokens=1030)
    client = LLMClient(_endpoint(server, context_length=1100))
    result = client.complete(_judge("w" * 4000, max_tokens=4096))
    # the server counts 1,030 prompt tokens: 70 are left, less the margin, so no budget larger
    # than the first fits, and the same request is not sent again
    assert result.outcome == "truncated" and "no larger budget fits" in result.error
    budgets = [r["max_tokens"] for r in server.chat_requests()]
    assert len(budgets) == 1


def test_a_truncated_answer_with_room_to_grow_is_asked_again_once_with_a_larger_budget(server, settings):
    settings.LLM_TRUNCATION_RETRIES = 3
    server.default = lambda body: Reply('{"reasoning": "cut', finish_reason="length", prompt_tokens=30)
    client = LLMClient(_endpoint(server, context_length=1000))
    result = client.complete(_judge("short", max_tokens=200))
    budgets = [r["max_tokens"] for r in server.chat_requests()]
    assert result.outcome == "truncated"
    assert budgets[0] == 200 and all(b2 > b1 for b1, b2 in zip(budgets, budgets[1:], strict=False))
    assert budgets[-1] <= 1000 and len(budgets) == len(set(budgets))  # never the same request twice


def test_a_server_that_names_its_context_in_a_max_tokens_error_is_asked_again_with_a_fitting_budget(server):
    server.queue(Status(400, "max_tokens=5000 cannot be greater than max_model_len=4096"))
    server.default = lambda body: Reply(json.dumps(VERDICT))
    result = LLMClient(_endpoint(server)).complete(_judge(max_tokens=5000))
    assert result.ok
    assert [r["max_tokens"] for r in server.chat_requests()][1] < 4096


def test_non_thinking_endpoint_sends_the_template_switch_and_keys_its_answers_apart(server):
    server.default = lambda body: Reply(json.dumps(VERDICT))
    thinking = LLMClient(_endpoint(server)).complete(_judge())
    plain = LLMClient(_endpoint(server, disable_thinking=True)).complete(_judge())
    assert "chat_template_kwargs" not in server.chat_requests()[0]
    assert server.chat_requests()[1]["chat_template_kwargs"] == {"enable_thinking": False}
    assert thinking.key != plain.key and not plain.cached


def test_the_endpoint_check_says_what_the_server_lacks_and_what_works(server):
    server.on(
        lambda b: (b.get("response_format") or {}).get("type") == "json_schema", Status(500, LLAMA_CPP_JSON_SCHEMA_500)
    )
    server.default = lambda body: Reply('{"ok": true}')
    check = endpoint_check(_endpoint(server), roles=["how2score_judge"])
    assert check.reachable and check.structured_output == "json_object"
    line = check.describe_capabilities()
    assert "json_schema rejected (HTTP 500" in line and LLAMA_CPP_JSON_SCHEMA_500 in line
    assert "context length unknown" in line


def test_breaker_tells_a_slow_endpoint_from_a_down_one():
    slow = CircuitBreaker(consecutive=3, window=50, window_failures=0.9)
    for _ in range(3):
        record = slow.record(False, error="no answer within 120 s (timed out)", endpoint="e", slow=True)
    assert record is not None and record["diagnosis"] == "slow"
    assert "is slow, not down" in breaker_message(record) and "timeout" in breaker_message(record)
    down = CircuitBreaker(consecutive=3, window=50, window_failures=0.9)
    for _ in range(3):
        record = down.record(False, error="Connection error.", endpoint="e")
    assert (
        record is not None
        and record["diagnosis"] == "down"
        and "Resume when it answers again" in breaker_message(record)
    )


def test_a_timeout_is_reported_to_the_run_watch_as_slow(server, settings):
    settings.LLM_MAX_ATTEMPTS = 2
    server.latency = 1.5
    watch = RunWatch(CircuitBreaker(consecutive=2, window=50, window_failures=0.9))
    result = LLMClient(_endpoint(server, timeout_seconds=0.5)).complete(_judge(), watch=watch)
    assert result.outcome == "api_error" and "no answer within" in result.error
    assert watch.tripped is not None and watch.tripped["diagnosis"] == "slow"


def _role_settings(settings, server, **fields):
    roles = dict(settings.LLM_ROLES)
    roles["how2score_judge"] = {
        "base_url": server.base_url,
        "api_key": "",
        "model": "smol",
        "temperature": None,
        "max_tokens": None,
        "context_length": None,
        "timeout_seconds": None,
        "disable_thinking": False,
        **fields,
    }
    settings.LLM_ROLES = roles


def test_the_roles_context_timeout_and_thinking_variables_reach_the_request(server, settings):
    from llm.endpoints import endpoint_get

    _role_settings(settings, server, context_length=1500, timeout_seconds=0.5, disable_thinking=True)
    server.default = lambda body: Reply(json.dumps(VERDICT))
    LLMClient(endpoint_get("how2score_judge")).complete(_judge("v" * 2000, max_tokens=4096))
    body = server.chat_requests()[0]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["max_tokens"] < 1500  # JUDGE_CONTEXT_LENGTH fitted the budget
    server.latency = 1.5
    settings.LLM_MAX_ATTEMPTS = 1
    late = LLMClient(endpoint_get("how2score_judge")).complete(_judge("late"))
    assert late.outcome == "api_error" and "no answer within 0.5 s" in late.error


def test_an_endpoint_records_context_timeout_and_thinking_fields_reach_the_request(server, settings):
    from llm.endpoint_services import endpoint_record_create, endpoint_role_assign
    from llm.endpoints import endpoint_get

    record = endpoint_record_create(
        name="small",
        base_url=server.base_url,
        model="smol",
        context_length="1500",
        disable_thinking=True,
        timeout_seconds="1",
    )
    endpoint_role_assign(role="how2score_judge", record=record)
    server.default = lambda body: Reply(json.dumps(VERDICT))
    endpoint = endpoint_get("how2score_judge")
    assert (endpoint.context_length, endpoint.timeout_seconds, endpoint.disable_thinking) == (1500, 1.0, True)
    LLMClient(endpoint).complete(_judge("v" * 2000, max_tokens=4096))
    body = server.chat_requests()[0]
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["max_tokens"] < 1500


def test_endpoint_record_fields_are_validated_with_the_field_named():
    from llm.endpoint_services import EndpointFieldError, endpoint_record_create

    with pytest.raises(EndpointFieldError) as refused:
        endpoint_record_create(
            name="bad",
            base_url="http://127.0.0.1:9/v1",
            model="m",
            context_length="-3",
            timeout_seconds="10**9",
            disable_thinking="maybe",
        )
    assert set(refused.value.errors) == {"context_length", "timeout_seconds", "disable_thinking"}


def test_first_use_probes_models_for_the_served_context(server):
    server.default = lambda body: Reply(json.dumps(VERDICT))
    original: Any = server._handler_class()

    class WithContext(original):  # vLLM's /models carries max_model_len
        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                return self._send(200, {"object": "list", "data": [{"id": "smol", "max_model_len": 2048}]})
            return super().do_GET()

    server._server.RequestHandlerClass = WithContext
    LLMClient(_endpoint(server))
    learned = caps.capabilities_get(server.base_url, "smol")
    assert (learned.context_length, learned.context_source) == (2048, "/models") and learned.probed_at


def test_a_timeout_doubles_the_next_requests_timeout_unless_one_was_set(server, settings):
    settings.LLM_TIMEOUT_SECONDS = 0.4
    settings.LLM_MAX_ATTEMPTS = 1
    server.latency = 0.7
    server.default = lambda body: Reply(json.dumps(VERDICT))
    first = LLMClient(_endpoint(server)).complete(_judge("one"))
    assert first.outcome == "api_error"
    assert caps.capabilities_get(server.base_url, "smol").timeout_floor == pytest.approx(0.8)
    assert LLMClient(_endpoint(server)).complete(_judge("two")).ok  # waits 0.8 s now


def test_a_greedy_request_cut_off_before_is_not_resent_unchanged(server, settings):
    settings.LLM_TRUNCATION_RETRIES = 0
    server.default = lambda body: Reply(
        '{"reasoning": "cut', finish_reason="length", completion_tokens=body["max_tokens"]
    )
    client = LLMClient(_endpoint(server))
    first = client.complete(_judge("same", max_tokens=100))
    assert first.outcome == "truncated" and [r["max_tokens"] for r in server.chat_requests()] == [100]
    # asked again (Retry failed, a failure retry of a mining stage): only with a larger budget
    client.complete(_judge("same", max_tokens=100))
    assert [r["max_tokens"] for r in server.chat_requests()] == [100, 200]


def test_a_greedy_request_with_no_larger_budget_left_is_not_sent_again(server, settings):
    settings.LLM_TRUNCATION_RETRIES = 0
    server.default = lambda body: Reply('{"reasoning": "cut', finish_reason="length", prompt_tokens=1030)
    client = LLMClient(_endpoint(server, context_length=1110))
    assert client.complete(_judge("q" * 4000, max_tokens=4096)).outcome == "truncated"
    again = client.complete(_judge("q" * 4000, max_tokens=4096))
    assert again.outcome == "truncated" and "not sent again" in again.error
    assert len(server.chat_requests()) == 1


def test_a_sampled_request_cut_off_before_may_be_sent_again_as_it_was(server, settings):
    settings.LLM_TRUNCATION_RETRIES = 0
    server.default = lambda body: Reply("cut", finish_reason="length")
    request = LLMRequest(
        stage="generate", messages=[{"role": "user", "content": "s"}], params={"temperature": 0.7, "max_tokens": 50}
    )
    client = LLMClient(_endpoint(server))
    client.complete(request)
    client.complete(request)
    assert [r["max_tokens"] for r in server.chat_requests()] == [50, 50]


def test_a_resumed_job_knows_which_greedy_requests_were_cut_off(server, settings):
    from llm.retries import _cut_off
    from llm.services import llm_job_create, llm_job_execute, llm_job_retry_failed

    settings.LLM_TRUNCATION_RETRIES = 0
    _role_settings(settings, server)
    server.default = lambda body: Reply(
        '{"reasoning": "cut', finish_reason="length", completion_tokens=body["max_tokens"]
    )
    job = llm_job_create(run="cut", role="how2score_judge", requests=[_judge("j", max_tokens=80)], start=False)
    llm_job_execute(job_id=job.pk)
    _cut_off.clear()  # a new process: only the ledger knows
    llm_job_retry_failed(job=job)
    llm_job_execute(job_id=job.pk)
    assert [r["max_tokens"] for r in server.chat_requests()] == [80, 160]


def test_a_short_prompts_template_overhead_does_not_make_long_prompts_too_long(server):
    # "Say hi" counted as 32 tokens by a chat template with its own system prompt
    server.default = lambda body: Reply(
        json.dumps(VERDICT), prompt_tokens=32 if len(body["messages"][-1]["content"]) < 100 else 1000
    )
    client = LLMClient(_endpoint(server, context_length=4096))
    client.complete(_judge("Say hi"))
    assert caps.capabilities_get(server.base_url, "smol").token_ratio is None
    long_prompt = client.complete(_judge("p" * 12_000, max_tokens=200))  # ~3,000 tokens: fits
    assert long_prompt.ok and server.chat_requests()[-1]["max_tokens"] == 200


@pytest.mark.parametrize("value", ["٣٠٠٠", "４０９６", "+5000", "3", "1e3", "4096.0"])
def test_a_context_length_must_be_plain_digits_and_large_enough_to_hold_a_prompt(value):
    from llm.endpoint_services import EndpointFieldError, endpoint_record_create

    with pytest.raises(EndpointFieldError) as refused:
        endpoint_record_create(name="odd", base_url="http://127.0.0.1:9/v1", model="m", context_length=value)
    assert "digits 0-9" in refused.value.errors["context_length"]


def test_the_records_page_says_nothing_was_learned_of_an_untested_endpoint(admin_client):
    from llm.endpoint_services import endpoint_record_create

    endpoint_record_create(name="never-tested", base_url="http://127.0.0.1:9/v1", model="m")
    page = admin_client.get("/llm/endpoints/").content.decode()
    assert "structured output not learned yet" in page
    api = admin_client.get("/api/llm/endpoints/").json()
    rows = api["results"] if isinstance(api, dict) else api
    assert rows[0]["capabilities"]["structured_output"] is None
