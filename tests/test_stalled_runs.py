"""Dead workers are seen (issue 28, F-11): a run whose worker stopped beating reads
``stalled`` (with the time of its last beat) on its page, in the API and in the status
commands once its lease has run out, and can be resumed at once; the resumed run finishes
on a new worker without sending again what was answered before the kill."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from judging.models import GenerationRun
from judging.services import generation_run_create, language_model_register
from llm.models import LedgerEntry
from mining.models import MiningRun, Procedure, StageResult
from mining.run_services import mining_run_create
from tests.scripted_llm import ScriptedLLM, last_user_message
from tests.scripted_miner import scripted_miner_server
from tests.services import celery_worker
from tests.test_judging_runs import _steps_answer
from tests.test_llm_workers import _database_url, _wait
from tests.test_mining_runs import config, point_stages_at
from tests.test_mining_workers import N_DOCS, _corpus, _sent_per_request
from tests.test_mining_workers import _env as _miner_env

LEASE = 2  # LLM_JOB_LEASE_SECONDS in the test and its workers: a dead worker is seen in seconds


def _purge_embedded_queue() -> None:
    """Tasks earlier tests left in this process's embedded broker must not reach the worker."""
    from pathlib import Path

    folder = Path(django_settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
    for message in folder.glob("*"):
        message.unlink(missing_ok=True)


@pytest.fixture
def generate_at(settings, demo):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    settings.LLM_JOB_LEASE_SECONDS = LEASE
    with ScriptedLLM(latency=0.5) as server:
        roles = dict(settings.LLM_ROLES)
        roles["generate"] = {
            "base_url": server.base_url,
            "api_key": "k",
            "model": "m",
            "temperature": None,
            "max_tokens": None,
        }
        settings.LLM_ROLES = roles
        server.default = _steps_answer
        yield server


def _worker_env(server) -> dict[str, str]:
    return {
        "LLM_BASE_URL": server.base_url,
        "LLM_MODEL": "m",
        "LLM_API_KEY": "k",
        "DATABASE_URL": _database_url(),
        "LLM_JOB_LEASE_SECONDS": str(LEASE),
        "LLM_BACKOFF_BASE_SECONDS": "0.01",
    }


@pytest.mark.integration
@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
def test_a_generation_run_whose_worker_was_killed_reads_stalled_and_resumes_at_once(
    generate_at, admin_client_, tmp_path
):
    server = generate_at
    _purge_embedded_queue()
    model = language_model_register(name="stall")
    api = "/api/judging/generation-runs/{}/"
    with celery_worker(tmp_path, env=_worker_env(server)) as worker:
        run = generation_run_create(name="stall-bench", language_model=model, concurrency=2)
        assert run.llm_job is not None
        keys = run.llm_job.keys
        _wait(lambda: LedgerEntry.objects.filter(key__in=keys).count() >= 4, 60, "the first answers")
        worker.kill()  # SIGKILL: no chance to release its claim or mark anything
        worker.wait()
        killed_at = time.monotonic()
    answered_before_kill = set(LedgerEntry.objects.filter(key__in=keys).values_list("key", flat=True))
    assert len(answered_before_kill) < len(keys)
    assert GenerationRun.objects.get(pk=run.pk).status == "running"  # what the crash leaves stored

    # Within the lease (plus the time to notice), the API says stalled, with the last beat.
    def api_status() -> str:
        return admin_client_.get(api.format(run.pk)).json()["status"]

    _wait(lambda: api_status() == "stalled", 4 * LEASE + 10, "the API to say stalled")
    seen_after = time.monotonic() - killed_at
    detail = admin_client_.get(api.format(run.pk)).json()
    assert detail["last_heartbeat"] is not None
    page = admin_client_.get(reverse("generation_run_detail", args=[run.pk])).content.decode()
    assert 'data-status="stalled"' in page and "stopped beating" in page
    listed = admin_client_.get("/api/judging/generation-runs/").json()["results"]
    assert [row["status"] for row in listed if row["id"] == run.pk] == ["stalled"]

    # Resume is allowed at once (not 409 "a worker is at work on it"), and a new worker finishes.
    answer = admin_client_.post(api.format(run.pk) + "resume/")
    assert answer.status_code == 200, answer.content
    assert answer.json()["run"]["status"] == "pending"
    resumed_at = time.monotonic()
    with celery_worker(tmp_path, env=_worker_env(server)):
        ready_at = time.monotonic()
        _wait(lambda: GenerationRun.objects.get(pk=run.pk).status == "done", 90, "the resumed run")
        done_at = time.monotonic()
    print(
        f"generation: stalled seen {seen_after:.1f} s after the kill; resumed run done {done_at - resumed_at:.1f} s "
        f"after resume ({done_at - ready_at:.1f} s after the new worker was ready)"
    )

    sent = Counter(last_user_message(body) for body in server.chat_requests())
    by_key = {key: request["messages"][-1]["content"] for key, request in zip(keys, run.llm_job.requests)}
    for key in answered_before_kill:
        assert sent[by_key[key]] == 1, "a request answered before the kill was sent again"
    assert run.generations.filter(outcome="ok").count() == len(keys)
    assert detail["outcomes"]["ok"] >= len(answered_before_kill)  # the stalled run kept what it had


@pytest.mark.integration
@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
def test_a_mining_run_whose_worker_was_killed_reads_stalled_and_resumes_at_once(settings, admin_client_, tmp_path):
    settings.LLM_JOB_LEASE_SECONDS = LEASE
    server, _ = scripted_miner_server(latency=0.15)
    api = "/api/mining/runs/{}/"
    with server:
        point_stages_at(settings, server)
        corpus = _corpus()
        env = {**_miner_env(server), "LLM_JOB_LEASE_SECONDS": str(LEASE)}
        _purge_embedded_queue()
        with celery_worker(tmp_path, env=env) as worker:
            run = mining_run_create(
                config_text=config("stalled", concurrency=4), source="run.yaml", corpus_name=corpus.name
            )
            _wait(lambda: StageResult.objects.filter(run=run).count() >= 40, 90, "the first stage results")

            def beats_renewed() -> bool:  # the worker's tick beats the run while it works
                started, beat = MiningRun.objects.filter(pk=run.pk).values_list("started_at", "heartbeat_at").get()
                return beat is not None and started is not None and (beat - started).total_seconds() >= 1

            _wait(beats_renewed, 30, "the worker's heartbeat to be renewed")
            worker.kill()  # SIGKILL: its claims on documents stay behind
            worker.wait()
            killed_at = time.monotonic()
        assert MiningRun.objects.get(pk=run.pk).status == "running"
        sent_before = _sent_per_request(server)

        _wait(lambda: admin_client_.get(api.format(run.pk)).json()["status"] == "stalled", 4 * LEASE + 10, "stalled")
        seen_after = time.monotonic() - killed_at
        page = admin_client_.get(reverse("mining_run_detail", args=[run.pk])).content.decode()
        assert 'data-status="stalled"' in page and 'id="resume-run"' in page

        answer = admin_client_.post(api.format(run.pk) + "resume/")
        assert answer.status_code == 200, answer.content
        resumed_at = time.monotonic()
        with celery_worker(tmp_path, env=env):
            ready_at = time.monotonic()
            _wait(lambda: MiningRun.objects.get(pk=run.pk).status == "done", 120, "the resumed run")
            done_at = time.monotonic()
        print(
            f"mining: stalled seen {seen_after:.1f} s after the kill; resumed run done {done_at - resumed_at:.1f} s "
            f"after resume ({done_at - ready_at:.1f} s after the new worker was ready)"
        )

        assert run.candidates.filter(status="passed").count() == N_DOCS == Procedure.objects.count()
        sent = _sent_per_request(server)
        repeated = {key for key, n in sent.items() if n > 1}
        assert len(repeated) <= 4  # only what was in flight at the kill (the run's concurrency)
        assert all(sent[key] == 1 for key in sent_before if key not in repeated)
