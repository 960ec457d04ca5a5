"""Leaderboard, cross-judge and run pages; launching runs from the web."""

from __future__ import annotations

import pytest
from django.urls import reverse

from judging.demo import PAPER_COMPARISON_RUN_NAMES as DEMO_RUNS
from judging.models import GenerationRun, Judgment
from judging.rankings import kendall_tau, spearman_rho
from judging.services import language_model_register

pytestmark = pytest.mark.django_db


def test_demo_leaderboard_ranks_the_papers_models(researcher_client, demo):
    html = researcher_client.get(reverse("leaderboard")).content.decode()
    assert 'id="how2score-bars"' in html and 'id="topic-heatmap"' in html
    # Tables 17-19 judged by How2Judge: Claude 4.5 Opus has no failure in its 3 outputs.
    assert "Claude 4.5 Opus" in html and "100.0" in html


def test_cross_judge_page_reports_rank_correlations(researcher_client, demo):
    # A second judge that disagrees with How2Judge on one output.
    for judgment in Judgment.objects.filter(judge="How2Judge"):
        Judgment.objects.create(
            generation=judgment.generation,
            judge="gpt-5",
            has_failure=not judgment.has_failure
            if judgment.generation.model == "claude-opus-4.5"
            else judgment.has_failure,
            critical_failures=[],
        )
    html = researcher_client.get(reverse("cross_judge")).content.decode()
    assert "How2Judge vs gpt-5" in html
    assert "Kendall" in html


def test_rank_correlations_on_hand_computed_cases():
    assert kendall_tau([1, 2, 3], [1, 2, 3]) == 1.0
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    # pairs (1,2) concordant, (1,3) concordant, (2,3) discordant: (2 - 1) / 3
    assert kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    assert spearman_rho([10, 20, 30, 40], [1, 2, 4, 3]) == pytest.approx(1 - 6 * 2 / (4 * 15))
    assert kendall_tau([1, 1], [1, 2]) is None and spearman_rho([5], [5]) is None


def test_researcher_reads_runs_but_cannot_launch(researcher_client, demo):
    assert researcher_client.get(reverse("judging_runs")).status_code == 200
    response = researcher_client.post(reverse("generation_run_launch"), {"name": "x"})
    assert response.status_code == 403


def test_admin_launch_with_bad_input_explains_and_creates_nothing(admin_client_, demo):
    response = admin_client_.post(
        reverse("generation_run_launch"),
        {"name": "run-1", "split": "bench", "seed": 0, "executor": "online", "concurrency": 0},
        follow=True,
    )
    html = response.content.decode()
    assert "was not started" in html and "language_model" in html and "concurrency" in html
    assert not GenerationRun.objects.exclude(name__in=DEMO_RUNS).exists()  # the demo's runs aside


def test_admin_launch_without_an_endpoint_says_so(admin_client_, demo, settings):
    roles = dict(settings.LLM_ROLES)
    roles["generate"] = {"base_url": "", "api_key": "", "model": "", "temperature": None, "max_tokens": None}
    settings.LLM_ROLES = roles
    model = language_model_register(name="qwen3-8b")
    response = admin_client_.post(
        reverse("generation_run_launch"),
        {
            "name": "run-1",
            "language_model": model.pk,
            "split": "bench",
            "seed": 0,
            "executor": "online",
            "concurrency": 4,
        },
        follow=True,
    )
    assert "LLM_BASE_URL" in response.content.decode()
    assert not GenerationRun.objects.exclude(name__in=DEMO_RUNS).exists()  # the demo's runs aside


def test_the_leaderboard_shows_one_split_at_a_time(researcher_client, demo):
    from judging.leaderboard_selectors import leaderboard
    from judging.models import Generation
    from judging.selectors import judged_splits
    from mining.models import Procedure

    # A constrained procedure (as CoScript adds them) judged for a model that has no other output.
    base = Procedure.objects.filter(split="bench").first() or Procedure.objects.first()
    assert base is not None
    constrained = Procedure.objects.create(
        topic=base.topic,
        goal="Make a cake for diabetics",
        split="constrained",
        steps=["Use a sweetener.", "Bake."],
        source_example_id="coscript:1:1",
    )
    generation = Generation.objects.create(
        procedure=constrained, model="constrained-only-model", predicted_steps=["Add sugar.", "Bake."]
    )
    Judgment.objects.create(generation=generation, judge="How2Judge", has_failure=True, critical_failures=[])
    assert "constrained" in judged_splits("How2Judge")
    assert [r["model"] for r in leaderboard("How2Judge", "constrained")] == ["constrained-only-model"]
    assert "constrained-only-model" in [r["model"] for r in leaderboard("How2Judge")]
    others = [s for s in judged_splits("How2Judge") if s != "constrained"]
    for split in others:
        assert "constrained-only-model" not in [r["model"] for r in leaderboard("How2Judge", split)]
    html = researcher_client.get(
        reverse("leaderboard"), {"judge": "How2Judge", "split": "constrained"}
    ).content.decode()
    assert "Leaderboard: Constrained (CoScript)" in html and "constrained-only-model" in html
    assert "Claude 4.5 Opus" not in html
    assert '<option value="constrained" selected>' in html
    html = researcher_client.get(reverse("leaderboard"), {"judge": "How2Judge", "split": "nonsense"}).content.decode()
    assert "judged nothing of a split named “nonsense”; showing all splits" in html
    assert "Claude 4.5 Opus" in html and "constrained-only-model" in html
