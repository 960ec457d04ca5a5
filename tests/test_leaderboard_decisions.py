"""Decisions on the leaderboard hold: "A is better than B" only when the exact paired test
(McNemar, or a sign test when an item holds several generations) says so at 5 % after Holm's
correction over every pair the leaderboard offers; ties share a rank and every rank carries
the interval of ranks its score interval allows; a model's coverage is counted against what
it generated (its generation runs' procedures, or How2Bench for imported generations), never
against what happened to be judged; cross-judge rankings use the items every judge judged."""

from __future__ import annotations

import pytest
from django.urls import reverse

from core.intervals import mcnemar_exact, newcombe_paired_interval
from judging.coverage import paired_comparison, ranking
from judging.cross_judge_selectors import cross_judge_rankings
from judging.leaderboard_selectors import leaderboard_ranking, model_comparison
from judging.models import Generation, GenerationRun, Judgment, LanguageModel
from judging.rankings import rank_correlation_intervals
from tests.judged_world import judge_model, procedures

# ---------------------------------------------------------------------------------------
# Paired comparisons: exact test, Newcombe interval, Holm
# ---------------------------------------------------------------------------------------


@pytest.fixture
def five_procedures(db):
    """The issue's case: 5 procedures, m-good passes all, m-mid passes 2: 3 discordant pairs
    all one way (exact McNemar p = 0.25)."""
    items = procedures(5)
    judge_model("m-good", items, [False] * 5)
    judge_model("m-mid", items, [False] * 2 + [True] * 3)
    return items


def test_three_discordant_pairs_of_five_are_not_called_better(researcher_client, five_procedures):
    comparison = model_comparison("how2judge", "m-good", "m-mid")
    assert comparison["p_value"] == pytest.approx(0.25)
    assert comparison["test"] == "exact McNemar" and (comparison["a_only"], comparison["b_only"]) == (3, 0)
    assert comparison["decision"] is None
    html = researcher_client.get(
        reverse("leaderboard"), {"judge": "how2judge", "a": "m-good", "b": "m-mid"}
    ).content.decode()
    assert "is better than" not in html
    assert "p = 0.25" in html and "exact McNemar" in html


def test_compare_gives_newcombe_interval_mcnemar_p_and_holm_over_the_offered_pairs(researcher_client, five_procedures):
    judge_model("m-bad", five_procedures, [True] * 5)
    body = researcher_client.get("/api/leaderboard/compare", {"judge": "how2judge", "a": "m-good", "b": "m-mid"}).json()
    assert body["ci95"] == pytest.approx(newcombe_paired_interval(2, 3, 0, 0))
    assert body["ci95_percent"] == pytest.approx([100 * x for x in body["ci95"]])
    assert body["interval"] == "newcombe paired score" and "Newcombe" in body["interval_name"]
    assert body["ci95"][0] < body["ci95"][1]
    # Three models: three pairs offered. good vs bad (5 discordant) p = 0.0625, good vs mid
    # 0.25, mid vs bad (2 discordant) 0.5; Holm: 0.1875, 0.5, 0.5.
    assert body["n_comparisons"] == 3 and body["p_value"] == pytest.approx(0.25)
    assert body["p_adjusted"] == pytest.approx(0.5) and body["p_adjustment"] == "Holm"
    assert "share_a_better" not in body and "share_b_better" not in body
    good_bad = model_comparison("how2judge", "m-good", "m-bad")
    assert good_bad["p_value"] == pytest.approx(mcnemar_exact(5, 0)) and good_bad["p_adjusted"] == pytest.approx(
        3 * 0.0625
    )
    assert good_bad["decision"] is None  # 5 procedures can never decide at 5 % after Holm over 3 pairs


def test_a_clear_difference_is_called_better_after_holm(researcher_client, db):
    items = procedures(30)
    judge_model("strong", items, [False] * 30)
    judge_model("weak", items, [False] * 10 + [True] * 20)
    comparison = model_comparison("how2judge", "weak", "strong")
    assert comparison["b_only"] == 20 and comparison["p_adjusted"] < 0.05 and comparison["decision"] == "b"
    html = researcher_client.get(
        reverse("leaderboard"), {"judge": "how2judge", "a": "weak", "b": "strong"}
    ).content.decode()
    assert "<strong>strong is better than weak</strong>" in html and "Holm" in html
    assert (
        "Of the 1 pair of models this form offers, <strong>strong is better than weak</strong> (adjusted p &lt; 0.0001)"
        in html
    )


def test_several_generations_per_item_use_a_sign_test_and_a_bca_interval():
    # A passes 2 of 2 generations on 6 items, B 1 of 2: A ahead on all 6 items.
    a = {f"p{i}": (2, 2, 0) for i in range(6)}
    b = {f"p{i}": (1, 2, 0) for i in range(6)}
    result = paired_comparison(a, b, resamples=500, seed=0)
    assert result["test"] == "exact sign test" and result["p_value"] == pytest.approx(2 / 2**6)
    assert result["interval"] == "paired bootstrap over items" and result["approximate"] is True
    # Every resample gives 0.5: no interval, and the reason says so (never [0.5, 0.5]).
    assert result["ci95"] is None and result["interval_reason"].startswith("interval not estimable (n = 6)")


def test_identical_models_never_get_a_zero_width_interval():
    a = {f"p{i}": (1, 1, 0) for i in range(8)}
    result = paired_comparison(a, dict(a))
    assert result["difference"] == 0.0 and result["p_value"] == 1.0
    low, high = result["ci95"]
    assert low < 0 < high


# ---------------------------------------------------------------------------------------
# Ties and rank intervals
# ---------------------------------------------------------------------------------------


def test_tied_scores_share_a_rank_and_are_marked(researcher_client, db):
    items = procedures(20)
    judge_model("alpha", items, [False] * 18 + [True] * 2)
    judge_model("zeta", items, [False] * 12 + [True] * 8)
    judge_model("beta", items, [False] * 12 + [True] * 8)
    judge_model("gamma", items, [False] * 4 + [True] * 16)
    board = leaderboard_ranking("how2judge")
    ranks = {r["model"]: (r["rank"], r["tied"]) for r in board["rows"]}
    assert ranks == {"alpha": (1, False), "beta": (2, True), "zeta": (2, True), "gamma": (4, False)}
    body = researcher_client.get("/api/leaderboard", {"judge": "how2judge"}).json()
    assert {r["model"]: r["rank"] for r in body["rows"]}["zeta"] == 2
    assert {r["model"]: r["tied"] for r in body["rows"]}["zeta"] is True
    html = researcher_client.get(reverse("leaderboard"), {"judge": "how2judge"}).content.decode()
    assert "2=" in html


def test_every_ranked_model_gets_the_ranks_its_interval_allows():
    def counts(passes, n):
        return {f"p{i}": (1 if i < passes else 0, 1, 0) for i in range(n)}

    models = {"a": counts(19, 20), "b": counts(17, 20), "c": counts(16, 20), "d": counts(2, 20)}
    result = ranking(models, n_items=20, min_coverage=0.95)
    rows = result["models"]
    intervals = {m: rows[m]["shown"]["ci95"] for m in models}
    for model in models:
        low, high = intervals[model]
        best = 1 + sum(1 for o in models if o != model and intervals[o][0] > high)
        worst = 1 + sum(1 for o in models if o != model and intervals[o][1] > low)
        assert rows[model]["rank_interval"] == [best, worst]
    assert rows["a"]["rank_interval"] == [1, 3] and rows["d"]["rank_interval"] == [4, 4]


def test_the_leaderboard_page_shows_rank_intervals(researcher_client, db):
    items = procedures(20)
    judge_model("a", items, [False] * 19 + [True])
    judge_model("b", items, [False] * 17 + [True] * 3)
    judge_model("d", items, [False] * 2 + [True] * 18)
    body = researcher_client.get("/api/leaderboard", {"judge": "how2judge"}).json()
    assert {r["model"]: r["rank_interval"] for r in body["rows"]} == {"a": [1, 2], "b": [1, 2], "d": [3, 3]}
    html = researcher_client.get(reverse("leaderboard"), {"judge": "how2judge"}).content.decode()
    assert "1–2" in html


# ---------------------------------------------------------------------------------------
# Coverage against what should have been judged
# ---------------------------------------------------------------------------------------


def _generation_run(name: str, items, model: str) -> GenerationRun:
    language_model, _ = LanguageModel.objects.get_or_create(name=model)
    run = GenerationRun.objects.create(
        name=name,
        language_model=language_model,
        prompt_file="p",
        prompt_hash="h",
        procedure_ids=[p.pk for p in items],
        status="done",
    )
    for procedure in items:
        Generation.objects.create(procedure=procedure, model=model, run=run, predicted_steps=["a", "b", "c"])
    return run


def _judge(model: str, items, verdicts, judge: str = "how2judge") -> None:
    for procedure, verdict in zip(items, verdicts):
        generation = Generation.objects.get(model=model, procedure=procedure)
        Judgment.objects.create(generation=generation, judge=judge, has_failure=verdict, outcome="ok")


@pytest.fixture
def half_judged(db):
    """The issue's case: m-half generated 60 procedures in its run; the judge (imported
    judgments, no judge run) judged 30 of them, all without failure. m-full generated and was
    judged on those 30 only (its run asked for 30)."""
    items = procedures(60)
    _generation_run("half", items, "m-half")
    _judge("m-half", items[:30], [False] * 30)
    _generation_run("full", items[:30], "m-full")
    _judge("m-full", items[:30], [False] * 20 + [True] * 10)
    return items


def test_coverage_is_judged_items_over_the_generation_runs_procedures(researcher_client, half_judged):
    board = leaderboard_ranking("how2judge", "bench")
    half = next(r for r in board["rows"] if r["model"] == "m-half")
    assert half["coverage"] == 0.5 and (half["n_items_judged"], half["n_items"]) == (30, 60)
    assert half["complete"] is False and half["rank"] is None
    full = next(r for r in board["rows"] if r["model"] == "m-full")
    assert full["coverage"] == 1.0 and full["rank"] == 1
    body = researcher_client.get("/api/leaderboard", {"judge": "how2judge"}).json()
    assert {r["model"]: r["coverage"] for r in body["rows"]} == {"m-full": 1.0, "m-half": 0.5}


def test_imported_generations_without_a_run_are_counted_against_how2bench(db):
    # How2Bench holds 10 procedures; the imported judgments cover 4 (before: 4 of 4, "complete").
    items = procedures(10)
    judge_model("imported", items[:4], [False] * 4)
    procedures(3, split="train", prefix="train")  # another split's procedures are not expected
    board = leaderboard_ranking("how2judge")
    [imported] = board["rows"]
    assert imported["coverage"] == pytest.approx(0.4) and imported["n_items"] == 10
    assert imported["complete"] is False and imported["rank"] is None


# ---------------------------------------------------------------------------------------
# Cross-judge: the items every judge judged, complete models only in tau
# ---------------------------------------------------------------------------------------


def test_cross_judge_uses_the_items_every_judge_judged_and_leaves_incomplete_models_out(researcher_client, db):
    items = procedures(40)
    for judge in ("j1", "j2"):
        judge_model("strong", items, [False] * 36 + [True] * 4, judge=judge)
        judge_model("mid", items, [False] * 24 + [True] * 16, judge=judge)
    judge_model("weak", items, [False] * 10 + [True] * 30, judge="j1")
    # j2 failed on half of weak's procedures: weak is incomplete under j2 (coverage 0.5).
    judge_model("weak", items, [False] * 10 + [True] * 10 + [None] * 20, judge="j2")
    # j2 also failed on strong's last two procedures (coverage 0.95, still complete): those
    # two items are left out for every model and judge.
    Judgment.objects.filter(judge="j2", generation__model="strong", generation__procedure__in=items[38:]).update(
        outcome="parse_failed", has_failure=None
    )
    rankings = cross_judge_rankings(["j1", "j2"])
    assert rankings["n_common_items"] == 38 and rankings["complete_models"] == ["mid", "strong"]
    assert rankings["incomplete_models"] == ["weak"] and rankings["left_out"] == {"weak": ["j2"]}
    [pair] = rankings["pairs"]
    assert pair["n_models"] == 2 and pair["n_items"] == 38
    strong_j1 = rankings["common_estimates"]["j1"]["strong"]
    assert strong_j1["n_judged"] == 38 and strong_j1["how2score"] == 36 / 38
    assert rankings["ranks"]["j1"] == {"strong": {"rank": 1, "tied": False}, "mid": {"rank": 2, "tied": False}}
    # Before, each judge scored strong on its own usable items (40 under j1, 38 under j2).
    assert rankings["estimates"]["j1"]["strong"]["n_judged"] == 40
    html = researcher_client.get(reverse("cross_judge")).content.decode()
    assert "38 procedures" in html and "left out" in html and "weak" in html


def test_rank_correlation_of_identical_judges_is_not_a_zero_width_interval():
    passes = [[1, 1, 1, 1, 0, 1], [1, 0, 1, 0, 0, 1], [0, 0, 0, 1, 0, 0]]
    judged = [[1] * 6] * 3
    result = rank_correlation_intervals((passes, judged), (passes, judged), resamples=300, seed=1)
    assert result["kendall_tau_ci95"] is None and result["spearman_ci95"] is None
    assert result["kendall_tau_reason"].startswith("interval not estimable (n = 6)")
    assert result["interval"] == "bootstrap over items" and result["approximate"] is True


def test_the_leaderboard_gives_every_pair_with_holm_over_all_of_them(researcher_client, five_procedures):
    judge_model("m-bad", five_procedures, [True] * 5)
    body = researcher_client.get("/api/leaderboard", {"judge": "how2judge"}).json()
    assert body["n_comparisons"] == 3 and body["n_decided"] == 0
    pairs = {(p["model_a"], p["model_b"]): p for p in body["pairwise"]}
    assert set(pairs) == {("m-bad", "m-good"), ("m-bad", "m-mid"), ("m-good", "m-mid")}
    good_mid = pairs[("m-good", "m-mid")]
    assert good_mid["p_value"] == pytest.approx(0.25) and good_mid["p_adjusted"] == pytest.approx(0.5)
    assert good_mid["difference"] == pytest.approx(0.6) and good_mid["difference_percent"] == pytest.approx(60.0)
    assert good_mid["decision"] is None
    # The same adjusted p as the compare API gives for that pair.
    compare = researcher_client.get("/api/leaderboard/compare", {"judge": "how2judge", "a": "m-good", "b": "m-mid"})
    assert compare.json()["p_adjusted"] == good_mid["p_adjusted"]
    html = researcher_client.get(reverse("leaderboard"), {"judge": "how2judge"}).content.decode()
    assert "Of the 3 pairs of models this form offers, no pair differs at 5 % after Holm" in html


def test_the_leaderboard_family_gives_each_pair_the_same_test_as_the_compare():
    # pairwise_tests computes the usual design on arrays; it must agree with paired_test,
    # and fall back to it where an item holds several generations.
    import random

    from judging.coverage import paired_test, pairwise_tests

    rng = random.Random(3)
    models = {}
    for m in range(5):
        cells = {}
        for item in range(40):
            if rng.random() < 0.15:
                continue  # not judged
            judged = 2 if m == 4 and item % 3 == 0 else (0 if rng.random() < 0.1 else 1)
            cells[f"p{item}"] = (sum(rng.random() < 0.6 for _ in range(judged)), judged, int(judged == 0))
        models[f"m{m}"] = cells
    family = pairwise_tests(models)
    for (a, b), test in family.items():
        expected = paired_test(models[a], models[b])
        assert {k: test[k] for k in expected} == expected
    assert family[("m0", "m4")]["test"] == "exact sign test" and family[("m0", "m1")]["test"] == "exact McNemar"
