"""The CoScript pages and API as a researcher uses them: who may see them, the launch form's
errors beside their fields, a run launched from the form and executed against the scripted
server, the run page's kept rates per constraint type, filtering again, the JSONL download
the faithfulness study reads, the review list's approve / remove, adding to the benchmark
once, the goal table's filters, How2Score of the constrained slice, and the read-only API."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.test import Client

from annotate.kinds.constraint_faithfulness.definition import parse_record
from coscript.models import CandidateScript, CoScriptRun, Review, SpecificGoal
from coscript.phase_services import coscript_run_execute
from coscript.result_services import export_records
from coscript.run_services import coscript_run_create
from judging.models import Generation, Judgment
from judging.services import language_model_register
from mining.models import Procedure, Split
from tests import coscript_world

pytestmark = pytest.mark.django_db(transaction=True)

FLAGGED = "Clean your skin with medication"  # the scripted screen answers Yes to "medication"


@pytest.fixture
def server(settings):
    with coscript_world.scripted_server(settings) as scripted:
        yield scripted


@pytest.fixture
def world(db):
    return coscript_world.make_procedures()


@pytest.fixture
def model(db):
    return language_model_register(name="scripted-model")


@pytest.fixture
def run(world, server, model) -> CoScriptRun:
    """A finished run: four abstract goals, nine specific goals, K = 2, one goal flagged."""
    created = coscript_run_create(name="pages-run", language_model=model, split="bench", start=False)
    assert coscript_run_execute(run_id=created.pk) == "done"
    created.refresh_from_db()
    return created


def _form(model, **changes) -> dict:
    data = {
        "name": "from-the-form",
        "language_model": model.pk,
        "split": "bench",
        "limit": "",
        "seed": "0",
        "k": "2",
        "filter_mode": "embedding+keyword",
        "keyword_bonus": "0.1",
        "screen": "on",
        "executor": "online",
        "concurrency": "4",
        "budget_usd": "",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def _kept_rate_cells(html: str) -> dict[str, str]:
    """Constraint type -> the kept-rate cell of the run page's #kept-rates table."""
    found = re.search(r'<table class="table" id="kept-rates">(.*?)</table>', html, re.S)
    assert found is not None
    table = found.group(1)
    return dict(re.findall(r'<tr data-type="(\w+)">.*?class="num kept-rate">([^<]+)<', table, re.S))


# ----------------------------------------------------------------------------- access


def test_anonymous_users_are_sent_to_login_and_users_without_a_role_are_refused(client, run):
    pages = ["/coscript/", f"/coscript/runs/{run.pk}/", "/coscript/review/", f"/coscript/runs/{run.pk}/export/"]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url
    assert client.post("/coscript/runs/new/", {}).status_code == 302
    for url in ("/api/coscript/runs/", f"/api/coscript/runs/{run.pk}/", f"/api/coscript/runs/{run.pk}/goals/"):
        assert client.get(url).status_code == 401, url

    nobody = get_user_model().objects.create_user(username="nora", password="nora-Password-1")
    no_role = Client()
    no_role.force_login(nobody)
    for url in pages:
        assert no_role.get(url).status_code == 403, url
    goal = run.goals.get(specific_goal=FLAGGED)
    assert no_role.post(f"/coscript/review/{goal.pk}/", {"decision": "approved"}).status_code == 403
    assert no_role.post(f"/coscript/runs/{run.pk}/benchmark/").status_code == 403
    assert no_role.post(f"/coscript/runs/{run.pk}/cancel/").status_code == 403
    assert no_role.get("/api/coscript/runs/").status_code == 403
    goal.refresh_from_db()
    assert goal.review == Review.PENDING
    assert not Procedure.objects.filter(split=Split.CONSTRAINED).exists()


def test_researchers_cannot_launch_cancel_resume_or_change_the_benchmark(researcher_client, run, model):
    assert researcher_client.post("/coscript/runs/new/", _form(model, name="by-a-researcher")).status_code == 403
    for action in ("cancel", "resume", "resume-without-errors", "benchmark"):
        assert researcher_client.post(f"/coscript/runs/{run.pk}/{action}/").status_code == 403, action
    page = researcher_client.get(f"/coscript/runs/{run.pk}/").content.decode()
    assert 'id="add-to-benchmark"' not in page and 'id="refilter-form"' in page and 'id="export-form"' in page
    assert not CoScriptRun.objects.filter(name="by-a-researcher").exists()
    assert not Procedure.objects.filter(split=Split.CONSTRAINED).exists()


def test_researchers_see_the_pages_and_the_nav_link(researcher_client, run):
    index = researcher_client.get("/coscript/")
    assert index.status_code == 200
    assert b'href="/coscript/">CoScript</a>' in index.content
    assert b"pages-run" in index.content and b'id="coscript-run-form"' not in index.content
    assert b'id="launch-admins-only"' in index.content
    assert researcher_client.get(f"/coscript/runs/{run.pk}/").status_code == 200
    assert researcher_client.get("/coscript/review/").status_code == 200
    assert researcher_client.get("/coscript/runs/999999/").status_code == 404


# ----------------------------------------------------------------------------- the launch form


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"name": ""}, "name", "required"),
        ({"k": "0"}, "k", "greater than or equal to 1"),
        ({"k": "11"}, "k", "less than or equal to 10"),
        ({"limit": "0"}, "limit", "greater than or equal to 1"),
        ({"keyword_bonus": "-0.5"}, "keyword_bonus", "greater than or equal to 0"),
        ({"filter_mode": "cosine"}, "filter_mode", "Select a valid choice"),
        ({"split": "constrained"}, "split", "Select a valid choice"),
        ({"executor": "carrier-pigeon"}, "executor", "Select a valid choice"),
        ({"concurrency": "0"}, "concurrency", "greater than or equal to 1"),
        ({"budget_usd": "-1"}, "budget_usd", "greater than or equal to 0"),
        ({"language_model": "999999"}, "language_model", "Select a valid choice"),
    ],
)
def test_a_bad_launch_field_is_refused_beside_the_field(admin_client_, world, server, model, changes, field, words):
    response = admin_client_.post("/coscript/runs/new/", _form(model, **changes))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == [field] and words in " ".join(errors[field]), errors
    assert f'id="id_{field}"'.encode() in response.content  # the form comes back filled in, with the error
    assert not CoScriptRun.objects.exists()


def test_service_refusals_land_on_their_fields_and_never_500(admin_client_, world, server, model, run):
    response = admin_client_.post("/coscript/runs/new/", _form(model, name="pages-run"))
    assert response.status_code == 400 and "exists" in " ".join(response.context["form"].errors["name"])
    # No procedures in How2Train: the service says so, on the split field.
    response = admin_client_.post("/coscript/runs/new/", _form(model, split="train"))
    assert response.status_code == 400
    assert "no procedures in split 'train'" in " ".join(response.context["form"].errors["split"])
    # A model whose role has no endpoint: on the model field.
    unconfigured = language_model_register(name="nowhere", role="how2score_judge")
    response = admin_client_.post("/coscript/runs/new/", _form(unconfigured))
    assert response.status_code == 400
    assert "no LLM endpoint for role 'how2score_judge'" in " ".join(response.context["form"].errors["language_model"])
    unknown = language_model_register(name="unknown-role", role="no-such-role")
    response = admin_client_.post("/coscript/runs/new/", _form(unknown))
    assert response.status_code == 400 and "unknown LLM role" in " ".join(
        response.context["form"].errors["language_model"]
    )
    assert CoScriptRun.objects.count() == 1


def test_an_unusable_prompt_file_is_named_above_the_form(admin_client_, world, server, model, tmp_path, monkeypatch):
    from coscript import run_services

    for name in run_services.PROMPT_FILES.values():
        (tmp_path / name).write_text((run_services.PROMPTS_DIR / name).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "script.txt").write_text("Steps for {specific_goal} and {unknown}", encoding="utf-8")
    monkeypatch.setattr(run_services, "PROMPTS_DIR", tmp_path)
    response = admin_client_.post("/coscript/runs/new/", _form(model))
    assert response.status_code == 400
    errors = " ".join(response.context["form"].non_field_errors())
    assert "A prompt file is not usable" in errors and "script.txt" in errors and "unknown" in errors
    assert 'id="form-errors"' in response.content.decode()
    assert not CoScriptRun.objects.exists()


def test_a_run_launched_from_the_form_executes_and_its_page_shows_kept_rates_per_type(
    admin_client_, admin_user, world, server, model
):
    response = admin_client_.post("/coscript/runs/new/", _form(model, k="2", seed="3", limit="", screen=None))
    run = CoScriptRun.objects.get(name="from-the-form")
    assert response.status_code == 302 and response["Location"] == f"/coscript/runs/{run.pk}/"
    assert (run.created_by, run.k, run.seed, run.screen, run.split, run.concurrency) == (
        admin_user,
        2,
        3,
        False,
        "bench",
        4,
    )
    assert run.status == "pending" and run.goals_job is not None and run.goals_job.n_total == 4 * 3
    page = admin_client_.get(f"/coscript/runs/{run.pk}/").content.decode()
    assert '<meta http-equiv="refresh" content="5">' in page  # active: the page refreshes itself
    assert (
        "0 / 12" in page and "coscript_specific_goals" in page and run.prompts["coscript_script"]["sha256"][:12] in page
    )

    assert coscript_run_execute(run_id=run.pk) == "done"  # the worker's part, in this process
    run.refresh_from_db()
    page = admin_client_.get(f"/coscript/runs/{run.pk}/").content.decode()
    assert 'http-equiv="refresh"' not in page
    cells = _kept_rate_cells(page)
    assert set(cells) == {"modifier", "method", "intent", "all"}
    for constraint_type in ("modifier", "method", "intent"):
        candidates = CandidateScript.objects.filter(goal__run=run, goal__constraint_type=constraint_type)
        kept = candidates.filter(kept=True).count()
        assert cells[constraint_type] == f"{100 * kept / candidates.count():.1f} %"
    assert "Screen off for this run." in page
    assert re.search(r'id="phase-goals".*?12 / 12', page, re.S) and re.search(
        r'id="phase-screen">.*?skipped', page, re.S
    )


# ----------------------------------------------------------------------------- the run page


def test_filtering_again_in_keyword_mode_changes_the_report(researcher_client, run, server):
    before = _kept_rate_cells(researcher_client.get(f"/coscript/runs/{run.pk}/").content.decode())
    sent = len(server.requests)
    response = researcher_client.post(
        f"/coscript/runs/{run.pk}/filter/", {"mode": "keyword", "keyword_bonus": "0"}, follow=True
    )
    assert len(server.requests) == sent  # no model call
    page = response.content.decode()
    run.refresh_from_db()
    assert run.filter_mode == "keyword" and run.report["filter"]["mode"] == "keyword"
    assert "Filtered again (keyword" in page and "missing_keywords" in page
    after = _kept_rate_cells(page)
    total = run.report["filter"]["total"]
    assert after["all"] == f"{100 * total['kept'] / total['candidates']:.1f} %"
    assert after != before
    # A bad bonus changes nothing and says why.
    response = researcher_client.post(
        f"/coscript/runs/{run.pk}/filter/", {"mode": "embedding", "keyword_bonus": "-1"}, follow=True
    )
    assert "Not filtered again" in response.content.decode()
    run.refresh_from_db()
    assert run.filter_mode == "keyword"


def test_a_run_stopped_at_the_filter_is_finished_by_filtering_from_the_page(researcher_client, run):
    # As when the worker could not load the embedding model: scripts collected, no verdicts.
    report = {k: v for k, v in run.report.items() if k != "filter"}
    CoScriptRun.objects.filter(pk=run.pk).update(
        phase="filter",
        status="failed",
        report=report,
        finished_at=None,
        error="EmbeddingModelUnavailable: EMBEDDING_MODEL=/x: no such folder",
    )
    CandidateScript.objects.filter(goal__run=run).update(kept=None, reason="", selected=False)
    page = researcher_client.get(f"/coscript/runs/{run.pk}/").content.decode()
    assert "The filter has not run yet." in page and "no such folder" in page
    assert re.search(r'<button type="submit">Filter again</button>', page)  # offered, not disabled
    page = researcher_client.post(
        f"/coscript/runs/{run.pk}/filter/", {"mode": "embedding+keyword", "keyword_bonus": "0.1"}, follow=True
    ).content.decode()
    run.refresh_from_db()
    assert (run.phase, run.status, run.error) == ("done", "done", "") and run.finished_at
    assert set(_kept_rate_cells(page)) == {"modifier", "method", "intent", "all"}
    assert not CandidateScript.objects.filter(goal__run=run, kept=None).exists()


def test_the_filter_is_not_offered_before_the_scripts_are_in(researcher_client, world, server, model):
    run = coscript_run_create(name="early", language_model=model, split="bench", start=False)
    page = researcher_client.get(f"/coscript/runs/{run.pk}/").content.decode()
    assert '<button type="submit" disabled>Filter again</button>' in page
    response = researcher_client.post(
        f"/coscript/runs/{run.pk}/filter/", {"mode": "keyword", "keyword_bonus": "0"}, follow=True
    )
    assert "no candidate scripts to filter yet" in response.content.decode()
    run.refresh_from_db()
    assert run.phase == "goals" and "filter" not in run.report


def test_the_goal_table_filters_by_type_kept_and_review_and_pages(researcher_client, run):
    url = f"/coscript/runs/{run.pk}/"
    page = researcher_client.get(url, {"constraint_type": "method"})
    goals = list(page.context["page"])
    assert {g.constraint_type for g in goals} == {"method"} and len(goals) == run.goals.filter(
        constraint_type="method"
    ).count()
    page = researcher_client.get(url, {"review": "pending"})
    assert [g.specific_goal for g in page.context["page"]] == [FLAGGED]
    without = researcher_client.get(url, {"kept": "no"}).context["page"]
    assert all(not g.candidates.filter(selected=True).exists() for g in without)
    with_script = researcher_client.get(url, {"kept": "yes"}).content.decode()
    assert "★ selected" in with_script and "vs best sibling" in with_script
    assert researcher_client.get(url, {"q": "wedding"}).context["page"].paginator.count == 1
    bogus = researcher_client.get(url, {"constraint_type": "bogus"})  # named and refused, as the API does
    assert bogus.status_code == 400 and "constraint_type: Select a valid choice. bogus" in bogus.content.decode()
    # Pagination: 25 per page.
    for n in range(30):
        SpecificGoal.objects.create(
            run=run,
            abstract_goal="Wash a car",
            constraint_type="modifier",
            constraint=f"Colour {n}",
            specific_goal=f"Wash a car of colour {n}",
            goal_key=f"extra-{n}",
        )
    first = researcher_client.get(url)
    assert first.context["page"].paginator.num_pages == 2 and "Page 1 of 2" in first.content.decode()
    assert len(researcher_client.get(url, {"page": 2}).context["page"]) == run.goals.count() - 25


def test_the_export_download_is_records_the_faithfulness_study_accepts(researcher_client, run):
    for choice in ("selected", "kept", "all"):
        response = researcher_client.get(f"/coscript/runs/{run.pk}/export/", {"candidates": choice})
        assert response.status_code == 200
        assert response["Content-Disposition"] == f'attachment; filename="coscript-run-{run.pk}-{choice}.jsonl"'
        lines = response.content.decode("utf-8").splitlines()
        assert len(lines) == len(export_records(run, candidates=choice)) > 0
        for line in lines:
            spec = parse_record(json.loads(line))
            assert spec.candidate_steps and spec.source["constraint_type"] in ("modifier", "method", "intent")
    everything = [
        json.loads(line)
        for line in researcher_client.get(
            f"/coscript/runs/{run.pk}/export/", {"candidates": "all"}
        ).content.splitlines()
    ]
    assert len(everything) == CandidateScript.objects.filter(goal__run=run).exclude(goal__specific_goal=FLAGGED).count()
    assert researcher_client.get(f"/coscript/runs/{run.pk}/export/", {"candidates": "some"}).status_code == 400


def _exported_goals(client, run) -> set[str]:
    body = client.get(f"/coscript/runs/{run.pk}/export/", {"candidates": "all"}).content.decode()
    return {json.loads(line)["specific_goal"] for line in body.splitlines()}


def test_review_approve_and_remove_decide_what_the_export_holds(researcher_client, researcher, run):
    goal = run.goals.get(specific_goal=FLAGGED)
    page = researcher_client.get("/coscript/review/").content.decode()
    assert f'id="review-goal-{goal.pk}"' in page and "sensitive" in page and "Yes" in page
    assert FLAGGED not in _exported_goals(researcher_client, run)

    response = researcher_client.post(f"/coscript/review/{goal.pk}/", {"decision": "approved"}, follow=True)
    goal.refresh_from_db()
    assert (goal.review, goal.reviewed_by) == (Review.APPROVED, researcher) and goal.reviewed_at
    page = response.content.decode()
    assert f'id="review-goal-{goal.pk}"' not in page and f'id="reviewed-goal-{goal.pk}"' in page
    assert "rita" in page and "approved" in page
    assert FLAGGED in _exported_goals(researcher_client, run)

    researcher_client.post(f"/coscript/review/{goal.pk}/", {"decision": "removed"})
    goal.refresh_from_db()
    assert goal.review == Review.REMOVED
    assert FLAGGED not in _exported_goals(researcher_client, run)
    # A goal that was never flagged, or an unknown decision, is refused with a message.
    cleared = run.goals.exclude(pk=goal.pk).first()
    response = researcher_client.post(f"/coscript/review/{cleared.pk}/", {"decision": "removed"}, follow=True)
    assert "was not flagged" in response.content.decode()
    response = researcher_client.post(f"/coscript/review/{goal.pk}/", {"decision": "maybe"}, follow=True)
    assert "decision must be" in response.content.decode()
    assert researcher_client.get(f"/coscript/review/{goal.pk}/").status_code == 405


def test_add_to_benchmark_creates_constrained_procedures_once(admin_client_, run):
    selected = CandidateScript.objects.filter(goal__run=run, selected=True)
    exportable = selected.exclude(goal__review=Review.PENDING).count()
    response = admin_client_.post(f"/coscript/runs/{run.pk}/benchmark/", follow=True)
    page = response.content.decode()
    constrained = Procedure.objects.filter(split=Split.CONSTRAINED)
    assert constrained.count() == exportable > 0
    assert selected.filter(goal__review=Review.PENDING).count() == 1  # the flagged goal's chosen script
    assert f"Constrained split: {exportable} added, 1 held by the review" in page
    assert f'<span id="n-in-benchmark">{exportable}</span>' in page
    assert 'href="/leaderboard/?split=constrained"' in page
    procedure = constrained.get(goal="Make a cake for a wedding")
    assert procedure.provenance["constraint_type"] == "intent" and procedure.steps == [
        "Plan the wedding cake tiers.",
        "Bake three layers.",
        "Stack the tiers with dowels.",
        "Decorate with wedding flowers.",
    ]

    response = admin_client_.post(f"/coscript/runs/{run.pk}/benchmark/", follow=True)
    assert constrained.count() == exportable
    assert f"0 added, {exportable} already in the benchmark, 1 held by the review" in response.content.decode()


def test_add_to_benchmark_before_the_filter_is_refused(admin_client_, world, server, model):
    run = coscript_run_create(name="unfinished", language_model=model, split="bench", start=False)
    response = admin_client_.post(f"/coscript/runs/{run.pk}/benchmark/", follow=True)
    assert "has not finished filtering" in response.content.decode()
    assert not Procedure.objects.filter(split=Split.CONSTRAINED).exists()


def test_cancel_and_resume_from_the_run_page(admin_client_, world, server, model):
    run = coscript_run_create(name="to-cancel", language_model=model, split="bench", start=False)
    page = admin_client_.get(f"/coscript/runs/{run.pk}/").content.decode()
    assert 'id="cancel-run"' in page and 'id="resume-run"' not in page
    admin_client_.post(f"/coscript/runs/{run.pk}/cancel/", {"confirm": "yes"})
    run.refresh_from_db()
    assert run.status == "cancelled" and run.goals_job is not None and run.goals_job.status == "cancelled"
    response = admin_client_.post(f"/coscript/runs/{run.pk}/resume/", follow=True)
    assert "a cancelled run cannot be resumed" in response.content.decode()
    assert admin_client_.post(f"/coscript/runs/{run.pk}/explode/").status_code == 400

    paused = coscript_run_create(name="to-resume", language_model=model, split="bench", start=False)
    CoScriptRun.objects.filter(pk=paused.pk).update(
        status="paused", pause_reason="3 of 12 specific goals requests failed"
    )
    page = admin_client_.get(f"/coscript/runs/{paused.pk}/").content.decode()
    assert 'id="resume-run"' in page and "3 of 12 specific goals requests failed" in page
    admin_client_.post(f"/coscript/runs/{paused.pk}/resume-without-errors/")
    paused.refresh_from_db()
    assert paused.status == "pending" and paused.report["accepted_errors"] == ["goals"]


# ----------------------------------------------------------------------------- the constrained slice


def test_the_run_list_shows_how2score_of_the_constrained_slice_per_constraint_type(admin_client_, run):
    admin_client_.post(f"/coscript/runs/{run.pk}/benchmark/")
    procedures: dict[str, list[Procedure]] = {
        p.provenance["constraint_type"]: [] for p in Procedure.objects.filter(split=Split.CONSTRAINED)
    }
    for p in Procedure.objects.filter(split=Split.CONSTRAINED).order_by("id"):
        procedures[p.provenance["constraint_type"]].append(p)
    # model-a: every modifier and method script passes, every intent one fails; one unreadable verdict.
    labels = {"modifier": False, "method": False, "intent": True}
    for constraint_type, items in procedures.items():
        for p in items:
            generation = Generation.objects.create(procedure=p, model="model-a", predicted_steps=["Do it."])
            Judgment.objects.create(generation=generation, judge="how2judge", has_failure=labels[constraint_type])
    extra = Generation.objects.create(procedure=procedures["modifier"][0], model="model-b", predicted_steps=["x"])
    Judgment.objects.create(generation=extra, judge="how2judge", has_failure=None, outcome="parse_failed")
    # A bench procedure's judgment is not part of the slice.
    bench_procedure = Procedure.objects.filter(split="bench").first()
    assert bench_procedure is not None
    bench = Generation.objects.create(procedure=bench_procedure, model="model-a")
    Judgment.objects.create(generation=bench, judge="how2judge", has_failure=True)

    response = admin_client_.get("/coscript/")
    rows = {(r["judge"], r["model"]): r for r in response.context["slice"]}
    a = rows[("how2judge", "model-a")]
    n = {t: len(items) for t, items in procedures.items()}
    assert a["n_judged"] == sum(n.values()) and a["coverage"] == 1.0 and a["rank"] == 1
    assert a["how2score"] == pytest.approx((n["modifier"] + n["method"]) / sum(n.values()))
    assert a["how2score_percent"] == pytest.approx(100 * (n["modifier"] + n["method"]) / sum(n.values()))
    assert {c["constraint_type"]: c["how2score"] for c in a["by_type"]} == {
        "modifier": 1.0,
        "method": 1.0,
        "intent": 0.0,
    }
    assert {c["constraint_type"]: c["how2score_percent"] for c in a["by_type"]} == {
        "modifier": 100.0,
        "method": 100.0,
        "intent": 0.0,
    }
    b = rows[("how2judge", "model-b")]
    assert b["how2score"] is None and b["n_unusable"] == 1 and b["rank"] is None and not b["complete"]
    html = response.content.decode()
    found = re.search(r'id="constrained-how2score">(.*?)</table>', html, re.S)
    assert found is not None
    table = found.group(1)
    assert re.search(r'data-type="intent"><strong>0.0</strong>', table)
    assert re.search(r'data-type="method"><strong>100.0</strong>', table)


# ----------------------------------------------------------------------------- the API


def test_the_api_lists_runs_with_their_report_and_goals_with_candidates(researcher_client, run):
    listing = researcher_client.get("/api/coscript/runs/").json()
    row = listing["results"][0]
    assert (row["name"], row["model"], row["phase"], row["status"]) == ("pages-run", "scripted-model", "done", "done")
    assert row["n_goals"] == 9 and row["n_candidates"] == 18
    assert row["kept_rate"] == pytest.approx(run.report["filter"]["total"]["kept_rate"])

    detail = researcher_client.get(f"/api/coscript/runs/{run.pk}/").json()
    assert detail["report"]["filter"]["by_type"]["intent"]["candidates"] == 6
    assert [j["phase"] for j in detail["jobs"]] == ["goals", "screen", "scripts"]
    assert detail["jobs"][0]["n_done"] == detail["jobs"][0]["n_total"] == 12
    assert {p["stage"] for p in detail["prompts"]} == {
        "coscript_specific_goals",
        "coscript_sensitive_screen",
        "coscript_script",
    }

    goals = researcher_client.get(f"/api/coscript/runs/{run.pk}/goals/", {"constraint_type": "intent"}).json()
    assert goals["count"] == 3
    first = goals["results"][0]
    assert first["constraint_type"] == "intent" and len(first["candidates"]) == 2
    assert {"index", "steps", "kept", "reason", "selected", "scores"} <= set(first["candidates"][0])
    pending = researcher_client.get(f"/api/coscript/runs/{run.pk}/goals/", {"review": "pending"}).json()
    assert [g["specific_goal"] for g in pending["results"]] == [FLAGGED]
    assert researcher_client.get("/api/coscript/runs/999999/goals/").status_code == 404
    assert researcher_client.get("/api/coscript/runs/", {"status": "done"}).json()["count"] == 1
    assert researcher_client.get("/api/coscript/runs/", {"status": "running"}).json()["count"] == 0
    assert researcher_client.get("/api/coscript/runs/", {"phase": "scripts"}).json()["count"] == 0
    assert researcher_client.get("/api/coscript/runs/", {"search": "pages"}).json()["count"] == 1
    assert researcher_client.get("/api/coscript/runs/", {"search": "nothing"}).json()["count"] == 0


def test_the_openapi_schema_describes_the_coscript_endpoints(researcher_client):
    schema = yaml.safe_load(researcher_client.get("/api/schema/").content)
    paths = schema["paths"]
    assert {"/api/coscript/runs/", "/api/coscript/runs/{id}/", "/api/coscript/runs/{id}/goals/"} <= set(paths)
    params = {p["name"] for p in paths["/api/coscript/runs/{id}/goals/"]["get"]["parameters"]}
    assert {"constraint_type", "kept", "review", "q", "page"} <= params
    launch = paths["/api/coscript/runs/"]["post"]  # the launch from YAML (tests/test_api_runs.py)
    assert "config" in launch["requestBody"]["content"]["application/json"]["examples"]["MinimalConfiguration"]["value"]


def test_the_demo_run_has_a_page(researcher_client):
    from coscript import demo

    demo.load()
    run = CoScriptRun.objects.get()
    response = researcher_client.get(f"/coscript/runs/{run.pk}/")
    assert response.status_code == 200
    page = response.content.decode()
    assert run.name in page and response.context["page"].paginator.count == run.goals.count() > 0
    assert run.status == "done"  # the bundled embedding model filtered the paper's scripts
    types = set(run.goals.values_list("constraint_type", flat=True))
    assert set(_kept_rate_cells(page)) == {*types, "all"}
    assert researcher_client.get("/coscript/").status_code == 200
    assert researcher_client.get(f"/api/coscript/runs/{run.pk}/").json()["jobs"][0]["state"] == "not needed"
