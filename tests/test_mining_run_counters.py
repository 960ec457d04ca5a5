"""A mining run's kept counters (mining/run_counters.py) say exactly what its rows say:
after retries, a budget's pause and its resume, *Retry failed*, *Change stages*, and two
workers writing the same documents at once (a claim whose lease ran out, taken again); each
check counts the rows afresh with the ORM and compares. A tampered counter is found and
rebuilt by ``mining_run_counters_verify`` (and the ``verify_run_counters`` command); a run
made before the counters were kept is counted from its rows on its first read, as the
migration leaves it."""

from __future__ import annotations

import math
import threading
from collections import Counter
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.db.models import Avg, Count, Q, Sum

from llm.constants import OUTCOMES
from llm.models import LedgerEntry, LedgerTotal
from llm.run_watch import ERROR_CHARS
from mining.models import CandidateStatus, Document, MiningCandidate, MiningRun, MiningRunCounter, StageResult
from mining.run_claims import candidates_sample
from mining.run_counters import mining_run_counters_verify
from mining.run_selectors import mining_run_progress, mining_run_state
from mining.run_services import (
    mining_run_create,
    mining_run_resume,
    mining_run_retry_failures,
    mining_run_update_stages,
)
from mining.stages import reason_code
from mining.walker import Walker
from tests.scripted_miner import document_text, scripted_miner_server
from tests.test_mining_runs import config, execute, make_corpus, miner, point_stages_at  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

TOPICS = ("food-dining", "health", "home-hobbies")


def _docs(n: int) -> list[tuple[str, str, str]]:
    """Documents of three topics: most pass, some are rejected by a stage, some fail."""
    flags = ["", "", "reject:llm_filter", "", "malformed:rewrite", "reject:final_validation", ""]
    return [(f"d{i}", TOPICS[i % 3], document_text(f"d{i}", f"Make thing {i}", 6, flags[i % 7])) for i in range(n)]


def _microseconds(cpu_ms: float | None) -> int | None:
    """A document's CPU as the counters keep it: whole microseconds, half up."""
    return None if cpu_ms is None else math.floor(cpu_ms * 1000 + 0.5)


def fresh_counts(run: MiningRun) -> tuple[Counter, dict, dict]:
    """The run counted from its rows with the ORM: stage results by (topic, stage, status,
    document status); every document by (topic, status, stage and reason code if rejected)
    with its costs' and CPU's sums; the corpus documents it can sample per topic."""
    funnel = Counter(
        {
            row[:4]: row[4]
            for row in StageResult.objects.filter(run=run)
            .values_list("candidate__topic_id", "stage", "status", "candidate__status")
            .annotate(n=Count("id"))
        }
    )
    documents: dict = {}
    for topic_id, status, stage, reason, cpu_ms, usd in (
        MiningCandidate.objects.filter(run=run)
        .values("pk", "topic_id", "status", "stage", "reason", "cpu_ms")
        .annotate(usd=Sum("stage_results__cost_usd"))
        .values_list("topic_id", "status", "stage", "reason", "cpu_ms", "usd")
    ):
        usd = usd or Decimal(0)
        rejected = status == CandidateStatus.REJECTED
        key = (topic_id, status, stage, reason_code(reason)) if rejected else (topic_id, status, "", "")
        n, total, squares, cpu, n_cpu = documents.get(key, (0, Decimal(0), Decimal(0), 0, 0))
        us = _microseconds(cpu_ms)
        documents[key] = (n + 1, total + usd, squares + usd * usd, cpu + (us or 0), n_cpu + (us is not None))
    sampled = Document.objects.filter(corpus=run.corpus, pk__lte=run.config["max_document_id"])
    corpus = {t: sampled.filter(topic_id=t).count() for t in run.topics.values_list("id", flat=True)}
    return funnel, documents, {t: n for t, n in corpus.items() if n}


def kept_counts(run: MiningRun) -> tuple[Counter, dict, dict]:
    funnel: Counter = Counter()
    documents: dict = {}
    corpus: dict = {}
    for counter in MiningRunCounter.objects.filter(run=run).exclude(n=0):
        if counter.scope == "stage":
            funnel[(counter.topic_id, counter.stage, counter.status, counter.candidate_status)] += counter.n
        elif counter.scope == "corpus":
            corpus[counter.topic_id] = corpus.get(counter.topic_id, 0) + counter.n
        else:
            key = (counter.topic_id, counter.candidate_status, counter.stage, counter.reason)
            n, total, squares, cpu, n_cpu = documents.get(key, (0, Decimal(0), Decimal(0), 0, 0))
            documents[key] = (
                n + counter.n,
                total + counter.cost_usd,
                squares + counter.cost_usd_squares,
                cpu + counter.cpu_us,
                n_cpu + counter.n_cpu,
            )
    return funnel, documents, corpus


def fresh_ledger(run: MiningRun) -> dict:
    """The run's ledger entries summed with the ORM per (stage, model, outcome, error as
    shown): requests, tokens in and out, the priced sum and the entries without a price."""
    found: dict = {}
    for stage, model, outcome, error, n, tokens_in, tokens_out, usd, unpriced in (
        LedgerEntry.objects.filter(run=run.ledger_run)
        .values_list("stage", "model", "outcome", "error")
        .annotate(
            n=Count("id"),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            usd=Sum("cost_usd"),
            unpriced=Count("id", filter=Q(cost_usd__isnull=True)),
        )
        .order_by()
    ):
        key = (stage, model, outcome, "" if outcome == "ok" else (error or "").strip()[:ERROR_CHARS])
        held = found.get(key, (0, 0, 0, Decimal(0), 0))
        found[key] = (held[0] + n, held[1] + tokens_in, held[2] + tokens_out, held[3] + (usd or 0), held[4] + unpriced)
    return found


def kept_ledger(run: MiningRun) -> dict:
    return {
        (t.stage, t.model, t.outcome, t.error): (t.n, t.tokens_in, t.tokens_out, t.priced_usd, t.n_unpriced)
        for t in LedgerTotal.objects.filter(run=run.ledger_run).exclude(n=0)
    }


def assert_counted_exactly(run: MiningRun) -> None:
    kept, counted = kept_counts(run), fresh_counts(run)
    assert kept[0] == counted[0]
    assert kept[1] == counted[1]
    assert kept[2] == counted[2]
    assert kept_ledger(run) == fresh_ledger(run)
    report = mining_run_counters_verify(run)
    assert report["mismatches"] == [] and report["ledger_mismatches"] == []
    # the page reads them: its document counts, CPU, cost table and outcome counts are the rows'
    progress = mining_run_progress(run)
    by_status = Counter(dict(run.candidates.values_list("status").annotate(n=Count("id"))))
    assert progress["totals"]["sampled"] == sum(by_status.values())
    assert progress["totals"]["failed"] == by_status["failed"]
    for topic in progress["funnel_by_topic"]:
        assert topic["documents"] == run.candidates.filter(topic__slug=topic["slug"]).count()
    timed = run.candidates.filter(cpu_ms__isnull=False)
    assert progress["totals"]["cpu"]["n"] == timed.count()
    if timed.exists():
        mean = timed.aggregate(mean=Avg("cpu_ms"))["mean"]
        assert abs(progress["totals"]["cpu"]["ms_per_document"] - mean) <= 0.006
    ledger = fresh_ledger(run)
    for row in progress["stage_costs"]:
        served = [v for k, v in ledger.items() if k[:2] == (row["stage"], row["model"])]
        assert row["requests"] == sum(v[0] for v in served)
        assert (row["tokens_in"], row["tokens_out"]) == (sum(v[1] for v in served), sum(v[2] for v in served))
        assert row["n_unpriced"] == sum(v[4] for v in served)
        if row["requests"] and not row["n_unpriced"]:
            assert row["cost_usd"] == sum((v[3] for v in served), Decimal(0))
    state = mining_run_state(run)
    outcomes: Counter = Counter()
    errors: Counter = Counter()
    for (_, _, outcome, error), value in ledger.items():
        outcomes[outcome] += value[0]
        if outcome != "ok":
            errors[f"{outcome}: {error}"] += value[0]
    assert {o: state["outcomes"][o] for o in OUTCOMES} == {o: outcomes[o] for o in OUTCOMES}
    assert len(state["top_errors"]) == min(len(errors), 5)
    assert all(errors[row["error"]] == row["n"] for row in state["top_errors"])


def test_every_walk_moves_the_counts_once_through_retries_and_retry_failed(miner, settings):
    settings.LLM_PARSE_REASKS = 0
    corpus = make_corpus(_docs(14))
    run = mining_run_create(config_text=config(failure_retries=1), source="run.yaml", corpus_name=corpus.name)
    execute(run)
    failed = run.candidates.filter(status="failed")
    # each failed document was walked twice (its automatic retry), its second write counted over its first
    assert failed.count() == 2 and set(failed.values_list("failures", flat=True)) == {2}
    assert_counted_exactly(run)
    progress = mining_run_progress(run)
    assert progress["outcomes"]["parse_failed"] == 2 and progress["totals"]["failed"] == 2
    assert {(r["stage"], r["reason"]) for r in progress["rejection_reasons"]} == {
        ("llm_filter", "excluded"),
        ("final_validation", "failed_validation"),
    }

    assert mining_run_retry_failures(run=run, start=False) == 2
    assert_counted_exactly(run)
    execute(run)  # they fail again, and are counted once more as failed, not twice
    assert_counted_exactly(run)
    assert mining_run_progress(run)["outcomes"]["parse_failed"] == 2


def test_a_budget_pause_a_resume_and_changed_stages_keep_the_counts_exact(settings):
    server, _ = scripted_miner_server()
    with server:
        point_stages_at(settings, server, model="gpt-4.1")  # priced: the documents' costs are counted
        corpus = make_corpus(_docs(12))
        run = mining_run_create(
            config_text=config(budget_usd=0.02, concurrency=2), source="run.yaml", corpus_name=corpus.name, start=False
        )
        assert execute(run).startswith("paused")  # walks stopped half way wrote what they had
        assert run.candidates.filter(status="pending").exists()
        assert_counted_exactly(run)
        before = mining_run_progress(run)["totals"]
        assert before["projected_cost_usd"] is not None

        mining_run_resume(run=run, budget_usd=Decimal("1"), start=False)
        execute(run)
        assert_counted_exactly(run)
        passed = sum(v[0] for k, v in kept_counts(run)[1].items() if k[1] == "passed")
        assert passed == run.candidates.filter(status="passed").count()

        mining_run_update_stages(
            run=run, config_text=config() + "stages:\n  rewrite: {model: other-model}\n", source="v2.yaml", start=False
        )
        assert_counted_exactly(run)
        execute(run)
        assert_counted_exactly(run)


@pytest.fixture
def postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers are proved on PostgreSQL: run with DATABASE_URL=postgres://...")


def test_two_workers_writing_the_same_documents_at_once_count_each_once(miner, postgresql_only):
    """Two walkers take the same documents at the same moment (a claim whose lease ran out,
    taken again by a second worker while the first still walks): each document's results
    are written twice, and counted once."""
    corpus = make_corpus(_docs(21))
    run = mining_run_create(config_text=config(failure_retries=0), source="run.yaml", corpus_name=corpus.name)
    candidates_sample(run)
    ids = list(run.candidates.order_by("id").values_list("pk", flat=True))
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker() -> None:
        walker = Walker(MiningRun.objects.get(pk=run.pk))
        try:
            barrier.wait(timeout=30)
            for pk in ids:
                walker.walk(MiningCandidate.objects.select_related("document").get(pk=pk))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            walker.close()
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    written = StageResult.objects.filter(run=run).count()
    assert written > len(ids)  # documents went through several stages, written by both
    assert not run.candidates.filter(status="pending").exists()
    assert_counted_exactly(run)


def test_a_tampered_counter_is_found_rebuilt_from_the_rows_and_reported(miner):
    corpus = make_corpus(_docs(7))
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name)
    execute(run)
    first = mining_run_progress(run)
    counter = MiningRunCounter.objects.filter(run=run, scope="stage", stage="heuristics").order_by("pk")[0]
    MiningRunCounter.objects.filter(pk=counter.pk).update(n=counter.n + 5)
    assert mining_run_progress(run)["funnel"] != first["funnel"]  # the page reads the counters

    report = mining_run_counters_verify(run)
    assert report["rebuilt"] and len(report["mismatches"]) == 1
    mismatch = report["mismatches"][0]
    assert (mismatch["kept"], mismatch["counted"]) == (counter.n + 5, counter.n)
    assert mining_run_progress(run)["funnel"] == first["funnel"]
    assert mining_run_counters_verify(run) == {**report, "mismatches": [], "rebuilt": False}


def test_the_command_verifies_every_run_and_says_what_it_rebuilt(miner, capsys):
    corpus = make_corpus(_docs(4))
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name)
    execute(run)
    call_command("verify_run_counters")
    assert f"run {run.pk} ({run.name}): counters agree with the rows" in capsys.readouterr().out
    MiningRunCounter.objects.filter(run=run, scope="document").update(n=0)
    with pytest.raises(CommandError, match="disagreed with the rows"):
        call_command("verify_run_counters", "--run", str(run.pk))
    out = capsys.readouterr().out
    assert "rebuilt from the rows" in out and "mismatch" in out
    call_command("verify_run_counters", "--run", str(run.pk))
    assert "agree" in capsys.readouterr().out
    LedgerTotal.objects.filter(run=run.ledger_run, outcome="ok").update(tokens_in=0)  # the ledger's totals too
    with pytest.raises(CommandError, match="disagreed with the rows"):
        call_command("verify_run_counters", "--run", str(run.pk))
    assert "ledger mismatch at run='mining-run:" in capsys.readouterr().out
    assert kept_ledger(run) == fresh_ledger(run)


def test_a_run_made_before_the_counters_is_counted_from_its_rows_on_first_read(miner):
    """The migration leaves earlier runs with ``counters_built`` false and no counters;
    their first read counts them from the rows, once, and shows what the rows say."""
    corpus = make_corpus(_docs(9))
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name)
    execute(run)
    expected = mining_run_progress(run)
    MiningRunCounter.objects.filter(run=run).delete()
    MiningRun.objects.filter(pk=run.pk).update(counters_built=False)
    run.refresh_from_db()

    counted = mining_run_progress(run)
    steady = ("documents_per_minute", "eta_minutes", "eta_ci95_minutes", "eta_n")  # they move with the clock
    assert {k: v for k, v in counted.items() if k != "totals"} == {k: v for k, v in expected.items() if k != "totals"}
    assert {k: v for k, v in counted["totals"].items() if k not in steady} == {
        k: v for k, v in expected["totals"].items() if k not in steady
    }
    run.refresh_from_db()
    assert run.counters_built
    assert_counted_exactly(run)
    report = mining_run_counters_verify(run)
    assert not report["first_count"] and not report["rebuilt"]


def test_the_migration_marks_existing_runs_to_be_counted_and_new_runs_as_counted(miner):
    from django.db.migrations.executor import MigrationExecutor

    corpus = make_corpus(_docs(3))
    executor = MigrationExecutor(connection)
    executor.migrate([("mining", "0010_procedure_mining_runs")])
    try:
        old = executor.loader.project_state([("mining", "0010_procedure_mining_runs")]).apps
        old_run = old.get_model("mining", "MiningRun").objects.create(
            name="before", corpus_id=corpus.pk, candidates_per_topic=5
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("mining"))
    assert MiningRun.objects.get(pk=old_run.pk).counters_built is False
    new = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    assert new.counters_built is True
