"""Every rate shown outside the How2Score leaderboard carries its n and a 95 % Wilson
interval, says what it left out, and reads the same on the page, in the API and in the
command: mining yield (overall, per topic) and stage pass rates, CoScript kept and goal
rates per constraint type, How2Score of the constrained slice per constraint type (n judged,
n unusable, coverage, interval; an incomplete row is never ranked above complete ones), and
goal-step accuracy (calls without a usable answer left out and counted)."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from core.intervals import share_estimate, wilson_interval
from core.templatetags.share_format import percent
from coscript.selectors import constrained_how2score
from goalstep.selectors import leaderboard, task_evaluation_accuracy
from goalstep.services import task_evaluation_create, task_evaluation_execute
from judging.how2score import how2score_estimate
from judging.leaderboard_selectors import leaderboard_ranking
from judging.models import Generation, Judgment
from judging.services import language_model_register
from mining.models import Procedure, Split, Topic
from mining.run_selectors import mining_run_progress
from mining.run_services import mining_run_create
from mining.runner import mining_run_execute
from tests.scripted_llm import Reply, last_user_message
from tests.scripted_miner import document_text
from tests.test_coscript_pages import model, run, server, world  # noqa: F401  (fixtures)
from tests.test_goalstep_evaluation import ANSWERS, task_set  # noqa: F401  (fixture)
from tests.test_mining_runs import config, make_corpus, miner  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def _command_json(capsys, *args) -> dict:
    capsys.readouterr()
    call_command(*args)
    out = capsys.readouterr().out
    return json.loads(out[out.index("{") :])


def _captured(pattern: str, text: str) -> str:
    """Group 1 of the first match of ``pattern`` (``.`` matching newlines too) in ``text``."""
    found = re.search(pattern, text, re.S)
    assert found, pattern
    return found.group(1)


def _wilson(successes: int, n: int) -> tuple[float, float]:
    interval = wilson_interval(successes, n)
    assert interval is not None
    return interval


def _shown_share(cell_html: str) -> tuple[str, str, str, int, int]:
    """(share, low, high, successes, n) as the share_estimate include prints them."""
    text = re.sub(r"<[^>]+>", "", cell_html)
    found = re.search(r"([\d.]+ %) \[([\d.]+ %)–([\d.]+ %)\] (\d+) / (\d+)", text)
    assert found, text
    return found.group(1), found.group(2), found.group(3), int(found.group(4)), int(found.group(5))


def _expected_shown(successes: int, n: int) -> tuple[str, str, str, int, int]:
    low, high = _wilson(successes, n)
    return percent(successes / n), percent(low), percent(high), successes, n


# -- the shared shape -------------------------------------------------------------------


def test_a_share_estimate_is_the_wilson_interval_of_its_counts():
    estimate = share_estimate(3, 4)
    assert estimate["share"] == 0.75 and estimate["n"] == 4 and estimate["successes"] == 3
    assert estimate["ci95"] == pytest.approx(list(_wilson(3, 4))) and estimate["interval"] == "wilson"
    assert share_estimate(0, 0) == {"share": None, "ci95": None, "successes": 0, "n": 0, "interval": "wilson"}


# -- mining yield -----------------------------------------------------------------------


@pytest.fixture
def mined(miner):
    """A finished run: health has 4 procedures, 1 rejection and 1 failed document (its
    llm_filter answer is never readable); food-dining 2 procedures and 1 rejection."""
    docs = [(f"d{i}", "health", document_text(f"d{i}", f"Prepare item {i}")) for i in range(4)]
    docs += [
        ("d4", "health", document_text("d4", "Visit the shop", flags="reject:llm_filter")),
        ("d5", "health", document_text("d5", "Sort the mail", flags="malformed:llm_filter")),
    ]
    docs += [(f"d{i}", "food-dining", document_text(f"d{i}", f"Cook dish {i}")) for i in (6, 7)]
    docs += [("d8", "food-dining", document_text("d8", "Visit the market", flags="reject:llm_filter"))]
    corpus = make_corpus(docs)
    run = mining_run_create(
        config_text=config("rates-run", failure_retries=0), source="run.yaml", corpus_name=corpus.name, start=False
    )
    mining_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "done_with_failures"
    return run


def test_mining_yield_counts_decided_documents_and_says_what_it_left_out(mined):
    progress = mining_run_progress(mined)
    totals = progress["totals"]
    assert (totals["procedures"], totals["rejected"], totals["failed"]) == (6, 2, 1)
    # Failed documents decide nothing: 6 of 8 decided, not 6 of 9 finished.
    assert totals["yield"] == {**share_estimate(6, 8), "left_out": {"in_flight": 0, "not_asked": 0, "failed": 1}}
    assert totals["yield"]["ci95"] == pytest.approx(list(_wilson(6, 8)))
    by_topic = {t["slug"]: t["yield"] for t in progress["funnel_by_topic"]}
    assert by_topic["health"] == {**share_estimate(4, 5), "left_out": {"in_flight": 0, "not_asked": 0, "failed": 1}}
    assert by_topic["food-dining"] == {
        **share_estimate(2, 3),
        "left_out": {"in_flight": 0, "not_asked": 0, "failed": 0},
    }
    llm_filter = next(row for row in progress["funnel"] if row["stage"] == "llm_filter")
    assert llm_filter["pass_rate"] == share_estimate(6, 8) and llm_filter["undecided"] == 1


def test_the_run_page_api_and_command_show_the_same_yield(mined, researcher_client, capsys):
    expected = mining_run_progress(mined)["totals"]["yield"]
    html = researcher_client.get(f"/mining/runs/{mined.pk}/").content.decode()
    cell = _captured(r'id="total-yield">(.*?)</td>', html)
    assert _shown_share(cell) == _expected_shown(6, 8)
    assert "decided documents" in cell and "left out: 0 in flight, 1 failed" in cell
    health = _captured(r'class="num topic-yield" data-topic="health">(.*?)</td>', html)
    assert _shown_share(health) == _expected_shown(4, 5)
    stage = _captured(r'class="num stage-pass-rate" data-stage="llm_filter">(.*?)</td>', html)
    assert _shown_share(stage) == _expected_shown(6, 8) and "1 undecided left out" in stage
    assert "Yield = procedures / decided documents" in html

    roundtrip = json.loads(json.dumps(expected))
    listing = researcher_client.get("/api/mining/runs/").json()
    row = listing["results"][0] if isinstance(listing, dict) else listing[0]
    assert row["yield"] == roundtrip
    assert researcher_client.get(f"/api/mining/runs/{mined.pk}/").json()["yield"] == roundtrip
    status = _command_json(capsys, "mine_run", "--status", "rates-run")
    assert status["totals"]["yield"] == roundtrip


# -- CoScript kept rates ----------------------------------------------------------------


def test_kept_rates_per_constraint_type_carry_n_and_wilson_intervals_everywhere(run, researcher_client, capsys):
    report = run.report["filter"]
    html = researcher_client.get(f"/coscript/runs/{run.pk}/").content.decode()
    table = _captured(r'<table class="table" id="kept-rates">(.*?)</table>', html)
    for constraint_type, row in [*report["by_type"].items(), ("all", report["total"])]:
        cells = _captured(rf'data-type="{constraint_type}">(.*?)</tr>', table)
        kept_cell = _captured(r'kept-rate">(.*?)</t[dh]>', cells)
        assert _shown_share(kept_cell) == _expected_shown(row["kept"], row["candidates"])
        goal_cell = _captured(r'goal-rate">(.*?)</t[dh]>', cells)
        assert _shown_share(goal_cell) == _expected_shown(row["goals_with_script"], row["goals"])

    total = report["total"]
    expected_total = list(_wilson(total["kept"], total["candidates"]))
    listing = researcher_client.get("/api/coscript/runs/").json()["results"][0]
    assert listing["kept_rate_ci95"] == pytest.approx(expected_total) and listing["kept_rate_n"] == total["candidates"]
    detail = researcher_client.get(f"/api/coscript/runs/{run.pk}/").json()["report"]["filter"]
    for constraint_type, row in report["by_type"].items():
        shown = detail["by_type"][constraint_type]
        assert shown["kept_rate_ci95"] == pytest.approx(list(_wilson(row["kept"], row["candidates"])))
        assert shown["goal_rate_ci95"] == pytest.approx(list(_wilson(row["goals_with_script"], row["goals"])))
    assert detail["total"]["kept_rate_ci95"] == pytest.approx(expected_total)

    status = _command_json(capsys, "coscript_run", "status", run.name)
    assert status["report"]["filter"] == detail
    index = researcher_client.get("/coscript/").content.decode()
    row_html = _captured(rf'{run.name}</a>.*?class="num kept-rate">(.*?)</td>', index)
    assert _shown_share(row_html) == _expected_shown(total["kept"], total["candidates"])


# -- How2Score of the constrained slice -----------------------------------------------------


@pytest.fixture
def constrained_slice(db):
    """Twelve constrained procedures, four per type. "complete-model" is judged on all of
    them (modifier and method pass, intent fails); "few-model" passes the one intent
    procedure it has a usable verdict for, and two of its answers were unusable."""
    topic, _ = Topic.objects.get_or_create(name="Health", defaults={"slug": "health"})
    procedures = {
        t: [
            Procedure.objects.create(
                topic=topic,
                goal=f"{t} goal {i}",
                steps=["a", "b"],
                split=Split.CONSTRAINED,
                source_example_id=f"{t}-{i}",
                provenance={"constraint_type": t},
            )
            for i in range(4)
        ]
        for t in ("modifier", "method", "intent")
    }
    for constraint_type, items in procedures.items():
        for procedure in items:
            generation = Generation.objects.create(procedure=procedure, model="complete-model", predicted_steps=["x"])
            Judgment.objects.create(generation=generation, judge="how2judge", has_failure=constraint_type == "intent")
    few = [
        Generation.objects.create(procedure=procedures["intent"][i], model="few-model", predicted_steps=["x"])
        for i in range(3)
    ]
    Judgment.objects.create(generation=few[0], judge="how2judge", has_failure=False)
    for generation in few[1:]:
        Judgment.objects.create(generation=generation, judge="how2judge", has_failure=None, outcome="parse_failed")
    return procedures


def test_the_constrained_slice_never_ranks_a_barely_covered_model_above_a_complete_one(
    constrained_slice, researcher_client
):
    rows = constrained_how2score()
    assert [(r["model"], r["rank"], r["complete"]) for r in rows] == [
        ("complete-model", 1, True),
        ("few-model", None, False),
    ]
    complete, few = rows
    # Each score is judging's estimate: n judged, unusable, coverage and the Wilson interval.
    fields = ("how2score", "how2score_percent", "ci95", "ci95_percent", "n_judged", "n_unusable", "coverage")
    assert {k: complete[k] for k in fields} == {
        k: how2score_estimate(8, 12, n_items=12, n_items_judged=12)[k] for k in fields
    }
    assert (few["how2score"], few["how2score_percent"], few["n_judged"], few["n_unusable"]) == (1.0, 100.0, 1, 2)
    assert few["coverage"] == pytest.approx(1 / 12)
    intent = {c["constraint_type"]: c for c in few["by_type"]}["intent"]
    assert intent == {
        "constraint_type": "intent",
        **how2score_estimate(1, 1, n_unusable=2, n_items=4, n_items_judged=1),
        "complete": False,
    }
    modifier = {c["constraint_type"]: c for c in complete["by_type"]}["modifier"]
    assert (
        modifier["how2score"] == 1.0 and modifier["ci95"] == how2score_estimate(4, 4)["ci95"] and modifier["complete"]
    )
    # The same numbers as the constrained leaderboard over all judged items.
    board = {r["model"]: r for r in leaderboard_ranking("how2judge", Split.CONSTRAINED, basis="all")["rows"]}
    for row in rows:
        assert row["ci95"] == board[row["model"]]["all_items"]["ci95"]
        assert row["coverage"] == board[row["model"]]["all_items"]["coverage"]

    html = researcher_client.get("/coscript/").content.decode()
    table = _captured(r'id="constrained-how2score">(.*?)</table>', html)
    assert table.index('data-model="complete-model"') < table.index('data-model="few-model"')
    few_row = _captured(r'data-model="few-model" class="incomplete">(.*?)</tr>', table)
    assert "incomplete" in few_row and "1 judged · 2 unusable" in few_row and "coverage 1 / 12" in few_row
    intent_cell = _captured(r'data-type="intent" class="incomplete">(.*?)</td>', few_row)
    low, high = intent["ci95_percent"]  # pages show the 0-100 forms
    assert f"[{low:.1f}–{high:.1f}]" in intent_cell and "coverage 1 / 4" in intent_cell


# -- goal-step accuracy -----------------------------------------------------------------


def _truncating(body):
    """The goal-step scripted model, except that its answer to "Keep a cat calm" runs out of
    tokens (finish_reason length): a call without a usable completion."""
    prompt = next(p for p in ANSWERS if p in last_user_message(body))
    return Reply("B", finish_reason="length") if prompt == "Keep a cat calm" else Reply(ANSWERS[prompt])


def test_goal_step_accuracy_leaves_out_calls_without_a_usable_answer_and_says_so(
    task_set, server, researcher_client, capsys
):
    server.default = _truncating  # the scripted server of the generate role
    scripted_model = language_model_register(name="scripted-model")
    evaluation = task_evaluation_create(task_set=task_set, language_model=scripted_model, start=False)
    task_evaluation_execute(evaluation_id=evaluation.pk)
    evaluation.refresh_from_db()
    assert evaluation.predictions.get(item__prompt="Keep a cat calm").outcome == "truncated"
    result = task_evaluation_accuracy(evaluation)
    # The truncated call is no answer and the unparseable one is not scored: 2 correct of 2
    # readable (3 answered, not 4), 1 unusable left out.
    assert (result["correct"], result["readable"], result["answered"], result["unparseable"]) == (2, 2, 3, 1)
    assert result["accuracy"] == pytest.approx(1.0) and result["ci95"] == pytest.approx(list(_wilson(2, 2)))
    assert (result["n_unusable"], result["unusable"], result["n_unanswered"]) == (1, {"truncated": 1}, 0)
    assert result["by_topic"]["Home & Hobbies"]["ci95"] == pytest.approx(list(_wilson(1, 1)))

    html = researcher_client.get(reverse("goalstep_leaderboard", args=["step_inference"])).content.decode()
    row = _captured(r"<tr><td>1</td><td>scripted-model</td>(.*?)</tr>", html)
    low, high = _wilson(2, 2)
    assert f"{low:.3f}–{high:.3f}" in row and '<td class="num unusable" title="truncated 1 ">1' in row
    assert "Left out and counted" in html
    [board_row] = leaderboard("step_inference")["rows"]
    assert board_row["ci95"] == result["ci95"] and board_row["n_unusable"] == 1

    capsys.readouterr()
    # the truncated call: the evaluation is done_with_failures, and the command says so and fails
    with pytest.raises(CommandError, match="ended done_with_failures, not done"):
        call_command("goalstep_evaluate", "--task-set", str(task_set.pk), "--model", "scripted-model")
    out = capsys.readouterr().out
    assert "finished: done_with_failures; 1 of 4 requests failed (truncated 1)\n" in out
    assert f"accuracy 1.000 (95% Wilson {low:.3f}–{high:.3f}) = 2 / 2 readable of 3 answered" in out
    assert "left out: 1 unusable (truncated 1), 0 unanswered" in out
