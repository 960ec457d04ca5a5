"""The researchers' agreement dashboards on studies in the database: the report equals the
report on the study's export file; judges, annotators, disagreements, downloads, the API."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils.html import escape

from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.reports.selectors import disagreement_list, study_agreement_report
from annotate.testing import (
    NO_FAILURE,
    ONE_FAILURE,
    annotate_all,
    annotate_next,
    annotator_start,
    judged_generation_study,
    label_as_the_judge,
    read_everything,
    study_make,
)
from judging.models import Judgment

pytestmark = pytest.mark.django_db


def _labelled_study():
    """4 items, 3 annotators each: items 1-2 unanimous, item 3 split 2-1, item 4 split 1-2."""
    study = study_make(n_items=4, annotators_per_item=3)
    plan = {"p1": [True, False, True, False], "p2": [True, False, True, True], "p3": [True, False, False, False]}
    for pid, labels in plan.items():
        participation = annotator_start(study, pid)
        for label in labels:
            assert annotate_next(participation, label=label) is not None
    return study


def test_report_from_the_database_equals_the_report_from_its_export(tmp_path, capsys):
    study = _labelled_study()
    export = tmp_path / "annotations.jsonl"
    call_command("export_annotations", "--study", study.slug, "--output", str(export))
    capsys.readouterr()
    call_command("agreement_report", "--annotations", str(export), "--seed", "3")
    from_file = json.loads(capsys.readouterr().out)
    call_command("agreement_report", "--study", study.slug, "--seed", "3")
    from_db = json.loads(capsys.readouterr().out)
    assert from_db == from_file == study_agreement_report(study, seed=3)
    assert from_db["n_annotations"] == 12 and from_db["human_majority"]["n_items"] == 4


def test_disagreements_rank_split_items_first():
    study = _labelled_study()
    ranked = disagreement_list(study)
    assert {r["n_has_failure"] for r in ranked[:2]} == {1, 2}  # the two split items
    assert ranked[-1]["entropy"] == 0.0


def test_agreement_page_shows_alpha_judges_and_downloads(researcher_client):
    study = _labelled_study()
    page = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug]))
    html = page.content.decode()
    assert page.status_code == 200 and 'id="alpha-table"' in html and "No judge has labelled" in html
    report = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug]) + "?format=json").json()
    assert report["n_items"] == 4
    api = researcher_client.get(f"/api/studies/{study.slug}/agreement?bootstrap=0").json()
    assert api["alpha"] == report["alpha"]
    for query, name in (("bootstrap=abc", "bootstrap"), ("bootstrap=10001", "bootstrap"), ("seed=-1", "seed")):
        bad = researcher_client.get(f"/api/studies/{study.slug}/agreement?{query}")
        assert bad.status_code == 400 and name in bad.json(), query
    assert 'id="other-kind-note"' not in html
    # The pilot-round column of a critical-failure study is the binary alpha over has_failure.
    detail = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert "Krippendorff's α (binary)" in detail and "Binary Krippendorff's α over has_failure" in detail


def test_annotators_and_disagreement_pages_and_csv(researcher_client):
    study = _labelled_study()
    html = researcher_client.get(reverse("annotate:report_annotators", args=[study.slug])).content.decode()
    assert "p1" in html and 'id="annotator-scatter"' in html
    csv_text = researcher_client.get(
        reverse("annotate:report_annotators", args=[study.slug]) + "?format=csv"
    ).content.decode()
    assert csv_text.splitlines()[0].startswith("annotator,n_main,loo_agreement")
    assert len(csv_text.splitlines()) == 4
    html = researcher_client.get(reverse("annotate:report_disagreements", args=[study.slug])).content.decode()
    assert 'id="disagreement-table"' in html and html.count("report_item") == 0 and "item-3" in html


def test_item_page_draws_each_annotators_failures_on_the_steps(researcher_client):
    study = study_make(n_items=1, annotators_per_item=2)
    for pid in ("a1", "a2"):
        annotate_next(annotator_start(study, pid), ONE_FAILURE if pid == "a1" else None, label=False)
    item = study.items.get()
    html = researcher_client.get(reverse("annotate:report_item", args=[study.slug, item.item_id])).content.decode()
    assert "Step order breaks it." in html
    assert '<span class="link-l2">a1</span>' in html  # a1 linked L2 step 2


def test_judges_on_generated_items_are_compared_with_the_majority(researcher_client, demo):
    study = judged_generation_study(name="From judgments", annotators_per_item=2)
    for pid in ("h1", "h2"):
        annotate_all(annotator_start(study, pid), True)
    report = study_agreement_report(study, bootstrap=0)
    judge = report["judges"]["How2Judge"]
    n_judged_failure = Judgment.objects.filter(judge="How2Judge", has_failure=True).count()
    # Humans said has_failure everywhere: the judge agrees exactly on the items it flagged.
    assert judge["n"] == 10 and judge["agreement"] == pytest.approx(n_judged_failure / 10)
    html = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug])).content.decode()
    assert 'id="judge-agreement"' in html and "How2Judge" in html


def test_leaderboard_shows_the_judge_score_calibrated_with_human_labels(researcher_client, demo):
    from judging.leaderboard_selectors import leaderboard

    study = judged_generation_study(name="Calibration", annotators_per_item=2)
    # Both humans agree with the judge everywhere: TPR = TNR = 1, so nothing is corrected.
    # (Two per item: one annotation is not a human majority.)
    label_as_the_judge(study, ("h1", "h2"))
    rows = {r["model"]: r for r in leaderboard("How2Judge")}
    claude = rows["claude-opus-4.5"]
    # Fractions with a _percent sibling, like how2score (was 0-100 in this field).
    assert claude["calibrated"]["corrected_score"] == pytest.approx(claude["how2score"])
    assert claude["calibrated"]["corrected_score_percent"] == pytest.approx(claude["how2score_percent"])
    assert claude["calibrated"]["tpr"] == 1.0 and claude["calibrated"]["tnr"] == 1.0
    html = researcher_client.get(reverse("leaderboard") + "?judge=How2Judge").content.decode()
    assert "over 10 human-labelled items" in html


def test_one_annotator_per_item_gives_the_leaderboard_no_calibration(demo):
    from annotate.reports.selectors import calibration_from_studies

    study = judged_generation_study(name="Single labels", annotators_per_item=1)
    annotate_all(annotator_start(study, "h1"), True)
    assert calibration_from_studies("How2Judge", [True, False, True]) is None


def test_generations_in_studies_are_kept_out_of_distillation(demo):
    from annotate.studies.item_sources import items_from_judgments
    from annotate.studies.services import study_create
    from annotate.studies.settings import StudySettings
    from judging.distillation import human_annotated_generation_ids

    items = items_from_judgments(judge="How2Judge", n=3, seed=0)
    study_create(
        name="Excluded", items=items, settings=StudySettings(training_enabled=False, qualification_enabled=False)
    )
    assert human_annotated_generation_ids() == {item.source["generation_id"] for item in items}


def test_openapi_schema_describes_the_agreement_endpoint_and_its_refusal(researcher_client):
    import yaml

    schema = yaml.safe_load(researcher_client.get("/api/schema/").content)
    for path in ("/api/studies/{slug}/agreement/", "/api/studies/{slug}/metric-agreement/"):
        operation = schema["paths"][path]["get"]
        assert {p["name"] for p in operation["parameters"]} >= {"slug", "bootstrap", "seed"}, path
        assert "another kind" in operation["responses"]["400"]["description"], path


def test_an_item_id_with_a_slash_links_from_the_disagreements_page_to_its_item_page(researcher_client):
    """Item ids are the importer's: 'batch/1' is one (issue 28, F-02: the page was a 500,
    NoReverseMatch for report_item), and so is '../../admin/', whose link a browser resolved
    to another page before it was written with '~' (annotate/url_converters.py)."""
    import dataclasses
    from urllib.parse import urljoin, urlsplit

    from annotate.studies.services import study_create
    from annotate.studies.settings import StudySettings
    from annotate.testing import item_spec

    study = study_create(
        name="Slashed ids",
        items=[
            dataclasses.replace(item_spec(1), item_id="batch/1"),
            dataclasses.replace(item_spec(2), item_id="a/b/"),
            dataclasses.replace(item_spec(3), item_id="../../admin/"),
            dataclasses.replace(item_spec(4), item_id="~x/./y"),
        ],
        settings=StudySettings(annotators_per_item=2, training_enabled=False, min_seconds=0, allow_other_pids=True),
    )
    for pid in ("a1", "a2"):
        participation = annotator_start(study, pid)
        for _ in range(4):
            annotate_next(participation, ONE_FAILURE if pid == "a1" else None, label=pid == "a1")
    page = researcher_client.get(reverse("annotate:report_disagreements", args=[study.slug]))
    assert page.status_code == 200
    html = page.content.decode()
    for item_id in ("batch/1", "a/b/", "../../admin/", "~x/./y"):
        url = reverse("annotate:report_item", args=[study.slug, item_id])
        assert f'href="{url}"' in html, url
        # What a browser asks for: the link with dot segments resolved (RFC 3986, 5.2.4).
        asked = urlsplit(urljoin(f"http://testserver/studies/{study.slug}/disagreements/", url)).path
        assert asked == url, (item_id, url, asked)
        item_page = researcher_client.get(asked)
        assert item_page.status_code == 200 and escape(item_id) in item_page.content.decode()
