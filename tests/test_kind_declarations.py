"""A study kind declares its answers, and every page, export and schema reads the declaration
(issue 30): the 1-5 rating kind of tests/kinds_rating/, one package and no edit anywhere else,
is registered for a test, annotated through the annotator's page, and shows up correctly on
the study page (each answer's summary), in the CSV and JSONL exports and the items API (the
shared columns and its own, no other kind's), in the report API (its results, and no other
kind's) and in the OpenAPI schema (its results and known-answer column, typed as it declares
them, gone again once it is taken away). Every registered kind's dotted functions resolve and
take what the shared code passes them, and every kind source's (the rubric editor's routes, command
and templates, in its package)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse

from annotate.kinds import kind_get, kind_list, kind_register, kind_template_dirs, kind_unregister
from annotate.kinds.base import ROLE_ATTENTION, StudyKind, kind_function_problems
from annotate.models import Annotation, Assignment, Study
from annotate.studies.exports import EXPORT_FIELDS
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from tests import kinds_rating

pytestmark = pytest.mark.django_db

# The columns each built-in kind has of its own: none of them may appear in a rating study's rows.
OTHER_KINDS_COLUMNS = {
    "has_failure",
    "failures",
    "gold_has_failure",
    "expected_has_failure",
    "choice",
    "expected_choice",
    "expected_answer",
}
RATING_TEMPLATES = Path(kinds_rating.__file__).with_name("templates")
RATINGS = {"rater-a": {"p-1": 4, "p-2": 2, "p-3": 5}, "rater-b": {"p-1": 5, "p-2": 1, "p-3": 5}}


@pytest.fixture
def rating():
    """The rating kind registered for one test only (its templates are found with it: no settings edit)."""
    kind_register(kinds_rating.KIND)
    yield kinds_rating.KIND
    kind_unregister(kinds_rating.KEY)


def _study(kind: StudyKind) -> Study:
    lines: list[dict[str, Any]] = [
        {"item_id": "p-1", "goal": "Brew green tea", "steps": ["Boil water.", "Cool it to 80 °C.", "Steep 2 min."]},
        {"item_id": "p-2", "goal": "Fold a paper plane", "steps": ["Fold in half.", "Fold the wings."]},
        {"item_id": "p-3", "goal": "Water a cactus", "steps": ["Check the soil is dry.", "Water the soil."]},
        {
            "item_id": "check-1",
            "goal": "Tie a shoe",
            "steps": ["Cross the laces.", "Pull tight."],
            "role": ROLE_ATTENTION,
            "known_rating": 5,
        },
    ]
    return study_create(
        name="Usability",
        kind=kind.key,
        items=[kind.parse_record(line) for line in lines],
        settings=StudySettings(
            training_enabled=False,
            qualification_enabled=False,
            min_seconds=0,
            attention_check_rate=0,
            allow_other_pids=True,
            annotators_per_item=2,
        ),
    )


def _page_state(html: str) -> dict:
    return json.loads(html.split('id="page-state" type="application/json">')[1].split("</script>")[0])


def _annotate(study: Study, pid: str) -> list[str]:
    """Enter as ``pid`` and rate every item the annotator page serves, through its submit URL."""
    client = Client()
    entry = client.get(
        reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": f"s-{pid}"}
    )
    assert entry.status_code == 302
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    served = []
    while (page := client.get(reverse("annotate:work", args=[study.slug]))).status_code == 200:
        html = page.content.decode()
        assert 'id="rating-scale"' in html  # the kind's own item template
        state = _page_state(html)
        item_id = Assignment.objects.get(public_id=state["assignment"]).item.item_id
        response = client.post(
            state["submitUrl"],
            data=json.dumps({"answer": {"rating": RATINGS[pid][item_id]}, "submission_id": f"{pid}-{item_id}"}),
            content_type="application/json",
        )
        assert response.status_code == 200 and response.json()["ok"], response.content
        served.append(item_id)
    assert page.status_code == 302
    return served


def _schema(client: Client) -> dict:
    return json.loads(client.get("/api/schema/?format=json").content)


def _annotation_parameters(client: Client) -> dict[str, dict]:
    operation = _schema(client)["paths"]["/api/studies/{slug}/annotations/"]["get"]
    return {parameter["name"]: parameter for parameter in operation["parameters"]}


def test_a_rating_kind_declared_in_one_package_shows_correctly_on_every_page_export_and_schema(
    rating, researcher_client
):
    study = _study(rating)
    for pid in RATINGS:
        assert sorted(_annotate(study, pid)) == ["p-1", "p-2", "p-3"]
    stored = sorted((a.annotator.pid, a.item.item_id, a.answer["rating"]) for a in Annotation.objects.all())
    assert stored == sorted((pid, item, r) for pid, ratings in RATINGS.items() for item, r in ratings.items())

    # The study page: each answer as the kind summarizes it, the check item's known answer too.
    detail = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    for r in (1, 2, 4, 5):
        assert f'answer-summary">rating {r}</span>' in detail
    assert "choice None" not in detail and "no_failure" not in detail
    assert "expected rating 5" in detail
    assert 'id="rating-n-answers">6 answers' in detail and 'id="rating-mean-p-1">p-1: 4.50' in detail

    # The exports: the shared columns, then the kind's own; no other kind's.
    columns = (*EXPORT_FIELDS, "rating", "expected_rating")
    csv_export = researcher_client.get(reverse("annotate:study_export", args=[study.slug, "csv"]))
    table = list(csv.DictReader(io.StringIO(b"".join(csv_export.streaming_content).decode())))
    assert tuple(table[0]) == columns and len(table) == 6
    assert sorted((row["annotator"], row["item_id"], row["rating"]) for row in table) == [
        (pid, item, str(r)) for pid, item, r in stored
    ]
    jsonl = researcher_client.get(f"/api/studies/{study.slug}/export/", {"format": "jsonl"})
    lines = [json.loads(line) for line in b"".join(jsonl.streaming_content).decode().splitlines()]
    assert all(set(line) == set(columns) for line in lines)
    assert sorted((line["annotator"], line["item_id"], line["rating"]) for line in lines) == stored
    assert not OTHER_KINDS_COLUMNS & set(table[0]) and not OTHER_KINDS_COLUMNS & set(lines[0])

    # The items API: the known answer under the kind's column, no other kind's.
    items = researcher_client.get(f"/api/studies/{study.slug}/items/").json()["results"]
    assert {i["item_id"]: i["expected_rating"] for i in items} == {"p-1": None, "p-2": None, "p-3": None, "check-1": 5}
    assert not OTHER_KINDS_COLUMNS & {key for item in items for key in item}

    # The annotations API: the label is the kind's summary, the kind's own field is its rating
    # (no other kind's field), its own filter selects by rating and another kind's is refused.
    annotations = f"/api/studies/{study.slug}/annotations/"
    listed = researcher_client.get(annotations).json()["results"]
    assert sorted(a["label"] for a in listed) == sorted(f"rating {r}" for _, _, r in stored)
    assert sorted((a["annotator"], a["item_id"], a["rating"]) for a in listed) == stored
    assert not {"has_failure", "failures", "choice"} & {key for a in listed for key in a}
    fives = researcher_client.get(annotations, {"rating": 5}).json()["results"]
    assert sorted((a["annotator"], a["item_id"]) for a in fives) == [
        ("rater-a", "p-3"),
        ("rater-b", "p-1"),
        ("rater-b", "p-3"),
    ]
    for query in ({"label": "has_failure"}, {"choice": 1}):  # another kind's: its answers have no such field
        assert researcher_client.get(annotations, query).json()["count"] == 0, query
    for query, refused in (({"rating": 6}, "rating"), ({"label": "maybe"}, "label"), ({"choice": "x"}, "choice")):
        response = researcher_client.get(annotations, query)
        assert response.status_code == 400 and refused in response.json(), (query, response.content)

    # The report API: the kind's results under its name, and no other kind's; a pilot round's
    # alpha is the kind's own (ordinal over the ratings), read from the round's rows.
    report = researcher_client.get(f"/api/studies/{study.slug}/report/").json()
    results = report["rating_results"]
    assert report["results_name"] == "rating_results"
    assert results["n_answers"] == 6 and results["mean_rating"] == {"p-1": 4.5, "p-2": 1.5, "p-3": 5.0}
    assert results["alpha"] is not None and results["alpha_n"] == 3
    assert report["rounds"][0]["alpha"] == pytest.approx(results["alpha"])
    assert not {"choice_results", "faithfulness_results", "rubric_results"} & set(report)

    # The schema documents the kind's results and known-answer column as it declares them.
    schemas = _schema(researcher_client)["components"]["schemas"]
    rating_results = schemas["StudyReport"]["properties"]["rating_results"]
    assert rating_results["properties"] == kinds_rating.RESULTS_SCHEMA["properties"]
    assert "rating_results" not in schemas["StudyReport"].get("required", [])
    assert schemas["StudyItem"]["properties"]["expected_rating"]["maximum"] == 5
    assert "test_rating" in schemas["StudyItem"]["properties"]["expected_rating"]["description"]
    assert schemas["Annotation"]["properties"]["rating"]["maximum"] == 5
    assert "test_rating" in schemas["Annotation"]["properties"]["rating"]["description"]
    rating_filter = _annotation_parameters(researcher_client)["rating"]
    assert rating_filter["schema"]["maximum"] == 5 and "test_rating" in rating_filter["description"]

    kind_unregister(kinds_rating.KEY)
    schemas = _schema(researcher_client)["components"]["schemas"]
    assert "rating_results" not in schemas["StudyReport"]["properties"]
    assert "expected_rating" not in schemas["StudyItem"]["properties"]
    assert "rating" not in schemas["Annotation"]["properties"]
    assert "rating" not in _annotation_parameters(researcher_client)
    assert RATING_TEMPLATES not in kind_template_dirs()
    kind_register(kinds_rating.KIND)  # the fixture takes it away again


def test_each_built_in_kinds_export_keeps_its_own_columns_and_no_other_kinds():
    """What external readers of the exports rely on: a critical-failure row keeps has_failure,
    failures, gold_has_failure and expected_has_failure; a multiple-choice row choice and
    expected_choice; a constraint-faithfulness row its known answers; none has another kind's."""
    own = {
        "critical_failure": ("has_failure", "failures", "gold_has_failure", "expected_has_failure"),
        "multiple_choice": ("choice", "expected_choice"),
        "constraint_faithfulness": ("expected_answer",),
    }
    for key, columns in own.items():
        assert kind_get(key).export_column_names() == columns, key
        assert not set(EXPORT_FIELDS) & OTHER_KINDS_COLUMNS


def test_its_templates_are_found_because_the_kind_is_registered(rating):
    """No settings edit: the kinds' template loader looks in the registered kind's package."""
    assert rating.package_dir() / "templates" == RATING_TEMPLATES and RATING_TEMPLATES in kind_template_dirs()
    assert not any("kinds_rating" in str(d) for engine in settings.TEMPLATES for d in engine.get("DIRS", []))
    rendered = render_to_string(rating.item_template, {})
    assert 'id="rating-scale"' in rendered


def test_the_built_in_kinds_keep_their_own_annotation_fields_and_filters(researcher_client):
    """A critical-failure study's annotations keep has_failure, failures and the label filter; a
    multiple-choice study's keep the choice filter and carry the choice; neither has the other's."""
    from annotate.kinds.multiple_choice.testing import step_inference_study
    from annotate.participation.reservations import assignment_next
    from annotate.participation.submissions import annotation_submit
    from annotate.testing import ONE_FAILURE, annotate_next, annotator_start, study_make

    failure_study = study_make(n_items=2, annotators_per_item=1)
    annotator = annotator_start(failure_study, "cf-a")
    annotate_next(annotator, label=True)
    annotate_next(annotator, label=False)
    url = f"/api/studies/{failure_study.slug}/annotations/"
    listed = researcher_client.get(url).json()["results"]
    assert sorted(a["has_failure"] for a in listed) == [False, True] and "choice" not in listed[0]
    failed = researcher_client.get(url, {"label": "has_failure"}).json()["results"]
    assert len(failed) == 1 and failed[0]["failures"] == ONE_FAILURE["failures"]
    assert researcher_client.get(url, {"choice": 0}).json()["count"] == 0

    choice_study = step_inference_study(n_items=2, annotators_per_item=1)
    annotator = annotator_start(choice_study, "mc-a")
    for choice in (0, 2):
        a = assignment_next(participation=annotator)
        assert a is not None
        annotation_submit(participation=annotator, public_id=a.public_id, answer={"choice": choice}, submission_id="t")
    url = f"/api/studies/{choice_study.slug}/annotations/"
    listed = researcher_client.get(url).json()["results"]
    assert sorted(a["choice"] for a in listed) == [0, 2]
    assert not {"has_failure", "failures"} & {key for a in listed for key in a}
    chosen = researcher_client.get(url, {"choice": 2}).json()["results"]
    assert [a["answer"]["choice"] for a in chosen] == [2]
    assert researcher_client.get(url, {"label": "has_failure"}).json()["count"] == 0


def test_the_report_schema_documents_every_registered_kinds_results(researcher_client):
    schemas = _schema(researcher_client)["components"]["schemas"]
    report = schemas["StudyReport"]["properties"]
    for kind in kind_list():
        if kind.results_name is not None:
            assert kind.results_name in report, kind.key
            assert report[kind.results_name]["type"] == "object"
    assert report["choice_results"]["additionalProperties"]["properties"]["yield"]["nullable"] is True
    item = schemas["StudyItem"]["properties"]
    assert item["expected_has_failure"]["type"] == "boolean" and "expected_choice" in item


def test_the_rubric_kinds_results_have_the_generic_shape_in_the_schema(researcher_client):
    from annotate.kinds.rubric.services import rubric_create, rubric_kinds_forget

    rubric_create(
        source={
            "key": "plain",
            "title": "Plain",
            "instructions": "Answer.",
            "questions": [{"id": "ok", "type": "yes_no", "prompt": "Is it fine?", "required": True}],
        }
    )
    try:
        report = _schema(researcher_client)["components"]["schemas"]["StudyReport"]["properties"]
        questions = report["rubric_results"]["properties"]["questions"]["items"]["properties"]
        assert {"id", "level", "alpha", "alpha_ci95", "alpha_n", "not_computed"} <= set(questions)
    finally:
        rubric_kinds_forget()


def test_every_registered_kinds_dotted_functions_resolve_and_take_what_they_are_given(rating):
    assert kind_function_problems(rating) == []
    for kind in kind_list():
        assert kind_function_problems(kind) == [], kind.key


def test_a_dotted_function_that_does_not_resolve_or_takes_the_wrong_arguments_is_named():
    from dataclasses import replace

    wrong = replace(
        kinds_rating.KIND,
        results_function="tests.kinds_rating.study_results.no_such_function",
        round_alpha_function="tests.kinds_rating.study_results.rating_results",  # takes the study alone
    )
    problems = kind_function_problems(wrong)
    assert len(problems) == 2
    assert problems[0].startswith("test_rating.results_function = 'tests.kinds_rating.study_results.no_such_function'")
    assert "round_alpha_function" in problems[1] and "(study, rows)" in problems[1]


def test_tiers_are_the_kinds_own_and_a_kind_without_them_has_none(rating, researcher_client, tmp_path):
    """The tiers download and export_choice_tier ask the study's kind: a rating study has no tier."""
    from django.core.management import CommandError, call_command

    study = _study(rating)
    assert researcher_client.get(reverse("annotate:study_choice_tier", args=[study.slug, "gold"])).status_code == 404
    with pytest.raises(CommandError, match="has no tier 'gold'"):
        call_command("export_choice_tier", "--study", study.slug, "--tier", "gold", "--output", str(tmp_path / "t"))
    assert kind_get("multiple_choice").tiers == ("gold", "harder")


def test_a_kinds_urls_module_is_checked_for_its_route_lists():
    from dataclasses import replace

    assert kind_function_problems(replace(kinds_rating.KIND, urls="annotate.kinds.rubric.urls")) == []
    missing = kind_function_problems(replace(kinds_rating.KIND, urls="tests.kinds_rating.no_such_module"))
    assert len(missing) == 1 and missing[0].startswith("test_rating.urls = 'tests.kinds_rating.no_such_module'")
    empty = kind_function_problems(replace(kinds_rating.KIND, urls="tests.kinds_rating.study_results"))
    assert empty == [
        "test_rating.urls = 'tests.kinds_rating.study_results' has neither urlpatterns nor api_urlpatterns"
    ]


def test_the_rubric_source_declares_its_editor_and_every_path_resolves():
    """The rubric editor lives in its package: its pages, endpoint, command and templates are
    declared by ``SOURCE`` and reached at the same URLs and names as before."""
    from django.core.management import load_command_class
    from django.urls import resolve

    from annotate.kinds import kind_command, kind_sources
    from annotate.kinds.sources import kind_source_problems

    assert [source.key for source in kind_sources()] == ["rubric"]
    for source in kind_sources():
        assert kind_source_problems(source) == [], source.key
    for name, route in [
        ("annotate:rubric_list", "/rubrics/"),
        ("annotate:rubric_new", "/rubrics/new/"),
        ("api-rubric-list", "/api/rubrics/"),
    ]:
        assert reverse(name) == route
        assert resolve(route).func.__module__.startswith("annotate.kinds.rubric."), name
    command = load_command_class("annotate", "rubric_create")
    assert (
        type(command) is kind_command("rubric_create") and type(command).__module__ == "annotate.kinds.rubric.commands"
    )
    with pytest.raises(KeyError, match="no_such_command"):
        kind_command("no_such_command")
    from django.template.loader import get_template

    package = kind_sources()[0].package_dir()
    assert package is not None
    for name in ("annotate/rubric_new.html", "annotate/rubric_list.html", "annotate/kinds/rubric_item.html"):
        template: Any = get_template(name)  # the Django backend's, which names its origin
        assert Path(template.origin.name).is_relative_to(package / "templates"), name
