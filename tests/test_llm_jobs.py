"""LLM jobs: the online executor under a concurrency cap, zero-cost re-runs, the budget cap,
pause and cancel, and the OpenAI Batch API flow including a partially failed batch."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from llm.batch import batch_files
from llm.models import BatchJob, LedgerEntry, LLMJob
from llm.request import LLMRequest
from llm.services import llm_job_cancel, llm_job_create, llm_job_execute, llm_job_resume
from tests.scripted_llm import Reply, ScriptedLLM, Status, last_user_message

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def _requests(n: int, schema=SCHEMA) -> list[LLMRequest]:
    return [
        LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": f"question {i}"}], schema=schema)
        for i in range(n)
    ]


def _answer_number(body):
    number = int(last_user_message(body).split()[-1])
    return Reply(json.dumps({"answer": number}), prompt_tokens=100_000, completion_tokens=10_000)


@pytest.fixture
def server(settings):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    with ScriptedLLM(latency=0.05) as scripted:
        scripted.default = _answer_number
        roles = dict(settings.LLM_ROLES)
        roles["llm_filter"] = {
            "base_url": scripted.base_url,
            "api_key": "sk-test",
            "model": "gpt-5",
            "temperature": None,
            "max_tokens": None,
        }
        settings.LLM_ROLES = roles
        yield scripted


def test_online_job_answers_every_request_in_the_ledger(server):
    job = llm_job_create(run="filter-run:1", role="llm_filter", requests=_requests(20), concurrency=8, start=False)
    assert llm_job_execute(job_id=job.pk) == "done"
    job.refresh_from_db()
    assert job.status == "done" and job.n_done == 20 and job.outcome_counts == {"ok": 20}
    answers = set()
    for entry in LedgerEntry.objects.filter(key__in=job.keys):
        assert entry.parsed is not None
        answers.add(entry.parsed["answer"])
    assert answers == set(range(20))
    # gpt-5: 100,000 in * 1.25e-6 + 10,000 out * 1e-5 = 0.225 USD per request
    assert job.cost_usd == Decimal("4.5")


def test_concurrent_requests_never_exceed_the_endpoint_cap(server, settings):
    settings.LLM_MAX_CONCURRENCY = 5
    job = llm_job_create(run="cap", role="llm_filter", requests=_requests(60), concurrency=32, start=False)
    llm_job_execute(job_id=job.pk)
    assert server.max_in_flight == 5  # reached, never exceeded
    assert len(server.chat_requests()) == 60


def test_a_second_identical_run_makes_zero_network_calls(server):
    first = llm_job_create(run="run-a", role="llm_filter", requests=_requests(15), start=False)
    llm_job_execute(job_id=first.pk)
    sent = len(server.chat_requests())
    second = llm_job_create(run="run-b", role="llm_filter", requests=_requests(15), start=False)
    assert llm_job_execute(job_id=second.pk) == "done"
    assert len(server.chat_requests()) == sent == 15
    second.refresh_from_db()
    assert second.n_done == 15 and second.cost_usd == 0  # run-b paid nothing


def test_budget_cap_pauses_the_job_and_resume_continues_without_repeats(server):
    job = llm_job_create(
        run="budget", role="llm_filter", requests=_requests(40), concurrency=2, budget_usd=Decimal("1.0"), start=False
    )
    assert llm_job_execute(job_id=job.pk) == "budget reached"
    job.refresh_from_db()
    assert job.status == "paused" and "budget" in job.pause_reason
    spent_requests = len(server.chat_requests())
    assert 5 <= spent_requests < 40  # 0.225 USD each: stops a little after crossing 1 USD
    assert job.projected_cost_usd == Decimal("9.0")  # 40 requests at 0.225 USD
    llm_job_resume(job=job, budget_usd=Decimal("100"))
    assert llm_job_execute(job_id=job.pk) == "done"
    keys = [r["messages"][0]["content"] for r in server.chat_requests()]
    assert len(keys) == len(set(keys)) == 40  # nothing asked twice


def test_cancelled_job_is_not_executed(server):
    job = llm_job_create(run="cancel", role="llm_filter", requests=_requests(3), start=False)
    llm_job_cancel(job=job)
    assert llm_job_execute(job_id=job.pk) == "not active (cancelled)"
    assert server.chat_requests() == []
    with pytest.raises(ValueError, match="cannot be resumed"):
        llm_job_resume(job=job)


def test_execute_returns_early_for_a_missing_job():
    assert llm_job_execute(job_id=987654) == "gone"


def test_job_without_a_configured_endpoint_is_refused_clearly(settings):
    from llm.endpoints import EndpointNotConfigured

    roles = dict(settings.LLM_ROLES)
    roles["generate"] = {"base_url": "", "api_key": "", "model": "", "temperature": None, "max_tokens": None}
    settings.LLM_ROLES = roles
    with pytest.raises(EndpointNotConfigured, match="LLM_BASE_URL"):
        llm_job_create(run="x", role="generate", requests=_requests(1), start=False)


def test_batch_files_respect_request_and_size_limits():
    lines = [(f"k{i}", b"x" * 10) for i in range(7)]
    assert [len(f) for f in batch_files(lines, max_requests=3, max_bytes=1000)] == [3, 3, 1]
    assert [len(f) for f in batch_files(lines, max_requests=100, max_bytes=33)] == [3, 3, 1]  # 11 bytes per line
    with pytest.raises(ValueError, match="larger than the batch file limit"):
        batch_files([("big", b"x" * 50)], max_bytes=20)


def test_batch_api_flow_with_a_partially_failed_batch(server, settings):
    settings.LLM_BATCH_MAX_RESUBMITS = 1
    failures = {"question 3", "question 7"}
    attempts: dict[str, int] = {}

    def fail_once(line):
        content = line["body"]["messages"][-1]["content"]
        attempts[content] = attempts.get(content, 0) + 1
        return "server_error" if content in failures and attempts[content] == 1 else None

    server.batch_failure = fail_once
    job = llm_job_create(run="batch-run", role="llm_filter", requests=_requests(10), executor="batch", start=False)

    assert llm_job_execute(job_id=job.pk).startswith("waiting")  # submitted, not finished yet
    (first,) = BatchJob.objects.filter(job=job)
    assert first.n_requests == 10 and first.batch_id in server.batches
    assert LedgerEntry.objects.count() == 0

    # A restart: a new pass finds the persisted batch and polls it; 2 requests failed and are resubmitted.
    assert llm_job_execute(job_id=job.pk).startswith("waiting")
    first.refresh_from_db()
    assert (first.status, first.n_succeeded, first.n_failed) == ("completed", 8, 2)
    second = BatchJob.objects.filter(job=job).exclude(pk=first.pk).get()
    assert second.n_requests == 2 and second.attempt == 2
    assert llm_job_execute(job_id=job.pk) == "done"

    job.refresh_from_db()
    assert job.status == "done" and job.outcome_counts == {"ok": 10}
    entry = LedgerEntry.objects.get(key=job.keys[3])
    assert entry.parsed == {"answer": 3} and entry.executor == "batch"
    assert entry.cost_usd == Decimal("0.1125")  # half of 0.225: the Batch API discount
    sent = [
        json.loads(line)["custom_id"]
        for f in server.files.values()
        for line in f.decode().splitlines()
        if line.startswith('{"custom_id"')
    ]
    assert sorted(sent) == sorted(job.keys + [job.keys[3], job.keys[7]])  # only the failed ones twice


def test_batch_requests_that_keep_failing_end_as_api_errors(server, settings):
    settings.LLM_BATCH_MAX_RESUBMITS = 0
    server.batch_failure = lambda line: (
        "server_error" if line["body"]["messages"][-1]["content"] == "question 1" else None
    )
    job = llm_job_create(run="batch-fail", role="llm_filter", requests=_requests(3), executor="batch", start=False)
    llm_job_execute(job_id=job.pk)
    assert llm_job_execute(job_id=job.pk) == "done"
    job.refresh_from_db()
    assert job.outcome_counts == {"ok": 2, "api_error": 1}
    assert "server_error" in LedgerEntry.objects.get(key=job.keys[1]).error


def test_vllm_offline_executor_says_clearly_when_vllm_is_missing(server, settings):
    import importlib.util

    from llm.vllm_offline import ExecutorUnavailable

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here; this test covers machines without it")
    job = llm_job_create(run="gpu", role="llm_filter", requests=_requests(2), executor="vllm_offline", start=False)
    with pytest.raises(ExecutorUnavailable, match="requirements-gpu.txt"):
        llm_job_execute(job_id=job.pk)
    assert server.chat_requests() == []


@pytest.mark.parametrize("repeated", [False, True], ids=["distinct", "one-request-twice"])
def test_a_sharded_jobs_counts_equal_the_ledgers_when_it_finishes(server, repeated):
    """A sharded job that finishes takes its counts from its shards' (each recounted from the
    ledger as it ended), unless a request is in two shards, where only the ledger's recount of
    the whole job is right (a repeated request is one answer, counted once)."""
    from llm.job_lifecycle import llm_job_refresh_counts
    from llm.shards import llm_job_shard

    requests = _requests(7)
    if repeated:
        requests.append(requests[0])  # the same request, in the last shard as in the first
    # The first request fails, its retries spent; the others are answered.
    server.on(lambda body: last_user_message(body) == "question 0", *[Status(500)] * 50)
    job = llm_job_create(run="sharded-counts", role="llm_filter", requests=requests, concurrency=4, start=False)
    assert len(llm_job_shard(job, size=3)) == 3
    assert llm_job_execute(job_id=job.pk) == "done"
    job.refresh_from_db()
    finished = (job.status, job.n_done, dict(job.outcome_counts))
    assert finished == ("done_with_failures", 7, {"ok": 6, "api_error": 1})
    llm_job_refresh_counts(job)
    assert (job.n_done, dict(job.outcome_counts)) == finished[1:]  # the ledger says the same
