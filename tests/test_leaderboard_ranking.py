"""The leaderboard compares like with like: complete models are ranked over the procedures
every one of them has a usable verdict for, a model below the coverage threshold is marked
and never ranked above complete ones, every row carries its interval and coverage, and any
two models are compared on their common procedures with a paired interval and an exact test
(page and API). Cross-judge rank correlations carry bootstrap intervals."""

from __future__ import annotations

import pytest
from django.urls import reverse

from judging.cross_judge_selectors import cross_judge_rankings
from judging.leaderboard_selectors import leaderboard_ranking, model_comparison
from tests.judged_world import judge_model, procedures

pytestmark = pytest.mark.django_db


@pytest.fixture
def issue_world(db):
    """As reported: a model judged on 3 of its 17 generations (14 unusable) and a model judged
    on 23 generations of other procedures."""
    few = procedures(17, prefix="few")
    other = procedures(23, prefix="other")
    judge_model("few-judged", few, [False] * 3 + [None] * 14)
    judge_model("broad", other, [False] * 18 + [True] * 5)


@pytest.fixture
def bench_world(db):
    """Two models judged on all 23 procedures of How2Bench, and the 3-of-17 model on 17 of them."""
    items = procedures(23)
    judge_model("strong", items, [False] * 20 + [True] * 3)
    judge_model("weak", items, [False] * 12 + [True] * 11)
    judge_model("few-judged", items[:17], [False] * 3 + [None] * 14)
    return items


def _row(board, model):
    return next(r for r in board["rows"] if r["model"] == model)


def test_three_usable_judgments_of_seventeen_no_longer_top_the_leaderboard(issue_world):
    board = leaderboard_ranking("how2judge")
    few = _row(board, "few-judged")
    assert board["rows"][0]["model"] != "few-judged"
    assert few["rank"] is None and few["complete"] is False
    assert (few["n_judged"], few["n_unusable"], few["n_items"], few["n_items_judged"]) == (3, 14, 40, 3)
    assert few["coverage"] == pytest.approx(3 / 40)
    assert few["ci95"][0] == pytest.approx(0.4385, abs=1e-4)  # 3 of 3 is not a certain 100 %
    assert few["ci95_percent"][0] == pytest.approx(43.85, abs=0.01)
    # Neither model covers 95 % of the 40 procedures: nothing is ranked.
    assert board["n_complete"] == 0 and all(r["rank"] is None for r in board["rows"])


def test_complete_models_are_ranked_over_common_items_and_the_incomplete_one_below(bench_world):
    board = leaderboard_ranking("how2judge")
    assert [r["model"] for r in board["rows"]] == ["strong", "weak", "few-judged"]
    assert [r["rank"] for r in board["rows"]] == [1, 2, None]
    assert board["n_items"] == 23 and board["n_common_items"] == 23 and board["basis"] == "common"
    few = _row(board, "few-judged")
    assert few["how2score"] == 1.0 and few["how2score_percent"] == 100.0
    assert few["scored_on"] == "own" and not few["complete"]


def test_the_common_basis_leaves_out_items_a_complete_model_lacks(db):
    items = procedures(20)
    judge_model("a", items, [False] * 20)
    judge_model("b", items[:19], [True] * 19)  # 19 of 20: 95 %, complete
    common = leaderboard_ranking("how2judge")
    assert common["n_common_items"] == 19 and _row(common, "a")["n_judged"] == 19
    everything = leaderboard_ranking("how2judge", basis="all")
    assert _row(everything, "a")["n_judged"] == 20 and _row(everything, "a")["scored_on"] == "own"
    stricter = leaderboard_ranking("how2judge", min_coverage=1.0)
    assert _row(stricter, "b")["rank"] is None and stricter["n_common_items"] == 20


def test_leaderboard_page_states_the_common_items_the_threshold_and_marks_incomplete_rows(
    researcher_client, bench_world
):
    html = researcher_client.get(reverse("leaderboard"), {"judge": "how2judge"}).content.decode()
    assert "Ranked over the <strong>23</strong> procedures that every complete model (2)" in html
    assert "below 95% coverage" in html
    assert 'class="incomplete" data-model="few-judged"' in html and "13% <span" in html  # 3 of 23
    assert "95% Wilson score interval" in html
    html = researcher_client.get(reverse("leaderboard"), {"judge": "how2judge", "basis": "all"}).content.decode()
    assert "all its judged procedures" in html


def test_leaderboard_page_with_a_bad_basis_or_threshold_is_a_400_naming_it(researcher_client, bench_world):
    response = researcher_client.get(reverse("leaderboard"), {"judge": "how2judge", "basis": "best"})
    assert response.status_code == 400 and "basis:" in response.content.decode()
    response = researcher_client.get(reverse("leaderboard"), {"judge": "how2judge", "min_coverage": "2"})
    assert response.status_code == 400 and "min_coverage:" in response.content.decode()


def test_leaderboard_page_compares_two_models_with_a_paired_interval(researcher_client, bench_world):
    html = researcher_client.get(
        reverse("leaderboard"), {"judge": "how2judge", "a": "strong", "b": "weak"}
    ).content.decode()
    comparison = model_comparison("how2judge", "strong", "weak")
    assert comparison["n_items"] == 23 and comparison["difference"] == pytest.approx(8 / 23)
    assert comparison["difference_percent"] == pytest.approx(100 * 8 / 23)
    assert comparison["ci95"][0] > 0  # strong passes every procedure weak passes, and 8 more
    # 8 discordant procedures all one way: exact McNemar p = 2 / 2^8; Holm over the 3 pairs
    # of the 3 models offered: 3 x 0.0078 < 0.05.
    assert comparison["p_value"] == pytest.approx(2 / 2**8) and comparison["n_comparisons"] == 3
    assert comparison["p_adjusted"] == pytest.approx(3 * 2 / 2**8) and comparison["decision"] == "a"
    assert "<strong>strong is better than weak</strong>" in html
    assert "exact McNemar" in html and "Holm" in html
    response = researcher_client.get(reverse("leaderboard"), {"judge": "how2judge", "a": "strong", "b": "nobody"})
    assert (
        response.status_code == 400
        and "b: judge &#x27;how2judge&#x27; has judged no generation" in response.content.decode()
    )


def test_compare_api_gives_the_difference_on_common_items(researcher_client, bench_world):
    body = researcher_client.get(
        "/api/leaderboard/compare", {"judge": "how2judge", "a": "few-judged", "b": "weak"}
    ).json()
    # Common procedures: the 3 with a usable verdict for few-judged (weak passes all 3).
    assert body["n_items"] == 3 and body["difference"] == 0.0 and body["difference_percent"] == 0.0
    assert body["a"]["n_judged"] == 3 and body["b"]["n_judged"] == 3
    # One generation per procedure: Newcombe's paired interval (no bootstrap), exact McNemar.
    assert body["resamples"] is None and body["interval"] == "newcombe paired score"
    assert body["test"] == "exact McNemar" and body["p_value"] == 1.0 and body["decision"] is None
    assert body["ci95"][0] < 0 < body["ci95"][1]  # never [0, 0]
    again = researcher_client.get(
        "/api/leaderboard/compare", {"judge": "how2judge", "a": "few-judged", "b": "weak"}
    ).json()
    assert again == body


@pytest.mark.parametrize(
    "query, field",
    [
        ({"a": "strong", "b": "weak"}, "judge"),
        ({"judge": "nobody", "a": "strong", "b": "weak"}, "judge"),
        ({"judge": "how2judge", "b": "weak"}, "a"),
        ({"judge": "how2judge", "a": "strong", "b": "ghost"}, "b"),
        ({"judge": "how2judge", "a": "strong", "b": "strong"}, "b"),
        ({"judge": "how2judge", "a": "strong", "b": "weak", "split": "train"}, "split"),
        ({"judge": "how2judge", "a": "strong", "b": "weak", "resamples": "0"}, "resamples"),
        ({"judge": "how2judge", "a": "strong", "b": "weak", "resamples": "lots"}, "resamples"),
        ({"judge": "how2judge", "a": "strong", "b": "weak", "seed": "-1"}, "seed"),
    ],
)
def test_compare_api_bad_input_is_a_400_naming_the_field(researcher_client, bench_world, query, field):
    response = researcher_client.get("/api/leaderboard/compare", query)
    assert response.status_code == 400 and field in response.json()


def test_leaderboard_api_gives_the_page_rows_with_intervals_and_coverage(researcher_client, bench_world):
    body = researcher_client.get("/api/leaderboard", {"judge": "how2judge"}).json()
    assert body["n_common_items"] == 23 and body["min_coverage"] == 0.95
    assert [(r["model"], r["rank"]) for r in body["rows"]] == [("strong", 1), ("weak", 2), ("few-judged", None)]
    strong = body["rows"][0]
    assert strong["ci95"] == pytest.approx(_row(leaderboard_ranking("how2judge"), "strong")["ci95"])
    assert strong["how2score_percent"] == pytest.approx(100 * strong["how2score"]) and 0 < strong["how2score"] <= 1
    assert strong["ci95_percent"] == pytest.approx([100 * x for x in strong["ci95"]])
    assert strong["coverage"] == 1.0 and strong["n_unusable"] == 0 and strong["interval"] == "wilson"
    for query, field in [
        ({"basis": "x"}, "basis"),
        ({"min_coverage": "-0.1"}, "min_coverage"),
        ({"judge": "nobody"}, "judge"),
        ({"split": "train"}, "split"),
    ]:
        response = researcher_client.get("/api/leaderboard", query)
        assert response.status_code == 400 and field in response.json()


def test_cross_judge_correlations_and_scores_carry_intervals(researcher_client, bench_world):
    items = bench_world
    judge_model("strong", items, [False] * 19 + [True] * 4, judge="gpt-5")
    judge_model("weak", items, [False] * 13 + [True] * 10, judge="gpt-5")
    rankings = cross_judge_rankings(["how2judge", "gpt-5"])
    [pair] = rankings["pairs"]
    # Two complete models: tau is 1 on every resample, so no interval is shown (it would
    # have zero width), with the reason; few-judged is incomplete and left out.
    assert pair["kendall_tau"] == 1.0 and pair["kendall_tau_ci95"] is None and pair["n_models"] == 2
    assert pair["kendall_tau_reason"].startswith("interval not estimable (n = 23)")
    assert pair["n_items"] == 23 and pair["resamples"] == 1000
    assert rankings["left_out"] == {"few-judged": ["how2judge", "gpt-5"]}
    few = rankings["estimates"]["how2judge"]["few-judged"]
    assert few["n_unusable"] == 14 and few["coverage"] == pytest.approx(3 / 23)
    html = researcher_client.get(reverse("cross_judge")).content.decode()
    assert "95% CI" in html and "coverage 3 / 23" in html and "1000 resamples of the common procedures, seed 0" in html
    assert "interval not estimable (n = 23)" in html


def test_leaderboard_api_needs_a_researcher(client, bench_world):
    assert client.get("/api/leaderboard", {"judge": "how2judge"}).status_code in (401, 403)
    assert client.get("/api/leaderboard/compare", {"judge": "how2judge", "a": "strong", "b": "weak"}).status_code in (
        401,
        403,
    )


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", "0.9.5"])
def test_a_non_number_threshold_is_a_400_not_a_500(researcher_client, bench_world, value):
    response = researcher_client.get("/api/leaderboard", {"judge": "how2judge", "min_coverage": value})
    assert response.status_code == 400 and "min_coverage" in response.json()
    page = researcher_client.get(reverse("leaderboard"), {"judge": "how2judge", "min_coverage": value})
    assert page.status_code == 400 and "min_coverage:" in page.content.decode()


def test_an_empty_threshold_means_the_default(researcher_client, bench_world):
    body = researcher_client.get("/api/leaderboard", {"judge": "how2judge", "min_coverage": ""}).json()
    assert body["min_coverage"] == 0.95


def test_an_unknown_judge_on_the_page_is_a_400_naming_it(researcher_client, bench_world):
    response = researcher_client.get(reverse("leaderboard"), {"judge": "nobody"})
    assert response.status_code == 400 and "judge: no judgments by a judge named" in response.content.decode()
    # a NUL in the name is refused before the view, naming the parameter too
    response = researcher_client.get(reverse("leaderboard"), {"judge": "no\x00body"})
    assert (
        response.status_code == 400
        and "<strong>judge</strong>: must not contain a NUL character" in response.content.decode()
    )
