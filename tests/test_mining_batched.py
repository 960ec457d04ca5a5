"""Mining at the endpoint's pace: documents are claimed in chunks, a chunk's stage results
and ledger answers are read in a few statements, each document's six stage results and its
new state are written at once, and every finished document carries the worker CPU its walk
took (shown on the run page with its n). A worker killed mid-chunk loses nothing: after its
lease another worker takes its documents over and no request answered before the kill is
sent again."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from llm.models import LedgerEntry
from mining.constants import MINING_CLAIM_LEASE_SECONDS
from mining.models import MiningCandidate, MiningRun, Procedure, StageResult
from mining.run_claims import candidates_claim, candidates_sample, chunk_load
from mining.run_selectors import mining_run_progress
from mining.run_services import mining_run_create, mining_run_retry_failures
from mining.runner import mining_run_execute
from mining.stages import PIPELINE
from mining.walker import Walker
from tests.scripted_miner import document_text, scripted_miner_server, stage_of
from tests.test_mining_runs import config, make_corpus, point_stages_at

pytestmark = pytest.mark.django_db(transaction=True)

TOPICS = ("food-dining", "health", "home-hobbies")


@pytest.fixture
def miner(settings):
    server, answers = scripted_miner_server()
    with server:
        point_stages_at(settings, server)
        yield server


def _corpus(n: int, rejected: int = 0):
    docs = [(f"d{i}", TOPICS[i % 3], document_text(f"d{i}", f"Make thing {i}")) for i in range(n)]
    docs += [
        (f"d{100 + i}", TOPICS[i % 3], document_text(f"d{100 + i}", f"Skip thing {i}", flags="reject:llm_filter"))
        for i in range(rejected)
    ]
    return make_corpus(docs)


def _started(name: str, corpus) -> MiningRun:
    run = mining_run_create(
        config_text=config(name, concurrency=4), source="run.yaml", corpus_name=corpus.name, start=False
    )
    MiningRun.objects.filter(pk=run.pk).update(status="running")
    run.refresh_from_db()
    return run


def _statements(queries, table: str, verb: str) -> int:
    return sum(1 for q in queries if q["sql"].lstrip().upper().startswith(verb) and f'"{table}"' in q["sql"])


def _walk_one_chunk(run: MiningRun) -> tuple[list, list, list]:
    """Claim, read and walk one chunk in this thread; the statements of the read and of the walks."""
    walker = Walker(run)
    token = uuid.uuid4().hex
    candidates_sample(run)
    ids = candidates_claim(run, token, 100)
    try:
        with CaptureQueriesContext(connection) as read:
            items = chunk_load(walker, token, ids)
        with CaptureQueriesContext(connection) as walked:
            for item in items:
                walker.walk(item.candidate, stored=item.stored, ledger=item.ledger, overhead_ms=item.overhead_ms)
    finally:
        walker.close()
    return items, list(read.captured_queries), list(walked.captured_queries)


def test_each_document_of_a_chunk_writes_its_stage_results_and_state_in_one_statement_each(miner):
    corpus = _corpus(9, rejected=3)
    run = _started("chunk", corpus)
    items, read, walked = _walk_one_chunk(run)
    assert len(items) == 12
    # The chunk is read at once: its candidates with their documents, their stage results,
    # and the first request of every document looked up in the ledger in one statement.
    assert _statements(read, "mining_miningcandidate", "SELECT") == 1
    assert _statements(read, "mining_stageresult", "SELECT") == 1
    assert _statements(read, "llm_ledgerentry", "SELECT") == 1
    # Walking looks nothing up one by one (the first request was looked up with the chunk,
    # each later one follows a fresh answer), and writes each document's stage results in
    # one statement and its state in one; the run's counters move in the same transaction,
    # from the document's row and results read locked (one statement) by one upsert.
    assert _statements(walked, "llm_ledgerentry", "SELECT") == 0
    assert _statements(walked, "llm_ledgerentry", "INSERT") == 9 * 5 + 3 * 2  # the answers, one each
    assert _statements(walked, "mining_stageresult", "INSERT") == 12
    assert _statements(walked, "mining_stageresult", "SELECT") == 12  # the locked read, one per document
    assert _statements(walked, "mining_miningruncounter", "INSERT") == 12
    assert _statements(walked, "mining_miningcandidate", "UPDATE") == 12
    assert run.candidates.filter(status="passed").count() == 9 and run.candidates.filter(status="rejected").count() == 3
    assert StageResult.objects.filter(run=run).count() == 9 * 6 + 3 * 3
    first = Procedure.objects.get(source_example_id="d0")
    assert set(first.provenance["processed_example"]) == set(PIPELINE)
    assert (
        first.provenance["processed_example"]["rewrite"]
        == StageResult.objects.get(candidate__document__doc_id="d0", stage="rewrite").answer
    )
    # Every stage result carries the time it was decided, not the time of the write: a
    # stage was decided after its answer reached the ledger and before the next stage asked.
    results = {r.stage: r for r in StageResult.objects.filter(candidate__document__doc_id="d0")}
    asked = dict(
        LedgerEntry.objects.filter(key__in=[r.request_key for r in results.values()]).values_list("stage", "created_at")
    )
    llm = [s for s in PIPELINE if s != "heuristics"]
    for stage, following in zip(llm, llm[1:]):
        assert asked[stage] <= results[stage].created_at <= asked[following]
    assert run.candidates.filter(claim="").count() == 12  # every claim released with its document


def test_a_second_run_over_the_same_documents_reads_every_answer_in_one_lookup_per_stage(miner):
    server = miner
    corpus = _corpus(6, rejected=2)
    first = _started("first", corpus)
    _walk_one_chunk(first)
    sent = len(server.chat_requests())
    second = _started("second", corpus)
    items, read, walked = _walk_one_chunk(second)
    assert len(items) == 8
    # One lookup per LLM stage for the whole chunk (five), none while walking, nothing sent.
    assert _statements(read, "llm_ledgerentry", "SELECT") == 5
    assert _statements(walked, "llm_ledgerentry", "SELECT") == 0
    assert len(server.chat_requests()) == sent
    assert second.candidates.filter(status="passed").count() == 6
    assert StageResult.objects.filter(run=second, cached=True).count() == 6 * 5 + 2 * 2
    assert Procedure.objects.count() == 6  # the same procedures, stored once


def test_every_finished_document_has_its_cpu_and_the_run_page_shows_the_mean_with_n(miner, admin_client_):
    corpus = _corpus(9, rejected=3)
    run = mining_run_create(
        config_text=config("cpu", concurrency=4), source="run.yaml", corpus_name=corpus.name, start=False
    )
    assert mining_run_execute(run_id=run.pk) == "done"
    cpu = list(MiningCandidate.objects.filter(run=run).values_list("cpu_ms", flat=True))
    assert len(cpu) == 12 and all(ms is not None and ms > 0 for ms in cpu)
    totals = mining_run_progress(run)["totals"]
    assert totals["cpu"]["n"] == 12
    assert totals["cpu"]["ms_per_document"] == pytest.approx(sum(ms for ms in cpu if ms is not None) / 12, abs=0.01)
    page = admin_client_.get(f"/mining/runs/{run.pk}/").content.decode()
    assert "CPU ms per document" in page and "n = 12 documents" in page
    progress = admin_client_.get(f"/api/mining/runs/{run.pk}/progress/").json()
    assert progress["totals"]["cpu"]["n"] == 12


def test_a_document_walked_again_adds_the_cpu_of_each_walk(miner):
    corpus = make_corpus([("d0", "health", document_text("d0", "Brew tea", flags="malformed:llm_filter"))])
    run = mining_run_create(
        config_text=config("failing", concurrency=1), source="run.yaml", corpus_name=corpus.name, start=False
    )
    assert mining_run_execute(run_id=run.pk) == "done"
    candidate = run.candidates.get()
    assert candidate.cpu_ms is not None
    assert candidate.status == "failed" and candidate.failures == 2 and candidate.cpu_ms > 0  # two walks
    first = candidate.cpu_ms
    mining_run_retry_failures(run=run, start=False)
    mining_run_execute(run_id=run.pk)
    candidate.refresh_from_db()
    assert candidate.status == "failed" and candidate.cpu_ms > first
    assert mining_run_progress(run)["totals"]["cpu"]["n"] == 1


# -- a real worker killed mid-chunk -------------------------------------------------------


@pytest.mark.integration
def test_a_worker_killed_mid_chunk_is_taken_over_after_its_lease_and_no_answered_request_is_sent_again(
    settings, tmp_path
):
    from mining.tasks import mining_run_execute_task
    from tests.services import celery_worker
    from tests.test_llm_workers import _database_url, _wait

    n_docs = 24
    server, _ = scripted_miner_server(latency=0.15)
    with server:
        point_stages_at(settings, server)
        corpus = _corpus(n_docs)
        queue = f"mining-{uuid.uuid4().hex[:8]}"
        env = {
            "LLM_BASE_URL": server.base_url,
            "LLM_MODEL": "scripted",
            "LLM_API_KEY": "k",
            "DATABASE_URL": _database_url(),
            "LLM_BACKOFF_BASE_SECONDS": "0.01",
        }
        run = mining_run_create(
            config_text=config("killed-mid-chunk", concurrency=3),
            source="run.yaml",
            corpus_name=corpus.name,
            start=False,
        )
        with celery_worker(tmp_path, env=env, queue=queue) as worker:
            mining_run_execute_task.apply_async(args=(run.pk,), queue=queue)
            _wait(lambda: run.candidates.filter(status="passed").count() >= 3, 90, "the first procedures")
            worker.kill()  # SIGKILL: its chunk stays claimed, its walks in memory are gone
            worker.wait()
        held = run.candidates.filter(status="pending").exclude(claim="")
        assert held.exists()  # killed in the middle of a chunk
        answered = set(LedgerEntry.objects.filter(run=run.ledger_run, outcome="ok").values_list("key", flat=True))
        sent_before = Counter((stage_of(b), b["messages"][0]["content"]) for b in server.chat_requests())
        prompts_answered = {
            entry.request["messages"][0]["content"] for entry in LedgerEntry.objects.filter(key__in=answered)
        }

        # No resume: the claims are only taken over once their lease has run out.
        MiningCandidate.objects.filter(run=run).exclude(claim="").update(
            claimed_at=timezone.now() - timedelta(seconds=MINING_CLAIM_LEASE_SECONDS + 1)
        )
        second = tmp_path / "second"
        second.mkdir()
        with celery_worker(second, env=env, queue=queue):
            mining_run_execute_task.apply_async(args=(run.pk,), queue=queue)
            _wait(lambda: MiningRun.objects.get(pk=run.pk).status == "done", 120, "the run taken over")

        assert run.candidates.filter(status="passed").count() == n_docs
        assert Procedure.objects.count() == n_docs  # each procedure once
        assert StageResult.objects.filter(run=run).count() == n_docs * 6  # nothing lost
        assert LedgerEntry.objects.filter(run=run.ledger_run).count() == n_docs * 5
        sent = Counter((stage_of(b), b["messages"][0]["content"]) for b in server.chat_requests())
        # A request answered before the kill went out once; only those in flight (at most
        # the concurrency) may have gone out twice.
        assert all(sent[key] == 1 for key in sent_before if key[1] in prompts_answered)
        assert sum(1 for n in sent.values() if n > 1) <= 3
        assert sum(sent.values()) <= n_docs * 5 + 3
