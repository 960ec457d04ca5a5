"""The ledger's totals kept per run (llm/ledger_totals.py) say exactly what its entries say:
after new entries, failures asked again (by the same run or another, which takes the entry
and what it cost), groups written at once, refused answers, entries without a price and two
writers at once; each check sums the entries afresh with the ORM and compares. A tampered
total is found and rebuilt by ``ledger_totals_verify``; the migration sums the entries that
exist."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connection, connections
from django.db.models import Count, Q, Sum

from llm.ledger import ledger_write, ledger_write_many
from llm.ledger_totals import ledger_totals_verify
from llm.models import LedgerEntry, LedgerTotal
from llm.run_watch import ERROR_CHARS
from llm.runs import ledger_run_counts
from llm.services import ledger_entry_reject

pytestmark = pytest.mark.django_db(transaction=True)


def fields(run: str, outcome: str = "ok", **more) -> dict:
    return {
        "stage": "extract_procedure",
        "run": run,
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "request": {"messages": []},
        "outcome": outcome,
        "parsed": {"a": 1} if outcome == "ok" else None,
        "error": "" if outcome == "ok" else "the server said no",
        "tokens_in": 100,
        "tokens_out": 10,
        "cost_usd": Decimal("0.001"),
        **more,
    }


def fresh(run: str) -> dict:
    """The label's entries summed with the ORM, per (stage, model, outcome, error as shown)."""
    found: dict = {}
    for stage, model, outcome, error, n, tokens_in, tokens_out, usd, unpriced in (
        LedgerEntry.objects.filter(run=run)
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
        key = (stage, model, outcome, "" if outcome == "ok" else error.strip()[:ERROR_CHARS])
        held = found.get(key, (0, 0, 0, Decimal(0), 0))
        found[key] = (held[0] + n, held[1] + tokens_in, held[2] + tokens_out, held[3] + (usd or 0), held[4] + unpriced)
    return found


def kept(run: str) -> dict:
    return {
        (t.stage, t.model, t.outcome, t.error): (t.n, t.tokens_in, t.tokens_out, t.priced_usd, t.n_unpriced)
        for t in LedgerTotal.objects.filter(run=run).exclude(n=0)
    }


def assert_summed_exactly(*runs: str) -> None:
    for run in runs:
        assert kept(run) == fresh(run)
        assert ledger_totals_verify(run) == []


def test_a_failure_asked_again_by_another_run_takes_the_entry_and_its_cost_to_that_run():
    ledger_write("k" * 64, fields("mining-run:1", "api_error", tokens_in=40, tokens_out=0))
    assert kept("mining-run:1") == {
        ("extract_procedure", "m", "api_error", "the server said no"): (1, 40, 0, Decimal("0.001"), 0)
    }
    ledger_write("k" * 64, fields("mining-run:2", cost_usd=Decimal("0.002")))
    assert kept("mining-run:1") == {}  # the entry is the second run's now
    # tokens and cost over every call, the failed one included
    assert kept("mining-run:2") == {("extract_procedure", "m", "ok", ""): (1, 140, 10, Decimal("0.003"), 0)}
    assert_summed_exactly("mining-run:1", "mining-run:2")
    assert ledger_run_counts("mining-run:1")[0]["api_error"] == 0
    assert ledger_run_counts("mining-run:2")[0]["ok"] == 1
    ledger_write("k" * 64, fields("mining-run:3"))  # an ok answer is never replaced
    assert_summed_exactly("mining-run:2", "mining-run:3")
    assert kept("mining-run:3") == {}


def test_a_group_written_at_once_counts_new_entries_and_replaced_failures_once():
    ledger_write("a" * 64, fields("judge-run:1", "truncated"))
    ledger_write_many(
        [
            ("a" * 64, fields("judge-run:1")),  # a failure asked again
            ("b" * 64, fields("judge-run:1", cost_usd=None)),  # no price: the cost is unknown
            ("c" * 64, fields("judge-run:1", "parse_failed", error="  " + "x" * 400)),
            ("c" * 64, fields("judge-run:1", "parse_failed", error="again")),  # the same key twice
        ]
    )
    assert_summed_exactly("judge-run:1")
    counts, errors = ledger_run_counts("judge-run:1")
    assert (counts["ok"], counts["parse_failed"], counts["truncated"]) == (2, 1, 0)
    assert errors == [{"error": "parse_failed: again", "n": 1}]
    assert kept("judge-run:1")[("extract_procedure", "m", "ok", "")][4] == 1


def test_a_refused_answer_becomes_the_refusing_runs_failure():
    ledger_write("r" * 64, fields("reward-endpoint"))
    assert ledger_entry_reject(key="r" * 64, reason="a link to step 9 of 5", run="judge-run:7")
    assert kept("reward-endpoint") == {}
    ((key, sums),) = kept("judge-run:7").items()
    assert key[2] == "parse_failed" and key[3].startswith("refused when stored by judge-run:7")
    assert sums == (1, 100, 10, Decimal("0.001"), 0)
    assert not ledger_entry_reject(key="r" * 64, reason="twice", run="judge-run:7")  # no ok answer left
    assert_summed_exactly("reward-endpoint", "judge-run:7")


def test_a_tampered_total_is_found_and_rebuilt_from_the_entries():
    ledger_write("t" * 64, fields("mining-run:4"))
    LedgerTotal.objects.filter(run="mining-run:4").update(n=5, tokens_in=1)
    mismatches = ledger_totals_verify("mining-run:4")
    assert len(mismatches) == 1
    assert (mismatches[0]["kept"]["n"], mismatches[0]["counted"]["n"]) == (5, 1)
    assert_summed_exactly("mining-run:4")


@pytest.fixture
def postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers are proved on PostgreSQL: run with DATABASE_URL=postgres://...")


def test_two_writers_at_once_count_each_entry_once(postgresql_only):
    """Two threads write the same run's entries at the same moment, half of the keys the
    same (one finds the other's entry: a failure replaced, or an ok answer kept)."""
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(me: int) -> None:
        try:
            barrier.wait(timeout=30)
            for i in range(60):
                key = f"{'s' if i % 2 else me}{i:063d}"[-64:]
                outcome = "api_error" if (i + me) % 3 == 0 else "ok"
                if i % 5 == 0:
                    ledger_write_many([(key, fields("mining-run:9", outcome, tokens_in=i))])
                else:
                    ledger_write(key, fields("mining-run:9", outcome, tokens_in=i))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(me,)) for me in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert LedgerEntry.objects.filter(run="mining-run:9").count() == 90
    assert_summed_exactly("mining-run:9")


def test_the_migration_sums_the_entries_that_exist():
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate([("llm", "0007_run_lifecycle")])
    try:
        old = executor.loader.project_state([("llm", "0007_run_lifecycle")]).apps
        entry = old.get_model("llm", "LedgerEntry")
        for i, (outcome, cost) in enumerate([("ok", Decimal("0.5")), ("ok", None), ("api_error", Decimal("0.25"))]):
            entry.objects.create(key=f"{i:064d}", **fields("mining-run:5", outcome, cost_usd=cost, error=" down "))
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("llm"))
    assert kept("mining-run:5") == {
        ("extract_procedure", "m", "ok", ""): (2, 200, 20, Decimal("0.5"), 1),
        ("extract_procedure", "m", "api_error", "down"): (1, 100, 10, Decimal("0.25"), 0),
    }
    assert_summed_exactly("mining-run:5")
