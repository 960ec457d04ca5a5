"""The New-study form works on its documented paths: its defaults create a study from every
documented source (judged generations, a file of each kind, both); an attention-check rate
above zero with no attention-check items is refused beside the field, by the form and by the
service; the form has every setting of the create_study command; releasing a participant's
slots asks for confirmation (a page that works without JavaScript, and the server requires it)."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.urls import reverse

from annotate.errors import StudyInvalid
from annotate.management.commands.create_study import Command as CreateStudyCommand
from annotate.models import Assignment, AssignmentStatus, Participation, Study
from annotate.participation.reservations import assignment_next
from annotate.studies.forms import StudyCreateForm
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import annotator_start, item_spec, study_make

pytestmark = pytest.mark.django_db


def _critical_failure(n, **extra):
    return {
        "item_id": f"cf{n}",
        "topic": "Travel & Tourism",
        "goal": f"Goal {n}",
        "reference_steps": ["a", "b"],
        "candidate_steps": ["c", "d"],
        **extra,
    }


def _multiple_choice(n, **extra):
    return {
        "id": f"mc{n}",
        "task": "step_inference",
        "prompt": f"Prevent colds {n}",
        "label": 0,
        "topic": "Health",
        "candidates": ["wash your hands", "wash your cat", "clap your hands", "eat your protein"],
        **extra,
    }


def _faithfulness(n, **extra):
    return {
        "id": f"fs{n}",
        "abstract_goal": "Make a cake",
        "specific_goal": f"Make a vanilla cake {n}",
        "constraint": "Vanilla",
        "constraint_type": "modifier",
        "topic": "Food",
        "steps": ["Preheat the oven.", "Mix.", "Bake."],
        **extra,
    }


def _upload(records, name="items.jsonl"):
    return SimpleUploadedFile(name, "".join(json.dumps(r) + "\n" for r in records).encode())


def _defaults(**fields) -> dict:
    """What a browser posts when nothing but the given fields is touched: every field's initial
    value (a ticked box as "on", an unticked one left out)."""
    data = {}
    for name, field in StudyCreateForm().fields.items():
        value = field.initial
        if value is True:
            data[name] = "on"
        elif value not in (None, False, ""):
            data[name] = value
    data.update(fields)
    return {k: v for k, v in data.items() if v is not None}


# Every documented source of items (docs/annotation.md "Create"), with nothing else changed.
SOURCES = {
    "judged generations": lambda: {"judge": "How2Judge", "n_judged": 5},
    "a critical-failure file": lambda: {"items_file": _upload([_critical_failure(n) for n in (1, 2, 3)])},
    "a critical-failure file with gold and attention items": lambda: {
        "items_file": _upload(
            [_critical_failure(n) for n in (1, 2, 3)]
            + [
                _critical_failure(4, qualification={"has_failure": True, "explanation": "x"}),
                _critical_failure(5, attention_check={"has_failure": False}),
            ]
        )
    },
    "judged generations plus a file of gold items": lambda: {
        "judge": "How2Judge",
        "n_judged": 5,
        "items_file": _upload(
            [
                _critical_failure(4, qualification={"has_failure": True, "explanation": "x"}),
                _critical_failure(5, qualification={"has_failure": False, "explanation": "y"}),
            ]
        ),
    },
    "a multiple-choice file": lambda: {
        "kind": "multiple_choice",
        "items_file": _upload([_multiple_choice(n) for n in (1, 2)]),
    },
    "a constraint-faithfulness file": lambda: {
        "kind": "constraint_faithfulness",
        "items_file": _upload([_faithfulness(n) for n in (1, 2)]),
    },
}


@pytest.mark.parametrize("source", list(SOURCES))
def test_the_form_defaults_create_a_study_from_every_documented_source(researcher_client, demo, source):
    response = researcher_client.post(
        reverse("annotate:study_new"), _defaults(name=f"Defaults: {source}", **SOURCES[source]())
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    study = Study.objects.get()
    roles = {role: study.items.filter(role=role).count() for role in ("main", "qualification", "attention")}
    # Qualification and attention checks are on exactly when the items hold gold / check items.
    assert study.qualification_enabled is (roles["qualification"] > 0)
    assert (study.attention_check_rate > 0) is (roles["attention"] > 0)
    if roles["attention"]:
        assert study.attention_check_rate == pytest.approx(0.1)


def test_an_attention_rate_without_attention_items_is_refused_beside_the_field(researcher_client, demo):
    data = _defaults(name="No checks", judge="How2Judge", n_judged=5, attention_check_rate="0.1")
    response = researcher_client.post(reverse("annotate:study_new"), data)
    assert response.status_code == 400
    body = response.content.decode()
    row = re.search(
        r'<div class="form-row">\s*<label for="id_attention_check_rate">.*?</div>\s*</div>|'
        r'<div class="form-row">\s*<label for="id_attention_check_rate">.*?(?=<div class="form-row">)',
        body,
        re.S,
    )
    assert row and "attention" in row.group(0).lower() and "no item is an attention check" in row.group(0)
    assert not Study.objects.exists()


def test_the_service_refuses_an_attention_rate_without_attention_items_and_names_the_field():
    with pytest.raises(StudyInvalid) as caught:
        study_create(
            name="No checks",
            items=[item_spec(1)],
            settings=StudySettings(qualification_enabled=False, attention_check_rate=0.1),
        )
    assert [e.field for e in caught.value.errors] == ["attention_check_rate"]
    assert "no item is an attention check" in caught.value.message
    assert not Study.objects.exists()


def test_an_explicit_qualification_without_gold_items_is_refused_beside_the_field(researcher_client, demo):
    data = _defaults(name="No gold", judge="How2Judge", n_judged=5, qualification_enabled="on")
    response = researcher_client.post(reverse("annotate:study_new"), data)
    assert response.status_code == 400
    assert not Study.objects.exists()
    form = response.context["form"]
    assert "qualification" in " ".join(form.errors["qualification_enabled"])


def test_the_study_page_claims_no_attention_checks_when_there_are_none(researcher_client):
    study = study_make(n_items=2)
    assert study.attention_check_rate == 0
    body = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert "attention checks off" in body
    checked = study_make(n_items=4, n_attention=2, attention_check_rate=0.25, name="Checked")
    body = researcher_client.get(reverse("annotate:study_detail", args=[checked.slug])).content.decode()
    assert "attention checks 0.25 (2 check items" in body


def test_the_command_defaults_create_a_study_from_judged_generations_alone(demo):
    out = StringIO()
    call_command("create_study", "--name", "Sampled", "--from-judge", "How2Judge", "--sample", "5", stdout=out)
    study = Study.objects.get()
    assert not study.qualification_enabled and study.attention_check_rate == 0
    assert "5 items, 0 attention checks, 0 qualification items" in out.getvalue()


# The command's options that are not study settings: where annotators reach this server (the
# web form is on that server already) and which file holds the items (the upload).
COMMAND_ONLY = {"base_url"}
COMMAND_TO_FORM = {
    "items": "items_file",
    "from_judge": "judge",
    "sample": "n_judged",
    "no_training": "training_enabled",
    "no_qualification": "qualification_enabled",
    "attention_rate": "attention_check_rate",
    "max_items": "max_items_per_annotator",
}


def test_the_form_has_every_setting_of_the_create_study_command():
    base = {a.dest for a in BaseCommand().create_parser("manage.py", "base")._actions}
    options = {a.dest for a in CreateStudyCommand().create_parser("manage.py", "create_study")._actions} - base
    assert {"items_per_page", "slug", "attention_rate"} <= options
    fields = set(StudyCreateForm().fields)
    assert sorted(d for d in options - COMMAND_ONLY if COMMAND_TO_FORM.get(d, d) not in fields) == []


def test_items_per_page_and_slug_from_the_form(researcher_client):
    data = _defaults(
        name="Pages",
        kind="multiple_choice",
        items_per_page=15,
        slug="goal-step-pages",
        items_file=_upload([_multiple_choice(n) for n in range(1, 4)]),
    )
    response = researcher_client.post(reverse("annotate:study_new"), data)
    assert response.status_code == 302
    study = Study.objects.get()
    assert study.items_per_page == 15 and study.slug == "goal-step-pages"


def test_items_per_page_out_of_range_is_refused_beside_the_field(researcher_client):
    data = _defaults(
        name="Pages",
        kind="multiple_choice",
        items_per_page=31,
        items_file=_upload([_multiple_choice(n) for n in range(1, 4)]),
    )
    response = researcher_client.post(reverse("annotate:study_new"), data)
    assert response.status_code == 400 and "items_per_page" in response.context["form"].errors
    assert not Study.objects.exists()


def test_release_asks_for_confirmation_and_the_server_requires_it(researcher_client):
    study = study_make(n_items=2)
    p = annotator_start(study, "returner")
    a = assignment_next(participation=p)
    assert a is not None
    url = reverse("annotate:participant_release", args=[study.slug, p.pk])

    # The study page's control leads to a confirmation step, not straight to the release.
    page = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert url in page and 'name="confirm"' in page
    # Without JavaScript: the confirmation page says what will happen.
    confirm_page = researcher_client.get(url)
    assert confirm_page.status_code == 200
    text = confirm_page.content.decode()
    assert "returner" in text and "1 reserved slot" in text and 'name="confirm" value="yes"' in text
    # A POST without the confirmation releases nothing and names the field.
    refused = researcher_client.post(url)
    assert refused.status_code == 400 and "confirm" in refused.content.decode()
    assert Assignment.objects.get(pk=a.pk).status == AssignmentStatus.RESERVED
    assert Participation.objects.get(pk=p.pk).state != "returned"
    # Confirmed: released.
    done = researcher_client.post(url, {"confirm": "yes"})
    assert done.status_code == 302
    assert Assignment.objects.get(pk=a.pk).status == AssignmentStatus.RELEASED
    assert Participation.objects.get(pk=p.pk).state == "returned"


@pytest.mark.parametrize(
    "field, value",
    [
        ("attention_check_rate", "lots"),
        ("attention_check_rate", "1.5"),
        ("items_per_page", "many"),
        ("items_per_page", "0"),
        ("qualification_enabled", "sometimes"),
        ("slug", "Not A Slug!"),
    ],
)
def test_hostile_settings_get_a_400_naming_the_field(researcher_client, field, value):
    data = _defaults(name="Hostile", items_file=_upload([_critical_failure(1)]), **{field: value})
    response = researcher_client.post(reverse("annotate:study_new"), data)
    assert response.status_code == 400
    assert field in response.context["form"].errors
    assert not Study.objects.exists()


def test_the_form_and_the_command_create_the_same_study_from_the_same_input(researcher_client, tmp_path):
    """One creation path: the New study page and ``manage.py create_study`` gather the items and
    map the settings through the same services, so the same file and settings make the same study."""
    records = [_multiple_choice(n) for n in range(1, 5)] + [
        _multiple_choice(5, attention_check={"label": 0}),
        _multiple_choice(6, attention_check={"label": 0}),
    ]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    posted = _defaults(
        name="By form",
        slug="by-form",
        kind="multiple_choice",
        items_file=_upload(records),
        annotators_per_item=2,
        min_seconds=7,
        lease_minutes=9,
        qualification_enabled="off",
        attention_check_rate=0.25,
        attention_max_failures=1,
        max_items_per_annotator=3,
        items_per_page=4,
        completion_code="DONE1",
        screened_out_code="OUT1",
        payment_per_item="0.20",
        min_annotations_for_majority=2,
        prolific_study_id="abc",
        instructions="Read well.",
    )
    posted.pop("training_enabled")  # unticked
    assert researcher_client.post(reverse("annotate:study_new"), posted).status_code == 302
    call_command(
        "create_study",
        "--name",
        "By form",
        "--slug",
        "by-command",
        "--kind",
        "multiple_choice",
        "--items",
        str(path),
        "--annotators-per-item",
        "2",
        "--min-seconds",
        "7",
        "--lease-minutes",
        "9",
        "--no-training",
        "--no-qualification",
        "--attention-rate",
        "0.25",
        "--attention-max-failures",
        "1",
        "--max-items",
        "3",
        "--items-per-page",
        "4",
        "--completion-code",
        "DONE1",
        "--screened-out-code",
        "OUT1",
        "--payment-per-item",
        "0.20",
        "--min-annotations-for-majority",
        "2",
        "--prolific-study-id",
        "abc",
        "--instructions",
        str(_instructions(tmp_path)),
        stdout=StringIO(),
    )
    by_form, by_command = Study.objects.get(slug="by-form"), Study.objects.get(slug="by-command")

    def study(s):
        skip = {"id", "slug", "first_round", "created_at", "created_by"}
        return {f.attname: getattr(s, f.attname) for f in Study._meta.concrete_fields if f.name not in skip}

    def items(s):
        return list(
            s.items.order_by("role", "position").values(
                "item_id",
                "role",
                "position",
                "topic",
                "goal",
                "reference_steps",
                "candidate_steps",
                "expected",
                "source",
            )
        )

    assert study(by_form) == study(by_command)
    assert by_form.items_per_page == 4 and by_form.attention_check_rate == 0.25 and not by_form.training_enabled
    assert items(by_form) == items(by_command) and len(items(by_form)) == 6


def _instructions(tmp_path):
    path = tmp_path / "guidelines.txt"
    path.write_text("Read well.")
    return path
