"""A study kind plugs in without edits outside its package: the toy clarity-rating kind of
tests/toy_kind/ is registered by a fixture and goes through entry, the item page, submit,
the export, the results on the study page and the report API, and is gone again after."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotate.kinds import kind_choices, kind_get, kind_register, kind_unregister
from annotate.kinds.base import ROLE_ATTENTION
from annotate.models import Annotation, Assignment, Study
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from tests import toy_kind

pytestmark = pytest.mark.django_db


@pytest.fixture
def toy():
    """The toy kind registered for one test only (its templates are found with it: no settings edit)."""
    kind_register(toy_kind.KIND)
    yield toy_kind.KIND
    kind_unregister(toy_kind.KEY)


def _study(kind, **settings) -> Study:
    lines = [
        {"id": "p-1", "goal": "Brew green tea", "steps": ["Boil water.", "Cool it to 80 °C.", "Steep 2 min."]},
        {"id": "p-2", "goal": "Fold a paper plane", "steps": ["Fold in half.", "Fold the wings."]},
        {
            "id": "check-1",
            "goal": "Tie a shoe",
            "steps": ["Cross the laces.", "Pull tight."],
            "role": ROLE_ATTENTION,
            "known_rating": 5,
        },
    ]
    defaults: dict[str, Any] = {
        "training_enabled": False,
        "qualification_enabled": False,
        "min_seconds": 0,
        "attention_check_rate": 0,
        "allow_other_pids": True,
        "annotators_per_item": 2,
    }
    defaults.update(settings)
    return study_create(
        name="Clarity",
        kind=kind.key,
        items=[kind.parse_record(line) for line in lines],
        settings=StudySettings(**defaults),
    )


def _enter(client: Client, study: Study, pid: str) -> None:
    response = client.get(
        reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": f"se-{pid}"}
    )
    assert response.status_code == 302
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})


def _page_state(html: str) -> dict:
    return json.loads(html.split('id="page-state" type="application/json">')[1].split("</script>")[0])


def _submit(client: Client, url: str, answer) -> tuple[int, dict]:
    response = client.post(
        url, data=json.dumps({"answer": answer, "submission_id": "s"}), content_type="application/json"
    )
    return response.status_code, response.json()


def _annotate_all(client: Client, study: Study, ratings: dict[str, int]) -> list[str]:
    """Rate every item the annotator is served; the served item ids in order."""
    served: list[str] = []
    while True:
        page = client.get(reverse("annotate:work", args=[study.slug]))
        if page.status_code == 302:
            return served
        html = page.content.decode()
        assert page.status_code == 200 and 'id="toy-rating"' in html  # the kind's own template
        state = _page_state(html)
        item_id = Assignment.objects.get(public_id=state["assignment"]).item.item_id
        assert "How clear is this procedure?" in html and 'data-kind="toy_clarity"' in html
        status, body = _submit(client, state["submitUrl"], {"rating": ratings[item_id]})
        assert status == 200 and body["ok"], body
        served.append(item_id)


def test_a_kind_registered_at_run_time_is_a_valid_study_kind_and_leaves_no_trace_when_taken_away(toy):
    study = _study(toy)
    study.full_clean()  # the kind field's choices come from the registry when asked
    assert (toy_kind.KEY, "Clarity rating (toy)") in kind_choices()
    assert study.get_kind_display() == "Clarity rating (toy)"
    kind_unregister(toy_kind.KEY)
    with pytest.raises(KeyError, match="study kind 'toy_clarity' is not installed"):
        kind_get(toy_kind.KEY)
    assert toy_kind.KEY not in dict(kind_choices())
    kind_register(toy_kind.KIND)  # the fixture takes it away again


def test_a_toy_kind_goes_from_entry_to_results_without_code_outside_its_package(toy, researcher_client):
    study = _study(toy)
    first, second = Client(), Client()
    _enter(first, study, "toy-a")
    # A bad answer is refused by the kind's own validation, naming the field.
    page = first.get(reverse("annotate:work", args=[study.slug]))
    status, body = _submit(first, _page_state(page.content.decode())["submitUrl"], {"rating": 9})
    assert status == 400 and [e["field"] for e in body["errors"]] == ["rating"]
    assert not Annotation.objects.exists()

    assert sorted(_annotate_all(first, study, {"p-1": 4, "p-2": 2})) == ["p-1", "p-2"]
    _enter(second, study, "toy-b")
    assert sorted(_annotate_all(second, study, {"p-1": 5, "p-2": 3})) == ["p-1", "p-2"]
    stored = Annotation.objects.filter(study=study).order_by("participation__annotator_id", "item__item_id")
    assert [(a.item.item_id, a.answer, a.has_failure, a.correct) for a in stored] == [
        ("p-1", {"rating": 4}, None, None),
        ("p-2", {"rating": 2}, None, None),
        ("p-1", {"rating": 5}, None, None),
        ("p-2", {"rating": 3}, None, None),
    ]

    # The export carries the kind's answers as they were stored.
    export = researcher_client.get(reverse("annotate:study_export", args=[study.slug, "jsonl"]))
    rows = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]
    assert sorted((r["item_id"], r["answer"]["rating"], r["kind"]) for r in rows) == [
        ("p-1", 4, "toy_clarity"),
        ("p-1", 5, "toy_clarity"),
        ("p-2", 2, "toy_clarity"),
        ("p-2", 3, "toy_clarity"),
    ]
    assert all("has_failure" not in r and "choice" not in r for r in rows)  # no other kind's columns

    # The study page renders the kind's results with its own template.
    detail = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert 'id="toy-results"' in detail and "4 answers" in detail
    assert 'id="toy-mean-p-1">p-1: 4.50' in detail and 'id="toy-mean-p-2">p-2: 2.50' in detail
    assert reverse("annotate:report_agreement", args=[study.slug]) not in detail  # no has_failure reports

    # The report API answers with the same results under the kind's name.
    report = researcher_client.get(f"/api/studies/{study.slug}/report/").json()
    assert report["kind"] == "toy_clarity"
    assert report["clarity_results"] == {"n_answers": 4, "mean_rating": {"p-1": 4.5, "p-2": 2.5}}
    assert report["results_name"] == "clarity_results"
    assert not {"choice_results", "faithfulness_results", "rubric_results"} & set(report)  # no other kind's
    assert report["agreement_url"] is None and report["metric_agreement_url"] is None

    # The critical-failure dashboards say the kind has no such report.
    agreement = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug])).content.decode()
    assert 'id="other-kind-note"' in agreement
    assert researcher_client.get(f"/api/studies/{study.slug}/agreement").status_code == 400


def test_a_toy_kinds_attention_check_is_scored_by_the_kinds_known_answer(toy):
    from annotate.participation.reservations import assignment_next
    from annotate.participation.submissions import annotation_submit
    from annotate.testing import annotator_start

    study = _study(toy, attention_check_rate=0.5, attention_max_failures=1, annotators_per_item=1)
    p = annotator_start(study, "toy-check")
    results = {}
    while (a := assignment_next(participation=p)) is not None:
        rating = 1 if a.role == ROLE_ATTENTION else 3  # the check's known rating is 5
        annotation_submit(participation=p, public_id=a.public_id, answer={"rating": rating}, submission_id="c")
        results[a.item.item_id] = Annotation.objects.get(assignment=a).correct
        p.refresh_from_db()
        if p.excluded:
            break
    assert results.get("check-1") is False
    assert results["p-1"] is None and results["p-2"] is None  # main items have no known answer


def test_the_api_creates_and_lists_a_study_of_a_kind_registered_after_start_up(toy, researcher_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    lines = [
        {"id": "p-1", "goal": "Brew green tea", "steps": ["Boil water.", "Steep 2 min."]},
        {"id": "p-2", "goal": "Fold a paper plane", "steps": ["Fold in half.", "Fold the wings."]},
    ]
    upload = SimpleUploadedFile(
        "items.jsonl", "\n".join(json.dumps(line) for line in lines).encode(), content_type="application/jsonl"
    )
    response = researcher_client.post(
        "/api/studies/", {"name": "Clarity by API", "kind": toy_kind.KEY, "items_file": upload}
    )
    assert response.status_code == 201, response.content
    study = Study.objects.get(name="Clarity by API")
    assert study.kind == toy_kind.KEY and study.items.count() == 2
    listed = researcher_client.get("/api/studies/", {"kind": toy_kind.KEY}).json()
    assert [row["slug"] for row in listed["results"]] == [study.slug]
    # A kind nobody registered is still refused, naming the field.
    refused = researcher_client.post("/api/studies/", {"name": "Nope", "kind": "no_such_kind", "items_file": upload})
    assert refused.status_code == 400 and "kind" in refused.json()


def test_a_study_whose_kind_is_no_longer_installed_is_refused_by_name_and_never_a_500(settings, researcher_client):
    """A kind's package removed after its studies were made (the toy kind unregistered): the
    pages and API answers that need the kind answer 503 naming it (an export before its first
    row), the study's plain detail and the lists still answer, and nothing stored changes."""
    kind_register(toy_kind.KIND)
    try:
        study = _study(toy_kind.KIND)
        other = _study(toy_kind.KIND)
        Study.objects.filter(pk=other.pk).update(name="Still here", kind="critical_failure")
        other.refresh_from_db()
    finally:
        kind_unregister(toy_kind.KEY)
    n_items = study.items.count()
    researcher_client.raise_request_exception = False
    anonymous = Client(raise_request_exception=False)
    answers = {
        "study page": researcher_client.get(reverse("annotate:study_detail", args=[study.slug])),
        "export": researcher_client.get(reverse("annotate:study_export", args=[study.slug, "jsonl"])),
        "API report": researcher_client.get(f"/api/studies/{study.slug}/report/"),
        "entry": anonymous.get(
            reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": "p1", "STUDY_ID": "s", "SESSION_ID": "x"}
        ),
    }
    for name, response in answers.items():
        assert response.status_code == 503, (name, response.status_code)
        assert toy_kind.KEY in response.content.decode(), name
    detail = researcher_client.get(f"/api/studies/{study.slug}/")  # what needs no kind is still answered
    assert detail.status_code == 200 and detail.json()["kind"] == toy_kind.KEY
    listing = researcher_client.get(reverse("annotate:study_list"))
    assert listing.status_code == 200
    assert other.name in listing.content.decode() and study.name in listing.content.decode()
    api_list = researcher_client.get("/api/studies/")
    assert api_list.status_code == 200
    assert {row["slug"] for row in api_list.json()["results"]} >= {study.slug, other.slug}
    assert study.items.count() == n_items


def test_the_study_apis_that_need_a_kind_no_longer_installed_answer_a_documented_503(researcher_client):
    """The items, annotations, export, rounds, data and agreement endpoints of a study whose kind
    was taken away answer 503 naming the kind, a status their OpenAPI operations document (every response
    here is checked against the schema, tests/schema_check.py), never a 500."""
    kind_register(toy_kind.KIND)
    try:
        study = _study(toy_kind.KIND)
    finally:
        kind_unregister(toy_kind.KEY)
    researcher_client.raise_request_exception = False
    base = f"/api/studies/{study.slug}"
    line = {"id": "p-9", "goal": "Brew black tea", "steps": ["Boil water.", "Steep 4 min."]}
    upload = SimpleUploadedFile("items.jsonl", json.dumps(line).encode(), content_type="application/jsonl")
    answers = {
        "items": researcher_client.get(f"{base}/items/"),
        "annotations": researcher_client.get(f"{base}/annotations/"),
        "export": researcher_client.get(f"{base}/export/"),
        "export csv": researcher_client.get(f"{base}/export/", {"format": "csv"}),
        "rounds": researcher_client.get(f"{base}/rounds/"),
        "new round": researcher_client.post(
            f"{base}/rounds/", {"instructions": "Read twice."}, content_type="application/json"
        ),
        "data": researcher_client.get(f"{base}/data/"),
        "data items": researcher_client.post(f"{base}/data/items/", {"items_file": upload}),
        "gold agreement": researcher_client.get(f"{base}/gold-agreement/"),
        "agreement": researcher_client.get(f"{base}/agreement/"),
        "metric agreement": researcher_client.get(f"{base}/metric-agreement/"),
    }
    for name, response in answers.items():
        assert response.status_code == 503, (name, response.status_code)
        assert response.json()["code"] == "unavailable" and toy_kind.KEY in response.json()["detail"], name
