"""The demo data: the papers' own examples, loaded idempotently, shown on the pages."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from judging.models import Generation, Judgment
from mining.constants import TOPICS
from mining.models import Procedure, Topic

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]  # the demo make run loads on SQLite


def test_every_one_of_the_fourteen_topics_has_a_demo_procedure(demo):
    assert sorted(Topic.objects.values_list("name", flat=True)) == sorted(TOPICS)
    for topic in Topic.objects.all():
        assert topic.procedures.exists(), topic.name


def test_loading_the_demo_twice_changes_nothing(demo, capsys):
    counts = (Procedure.objects.count(), Generation.objects.count(), Judgment.objects.count())
    call_command("load_demo")
    assert (Procedure.objects.count(), Generation.objects.count(), Judgment.objects.count()) == counts
    assert "0 procedures created, 17 already present" in capsys.readouterr().out


def test_demo_keeps_the_paper_text_and_its_source(demo):
    # How2Everything Table 7, Crime & Law, reference step 4.
    procedure = Procedure.objects.get(source_example_id="paper-t7-crime-law")
    assert procedure.steps[3] == "Wait 30 days for co-owners to express their desire to purchase your share."
    assert "Table 7" in procedure.provenance["demo_source"]


def test_demo_judgments_follow_the_paper_labels(demo):
    # Table 17: Gemini 2.5 Pro misses the 30-day waiting period; Claude and GPT 5 do not fail.
    labels = {
        j.generation.model: j.has_failure
        for j in Judgment.objects.filter(generation__procedure__source_example_id="paper-t7-crime-law")
    }
    assert labels == {"claude-opus-4.5": False, "gpt-5": False, "gemini-2.5-pro": True}
    gemini = Judgment.objects.get(
        generation__model="gemini-2.5-pro", generation__procedure__source_example_id="paper-t7-crime-law"
    )
    assert any(4 in f["L1_steps"] for f in gemini.critical_failures)
    for judgment in Judgment.objects.all():
        assert judgment.has_failure == bool(judgment.critical_failures)


def test_home_page_shows_counts_and_the_chart(researcher_client, demo):
    html = researcher_client.get(reverse("home")).content.decode()
    assert 'id="procedures-per-topic"' in html
    assert "17 procedures: 17 in How2Bench" in html
    assert "Travel &amp; Tourism" in html


def test_procedure_page_numbers_steps_and_shows_judged_generations(researcher_client, demo):
    procedure = Procedure.objects.get(source_example_id="paper-t7-crime-law")
    html = researcher_client.get(reverse("procedure_detail", args=[procedure.pk])).content.decode()
    assert '<span class="step-no">1.</span> Prepare a notification' in html
    assert '<span class="step-no">5.</span> Sell your share' in html
    assert "Gemini 2.5 Pro" in html and "has_failure" in html
    assert "L1 4" in html


def test_procedure_list_search_and_filters(researcher_client, demo):
    html = researcher_client.get(reverse("procedure_list") + "?q=plasmid").content.decode()
    assert "1 procedure" in html and "whole plasmid PCR" in html
    html = researcher_client.get(reverse("procedure_list") + "?q=knurl+holder").content.decode()
    assert "1 procedure" in html  # found through the resources
    html = researcher_client.get(reverse("procedure_list") + "?topic=health&split=train").content.decode()
    assert "No procedure matches." in html


def test_procedure_list_paginates(researcher_client, demo):
    html = researcher_client.get(reverse("procedure_list")).content.decode()
    assert "17 procedures" in html
    assert "Page 1 of 1" not in html  # 25 per page: a single page has no pager


def test_demo_coscript_run_holds_the_papers_goals_and_scripts_filtered_for_real(demo):
    from coscript import demo as coscript_demo
    from coscript.models import CandidateScript, CoScriptRun

    assert "18 specific goals, 5 scripts, filtered" in coscript_demo.load()
    assert coscript_demo.load() == "CoScript demo run already loaded"
    run = CoScriptRun.objects.get(name__startswith="CoScript paper examples")
    assert (run.phase, run.status) == ("done", "done")
    assert run.goals.count() == 18 and run.goals.filter(constraint_type="intent").count() == 5
    twitter = CandidateScript.objects.get(goal__specific_goal="Link twitter accounts on flipboard")
    assert twitter.steps[-1] == "Log into your Twitter account."
    # The filter ran on the bundled model: the Twitter script beats its Facebook sibling.
    assert twitter.kept and twitter.scores["best_sibling_goal"] is not None
    assert twitter.scores["target_score"] > twitter.scores["best_sibling_score"]
    assert run.report["filter"]["total"]["candidates"] == 5


def test_the_demo_leaderboard_ranks_the_three_models_of_tables_17_to_19_on_the_same_procedures(researcher_client, demo):
    from judging.leaderboard_selectors import leaderboard_ranking

    board = leaderboard_ranking("How2Judge")  # the page's default view: all splits, common items
    ranked = {row["model"]: row["rank"] for row in board["rows"] if row["rank"] is not None}
    # Tables 17-19: Claude 3 of 3 without a critical failure, GPT 5 2 of 3, Gemini 2.5 Pro 1 of 3.
    assert ranked == {"claude-opus-4.5": 1, "gpt-5": 2, "gemini-2.5-pro": 3}
    assert board["n_complete"] == 3 and board["n_common_items"] == 3
    # Table 1's single Qwen output is an imported generation: counted against all of How2Bench.
    qwen = next(row for row in board["rows"] if row["model"] == "qwen3-8b-instruct")
    assert not qwen["complete"] and qwen["rank"] is None

    html = researcher_client.get(reverse("leaderboard")).content.decode()
    assert "Ranked over the <strong>3</strong> procedures that every complete model (3) has a usable judgment" in html
    assert "No model has a usable judgment" not in html


def test_loading_the_demo_twice_keeps_one_run_per_model_of_tables_17_to_19(researcher_client, demo):
    from judging import demo as judging_demo
    from judging.models import GenerationRun

    judging_demo.load()
    runs = GenerationRun.objects.filter(name__startswith="Paper examples, Tables 17-19")
    assert runs.count() == 3 and {run.status for run in runs} == {"done"}
    for run in runs:
        assert run.generations.count() == 3 and len(run.procedure_ids) == 3 and run.llm_job is None
        page = researcher_client.get(reverse("generation_run_detail", args=[run.pk]))
        assert page.status_code == 200 and "Tables 17-19" in page.content.decode()
    assert researcher_client.get(reverse("judging_runs")).status_code == 200


def test_the_demo_runs_of_the_papers_outputs_refuse_every_action_with_a_409_never_a_500(admin_client_):
    """The Tables 17-19 runs were filed, not generated here: they own no LLM job, so pause,
    resume, cancel and Retry failed have nothing to act on (the crawler found a 500 on
    retry-failed)."""
    from judging.demo import PAPER_COMPARISON_MODELS, paper_comparison_run_name
    from judging.models import GenerationRun

    call_command("load_demo", verbosity=0)
    for model in PAPER_COMPARISON_MODELS:
        run = GenerationRun.objects.get(name=paper_comparison_run_name(model))
        for action in ("pause", "resume", "cancel", "retry-failed"):
            response = admin_client_.post(f"/api/judging/generation-runs/{run.pk}/{action}/")
            assert response.status_code in (400, 409), (action, response.status_code, response.content[:200])
        run.refresh_from_db()
        assert run.status == "done"
