"""A mining run's progress comes from what exists: the planned documents, the ETA and the
projected cost from the documents the run can actually sample (the corpus may hold fewer
than ``candidates_per_topic``), a finished run shows what it spent and no projection,
documents still being worked on are in flight (not drop-offs), and the cost table keeps
each request under the model that served it. Runs go through the scripted server."""

from __future__ import annotations

import json
import statistics
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from llm.models import LedgerEntry
from mining.charts import mining_funnel_chart
from mining.models import MiningCandidate, MiningRun
from mining.run_claims import candidates_sample
from mining.run_estimates import CostSums, cost_projection, eta_estimate, poisson_interval
from mining.run_selectors import mining_run_progress
from mining.run_services import mining_run_create, mining_run_resume, mining_run_update_stages
from mining.walker import Walker
from tests.scripted_miner import document_text, scripted_miner_server
from tests.test_mining_runs import config, execute, make_corpus, miner, point_stages_at  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

TOPICS = ("food-dining", "health", "home-hobbies")


def _corpus(n: int, name: str = "web"):
    return make_corpus(
        [(f"d{i}", TOPICS[i % 3], document_text(f"d{i}", f"Make thing {i}")) for i in range(n)], name=name
    )


def test_planned_documents_are_what_each_topic_can_give_not_the_budget_times_topics(miner):
    corpus = _corpus(35)  # 12 + 12 + 11 documents
    run = mining_run_create(
        config_text=config(candidates_per_topic=100), source="run.yaml", corpus_name=corpus.name, start=False
    )
    assert mining_run_progress(run)["totals"]["planned"] == 35
    small = mining_run_create(
        config_text=config("small", candidates_per_topic=5), source="run.yaml", corpus_name=corpus.name, start=False
    )
    assert mining_run_progress(small)["totals"]["planned"] == 15  # the budget binds: 5 per topic


def test_eta_counts_the_documents_left_in_the_corpus(miner):
    corpus = _corpus(35)
    run = mining_run_create(
        config_text=config(candidates_per_topic=100), source="run.yaml", corpus_name=corpus.name, start=False
    )
    candidates_sample(run)
    now = timezone.now()
    MiningRun.objects.filter(pk=run.pk).update(status="running", started_at=now - timedelta(minutes=10))
    walker = Walker(MiningRun.objects.get(pk=run.pk))  # ten documents walked to the end, now
    for candidate in run.candidates.select_related("document").order_by("id")[:10]:
        walker.walk(candidate)
    walker.close()
    run.refresh_from_db()
    assert run.candidates.exclude(status="pending").count() == 10
    totals = mining_run_progress(run)["totals"]
    # 10 documents in the last 5 minutes: 2 a minute; 25 of the 35 are left: 12.5 minutes.
    assert totals["documents_per_minute"] == 2.0 and totals["eta_minutes"] == 12.5
    assert totals["eta_n"] == 10
    low, high = totals["eta_ci95_minutes"]
    assert low < 12.5 < high


def test_projected_cost_extrapolates_to_the_documents_the_run_can_sample(settings):
    server, _ = scripted_miner_server()
    with server:
        point_stages_at(settings, server, model="gpt-4.1")  # priced: 0.00128 USD a call
        corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}")) for i in range(10)])
        run = mining_run_create(
            config_text=config(budget_usd=0.01, concurrency=1, candidates_per_topic=100),
            source="run.yaml",
            corpus_name=corpus.name,
            start=False,
        )
        assert execute(run).startswith("paused")
        totals = mining_run_progress(run)["totals"]
        assert totals["planned"] == 10 and totals["finished"] >= 1
        spent = LedgerEntry.objects.filter(run=run.ledger_run).count() * Decimal("0.00128")
        assert totals["cost_usd"] == spent
        # every document makes five calls: 10 documents x 5 calls, not 100 x 5, and the calls
        # already made for documents still in flight are not counted twice
        assert totals["projected_cost_usd"] == pytest.approx(10 * 5 * 0.00128)
        assert totals["projected_n"] == totals["finished"]

        mining_run_resume(run=run, budget_usd=Decimal("1"), start=False)
        execute(run)
        totals = mining_run_progress(run)["totals"]
        assert totals["finished"] == 10
        assert totals["projected_cost_usd"] is None and totals["eta_minutes"] is None  # finished: spent, no projection
        assert totals["cost_usd"] == LedgerEntry.objects.filter(run=run.ledger_run).count() * Decimal("0.00128")


def test_a_finished_runs_page_shows_what_it_spent_and_no_projection(settings, researcher_client):
    server, _ = scripted_miner_server()
    with server:
        point_stages_at(settings, server, model="gpt-4.1")
        corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}")) for i in range(3)])
        run = mining_run_create(
            config_text=config(candidates_per_topic=400), source="run.yaml", corpus_name=corpus.name, start=False
        )
        execute(run)
        assert run.status in ("done", "done_with_failures")
        page = researcher_client.get(reverse("mining_run_detail", args=[run.pk])).content.decode()
        assert 'id="projected-cost"' not in page
        assert "0.0192 USD" in page  # 3 documents x 5 calls x 0.00128
        assert "3 of at most 3" in page


def test_documents_still_in_flight_are_not_drawn_as_drop_offs(settings, researcher_client):
    server, _ = scripted_miner_server()
    with server:
        point_stages_at(settings, server, model="gpt-4.1")
        corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}")) for i in range(10)])
        run = mining_run_create(
            config_text=config(budget_usd=0.01, concurrency=1), source="run.yaml", corpus_name=corpus.name, start=False
        )
        assert execute(run).startswith("paused")  # nothing rejected, nothing failed; most documents pending
        progress = mining_run_progress(run)
        totals = progress["totals"]
        assert totals["rejected"] == totals["failed"] == 0 and totals["pending"] >= 7
        for row in progress["funnel"]:
            assert row["passed"] + row["in_flight"] == totals["sampled"]  # no drop-off anywhere
            assert row["dropped"] == 0
        last = progress["funnel"][-1]
        assert last["in_flight"] == totals["pending"]
        for topic in progress["funnel_by_topic"]:
            for cell in topic["stages"]:
                assert cell["passed"] + cell["in_flight"] == topic["documents"]
        figure = _chart_data(mining_funnel_chart(progress["funnel"], totals["sampled"]))
        traces = {trace["name"]: trace for trace in figure}
        assert list(traces["in flight"]["x"])[-1] == totals["pending"]
        assert list(traces["passed"]["x"])[-1] == last["passed"]
        page = researcher_client.get(reverse("mining_run_detail", args=[run.pk])).content.decode()
        assert f"+{totals['pending']} in flight" in page
        assert 'id="projected-cost"' in page and f"from {totals['finished']} finished" in page


def test_the_eta_interval_is_the_exact_poisson_interval_of_the_documents_counted():
    low, high = poisson_interval(10)
    assert low == pytest.approx(4.795, abs=1e-3) and high == pytest.approx(18.390, abs=1e-3)
    eta = eta_estimate(remaining=25, finished_in_window=10, window_minutes=5)
    assert eta == {"minutes": 12.5, "ci95": [6.8, 26.1], "n": 10}
    assert eta_estimate(remaining=25, finished_in_window=0, window_minutes=5)["minutes"] is None
    assert eta_estimate(remaining=0, finished_in_window=10, window_minutes=5)["minutes"] is None


def test_a_projection_never_drops_below_what_is_spent_and_needs_a_finished_document():
    assert cost_projection(spent=Decimal("1"), planned=10, finished=CostSums.of([]))["usd"] is None
    costs = [Decimal("0.2"), Decimal("0.3")]
    one = cost_projection(spent=Decimal("0.5"), planned=4, finished=CostSums.of(costs), in_flight_paid=Decimal("0"))
    assert one["usd"] == pytest.approx(0.5 + 2 * 0.25) and one["n"] == 2
    low, high = one["ci95"]
    assert 0.5 <= low < one["usd"] < high
    # the interval from the sums is the one from the costs themselves (mean +- z sd / sqrt n)
    half = 1.959963984540054 * statistics.stdev([0.2, 0.3]) / 2**0.5
    assert (low, high) == (pytest.approx(0.5 + 2 * (0.25 - half)), pytest.approx(0.5 + 2 * (0.25 + half)))


def test_a_rejection_is_a_drop_off_and_stays_one(miner):
    corpus = make_corpus(
        [
            ("d1", "health", document_text("d1", "Tape an ankle", flags="reject:llm_filter")),
            ("d2", "health", document_text("d2", "Ice a bruise")),
        ]
    )
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    execute(run)
    funnel = {row["stage"]: row for row in mining_run_progress(run)["funnel"]}
    counts = {key: funnel["heuristics"][key] for key in ("stage", "reached", "passed", "in_flight", "dropped")}
    assert counts == {"stage": "heuristics", "reached": 2, "passed": 2, "in_flight": 0, "dropped": 0}
    assert funnel["llm_filter"]["dropped"] == 1 and funnel["final_validation"]["passed"] == 1


def _run_then_change_the_rewrite_model(n_documents: int) -> MiningRun:
    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}")) for i in range(n_documents)])
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    execute(run)
    mining_run_update_stages(
        run=run, config_text=config() + "stages:\n  rewrite: {model: other-model}\n", source="run-v2.yaml", start=False
    )
    execute(run)
    return run


def test_the_cost_table_keeps_requests_under_the_model_that_served_them(miner):
    run = _run_then_change_the_rewrite_model(3)
    rows = [row for row in mining_run_progress(run)["stage_costs"] if row["stage"] == "rewrite"]
    assert {(row["model"], row["requests"], row["current"]) for row in rows} == {
        ("scripted", 3, False),
        ("other-model", 3, True),
    }
    other = next(row for row in mining_run_progress(run)["stage_costs"] if row["stage"] == "llm_filter")
    assert (other["model"], other["requests"], other["current"]) == ("scripted", 3, True)


def test_the_cost_table_on_the_page_names_each_model(miner, researcher_client):
    run = _run_then_change_the_rewrite_model(2)
    page = researcher_client.get(reverse("mining_run_detail", args=[run.pk])).content.decode()
    table = page[page.index('id="stage-costs"') :]
    table = table[: table.index("</table>")]
    assert table.count("<td>rewrite</td>") == 2
    assert "<td>other-model</td>" in table and "earlier configuration" in table


def _chart_data(html: str) -> list[dict]:
    """The traces of a chart fragment (its figure's JSON block, drawn by static/js/charts.js)."""
    start = html.index('class="plotly-figure"')
    payload = html[html.index(">", start) + 1 : html.index("</script>", start)]
    return json.loads(payload)["figure"]["data"]


def test_a_runs_progress_reads_its_kept_counters_and_they_agree_with_its_rows(miner):
    """The funnel, the projection and the rejection reasons come from the run's counters
    (mining/run_counters.py), never from counting its stage results; the documents by topic
    and status and their CPU from them too; the cost table from the ledger's kept totals
    (llm/ledger_totals.py), never from its entries. After a run, after *Change stages*
    reopened it and after its second execution, the counters equal a fresh count from the
    rows."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mining.run_counters import mining_run_counters_verify

    corpus = make_corpus(
        [
            ("d0", "health", document_text("d0", "Exercise 0")),
            ("d1", "health", document_text("d1", "Exercise 1", flags="reject:llm_filter")),
        ]
    )
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    execute(run)
    run.refresh_from_db()
    assert run.status == "done"

    def counted(queries, table: str) -> int:
        return sum(f'FROM "{table}"' in q["sql"] and ("GROUP BY" in q["sql"] or "SUM(" in q["sql"]) for q in queries)

    with CaptureQueriesContext(connection) as read:
        first = mining_run_progress(run)
    assert counted(read.captured_queries, "mining_stageresult") == 0
    assert counted(read.captured_queries, "mining_miningcandidate") == 0
    assert not any('FROM "llm_ledgerentry"' in q["sql"] for q in read.captured_queries)
    assert any('FROM "llm_ledgertotal"' in q["sql"] for q in read.captured_queries)  # the cost table
    assert first["rejection_reasons"] == [{"stage": "llm_filter", "reason": "excluded", "documents": 1}]
    assert mining_run_counters_verify(run)["mismatches"] == []

    mining_run_update_stages(
        run=run, config_text=config() + "stages:\n  rewrite: {model: other-model}\n", source="run-v2.yaml", start=False
    )
    run.refresh_from_db()
    reopened = mining_run_progress(run)
    assert reopened["totals"]["pending"] == 2 and reopened["rejection_reasons"] == []
    for row in reopened["funnel"]:  # every document is being walked again: nothing dropped
        assert (row["passed"] + row["in_flight"], row["dropped"]) == (2, 0)
    assert mining_run_counters_verify(run)["mismatches"] == []
    execute(run)
    run.refresh_from_db()
    progress = mining_run_progress(run)
    assert mining_run_counters_verify(run)["mismatches"] == []
    assert progress["funnel"] == first["funnel"] and progress["rejection_reasons"] == first["rejection_reasons"]
    rows = [row for row in progress["stage_costs"] if row["stage"] == "rewrite"]
    assert {(row["model"], row["requests"]) for row in rows} == {("scripted", 1), ("other-model", 1)}
