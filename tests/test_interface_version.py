"""Each study kind has its own annotation interface (templates, scripts) and so its own
interface version: the kind says it (``StudyKind.interface_version``), the annotator's page
state carries it, and every annotation stores it. Critical failure keeps "cf-ui-1", the
version its annotations have always stored."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from annotate.kinds import kind_get, kind_list
from annotate.kinds.base import StudyKind
from annotate.models import Annotation
from annotate.participation.reservations import assignment_next, assignment_page
from annotate.participation.services import participation_consent, participation_enter
from annotate.participation.submissions import annotation_submit
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import annotate_next, annotator_start, study_make

SETTINGS: dict[str, Any] = {
    "training_enabled": False,
    "qualification_enabled": False,
    "min_seconds": 0,
    "allow_other_pids": True,
}

CHOICE_LINE = {
    "id": "step_inference-1",
    "task": "step_inference",
    "prompt": "Prevent illness",
    "candidates": ["wash your hands", "wash your cat", "clap your hands", "eat your protein"],
    "label": 0,
    "topic": "Health",
}
FAITHFULNESS_LINE = {
    "id": "cs-1",
    "abstract_goal": "Make a cake",
    "specific_goal": "Make a vanilla cake",
    "constraint": "Vanilla",
    "constraint_type": "modifier",
    "topic": "Food",
    "steps": ["Gather your ingredients.", "Add the vanilla.", "Bake the cake."],
}
YES_ALL = {"specific_goal_ok": "yes", "meets_constraint": "yes", "steps_correct": "yes", "wrong_steps": []}


def _study(kind: str, line: dict):
    spec = kind_get(kind).parse_record(line)
    return study_create(
        name=f"{kind} study", kind=kind, items=[spec], settings=StudySettings(attention_check_rate=0, **SETTINGS)
    )


def _enter(study, pid: str):
    p = participation_enter(study=study, pid=pid, prolific_study_id="S", session_id=f"s-{pid}")
    return participation_consent(participation=p)


def test_each_kind_has_its_own_interface_version_and_critical_failure_keeps_cf_ui_1():
    versions = {kind.key: kind.interface_version for kind in kind_list()}
    assert versions["critical_failure"] == "cf-ui-1"
    assert versions["multiple_choice"] != "cf-ui-1" and versions["constraint_faithfulness"] != "cf-ui-1"
    assert all(versions.values()) and len(set(versions.values())) == len(versions)


def test_a_kind_that_names_no_version_gets_one_of_its_own():
    toy = StudyKind(
        key="toy",
        label="Toy",
        item_template="t.html",
        codebook_path=None,
        default_instructions="",
        parse_record=lambda record: None,  # type: ignore[arg-type]
        clean_draft=lambda draft, n1, n2: {},
        validate_submission=lambda answer, n1, n2: (None, []),
    )
    assert toy.interface_version == "toy-ui-1"


@pytest.mark.django_db
def test_a_critical_failure_annotation_stores_its_kinds_version():
    study = study_make(n_items=1, annotators_per_item=1)
    assert annotate_next(annotator_start(study, "pid-cf"), label=False) is not None
    assert Annotation.objects.get(study=study).interface_version == "cf-ui-1"


@pytest.mark.django_db
def test_a_multiple_choice_annotation_stores_its_kinds_version():
    study = _study("multiple_choice", CHOICE_LINE)
    p = _enter(study, "pid-mc")
    [a] = assignment_page(participation=p, size=5)
    annotation_submit(participation=p, public_id=a.public_id, answer={"choice": 0}, submission_id="t")
    assert Annotation.objects.get(study=study).interface_version == kind_get("multiple_choice").interface_version


@pytest.mark.django_db
def test_a_constraint_faithfulness_annotation_stores_its_kinds_version():
    study = _study("constraint_faithfulness", FAITHFULNESS_LINE)
    p = _enter(study, "pid-faith")
    a = assignment_next(participation=p)
    assert a is not None
    annotation_submit(participation=p, public_id=a.public_id, answer=YES_ALL, submission_id="t")
    expected = kind_get("constraint_faithfulness").interface_version
    assert Annotation.objects.get(study=study).interface_version == expected


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kind", "line"),
    [("critical_failure", None), ("multiple_choice", CHOICE_LINE), ("constraint_faithfulness", FAITHFULNESS_LINE)],
)
def test_the_annotators_page_state_carries_its_kinds_version(kind, line):
    study = study_make(n_items=1, annotators_per_item=1) if line is None else _study(kind, line)
    client = Client()
    client.get(f"/a/{study.slug}/?PROLIFIC_PID=pid-page&STUDY_ID=S&SESSION_ID=s1")
    client.post(f"/a/{study.slug}/consent/", {"agree": "yes"})
    page = client.get(f"/a/{study.slug}/work/")
    assert page.status_code == 200
    found = re.search(r'<script id="page-state" type="application/json">(.*?)</script>', page.content.decode(), re.S)
    assert found is not None
    state = json.loads(found[1])
    assert state["interfaceVersion"] == kind_get(kind).interface_version
