"""Exports that cannot execute: every CSV the product writes neutralises cells a spreadsheet
would read as a formula (a leading =, +, -, @, tab or carriage return gets a ' in front),
while real numbers, negative ones included, stay numbers (docs/annotation.md, "CSV exports")."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import pytest
from django.urls import reverse

from annotate.kinds.base import ROLE_MAIN
from annotate.models import Participation
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import ONE_FAILURE, annotate_next, annotator_start, item_spec, judged_generation_study
from core.csv_cells import FORMULA_TRIGGERS, csv_cell, csv_writer
from judging.models import Judgment

pytestmark = pytest.mark.django_db

FORMULA = "=cmd|' /C calc'!A0"
AT_FORMULA = "@SUM(1+1)*cmd|' /C calc'!A0"
PID = "5f0c1a2b3c4d5e6f7a8b9c0d"  # 24 hex characters, like a Prolific id


def _rows(response) -> list[list[str]]:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return list(csv.reader(io.StringIO(body.decode("utf-8"))))


def _is_number(cell: str) -> bool:
    try:
        return math.isfinite(float(cell))
    except ValueError:
        return False


def _executable_cells(rows: list[list[str]]) -> list[str]:
    """Cells a spreadsheet would evaluate: a leading trigger on anything but a real number."""
    return [cell for row in rows for cell in row if cell[:1] in FORMULA_TRIGGERS and not _is_number(cell)]


def _study(name: str = "CSV study", **settings):
    defaults: dict[str, Any] = {
        "training_enabled": False,
        "qualification_enabled": False,
        "min_seconds": 0,
        "annotators_per_item": 1,
    }
    defaults.update(settings)
    return study_create(name=name, items=[item_spec(1), item_spec(2)], settings=StudySettings(**defaults))


def _hostile_annotator(client, study) -> Participation:
    """An annotator who enters through the study link, writes a formula as their comment and
    whose stored STUDY_ID and SESSION_ID are formula strings. (The entry link now refuses such
    ids; rows stored before that check, or by any other path, must still export safely, so
    the test writes them to the participation directly.)"""
    entry = client.get(f"/a/{study.slug}/", {"PROLIFIC_PID": PID, "STUDY_ID": "study1", "SESSION_ID": "session1"})
    assert entry.status_code == 302, entry.content[:500]
    Participation.objects.filter(study=study, annotator__pid=PID).update(
        prolific_study_id=FORMULA, prolific_session_id=AT_FORMULA
    )
    p = Participation.objects.get(study=study, annotator__pid=PID)
    from annotate.participation.services import participation_consent

    p = participation_consent(participation=p)
    assert annotate_next(p, {**ONE_FAILURE, "comments": FORMULA}) is not None
    return p


def test_annotator_formulas_in_comments_and_entry_ids_are_neutralised_in_the_annotations_csv(client, researcher_client):
    study = _study()
    _hostile_annotator(client, study)
    rows = _rows(researcher_client.get(reverse("annotate:study_export", args=[study.slug, "csv"])))
    header, row = rows[0], rows[1]
    cells = dict(zip(header, row))
    assert cells["comments"] == "'" + FORMULA
    assert cells["prolific_study_id"] == "'" + FORMULA
    assert cells["prolific_session_id"] == "'" + AT_FORMULA
    assert _executable_cells(rows) == []


def test_the_jsonl_export_keeps_the_annotators_text_unchanged(client, researcher_client):
    """Neutralising is for spreadsheets: the JSONL export (the agreement report's input) is data."""
    import json

    study = _study()
    _hostile_annotator(client, study)
    response = researcher_client.get(reverse("annotate:study_export", args=[study.slug, "jsonl"]))
    record = json.loads(b"".join(response.streaming_content).decode().splitlines()[0])
    assert record["comments"] == FORMULA and record["prolific_study_id"] == FORMULA


def test_item_ids_from_an_uploaded_file_are_neutralised_in_the_disagreements_csv(researcher_client):
    items = [item_spec(1), item_spec(2)]
    items[0].item_id, items[1].item_id = "=1+2", "-3+4"
    study = study_create(
        name="Hostile ids",
        items=items,
        settings=StudySettings(
            training_enabled=False, qualification_enabled=False, min_seconds=0, annotators_per_item=2
        ),
    )
    for n, pid in enumerate((f"{1:024x}", f"{2:024x}")):
        p = annotator_start(study, pid)
        while annotate_next(p, label=bool(n)) is not None:
            pass
    rows = _rows(researcher_client.get(reverse("annotate:report_disagreements", args=[study.slug]) + "?format=csv"))
    assert {r[0] for r in rows[1:]} == {"'=1+2", "'-3+4"}
    assert _executable_cells(rows) == []
    csv_text = researcher_client.get(reverse("annotate:study_export", args=[study.slug, "csv"]))
    assert {r[0] for r in _rows(csv_text)[1:]} == {"'=1+2", "'-3+4"}


def test_judge_names_are_neutralised_in_the_judges_csv(researcher_client, demo):
    study = judged_generation_study(name="Hostile judge", annotators_per_item=2, n=4)
    hostile = '=HYPERLINK("http://example.invalid","x")'
    for item in study.items.filter(role=ROLE_MAIN):
        Judgment.objects.create(generation_id=item.source["generation_id"], judge=hostile, has_failure=True)
    for pid in (f"{1:024x}", f"{2:024x}"):
        p = annotator_start(study, pid)
        while annotate_next(p, label=True) is not None:
            pass
    rows = _rows(researcher_client.get(reverse("annotate:report_agreement", args=[study.slug]) + "?format=judges.csv"))
    assert "'" + hostile in [r[0] for r in rows[1:]]
    assert _executable_cells(rows) == []


def test_annotators_csv_writes_through_the_neutralising_writer(client, researcher_client):
    study = _study()
    _hostile_annotator(client, study)
    rows = _rows(researcher_client.get(reverse("annotate:report_annotators", args=[study.slug]) + "?format=csv"))
    assert rows[1][0] == PID and _executable_cells(rows) == []


def test_metric_agreement_csv_neutralises_text_and_keeps_negative_numbers(researcher_client, monkeypatch):
    import annotate.reports.views as views

    study = _study()
    signal = {
        "rank": 1,
        "key": "-key",
        "label": "=label()",
        "family": "+family",
        "higher_means": "@x",
        "n": 4,
        "n_has_failure": 2,
        "n_no_failure": 2,
        "auc": 0.25,
        "auc_ci95": [-0.5, 0.75],
        "best_threshold": {
            "accuracy": 0.5,
            "ci95": None,
            "threshold": -0.52,
            "rule": "\tleft",
            "baseline_accuracy": 0.5,
        },
        "kendall_tau": -1.0,
        "kendall_tau_ci95": None,
        "n_models": 2,
        "note": "\r=note",
    }
    monkeypatch.setattr(views, "study_metric_agreement_report", lambda s: {"signals": [signal]})
    rows = _rows(researcher_client.get(reverse("annotate:report_metric_agreement", args=[study.slug]) + "?format=csv"))
    cells = dict(zip(rows[0], rows[1]))
    assert (cells["key"], cells["label"], cells["family"], cells["higher_means"]) == (
        "'-key",
        "'=label()",
        "'+family",
        "'@x",
    )
    assert cells["best_threshold_rule"] == "'\tleft" and cells["note"] == "'\r=note"
    assert cells["best_threshold"] == "-0.52" and cells["kendall_tau"] == "-1.0" and cells["auc_ci95_low"] == "-0.5"
    assert _executable_cells(rows) == []


@pytest.mark.parametrize(
    "value, expected",
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@A1", "'@A1"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("\uff1d1+1", "'\uff1d1+1"),  # a full-width '=' some spreadsheets take for '='
        ("plain", "plain"),
        ("", ""),
        ("a=b", "a=b"),
        (None, None),
        (-0.52, -0.52),
        (-3, -3),
        (0, 0),
        (True, "true"),
        (False, "false"),
        (float("-inf"), "'-inf"),
        (float("nan"), "nan"),
    ],
)
def test_csv_cell_neutralises_formula_text_and_keeps_real_numbers(value, expected):
    assert csv_cell(value) == expected


def test_csv_writer_neutralises_every_cell_of_every_row():
    buffer = io.StringIO()
    writer = csv_writer(buffer)
    writer.writerow(["=a", -1.5, "ok"])
    writer.writerows([["+b", 2], ["@c", None]])
    assert list(csv.reader(io.StringIO(buffer.getvalue()))) == [["'=a", "-1.5", "ok"], ["'+b", "2"], ["'@c", ""]]


# --------------------------------------------------------------------------- one way to write a boolean


def test_every_csv_writes_booleans_in_lowercase_as_the_annotations_csv_does(client, researcher_client):
    """One convention for every CSV the product writes (core/csv_cells.py): true/false."""
    study = _study(annotators_per_item=2)
    for n, pid in enumerate((f"{1:024x}", f"{2:024x}")):
        p = annotator_start(study, pid)
        while annotate_next(p, label=bool(n)) is not None:
            pass
    Participation.objects.filter(study=study, annotator__pid=f"{2:024x}").update(
        excluded=True, exclusion_reason="manual"
    )
    annotators = _rows(
        researcher_client.get(reverse("annotate:report_annotators", args=[study.slug]), {"format": "csv"})
    )
    excluded = {row[0]: row[annotators[0].index("excluded")] for row in annotators[1:]}
    assert excluded == {f"{1:024x}": "false", f"{2:024x}": "true"}
    annotations = _rows(researcher_client.get(reverse("annotate:study_export", args=[study.slug, "csv"])))
    assert {row[annotations[0].index("has_failure")] for row in annotations[1:]} == {"true", "false"}
    writer_output = io.StringIO()
    csv_writer(writer_output).writerow([True, False, None])
    assert writer_output.getvalue().strip() == "true,false,"


def test_the_disagreements_csv_writes_the_majority_in_lowercase(researcher_client):
    study = _study(annotators_per_item=3, min_annotations_for_majority=2)
    for n, pid in enumerate((f"{1:024x}", f"{2:024x}", f"{3:024x}")):
        p = annotator_start(study, pid)
        while annotate_next(p, label=n == 0) is not None:
            pass
    rows = _rows(researcher_client.get(reverse("annotate:report_disagreements", args=[study.slug]), {"format": "csv"}))
    assert {row[rows[0].index("majority")] for row in rows[1:]} == {"false"}
