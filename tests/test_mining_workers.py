"""A mining run in real Celery worker processes: a worker killed mid-run and the run
resumed finishes with no duplicated procedure and no completed request sent again; two
workers share one run through their claims."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from llm.models import LedgerEntry
from mining.models import MiningRun, Procedure, StageResult
from mining.run_services import mining_run_create, mining_run_resume
from mining.tasks import mining_run_execute_task
from tests.scripted_miner import document_text, scripted_miner_server, stage_of
from tests.services import celery_worker
from tests.test_llm_workers import _database_url, _wait
from tests.test_mining_runs import config, make_corpus, point_stages_at

# sqlite: the worker beside the web process on one SQLite file is the embedded default (make run)
pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.sqlite]

N_DOCS = 30


def _env(server) -> dict[str, str]:
    return {
        "LLM_BASE_URL": server.base_url,
        "LLM_MODEL": "scripted",
        "LLM_API_KEY": "k",
        "DATABASE_URL": _database_url(),
        "LLM_BACKOFF_BASE_SECONDS": "0.01",
    }


def _send(run, queue: str, n: int = 1) -> None:
    """Hand the run to the workers of this test's own queue (messages other tests left in
    the shared embedded broker never reach them)."""
    for _ in range(n):
        mining_run_execute_task.apply_async(args=(run.pk,), queue=queue)


def _corpus():
    docs = [
        (f"d{i}", ("food-dining", "health", "industrial")[i % 3], document_text(f"d{i}", f"Make thing {i}"))
        for i in range(N_DOCS)
    ]
    return make_corpus(docs)


def _sent_per_request(server) -> Counter:
    return Counter((stage_of(b), b["messages"][0]["content"]) for b in server.chat_requests())


def test_worker_killed_mid_run_then_resumed_mines_each_procedure_once(settings, tmp_path):
    server, _ = scripted_miner_server(latency=0.15)
    with server:
        point_stages_at(settings, server)
        corpus = _corpus()
        queue = f"mining-{uuid.uuid4().hex[:8]}"
        with celery_worker(tmp_path, env=_env(server), queue=queue) as worker:
            run = mining_run_create(
                config_text=config("killed", concurrency=4), source="run.yaml", corpus_name=corpus.name, start=False
            )
            _send(run, queue)
            _wait(lambda: StageResult.objects.filter(run=run).count() >= 40, 90, "the first stage results")
            worker.kill()  # SIGKILL: no chance to release claims or mark anything
            worker.wait()
        run.refresh_from_db()
        assert run.status == "running"  # what a crash leaves behind
        done_before = set(LedgerEntry.objects.filter(run=run.ledger_run).values_list("key", flat=True))
        results_before = StageResult.objects.filter(run=run).count()
        assert 0 < results_before < N_DOCS * 6
        sent_before = _sent_per_request(server)

        mining_run_resume(run=run, start=False)
        with celery_worker(tmp_path, env=_env(server), queue=queue):
            _send(run, queue)
            _wait(lambda: MiningRun.objects.get(pk=run.pk).status == "done", 120, "the resumed run")

        run.refresh_from_db()
        assert run.candidates.filter(status="passed").count() == N_DOCS
        assert Procedure.objects.count() == N_DOCS  # no duplicated procedure
        assert Procedure.objects.values("source_example_id").distinct().count() == N_DOCS
        sent = _sent_per_request(server)
        repeated = {key: n for key, n in sent.items() if n > 1}
        # Only requests in flight at the kill (at most the concurrency) may have gone out twice;
        # every request answered before the kill was answered from the ledger afterwards.
        assert len(repeated) <= 4
        assert all(sent_before[key] == 1 for key in sent_before if key not in repeated)
        assert LedgerEntry.objects.filter(run=run.ledger_run).count() == N_DOCS * 5
        assert done_before <= set(LedgerEntry.objects.filter(run=run.ledger_run).values_list("key", flat=True))


def test_two_workers_share_a_run_without_taking_the_same_document(settings, tmp_path):
    server, _ = scripted_miner_server(latency=0.05)
    with server:
        point_stages_at(settings, server)
        corpus = _corpus()
        second = tmp_path / "second"
        second.mkdir()
        queue = f"mining-{uuid.uuid4().hex[:8]}"
        with (
            celery_worker(tmp_path, env=_env(server), queue=queue),
            celery_worker(second, env=_env(server), queue=queue),
        ):
            run = mining_run_create(
                config_text=config("shared", concurrency=3, workers=2),
                source="run.yaml",
                corpus_name=corpus.name,
                start=False,
            )
            _send(run, queue, n=2)
            _wait(lambda: MiningRun.objects.get(pk=run.pk).status == "done", 120, "the run")
        assert run.candidates.filter(status="passed").count() == N_DOCS
        sent = _sent_per_request(server)
        assert sum(sent.values()) == N_DOCS * 5 and max(sent.values()) == 1  # no document walked twice
        logs = [(tmp_path / f"worker-{queue}.log").read_text(), (second / f"worker-{queue}.log").read_text()]
        assert all("mining.run_execute" in log for log in logs)  # both workers took part
