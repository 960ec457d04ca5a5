"""The anonymous annotator's path is hostile-proof: NaN/Infinity in a number field, integers
beyond a 32-bit column, deep nesting, NUL characters, lone surrogates and over-long strings
get a 400 that names the field, never a 500, and nothing stored changes.

Every study kind shares the save and submit endpoints; each kind is attacked on them."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from annotate.kinds import kind_get
from annotate.models import Annotation, Annotator, Assignment, Participation
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import item_spec, study_make

pytestmark = pytest.mark.django_db

PID = "5f1e2d3c4b5a69788796a5b4"  # shaped like a Prolific id: 24 hexadecimal characters
TOO_BIG = 2**31  # one above the largest value of a PostgreSQL integer column


def _multiple_choice_study():
    line = {
        "id": "mc-1",
        "task": "step_inference",
        "prompt": "Prevent colds",
        "label": 0,
        "topic": "Health",
        "candidates": ["wash your hands", "wash your cat", "clap your hands", "eat your protein"],
    }
    return study_create(
        name="Choices",
        kind="multiple_choice",
        items=[kind_get("multiple_choice").parse_record(line)],
        settings=StudySettings(training_enabled=False, qualification_enabled=False, min_seconds=0),
    )


def _faithfulness_study():
    line = {
        "id": "cs-1",
        "abstract_goal": "Make a cake",
        "specific_goal": "Make a vanilla cake",
        "constraint": "Vanilla",
        "constraint_type": "modifier",
        "steps": ["Gather.", "Mix.", "Bake."],
    }
    return study_create(
        name="Faithfulness",
        kind="constraint_faithfulness",
        items=[kind_get("constraint_faithfulness").parse_record(line)],
        settings=StudySettings(training_enabled=False, qualification_enabled=False, min_seconds=0),
    )


STUDIES = {
    "critical_failure": lambda: study_make(n_items=2, name="Critical"),
    "multiple_choice": _multiple_choice_study,
    "constraint_faithfulness": _faithfulness_study,
}


@pytest.fixture(params=list(STUDIES))
def on_item(request):
    """An annotator of each kind's study with an item reserved on their page."""
    study = STUDIES[request.param]()
    client = Client()
    response = client.get(
        reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": PID, "STUDY_ID": "st", "SESSION_ID": "se"}
    )
    assert response.status_code == 302
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    assert client.get(reverse("annotate:work", args=[study.slug])).status_code == 200
    a = Assignment.objects.get()
    return client, study, a


def _snapshot() -> list:
    """Everything an annotator's request could write."""
    return [
        list(
            Assignment.objects.order_by("pk").values(
                "status",
                "draft",
                "draft_seq",
                "draft_saved_at",
                "click_log",
                "steps_opened",
                "goal_acknowledged_at",
                "active_seconds",
                "last_activity_at",
                "lease_expires_at",
            )
        ),
        list(Participation.objects.order_by("pk").values()),
        list(Annotation.objects.order_by("pk").values("pk")),
        list(Annotator.objects.order_by("pk").values()),
    ]


def _post_raw(client: Client, url: str, text: str):
    return client.post(url, data=text.encode("utf-8", "surrogatepass"), content_type="application/json")


def _refused(response, field: str) -> dict:
    assert response.status_code == 400, (response.status_code, response.content[:500])
    body = response.json()
    assert body["ok"] is False
    fields = [e["field"] for e in body["errors"]]
    assert field in fields, (field, body)
    return body


DEEP = "[" * 50_000 + "]" * 50_000

# (raw JSON body, the field the 400 must name)
HOSTILE_SAVES = {
    "active_ms NaN": ('{"active_ms": NaN}', "active_ms"),
    "active_ms Infinity": ('{"active_ms": Infinity}', "active_ms"),
    "active_ms -Infinity": ('{"active_ms": -Infinity}', "active_ms"),
    "active_ms 1e400": ('{"active_ms": 1e400}', "active_ms"),
    "active_ms above 2^31-1": (json.dumps({"active_ms": TOO_BIG}), "active_ms"),
    "active_ms with 40 digits": ('{"active_ms": ' + "9" * 40 + "}", "active_ms"),
    "active_ms negative": ('{"active_ms": -5}', "active_ms"),
    "active_ms as text": ('{"active_ms": "12"}', "active_ms"),
    "seq above 2^31-1": (json.dumps({"seq": TOO_BIG, "draft": {}}), "seq"),
    "seq NaN": ('{"seq": NaN, "draft": {}}', "seq"),
    "seq a float": ('{"seq": 1.5, "draft": {}}', "seq"),
    "client_t Infinity": ('{"events": [{"type": "visible", "client_t": Infinity}]}', "events[0].client_t"),
    "client_t above 2^53": (json.dumps({"events": [{"type": "visible", "client_t": 2**60}]}), "events[0].client_t"),
    "NUL in an event target": (
        json.dumps({"events": [{"type": "shortcut", "target": "a\u0000b"}]}),
        "events[0].target",
    ),
    "event type not a string": (json.dumps({"events": [{"type": ["goal_ack"]}]}), "events[0].type"),
    "event not an object": (json.dumps({"events": ["goal_ack"]}), "events[0]"),
    "events not a list": (json.dumps({"events": {"type": "goal_ack"}}), "events"),
    "NUL in the draft": (json.dumps({"seq": 1, "draft": {"comments": "a\u0000b"}}), "draft.comments"),
    "lone surrogate in the draft": ('{"seq": 1, "draft": {"comments": "\\ud800"}}', "draft.comments"),
    "NUL in a draft key": ('{"seq": 1, "draft": {"x\\u0000": 1}}', "draft.x\\x00"),
    "over-long string": (json.dumps({"seq": 1, "draft": {"comments": "x" * 200_000}}), "draft.comments"),
    "deep nesting": ('{"seq": 1, "draft": ' + DEEP + "}", "body"),
    "not an object": ("[1, 2]", "body"),
    "not JSON": ("{'seq': 1", "body"),
}


@pytest.mark.parametrize("case", list(HOSTILE_SAVES))
def test_a_hostile_autosave_is_refused_with_400_naming_the_field_and_changes_nothing(on_item, case):
    client, study, a = on_item
    text, field = HOSTILE_SAVES[case]
    before = _snapshot()
    _refused(_post_raw(client, reverse("annotate:save", args=[study.slug, a.public_id]), text), field)
    assert _snapshot() == before


HOSTILE_SUBMITS = {
    "NaN in the answer": (
        '{"answer": {"has_failure": NaN, "choice": NaN, "steps_correct": NaN}}',
        "answer.has_failure",
    ),
    "Infinity in the answer": ('{"answer": {"comments": "ok", "x": Infinity}}', "answer.x"),
    "NUL in the comments": (json.dumps({"answer": {"comments": "\u0000"}}), "answer.comments"),
    "submission_id with NUL": (json.dumps({"answer": {}, "submission_id": "a\u0000"}), "submission_id"),
    "submission_id too long": (json.dumps({"answer": {}, "submission_id": "x" * 65}), "submission_id"),
    "submission_id an object": (json.dumps({"answer": {}, "submission_id": {"a": 1}}), "submission_id"),
    "deep nesting": ('{"answer": ' + DEEP + "}", "body"),
}


@pytest.mark.parametrize("endpoint", ["annotate:save", "annotate:submit"])
def test_a_multipart_form_instead_of_json_is_a_400_not_a_500(on_item, endpoint):
    client, study, a = on_item
    before = _snapshot()
    response = client.post(reverse(endpoint, args=[study.slug, a.public_id]), {"draft": "x", "seq": "1"})
    _refused(response, "body")
    assert _snapshot() == before


@pytest.mark.parametrize("case", list(HOSTILE_SUBMITS))
def test_a_hostile_submit_is_refused_with_400_naming_the_field_and_stores_nothing(on_item, case):
    client, study, a = on_item
    text, field = HOSTILE_SUBMITS[case]
    before = _snapshot()
    _refused(_post_raw(client, reverse("annotate:submit", args=[study.slug, a.public_id]), text), field)
    assert _snapshot() == before


@pytest.mark.parametrize("kind", list(STUDIES))
def test_a_huge_step_or_choice_inside_an_answer_is_a_400_of_the_kind_not_a_500(kind):
    study = STUDIES[kind]()
    client = Client()
    client.get(
        reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": PID, "STUDY_ID": "st", "SESSION_ID": "se"}
    )
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    client.get(reverse("annotate:work", args=[study.slug]))
    a = Assignment.objects.get()
    answer = {
        "critical_failure": {
            "has_failure": True,
            "failures": [{"description": "d", "L1_steps": [2**40], "L2_steps": [1]}],
        },
        "multiple_choice": {"choice": 2**63},
        "constraint_faithfulness": {
            "specific_goal_ok": "yes",
            "meets_constraint": "yes",
            "steps_correct": "no",
            "wrong_steps": [{"step": 10**20, "error_types": ["wrong_order"]}],
        },
    }[kind]
    url = reverse("annotate:submit", args=[study.slug, a.public_id])
    response = client.post(url, data=json.dumps({"answer": answer}), content_type="application/json")
    assert response.status_code == 400 and response.json()["errors"]
    assert not Annotation.objects.exists()
    save = client.post(
        reverse("annotate:save", args=[study.slug, a.public_id]),
        data=json.dumps({"draft": answer, "seq": 1}),
        content_type="application/json",
    )
    assert save.status_code == 200  # a draft keeps only what is valid
    assert json.dumps(Assignment.objects.get().draft).count(str(2**40)) == 0


ENTRY_PARAMS = {
    "NUL in STUDY_ID": ({"STUDY_ID": "st\x00"}, "STUDY_ID"),
    "NUL in SESSION_ID": ({"SESSION_ID": "se\x00"}, "SESSION_ID"),
    "over-long SESSION_ID": ({"SESSION_ID": "s" * 101}, "SESSION_ID"),
    "formula in STUDY_ID": ({"STUDY_ID": "=cmd|' /C calc'!A0"}, "STUDY_ID"),
    "NUL in the PID": ({"PROLIFIC_PID": "ab\x00"}, "PROLIFIC_PID"),
    "a made-up PID": ({"PROLIFIC_PID": "made-up-1"}, "PROLIFIC_PID"),
}


@pytest.mark.parametrize("case", list(ENTRY_PARAMS))
def test_hostile_entry_parameters_get_a_friendly_400_naming_the_parameter_and_create_nobody(case):
    study = study_make(n_items=1, allow_other_pids=False)
    params, field = ENTRY_PARAMS[case]
    query = {"PROLIFIC_PID": PID, "STUDY_ID": "st", "SESSION_ID": "se", **params}
    before = _snapshot()
    response = Client().get(reverse("annotate:entry", args=[study.slug]), query)
    assert response.status_code == 400
    assert field.encode() in response.content and b"Traceback" not in response.content
    assert _snapshot() == before


@pytest.mark.parametrize("encoded", ["%ED%A0%80", "%FF%FE", "%C0%80"])
def test_undecodable_bytes_in_the_entry_url_get_a_friendly_400(encoded):
    study = study_make(n_items=1)
    url = reverse("annotate:entry", args=[study.slug])
    response = Client().get(f"{url}?PROLIFIC_PID={encoded}&STUDY_ID=st&SESSION_ID={encoded}")
    assert response.status_code == 400 and b"PROLIFIC_PID" in response.content
    assert not Participation.objects.exists()


def test_hostile_form_posts_and_huge_training_numbers_on_the_path_are_never_a_500():
    study = study_make(n_items=1, training_enabled=True)
    client = Client()
    client.get(
        reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": PID, "STUDY_ID": "st", "SESSION_ID": "se"}
    )
    consent = reverse("annotate:consent", args=[study.slug])
    assert client.post(consent, {"agree": "yes\x00"}).status_code == 400
    assert client.post(consent, {"agree": "y" * 100_000}).status_code == 400
    assert Participation.objects.get().state == "consent"
    client.post(consent, {"agree": "yes"})
    for number in (10**15, 10**30):  # beyond the examples; beyond any integer column
        huge = f"/a/{study.slug}/training/{number}/"
        assert client.get(huge).status_code in (302, 404)
        assert client.post(huge, {"answer": "critical"}).status_code in (302, 404)
    first = reverse("annotate:training_example", args=[study.slug, 1])
    client.get(first)
    assert client.post(first, {"answer": "critical\x00"}).status_code == 400
    assert client.post(first, {"answer": ["critical", "acceptable"]}).status_code in (200, 400)
