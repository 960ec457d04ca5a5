"""The researchers' study pages: create (file and judged generations), progress, annotators,
items, rounds, release, exports; who may see them; the demo study."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotate.models import Annotation, Assignment, AssignmentStatus, Participation, Study
from annotate.participation.reservations import assignment_next
from annotate.studies.services import study_update
from annotate.testing import annotate_next, annotator_start, backdate, study_make

pytestmark = pytest.mark.django_db


def _jsonl(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _record(n, **extra):
    return {
        "item_id": f"w{n}",
        "topic": "Travel & Tourism",
        "goal": f"Goal {n}",
        "reference_steps": ["a", "b"],
        "candidate_steps": ["c", "d"],
        **extra,
    }


FORM = {
    "name": "Web study",
    "kind": "critical_failure",
    "annotators_per_item": 3,
    "min_seconds": 90,
    "lease_minutes": 30,
    "training_enabled": "on",
    "qualification_enabled": "on",
    "attention_check_rate": 0.1,
    "attention_max_failures": 1,
    "seed": 0,
}


def test_a_researcher_creates_a_study_from_judged_generations_plus_a_file_of_gold_items(researcher_client, demo):
    upload = SimpleUploadedFile(
        "gold.jsonl",
        _jsonl(
            [
                _record(1, qualification={"has_failure": True, "explanation": "x"}),
                _record(2, attention_check={"has_failure": False}),
            ]
        ),
    )
    response = researcher_client.post(
        reverse("annotate:study_new"), {**FORM, "judge": "How2Judge", "n_judged": 5, "items_file": upload}
    )
    assert response.status_code == 302
    study = Study.objects.get()
    assert study.items.filter(role="main").count() == 5 and study.items.filter(role="qualification").count() == 1
    page = researcher_client.get(response.url)
    assert page.status_code == 200
    body = page.content.decode()
    assert "PROLIFIC_PID={{%PROLIFIC_PID%}}" in body and study.completion_code in body and "0 / 5" in body


def test_a_bad_upload_names_the_line_and_creates_nothing(researcher_client):
    upload = SimpleUploadedFile("items.jsonl", _jsonl([_record(1)]) + b'{"item_id": "w2"}\n')
    response = researcher_client.post(
        reverse("annotate:study_new"), {**FORM, "items_file": upload, "qualification_enabled": ""}
    )
    assert response.status_code == 400
    assert "items.jsonl, line 2, field &#x27;goal&#x27;: is required" in response.content.decode()
    assert "Nothing was created." in response.content.decode()
    assert not Study.objects.exists()


def test_the_study_page_shows_progress_pay_pass_rates_annotators_and_items(researcher_client):
    study = study_make(
        n_items=3,
        annotators_per_item=2,
        n_gold=2,
        gold_answers=[False, False],
        qualification_pass=1,
        payment_per_item=Decimal("1.00"),
    )
    for pid in ("r1", "r2"):
        p = annotator_start(study, pid)
        annotate_next(p, label=False)
        annotate_next(p, label=False)  # both gold items answered right
        a = assignment_next(participation=p)
        assert a is not None
        from annotate.participation.drafts import assignment_save
        from annotate.participation.submissions import annotation_submit
        from annotate.testing import read_everything

        read_everything(p, a)
        backdate(a, 120)
        assignment_save(participation=p, public_id=a.public_id, active_ms=120_000)
        annotation_submit(participation=p, public_id=a.public_id, answer={"has_failure": False, "failures": []})
    response = researcher_client.get(reverse("annotate:study_detail", args=[study.slug]))
    body = response.content.decode()
    assert response.status_code == 200
    assert 'id="items-complete">1 / 3' in body
    assert "USD/h" in body and "30.00 USD/h" in body  # 1 USD per ~120 s of active time
    assert "100 % of 2" in body  # qualification pass rate
    assert "r1" in body and "r2" in body and "gold-1" in body


def test_release_frees_a_returned_participants_slots(researcher_client):
    study = study_make(n_items=2)
    p = annotator_start(study, "returner")
    a = assignment_next(participation=p)
    assert a is not None
    response = researcher_client.post(
        reverse("annotate:participant_release", args=[study.slug, p.pk]), {"confirm": "yes"}
    )
    assert response.status_code == 302
    assert Assignment.objects.get(pk=a.pk).status == AssignmentStatus.RELEASED
    assert Participation.objects.get(pk=p.pk).state == "returned"


def test_a_new_round_clones_the_items_under_new_guidelines_and_rounds_are_compared(researcher_client):
    study = study_make(n_items=2, annotators_per_item=2)
    response = researcher_client.post(
        reverse("annotate:study_round_new", args=[study.slug]), {"instructions": "Round two: clearer examples."}
    )
    new = Study.objects.exclude(pk=study.pk).get()
    assert response.url == reverse("annotate:study_detail", args=[new.slug])
    assert new.round == 2 and new.first_round_id == study.pk and new.guideline_version_id != study.guideline_version_id
    assert list(new.items.values_list("item_id", flat=True)) == list(study.items.values_list("item_id", flat=True))
    body = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert new.name in body and "Krippendorff" in body


def test_guidelines_cannot_change_under_annotators_who_already_started():
    from annotate.errors import StudyInvalid

    study = study_make(n_items=2)
    changed = study_update(study=study, instructions="Edited before anyone came.")
    assert changed.guideline_version.instructions == "Edited before anyone came."
    annotator_start(changed, "starter")
    with pytest.raises(StudyInvalid, match="new round"):
        study_update(study=changed, instructions="Edited later.")


def test_exports_from_the_web_ui_in_csv_and_jsonl(researcher_client):
    study = study_make(n_items=1, annotators_per_item=1)
    annotate_next(annotator_start(study, "csvperson"), label=True)
    response = researcher_client.get(reverse("annotate:study_export", args=[study.slug, "csv"]))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 1 and rows[0]["annotator"] == "csvperson" and rows[0]["has_failure"] == "true"
    assert json.loads(rows[0]["failures"])[0]["L2_steps"] == [2]
    response = researcher_client.get(reverse("annotate:study_export", args=[study.slug, "jsonl"]))
    line = json.loads(b"".join(response.streaming_content).decode().splitlines()[0])
    assert line["item_id"] == "item-1" and line["excluded"] is False
    assert researcher_client.get(reverse("annotate:study_export", args=[study.slug, "xlsx"])).status_code == 404


def test_study_pages_need_the_researcher_role():
    study = study_make(n_items=1)
    urls = [
        reverse("annotate:study_list"),
        reverse("annotate:study_new"),
        reverse("annotate:study_detail", args=[study.slug]),
        reverse("annotate:study_export", args=[study.slug, "csv"]),
    ]
    for url in urls:
        response = Client().get(url)
        assert response.status_code == 302 and "/login/" in response["Location"]
    # An annotator's session does not open them either.
    annotator = Client()
    annotator.get(reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": "curious"})
    for url in urls:
        assert "/login/" in annotator.get(url)["Location"]
    from django.contrib.auth import get_user_model

    nobody = get_user_model().objects.create_user("norole", password="x-Password-1")
    client = Client()
    client.force_login(nobody)
    assert all(client.get(url).status_code == 403 for url in urls)


def test_admins_see_the_study_pages(admin_client_):
    study = study_make(n_items=1)
    assert admin_client_.get(reverse("annotate:study_detail", args=[study.slug])).status_code == 200
    assert b"Studies" in admin_client_.get(reverse("annotate:study_list")).content


def test_the_demo_study_loads_idempotently_and_any_pid_can_annotate(demo):
    from annotate import demo as annotate_demo

    first = annotate_demo.load()
    assert "7 items, 4 qualification items, 1 attention check" in first
    assert "already present" in annotate_demo.load()
    study = Study.objects.get(slug=annotate_demo.DEMO_SLUG)
    assert study.min_seconds == 90 and study.annotators_per_item == 3 and study.training_enabled
    gold = study.items.filter(role="qualification")
    assert set(gold.values_list("expected", flat=True)) == {True, False}
    client = Client()
    response = client.get(annotate_demo.entry_path().replace("demo-annotator-1", "anyone42"))
    assert response.status_code == 302 and response["Location"].endswith("/consent/")
    assert b"research study" in client.get(response["Location"]).content
    assert not Annotation.objects.filter(study=study).exists()  # nobody has annotated the live study
