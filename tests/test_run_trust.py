"""Run states stay true when the endpoint misbehaves: done only when every request has an
ok answer, a breaker that pauses a run whose endpoint is down, failures never served from
the ledger, Retry failed that re-asks exactly the failures, and any answer at all turned
into an outcome. Everything goes through the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
import time

import httpx2
import openai
import pytest
from django.urls import reverse

from judging.models import JudgeRun
from judging.services import judge_run_create, judge_run_execute
from llm.client import LLMClient
from llm.endpoints import Endpoint
from llm.limits import limits_get
from llm.models import LedgerEntry, LLMJob
from llm.request import LLMRequest
from llm.retries import _retry_after_seconds
from llm.run_lifecycle import run_control
from llm.run_watch import CircuitBreaker
from llm.services import llm_job_create, llm_job_execute
from tests.scripted_llm import Raw, Reply, ScriptedLLM, Status
from tests.test_judging_runs import _generate, _judge_answer, server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def _judge_requests(server: ScriptedLLM) -> list[dict]:
    return [r for r in server.chat_requests() if r.get("response_format")]


@pytest.fixture
def quick(settings):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.001
    settings.LLM_BACKOFF_MAX_SECONDS = 0.01
    return settings


def test_a_judge_run_whose_endpoint_is_down_pauses_itself_and_says_why(server, quick, researcher_client):  # noqa: F811
    run = _generate()
    outage = {"on": True}
    server.default = lambda body: (
        Status(500, "upstream overloaded")
        if outage["on"] and body.get("response_format")
        else (_judge_answer(body) if body.get("response_format") else Reply("1. a\n2. b"))
    )
    judge = judge_run_create(name="j-outage", generation_run=run, judge="how2judge", start=False, concurrency=4)
    judge_run_execute(run_id=judge.pk)
    judge.refresh_from_db()
    job = judge.llm_job
    assert job is not None
    job.refresh_from_db()
    assert judge.status == "paused" and job.status == "paused"
    assert "circuit breaker" in judge.pause_reason and server.base_url in judge.pause_reason and not judge.error
    assert job.breaker["reason"].endswith("failed attempts in a row") and "500" in job.breaker["last_error"]
    assert len(_judge_requests(server)) < 17 * 6  # it stopped instead of spending every retry on every request
    assert judge.judgments.count() == 0  # nothing unusable was stored as a verdict
    html = researcher_client.get(reverse("generation_run_detail", args=[run.pk])).content.decode()
    assert f'id="judge-{judge.pk}-breaker"' in html and "upstream overloaded" in html

    outage["on"] = False  # the endpoint recovers; resuming continues the run
    run_control(JudgeRun.objects.get(pk=judge.pk), "resume")
    assert judge_run_execute(run_id=judge.pk) == "done"
    judge.refresh_from_db()
    assert judge.status == "done_with_failures"  # the scripted judge never answers one generation in JSON
    assert judge.judgments.filter(outcome="ok").count() == 16


def test_failures_end_done_with_failures_and_retry_failed_reasks_exactly_them(server, quick):  # noqa: F811
    run = _generate()
    broken = {"on": True}

    def answer(body):
        if not body.get("response_format"):
            return Reply("1. a\n2. b")
        text = body["messages"][0]["content"]
        if broken["on"] and ("Sell your share" in text or "reticello" in text):
            return Reply("not json at all")  # malformed answer, also when re-asked
        return Reply(json.dumps({"reasoning": "ok", "critical_failures": []}))

    server.default = answer
    judge = judge_run_create(name="j", generation_run=run, judge="how2judge", start=False)
    assert judge.llm_job is not None
    judge_run_execute(run_id=judge.pk)
    judge.refresh_from_db()
    assert judge.status == "done_with_failures"
    assert judge.llm_job.outcome_counts == {"ok": 15, "parse_failed": 2}
    assert judge.judgments.filter(outcome="parse_failed").count() == 2

    broken["on"] = False
    before = len(_judge_requests(server))
    assert run_control(judge, "retry") == 2
    judge_run_execute(run_id=judge.pk)
    judge.refresh_from_db()
    assert len(_judge_requests(server)) - before == 2  # exactly the two failures, nothing else
    assert judge.status == "done" and judge.judgments.filter(outcome="ok").count() == 17
    histories = [e.history for e in LedgerEntry.objects.filter(key__in=judge.llm_job.keys) if e.history]
    assert len(histories) == 2 and all(h[0]["outcome"] == "parse_failed" for h in histories)


def test_a_new_run_reasks_failures_another_run_left_in_the_ledger(server, quick):  # noqa: F811
    run = _generate()
    broken = {"on": True}
    server.default = lambda body: (
        Reply("1. a\n2. b")
        if not body.get("response_format")
        else Reply("<html>oops</html>")
        if broken["on"] and "Sell your share" in body["messages"][0]["content"]
        else Reply(json.dumps({"reasoning": "ok", "critical_failures": []}))
    )
    first = judge_run_create(name="j1", generation_run=run, judge="how2judge", start=False)
    judge_run_execute(run_id=first.pk)
    broken["on"] = False
    before = len(_judge_requests(server))
    second = judge_run_create(name="j2", generation_run=run, judge="how2judge-again", start=False)
    judge_run_execute(run_id=second.pk)
    second.refresh_from_db()
    assert len(_judge_requests(server)) - before == 1  # the same requests: only the failed one is asked
    assert second.status == "done" and second.judgments.filter(outcome="ok").count() == 17


def test_resuming_a_runs_job_from_the_llm_page_goes_through_the_run(server, quick, admin_client_):  # noqa: F811
    run = _generate()
    judge = judge_run_create(name="j", generation_run=run, judge="how2judge", start=False)
    assert judge.llm_job is not None
    run_control(judge, "pause")
    response = admin_client_.post(reverse("llm_job_action", args=[judge.llm_job.pk, "resume"]), follow=True)
    assert "through its judge run j" in response.content.decode()
    judge.refresh_from_db()
    assert judge.status == "pending" and judge.llm_job.status == "pending"
    judge_run_execute(run_id=judge.pk)  # what the run's enqueued task does
    judge.refresh_from_db()
    assert judge.judgments.count() == 17  # the answers became judgments


def _client(server: ScriptedLLM) -> LLMClient:
    return LLMClient(Endpoint(role="llm_filter", base_url=server.base_url, api_key="k", model="m"))


SCHEMA = {"type": "object", "properties": {"has": {"type": "boolean"}}, "required": ["has"]}


@pytest.mark.parametrize(
    "raw, reason",
    [
        (Raw("<html><body>502 Bad Gateway</body></html>", content_type="text/html"), "not JSON"),
        (Raw(json.dumps({"choices": [None]})), "choices[0]"),
        (Raw("[]"), "JSON list"),
        (
            Raw(json.dumps({"choices": [{"message": {"content": {"has": True}}, "finish_reason": "stop"}]})),
            "non-string content",
        ),
        (Raw(json.dumps({"object": "chat.completion"})), "no choices"),
        (Raw('{"choices": ' + "[" * 100_000 + "]" * 100_000 + "}"), "not JSON"),
    ],
)
def test_any_200_that_is_not_a_completion_becomes_an_api_error_outcome(quick, raw, reason):
    quick.LLM_MAX_ATTEMPTS = 2
    with ScriptedLLM() as server:
        server.default = lambda body: raw
        client = _client(server)
        result = client.complete(
            LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": reason}], schema=SCHEMA)
        )
        client.close()
    assert result.outcome == "api_error" and reason in result.error and "malformed response" in result.error
    assert LedgerEntry.objects.get(key=result.key).outcome == "api_error"


def test_non_numeric_usage_is_read_as_zero_tokens(quick):
    body = {
        "choices": [{"message": {"content": '{"has": true}'}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": "many", "completion_tokens": None},
    }
    with ScriptedLLM() as server:
        server.default = lambda _: Raw(json.dumps(body))
        client = _client(server)
        result = client.complete(
            LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": "x"}], schema=SCHEMA)
        )
        client.close()
    assert result.ok and result.value == {"has": True} and result.tokens_in == result.tokens_out == 0


def test_an_answer_holding_two_different_json_objects_is_parse_failed(quick):
    with ScriptedLLM() as server:
        server.default = lambda _: Reply('{"has": true}\nOn second thought: {"has": false}')
        client = _client(server)
        result = client.complete(
            LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": "x"}], schema=SCHEMA)
        )
        client.close()
    assert result.outcome == "parse_failed" and "ambiguous" in result.error


def test_an_answer_nested_beyond_any_stage_is_parse_failed_not_a_crash(quick):
    deep = '{"has": ' + "[" * 50_000 + "]" * 50_000 + "}"
    with ScriptedLLM() as server:
        server.default = lambda _: Reply(deep)
        client = _client(server)
        result = client.complete(
            LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": "x"}], schema=SCHEMA)
        )
        client.close()
    assert result.outcome == "parse_failed" and "levels deep" in result.error


def _error(headers: dict[str, str]) -> openai.APIStatusError:
    request = httpx2.Request("POST", "http://llm.test/v1/chat/completions")
    return openai.APIStatusError(
        "rate limited", response=httpx2.Response(429, headers=headers, request=request), body=None
    )


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"retry-after": "100000"}, 60.0),
        ({"retry-after": "-5"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
    ],
)
def test_retry_after_is_capped_and_unreadable_values_ignored(settings, headers, expected):
    settings.LLM_RETRY_AFTER_MAX_SECONDS = 60.0
    assert _retry_after_seconds(_error(headers)) == expected


def test_one_429_with_a_huge_retry_after_pauses_the_endpoint_only_up_to_the_cap(quick):
    quick.LLM_RETRY_AFTER_MAX_SECONDS = 0.3
    with ScriptedLLM() as server:
        server.queue(Status(429, "slow down", {"retry-after": "100000"}))
        server.default = lambda _: Reply('{"has": true}')
        client = _client(server)
        result = client.complete(
            LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": "x"}], schema=SCHEMA)
        )
        assert limits_get().paused_for(client.endpoint_id) <= 0.3
        client.close()
    assert result.ok and result.attempts == 2


def _job(server: ScriptedLLM, settings, n: int = 3) -> LLMJob:
    roles = dict(settings.LLM_ROLES)
    roles["llm_filter"] = {
        "base_url": server.base_url,
        "api_key": "k",
        "model": "m",
        "temperature": None,
        "max_tokens": None,
    }
    settings.LLM_ROLES = roles
    requests = [
        LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": f"q{i}"}], schema=SCHEMA) for i in range(n)
    ]
    return llm_job_create(run="plain-job", role="llm_filter", requests=requests, start=False, concurrency=2)


def test_a_job_is_executed_by_one_task_at_a_time(quick):
    from datetime import timedelta

    from django.utils import timezone

    with ScriptedLLM() as server:
        server.default = lambda _: Reply('{"has": true}')
        job = _job(server, quick)
        LLMJob.objects.filter(pk=job.pk).update(
            claimed_by="another-task", claim_expires=timezone.now() + timedelta(seconds=60)
        )
        assert llm_job_execute(job_id=job.pk) == "waiting: claimed by another worker"
        assert server.chat_requests() == []
        # The holder died: its lease runs out and the job is taken over.
        LLMJob.objects.filter(pk=job.pk).update(claim_expires=timezone.now() - timedelta(seconds=1))
        assert llm_job_execute(job_id=job.pk) == "done"
    job.refresh_from_db()
    assert job.status == "done" and job.claimed_by == "" and len(server.chat_requests()) == 3


def test_requests_waiting_for_a_retry_count_as_retrying_and_pause_stops_them(settings):
    settings.LLM_BACKOFF_BASE_SECONDS = 30.0  # a long wait: only a pause can end it early
    settings.LLM_BACKOFF_MAX_SECONDS = 30.0
    settings.LLM_BREAKER_CONSECUTIVE = 1000
    with ScriptedLLM() as server:
        server.default = lambda _: Status(503, "warming up")
        job = _job(server, settings, n=2)
        outcome: dict[str, str] = {}
        worker = threading.Thread(target=lambda: outcome.setdefault("value", llm_job_execute(job_id=job.pk)))
        worker.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and LLMJob.objects.get(pk=job.pk).n_retrying < 2:
            time.sleep(0.2)
        assert LLMJob.objects.get(pk=job.pk).n_retrying == 2
        from llm.runs import jobs_state

        assert jobs_state([LLMJob.objects.get(pk=job.pk)])["outcomes"]["retrying"] == 2
        live = LLMJob.objects.get(pk=job.pk).breaker  # what the page says while it retries
        assert "503" in live["last_error"] and live["failed_in_a_row"] >= 2 and "reason" not in live
        LLMJob.objects.filter(pk=job.pk).update(status="paused", pause_reason="paused by a user")
        worker.join(timeout=15)
        assert not worker.is_alive()  # the 30 s waits were abandoned
    assert outcome["value"] == "paused"
    assert LedgerEntry.objects.count() == 0  # interrupted requests are unfinished, not failures


def test_the_breaker_trips_on_a_streak_or_a_failing_window():
    streak = CircuitBreaker(consecutive=3, window=10, window_failures=0.5)
    assert streak.record(False, error="e1") is None and streak.record(False, error="e2") is None
    assert streak.record(True) is None
    assert streak.record(False) is None and streak.record(False) is None
    record = streak.record(False, error="500: down", endpoint="http://x (m)")
    assert record is not None
    assert record["reason"] == "3 failed attempts in a row" and record["last_error"] == "500: down"
    window = CircuitBreaker(consecutive=100, window=10, window_failures=0.5)
    outcomes = [False, True] * 3 + [False, False, True, False]  # 6 of 10 failed, never 3 in a row
    tripped = [window.record(ok) for ok in outcomes]
    assert (
        tripped[-1] is not None
        and tripped[-1]["reason"] == "6 of the last 10 attempts failed"
        and all(t is None for t in tripped[:-1])
    )


def test_cancelling_a_run_asks_first_and_a_post_without_the_confirmation_changes_nothing(server, admin_client_):  # noqa: F811
    run = _generate()
    judge = judge_run_create(name="j", generation_run=run, judge="how2judge", start=False)
    url = reverse("judging_run_action", args=["judge", judge.pk, "cancel"])
    page = admin_client_.get(reverse("generation_run_detail", args=[run.pk])).content.decode()
    assert "Yes, cancel" in page and 'name="confirm" value="yes"' in page  # the question, no JavaScript needed
    refused = admin_client_.post(url)
    assert refused.status_code == 400 and "confirm" in refused.content.decode()
    assert JudgeRun.objects.get(pk=judge.pk).status == "pending"
    admin_client_.post(url, {"confirm": "yes"})
    assert JudgeRun.objects.get(pk=judge.pk).status == "cancelled"


def test_a_task_that_dies_on_an_error_leaves_its_answers_stored_and_the_run_resumable(server, quick, monkeypatch):  # noqa: F811
    run = _generate()
    judge = judge_run_create(name="j", generation_run=run, judge="how2judge", start=False, concurrency=1)
    real = LLMClient.complete
    calls = {"n": 0}

    def flaky(self, request, **kwargs):
        calls["n"] += 1
        if calls["n"] == 6:
            raise RuntimeError("a bug in the worker")
        return real(self, request, **kwargs)

    monkeypatch.setattr(LLMClient, "complete", flaky)
    with pytest.raises(RuntimeError):
        judge_run_execute(run_id=judge.pk)
    assert judge.llm_job_id is not None
    job = LLMJob.objects.get(pk=judge.llm_job_id)
    assert job.status == "failed" and "a bug in the worker" in job.error and job.claimed_by == ""
    assert JudgeRun.objects.get(pk=judge.pk).judgments.count() == 5  # paid-for answers became judgments
    monkeypatch.setattr(LLMClient, "complete", real)
    JudgeRun.objects.filter(pk=judge.pk).update(status="failed")  # what the task's on_failure does
    run_control(JudgeRun.objects.get(pk=judge.pk), "resume")
    judge_run_execute(run_id=judge.pk)
    assert JudgeRun.objects.get(pk=judge.pk).judgments.count() == 17


def test_the_api_gives_each_judge_run_its_status_outcomes_errors_and_score(server, quick, researcher_client):  # noqa: F811
    run = _generate()
    judge = judge_run_create(name="j", generation_run=run, judge="how2judge", start=False)
    judge_run_execute(run_id=judge.pk)  # the scripted judge never answers one generation in JSON
    listed = researcher_client.get("/api/judging/judge-runs/").json()["results"][0]
    detail = researcher_client.get(f"/api/judging/judge-runs/{judge.pk}/").json()
    for body in (listed, detail):
        assert body["status"] == "done_with_failures" and body["n_failed"] == 1
        assert body["outcomes"]["ok"] == 16 and body["outcomes"]["parse_failed"] == 1
        assert body["how2score"]["n_judged"] == 16 and body["how2score"]["n_unusable"] == 1
    assert detail["top_errors"][0]["error"].startswith("parse_failed")
    generation = researcher_client.get(f"/api/judging/generation-runs/{run.pk}/").json()
    assert generation["status"] == "done" and generation["outcomes"]["ok"] == 17
    schema = researcher_client.get("/api/schema/").content.decode()
    assert "/api/judging/judge-runs/" in schema
