"""LLM jobs in real Celery worker processes: a worker killed mid-run and the job resumed
(no completed request sent twice, no result lost), and the concurrency cap shared through
Redis by two worker processes."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter

import pytest
from celery import Celery
from django.db import connection

from llm.async_executor import FLUSH_SECONDS
from llm.models import LedgerEntry, LLMJob
from llm.request import LLMRequest
from llm.services import llm_job_create, llm_job_resume
from tests.scripted_llm import Reply, ScriptedLLM, last_user_message
from tests.services import REDIS_URL, celery_worker, require

# sqlite: the worker beside the web process on one SQLite file is the embedded default (make run)
pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.sqlite]


def _database_url() -> str:
    """The test database, as a URL a worker process can use."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _echo_number(body):
    return Reply(json.dumps({"answer": int(last_user_message(body).split()[-1])}))


def _requests(n: int, prefix: str = "question") -> list[LLMRequest]:
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    return [
        LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": f"{prefix} {i}"}], schema=schema)
        for i in range(n)
    ]


def _point_role_at(settings, server: ScriptedLLM) -> dict[str, str]:
    roles = dict(settings.LLM_ROLES)
    roles["llm_filter"] = {
        "base_url": server.base_url,
        "api_key": "sk-test",
        "model": "scripted-model",
        "temperature": None,
        "max_tokens": None,
    }
    settings.LLM_ROLES = roles
    # A killed worker's claim on its job runs out after the lease; the resumed job's task
    # comes back after one lease and takes the job over.
    return {
        "LLM_BASE_URL": server.base_url,
        "LLM_MODEL": "scripted-model",
        "LLM_API_KEY": "sk-test",
        "DATABASE_URL": _database_url(),
        "LLM_JOB_LEASE_SECONDS": "3",
    }


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_worker_killed_mid_run_then_resumed_sends_no_completed_request_twice(settings, tmp_path):
    with ScriptedLLM(latency=0.2) as server:
        server.default = _echo_number
        env = _point_role_at(settings, server)
        job = None
        with celery_worker(tmp_path, env=env) as worker:
            job = llm_job_create(run="resume-test", role="llm_filter", requests=_requests(60), concurrency=4)
            _wait(lambda: LedgerEntry.objects.filter(key__in=job.keys).count() >= 12, 60, "the first answers")
            worker.kill()  # SIGKILL: no chance to clean up
            worker.wait()
        finished_before_kill = set(LedgerEntry.objects.filter(key__in=job.keys).values_list("key", flat=True))
        assert 12 <= len(finished_before_kill) < 60
        assert LLMJob.objects.get(pk=job.pk).status == "running"  # what a crash leaves behind

        llm_job_resume(job=job)
        with celery_worker(tmp_path, env=env):
            _wait(lambda: LLMJob.objects.get(pk=job.pk).status == "done", 90, "the resumed job")

        sent = Counter(last_user_message(r) for r in server.chat_requests())
        by_key = {k: r["messages"][0]["content"] for k, r in zip(job.keys, job.requests)}
        for key in finished_before_kill:
            assert sent[by_key[key]] == 1, f"{by_key[key]} was answered before the kill but sent again"
        entries = LedgerEntry.objects.filter(key__in=job.keys)
        assert entries.count() == 60 and set(entries.values_list("outcome", flat=True)) == {"ok"}
        assert sorted(e.parsed["answer"] for e in entries if e.parsed is not None) == list(range(60))
        # Only requests whose answers the ledger did not hold when the worker died may have been
        # sent twice: those in flight (at most the concurrency, 4) and those answered but still
        # waiting for their group's write (at most FLUSH_SECONDS = 0.1 s of answers: below one
        # per slot at 0.2 s latency). A fresh-clone run saw 5 with the bound at 4.
        assert FLUSH_SECONDS < 0.2
        assert sum(n - 1 for n in sent.values()) <= 2 * 4


def test_two_workers_share_the_concurrency_cap_through_redis(settings, tmp_path):
    require(REDIS_URL, "Redis")
    queue = f"llm-{uuid.uuid4().hex[:8]}"
    prefix = uuid.uuid4().hex[:6]
    with ScriptedLLM(latency=0.1) as server:
        server.default = _echo_number
        env = _point_role_at(settings, server)
        env.update(
            CELERY_BROKER_URL=REDIS_URL,
            CELERY_RESULT_BACKEND=REDIS_URL,
            LLM_MAX_CONCURRENCY="3",
            LLM_LIMITS_REDIS_URL=REDIS_URL,
        )
        jobs = [
            llm_job_create(
                run=f"shared-{i}",
                role="llm_filter",
                requests=_requests(30, f"{prefix}-{i}"),
                concurrency=8,
                start=False,
            )
            for i in range(2)
        ]
        client = Celery("web-process", broker=REDIS_URL, backend=REDIS_URL, set_as_current=False)
        second_dir = tmp_path / "second"
        second_dir.mkdir()
        try:
            with celery_worker(tmp_path, env=env, queue=queue), celery_worker(second_dir, env=env, queue=queue):
                for job in jobs:
                    client.send_task("llm.job_execute", args=[job.pk], queue=queue)
                _wait(lambda: all(LLMJob.objects.get(pk=j.pk).status == "done" for j in jobs), 90, "both jobs")
        finally:
            client.close()
    assert len(server.chat_requests()) == 60
    first, second = (LLMJob.objects.get(pk=j.pk) for j in jobs)
    assert first.started_at is not None and first.finished_at is not None
    assert second.started_at is not None and second.finished_at is not None
    # The two jobs ran at the same time (one per worker process) ...
    assert first.started_at < second.finished_at and second.started_at < first.finished_at
    # ... and together never had more requests in flight than the cap.
    assert server.max_in_flight == 3
