"""Every How2Score carries n_judged, n_unusable, coverage and a 95 % interval: the pure
intervals (Wilson, paired bootstrap, rank-correlation bootstrap) on hand-computed cases, and
the score of a judge run, `bench_run status` and `bench_aggregate`."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from core.intervals import paired_bootstrap_difference, wilson_interval
from judging.coverage import paired_comparison, ranking
from judging.how2score import How2ScoreTally, how2score_estimate
from judging.models import GenerationRun, JudgeRun, Judgment, LanguageModel
from judging.rankings import rank_correlation_intervals
from judging.selectors import judge_run_score
from tests.judged_world import judge_model, procedures

# ---------------------------------------------------------------------------------------
# Wilson score interval
# ---------------------------------------------------------------------------------------


def test_wilson_interval_matches_hand_computed_values():
    # 1 of 2: centre (0.5 + z²/4) / (1 + z²/2) = 0.5, half-width 0.4055 -> [0.0945, 0.9055].
    interval = wilson_interval(1, 2)
    assert interval is not None
    low, high = interval
    assert low == pytest.approx(0.094531, abs=1e-6) and high == pytest.approx(0.905469, abs=1e-6)
    # 0 of 10: the upper bound is z² / (n + z²) = 3.8415 / 13.8415 = 0.2775.
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.277533, abs=1e-6))
    assert wilson_interval(0, 0) is None


def test_three_passes_of_three_is_not_certain():
    # The defect: 3 usable verdicts shown as a bare 100.0. Wilson gives [43.9, 100].
    estimate = how2score_estimate(3, 3, n_unusable=14, n_items=17, n_items_judged=3)
    assert estimate["how2score"] == 1.0 and estimate["how2score_percent"] == 100.0
    assert estimate["ci95"][0] == pytest.approx(0.4385, abs=1e-4) and estimate["ci95"][1] == 1.0
    assert estimate["ci95_percent"][0] == pytest.approx(43.85, abs=0.01) and estimate["ci95_percent"][1] == 100.0
    assert (estimate["n_judged"], estimate["n_unusable"], estimate["interval"]) == (3, 14, "wilson")
    assert estimate["coverage"] == pytest.approx(3 / 17)


def test_wilson_interval_rejects_impossible_counts():
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_tally_counts_unusable_answers_and_coverage_by_item():
    tally = How2ScoreTally()
    for item, label in [("p1", False), ("p1", True), ("p2", None), ("p3", False)]:
        tally.add("Health", label, item=item)
    result = tally.result(n_items=4)
    assert result["how2score"] == pytest.approx(2 / 3) and result["how2score_percent"] == pytest.approx(100 * 2 / 3)
    assert (result["n_judged"], result["n_unusable"], result["n_items"], result["n_items_judged"]) == (3, 1, 4, 2)
    assert result["coverage"] == pytest.approx(0.5)
    assert result["by_topic"]["Health"]["ci95"] == pytest.approx(how2score_estimate(2, 3)["ci95"])


# ---------------------------------------------------------------------------------------
# Paired bootstrap over items
# ---------------------------------------------------------------------------------------


def test_paired_bootstrap_of_a_model_that_always_wins_shows_no_zero_width_interval():
    # Every resample gives 100: the interval would be [100, 100]; it is null with the reason.
    a = [(1, 1)] * 10
    b = [(0, 1)] * 10
    result = paired_bootstrap_difference(a, b)
    assert result["difference"] == 100.0 and result["ci95"] is None and result["n_items"] == 10
    assert result["interval_reason"].startswith("interval not estimable (n = 10)")
    assert "share_a_better" not in result and result["approximate"] is True


def test_paired_bootstrap_is_seeded_and_pairs_the_items():
    # A and B fail on the same hard items; A also passes 3 items B fails. Pairing cancels
    # the shared hard items: the interval stays above 0.
    a = [(1, 1)] * 13 + [(0, 1)] * 7
    b = [(1, 1)] * 10 + [(0, 1)] * 10
    first = paired_bootstrap_difference(a, b, resamples=2000, seed=7)
    assert first == paired_bootstrap_difference(a, b, resamples=2000, seed=7)
    assert first["difference"] == pytest.approx(15.0)
    # Unpaired, 65 vs 50 of 20 would give an interval around 0 of about ±30; paired, A never
    # loses an item, so no resample has A below B. BCa stretches the skewed upper end (3
    # discordant items of 20: the upper bound is 8 of them, about Wilson's 36 % for 3 of 20).
    assert 0 <= first["ci95"][0] < 15 < first["ci95"][1] <= 40 + 1e-9
    assert first["interval"] == "paired bootstrap over items" and "BCa" in first["interval_name"]


def test_paired_bootstrap_without_common_items_has_no_difference():
    result = paired_bootstrap_difference([], [])
    assert result["difference"] is None and result["ci95"] is None and result["n_items"] == 0


def test_paired_comparison_uses_only_items_both_models_have_a_usable_verdict_for():
    a = {"p1": (1, 1, 0), "p2": (1, 1, 0), "p3": (0, 0, 1), "p4": (1, 1, 0)}
    b = {"p1": (0, 1, 0), "p2": (1, 1, 0), "p3": (1, 1, 0)}
    result = paired_comparison(a, b)
    assert result["n_items"] == 2  # p1 and p2: p3 unusable for A, p4 not judged for B
    assert result["a"]["how2score"] == 1.0 and result["b"]["how2score"] == 0.5
    assert result["a"]["how2score_percent"] == 100.0 and result["b"]["how2score_percent"] == 50.0
    assert result["difference"] == pytest.approx(0.5) and result["difference_percent"] == pytest.approx(50.0)
    # One generation per item: Newcombe's paired interval and exact McNemar (1 discordant).
    assert result["interval"] == "newcombe paired score" and result["test"] == "exact McNemar"
    assert (result["a_only"], result["b_only"], result["p_value"]) == (1, 0, 1.0)


# ---------------------------------------------------------------------------------------
# Rank correlations
# ---------------------------------------------------------------------------------------


def test_rank_correlation_intervals_of_two_identical_judges_are_not_estimable():
    passes = [[1, 1, 1, 1, 0, 1], [1, 0, 1, 0, 0, 1], [0, 0, 0, 1, 0, 0]]
    judged = [[1] * 6] * 3
    result = rank_correlation_intervals((passes, judged), (passes, judged), resamples=300, seed=1)
    # Every resample gives 1: no zero-width [1, 1] interval, the reason instead.
    assert result["kendall_tau_ci95"] is None and result["spearman_ci95"] is None
    assert result["kendall_tau_reason"].startswith("interval not estimable (n = 6)")
    assert result["n_items"] == 6 and result["interval"] == "bootstrap over items"


def test_rank_correlation_intervals_of_disagreeing_judges_span_less_than_one():
    x = [[1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]]
    y = [[1, 0, 0, 0, 0, 0, 0, 1], [1, 1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 0, 0]]
    judged = [[1] * 8] * 3
    result = rank_correlation_intervals((x, judged), (y, judged), resamples=500, seed=0)
    low, high = result["kendall_tau_ci95"]
    assert -1.0 <= low <= high < 1.0


def test_ranking_rule_ranks_complete_models_over_their_common_items():
    full = {f"p{i}": (1, 1, 0) for i in range(20)}
    nearly = {**{f"p{i}": (0, 1, 0) for i in range(19)}, "p19": (0, 0, 1)}  # 19 of 20: 95 %
    few = {"p0": (1, 1, 0), "p1": (1, 1, 0), "p2": (1, 1, 0)}
    result = ranking({"full": full, "nearly": nearly, "few": few}, n_items=20, min_coverage=0.95)
    assert result["order"] == ["full", "nearly", "few"]
    assert result["n_common_items"] == 19 and result["n_complete"] == 2
    assert result["models"]["full"]["shown"]["n_judged"] == 19  # p19 left out: "nearly" has no verdict for it
    assert result["models"]["few"]["rank"] is None and result["models"]["few"]["scored_on"] == "own"


# ---------------------------------------------------------------------------------------
# Judge runs, bench_run status and bench_aggregate
# ---------------------------------------------------------------------------------------


@pytest.fixture
def judged_run(db):
    items = procedures(5)
    model = LanguageModel.objects.create(name="m1")
    generation_run = GenerationRun.objects.create(
        name="g1",
        language_model=model,
        prompt_file="p",
        prompt_hash="h",
        procedure_ids=[p.pk for p in items],
        status="done",
    )
    judge_run = JudgeRun.objects.create(
        name="j1", generation_run=generation_run, judge="how2judge", prompt_file="p", prompt_hash="h", status="done"
    )
    judge_model("m1", items[:4], [False, True, False, None])
    from judging.models import Generation

    Generation.objects.filter(model="m1").update(run=generation_run)
    Judgment.objects.update(run=judge_run)
    return judge_run


def test_judge_run_score_carries_interval_unusable_and_coverage_of_the_run(judged_run):
    score = judge_run_score(judged_run)
    # 4 of 5 procedures have a generation judged; 3 usable verdicts, 2 without failure.
    assert score["how2score"] == pytest.approx(2 / 3) and score["how2score_percent"] == pytest.approx(100 * 2 / 3)
    assert (score["n_judged"], score["n_unusable"], score["n_items"], score["n_items_judged"]) == (3, 1, 5, 3)
    assert score["coverage"] == pytest.approx(0.6)
    assert score["ci95"] == pytest.approx(how2score_estimate(2, 3)["ci95"]) and score["interval"] == "wilson"


def test_bench_run_status_prints_the_score_with_interval_and_coverage(judged_run):
    out = io.StringIO()
    call_command("bench_run", "status", "j1", stdout=out)
    printed = json.loads(out.getvalue())["how2score"]
    assert printed["n_judged"] == 3 and printed["n_unusable"] == 1 and printed["coverage"] == pytest.approx(0.6)
    assert printed["ci95"] == pytest.approx(how2score_estimate(2, 3)["ci95"])


def test_bench_aggregate_prints_interval_and_coverage_by_source_example(tmp_path):
    lines = [
        {"source_example_id": "1", "topic": "Health", "has_failure": False},
        {"source_example_id": "1", "topic": "Health", "has_failure": True},
        {"source_example_id": "2", "topic": "Health", "judge_completion": "no JSON here"},
        {"source_example_id": "3", "topic": "Health", "has_failure": False},
    ]
    path = tmp_path / "j.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    out = io.StringIO()
    call_command("bench_aggregate", "--judgments", str(path), stdout=out, stderr=io.StringIO())
    result = json.loads(out.getvalue())
    assert result["how2score_percent"] == pytest.approx(100 * 2 / 3) and result["ci95"] == pytest.approx(
        how2score_estimate(2, 3)["ci95"]
    )
    # Items are source_example_ids: 1 and 3 of 3 have a usable verdict.
    assert (result["n_judged"], result["n_unusable"], result["n_items"], result["n_items_judged"]) == (3, 1, 3, 2)
    assert result["coverage"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("n", [1, 3, 6, 7, 10, 30, 49, 1000])
def test_wilson_bounds_at_none_and_all_are_exact_not_float_noise(n):
    from core.intervals import wilson_interval

    none, every = wilson_interval(0, n), wilson_interval(n, n)
    assert none is not None and every is not None
    assert none[0] == 0.0 and 0 < none[1] < 1
    assert every[1] == 1.0 and 0 < every[0] < 1
