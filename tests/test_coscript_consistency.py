"""A CoScript run reads the same everywhere: the run page's report and parameters give the
counts its goal table, its filter table and the API give (the demo run too, whose goals were
loaded rather than generated, so it has no goals or scripts phase report), and says "Not
collected yet" only when nothing was collected. The goal filters of the API and of the run
page refuse a value they do not know with a 400 naming the parameter, never ignoring it."""

from __future__ import annotations

import re

import pytest
import yaml

from coscript import demo as coscript_demo
from coscript.models import CandidateScript, CoScriptRun
from coscript.phase_services import coscript_run_execute
from coscript.run_services import coscript_run_create
from judging.services import language_model_register
from tests import coscript_world

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo_run(db) -> CoScriptRun:
    coscript_demo.load()
    return CoScriptRun.objects.get()


def _text(html: str, element_id: str) -> str:
    """The text of the element with this id, tags removed and blanks collapsed."""
    match = re.search(rf'<(\w+)[^>]*id="{element_id}"[^>]*>(.*?)</\1>', html, re.S)
    assert match, f"no #{element_id} on the page"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(2)).split())


def _parameter(html: str, name: str) -> str:
    table = re.search(r'<table class="table" id="run-parameters">(.*?)</table>', html, re.S)
    assert table, "no #run-parameters on the page"
    return dict(re.findall(r"<tr><th>([^<]+)</th><td>([^<]*)</td></tr>", table.group(1)))[name]


# ----------------------------------------------------------------------------- defect A


def test_the_demo_run_page_states_the_goals_and_candidates_it_holds(researcher_client, demo_run):
    assert demo_run.status == "done"
    page = researcher_client.get(f"/coscript/runs/{demo_run.pk}/").content.decode()
    api = researcher_client.get(f"/api/coscript/runs/{demo_run.pk}/").json()
    goals = researcher_client.get(f"/api/coscript/runs/{demo_run.pk}/goals/").json()
    n_abstract = len({g["abstract_goal"] for g in goals["results"]})
    assert (api["n_goals"], api["n_candidates"], goals["count"], n_abstract) == (18, 5, 18, 8)

    report = page.split('id="report"', 1)[1].split("</section>", 1)[0]
    assert "Not collected yet" not in report
    summary = _text(page, "goals-summary")
    assert summary.startswith("18 specific goals from 8 abstract goals"), summary
    assert "modifier 7, method 6, intent 5" in summary, summary
    scripts = _text(page, "scripts-summary")
    assert scripts.startswith("5 candidates"), scripts
    assert "5 of 18 specific goals" in scripts and "ok 5" in scripts, scripts
    assert "1 per specific goal" not in scripts  # 13 of the paper's goals have no script
    assert _parameter(page, "Abstract goals").startswith("8 ")

    # The filter table and the goal table count the same goals and candidates.
    all_row = re.search(r'<tr data-type="all">(.*?)</tr>', page, re.S)
    assert all_row, "no row for all types in #kept-rates"
    cells = re.findall(r'<th class="num">(\d+)</th>', all_row.group(1))
    assert cells[:1] == ["5"] and "18" in cells
    assert "18 specific goals</p>" in page


def test_the_demo_run_page_says_its_goals_were_loaded_not_requested(researcher_client, demo_run):
    page = researcher_client.get(f"/coscript/runs/{demo_run.pk}/").content.decode()
    report = page.split('id="report"', 1)[1].split("</section>", 1)[0]
    assert "Requests: ." not in report and "Requests:" not in report
    assert "no model was asked" in report


@pytest.fixture
def created_run(settings) -> CoScriptRun:
    """A run created but not executed: nothing collected yet."""
    coscript_world.make_procedures()
    with coscript_world.scripted_server(settings):
        model = language_model_register(name="scripted-model")
        return coscript_run_create(name="not-yet", language_model=model, split="bench", start=False)


def test_a_run_that_collected_nothing_says_not_collected_yet(researcher_client, created_run):
    page = researcher_client.get(f"/coscript/runs/{created_run.pk}/").content.decode()
    report = page.split('id="report"', 1)[1].split("</section>", 1)[0]
    assert report.count("Not collected yet.") == 2
    assert _parameter(page, "Abstract goals").startswith(f"{len(created_run.abstract_ids)} ")


def test_a_generated_run_page_agrees_with_its_report_and_the_api(researcher_client, settings):
    coscript_world.make_procedures()
    with coscript_world.scripted_server(settings):
        model = language_model_register(name="scripted-model")
        run = coscript_run_create(name="agree", language_model=model, split="bench", start=False)
        assert coscript_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    page = researcher_client.get(f"/coscript/runs/{run.pk}/").content.decode()
    api = researcher_client.get(f"/api/coscript/runs/{run.pk}/").json()
    goals = run.report["goals"]
    summary = _text(page, "goals-summary")
    assert summary.startswith(f"{api['n_goals']} specific goals from {goals['abstract_goals']} abstract goals")
    assert goals["specific_goals"] == api["n_goals"] == run.goals.count()
    scripts = _text(page, "scripts-summary")
    assert scripts.startswith(f"{api['n_candidates']} candidates ({run.k} per specific goal)"), scripts
    assert api["n_candidates"] == run.report["scripts"]["candidates"] == CandidateScript.objects.count()
    assert _parameter(page, "Abstract goals").startswith(f"{goals['abstract_goals']} ")
    assert "Requests: ok 12" in _text(page, "report")


# ----------------------------------------------------------------------------- defect B


@pytest.mark.parametrize("name", ["kept", "review", "constraint_type"])
def test_the_goals_api_refuses_an_unknown_filter_value_naming_it(researcher_client, demo_run, name):
    response = researcher_client.get(f"/api/coscript/runs/{demo_run.pk}/goals/", {name: "zzz"})
    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body) == ["code", "detail", name] and "zzz" in body[name][0]


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ({"constraint_type": "intent"}, 5),
        ({"kept": "yes"}, None),
        ({"review": "not_flagged"}, 18),
        ({"review": "pending"}, 0),
        ({"q": "pancakes"}, 2),
        ({"constraint_type": ""}, 18),
    ],
)
def test_the_goals_api_still_filters_by_a_known_value(researcher_client, demo_run, query, count):
    response = researcher_client.get(f"/api/coscript/runs/{demo_run.pk}/goals/", query)
    assert response.status_code == 200, response.content
    if count is None:  # kept=yes: the goals with a chosen script, as the filter table counts them
        count = demo_run.report["filter"]["total"]["goals_with_script"]
        no = researcher_client.get(f"/api/coscript/runs/{demo_run.pk}/goals/", {"kept": "no"}).json()["count"]
        assert count + no == 18
    assert response.json()["count"] == count


def test_the_goals_schema_declares_the_filters_as_enums(researcher_client):
    schema = yaml.safe_load(researcher_client.get("/api/schema/").content)
    params = {p["name"]: p for p in schema["paths"]["/api/coscript/runs/{id}/goals/"]["get"]["parameters"]}
    assert set(params["constraint_type"]["schema"]["enum"]) == {"modifier", "method", "intent"}
    assert set(params["kept"]["schema"]["enum"]) == {"yes", "no"}
    assert set(params["review"]["schema"]["enum"]) == {"not_flagged", "pending", "approved", "removed"}
    assert {"q", "page"} <= set(params)


@pytest.mark.parametrize("name", ["kept", "review", "constraint_type"])
def test_the_run_page_refuses_an_unknown_goal_filter_naming_it(researcher_client, demo_run, name):
    response = researcher_client.get(f"/coscript/runs/{demo_run.pk}/", {name: "zzz"})
    assert response.status_code == 400
    errors = _text(response.content.decode(), "goal-filter-errors")
    assert errors.startswith(f"{name}:") and "zzz" in errors, errors


def test_the_run_page_filters_by_a_known_value(researcher_client, demo_run):
    response = researcher_client.get(f"/coscript/runs/{demo_run.pk}/", {"constraint_type": "intent", "kept": "no"})
    assert response.status_code == 200
    assert 'id="goal-filter-errors"' not in response.content.decode()
    intent_no = researcher_client.get(
        f"/api/coscript/runs/{demo_run.pk}/goals/", {"constraint_type": "intent", "kept": "no"}
    ).json()["count"]
    assert response.context["page"].paginator.count == intent_no


@pytest.mark.sqlite  # SQLite's parser depth is the limit met first
def test_a_search_too_long_to_query_is_refused_naming_q(researcher_client, demo_run):
    words = " ".join(f"w{i}" for i in range(2000))  # thousands of conditions: deeper than SQLite parses
    response = researcher_client.get(f"/api/coscript/runs/{demo_run.pk}/goals/", {"q": words})
    assert response.status_code == 400 and list(response.json()) == ["code", "detail", "q"]
    page = researcher_client.get(f"/coscript/runs/{demo_run.pk}/", {"q": words})
    assert page.status_code == 400
    assert _text(page.content.decode(), "goal-filter-errors").startswith("q:")


def test_the_goal_selector_refuses_an_unknown_value_naming_it(demo_run):
    from core.app_errors import InvalidInput
    from coscript.selectors import specific_goal_list

    with pytest.raises(InvalidInput) as refused:
        specific_goal_list(run=demo_run, kept="zzz", review="pending", constraint_type="colour")
    assert set(refused.value.fields) == {"kept", "constraint_type"}
    assert specific_goal_list(run=demo_run, kept="").count() == 18


def test_a_goal_list_of_an_unknown_run_is_a_404(researcher_client):
    assert researcher_client.get("/api/coscript/runs/999999/goals/").status_code == 404
    assert researcher_client.get("/api/coscript/runs/abc/goals/").status_code == 404
