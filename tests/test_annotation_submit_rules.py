"""Every rule of a submit, checked by the server; drafts; idempotent submits; provenance."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from annotate.errors import DraftRejected, SubmissionRejected
from annotate.models import Annotation, Assignment, AssignmentStatus
from annotate.participation.drafts import assignment_save
from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.testing import NO_FAILURE, ONE_FAILURE, annotator_start, backdate, read_everything, study_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def ready():
    """A study with the paper's 90-second minimum and an annotator on an item read in full."""
    study = study_make(n_items=3, min_seconds=90)
    p = annotator_start(study, "pid-ready")
    a = assignment_next(participation=p)
    assert a is not None
    read_everything(p, a)
    backdate(a, 91)
    return study, p, a


def _reject(p, a, answer):
    with pytest.raises(SubmissionRejected) as info:
        annotation_submit(participation=p, public_id=a.public_id, answer=answer)
    assert not Annotation.objects.exists()
    return {e.field: e.message for e in info.value.errors}


def test_a_complete_submit_is_stored_with_its_provenance(ready):
    study, p, a = ready
    assignment_save(participation=p, public_id=a.public_id, active_ms=4000)
    result = annotation_submit(participation=p, public_id=a.public_id, answer=ONE_FAILURE, submission_id="abc")
    ann = result.annotation
    assert result.created and ann.has_failure
    assert ann.failures == [{"description": "Step order breaks it.", "L1_steps": [1], "L2_steps": [2]}]
    assert ann.guideline_version == study.guideline_version.label
    assert ann.l1_hash == a.item.l1_hash and ann.l2_hash == a.item.l2_hash and len(ann.l1_hash) == 64
    assert ann.interface_version and ann.source == "main" and not ann.surplus and not ann.late
    assert ann.wall_seconds >= 91 and 0 < ann.active_seconds <= ann.wall_seconds
    assert set(ann.steps_opened) == {"L1.1", "L1.2", "L1.3", "L2.1", "L2.2", "L2.3"}
    assert [e["type"] for e in ann.click_log][:2] == ["goal_ack", "step_open"]
    assert Assignment.objects.get(pk=a.pk).status == AssignmentStatus.SUBMITTED


def test_submit_before_90_seconds_is_rejected():
    study = study_make(n_items=1, min_seconds=90)
    p = annotator_start(study, "pid-early")
    a = assignment_next(participation=p)
    assert a is not None
    read_everything(p, a)
    backdate(a, 60)
    errors = _reject(p, a, NO_FAILURE)
    assert "time" in errors and "90 seconds" in errors["time"] and "30 seconds to go" in errors["time"]
    backdate(a, 90)  # from the original first serve: exactly 90 seconds ago
    assert annotation_submit(participation=p, public_id=a.public_id, answer=NO_FAILURE).created


def test_the_minimum_counts_from_the_first_serve_not_from_a_reload(ready):
    study, p, a = ready
    again = assignment_next(participation=p)  # a reload serves the same item
    assert again is not None
    assert again.pk == a.pk and again.first_served_at == Assignment.objects.get(pk=a.pk).first_served_at


def test_submit_without_acknowledging_the_goal_is_rejected(ready):
    study, p, a = ready
    assignment_save(participation=p, public_id=a.public_id, events=[{"type": "goal_unack"}])
    assert "goal" in _reject(p, a, NO_FAILURE)


def test_submit_with_an_unopened_step_is_rejected():
    study = study_make(n_items=1)
    p = annotator_start(study, "pid-steps")
    a = assignment_next(participation=p)
    assert a is not None
    events = [{"type": "goal_ack"}] + [
        {"type": "step_open", "target": s} for s in ("L1.1", "L1.2", "L1.3", "L2.1", "L2.3")
    ]
    assignment_save(participation=p, public_id=a.public_id, events=events)
    errors = _reject(p, a, NO_FAILURE)
    assert "L2.2" in errors["steps"] and "1 not yet read" in errors["steps"]


def test_steps_opened_are_only_those_the_server_recorded(ready):
    study, p, a = ready
    with pytest.raises(DraftRejected):
        assignment_save(participation=p, public_id=a.public_id, events=[{"type": "step_open", "target": "L2.9"}])


def test_critical_failures_identified_without_a_failure_is_rejected(ready):
    assert "failures" in _reject(ready[1], ready[2], {"has_failure": True, "failures": []})


def test_no_choice_is_rejected(ready):
    assert "has_failure" in _reject(ready[1], ready[2], {"failures": []})


def test_a_failure_without_description_is_rejected(ready):
    errors = _reject(
        ready[1], ready[2], {"has_failure": True, "failures": [{"description": "  ", "L1_steps": [1], "L2_steps": []}]}
    )
    assert "failures[1].description" in errors


def test_a_failure_without_a_linked_step_is_rejected(ready):
    errors = _reject(
        ready[1], ready[2], {"has_failure": True, "failures": [{"description": "x", "L1_steps": [], "L2_steps": []}]}
    )
    assert "failures[1].steps" in errors


@pytest.mark.parametrize(
    "l1, l2, field",
    [
        ([4], [], "failures[1].L1_steps"),
        ([], [0], "failures[1].L2_steps"),
        ([], ["2"], "failures[1].L2_steps"),
        ([True], [], "failures[1].L1_steps"),
    ],
)
def test_a_step_number_outside_the_list_is_rejected(ready, l1, l2, field):
    errors = _reject(
        ready[1], ready[2], {"has_failure": True, "failures": [{"description": "x", "L1_steps": l1, "L2_steps": l2}]}
    )
    assert field in errors


def test_no_critical_failures_together_with_listed_failures_is_rejected(ready):
    errors = _reject(ready[1], ready[2], {"has_failure": False, "failures": ONE_FAILURE["failures"]})
    assert "failures" in errors


def test_every_problem_is_reported_at_once():
    study = study_make(n_items=1, min_seconds=90)
    p = annotator_start(study, "pid-all")
    a = assignment_next(participation=p)
    errors = _reject(p, a, {"has_failure": True, "failures": []})
    assert {"goal", "steps", "time", "failures"} <= set(errors)


def test_a_second_submit_stores_nothing_new_and_returns_the_first(ready):
    study, p, a = ready
    first = annotation_submit(participation=p, public_id=a.public_id, answer=ONE_FAILURE, submission_id="one")
    second = annotation_submit(participation=p, public_id=a.public_id, answer=NO_FAILURE, submission_id="two")
    assert first.created and not second.created
    assert second.annotation.pk == first.annotation.pk and Annotation.objects.count() == 1
    assert Annotation.objects.get().has_failure is True


def test_a_draft_never_overwrites_a_submitted_annotation(ready):
    study, p, a = ready
    annotation_submit(participation=p, public_id=a.public_id, answer=ONE_FAILURE)
    with pytest.raises(DraftRejected):
        assignment_save(participation=p, public_id=a.public_id, draft=NO_FAILURE, seq=99)
    assert Annotation.objects.get().has_failure is True
    assert Assignment.objects.get(pk=a.pk).draft_seq == 0


def test_an_older_draft_arriving_late_does_not_undo_a_newer_one(ready):
    study, p, a = ready
    assignment_save(participation=p, public_id=a.public_id, draft={**NO_FAILURE, "comments": "newer"}, seq=5)
    result = assignment_save(participation=p, public_id=a.public_id, draft={**NO_FAILURE, "comments": "older"}, seq=4)
    assert not result.draft_saved
    assert Assignment.objects.get(pk=a.pk).draft["comments"] == "newer"


def test_incomplete_drafts_are_kept_as_typed(ready):
    study, p, a = ready
    draft = {
        "has_failure": True,
        "failures": [{"description": "half a thought", "L1_steps": [2, 9], "L2_steps": []}],
        "comments": "hm",
    }
    assignment_save(participation=p, public_id=a.public_id, draft=draft, seq=1)
    stored = Assignment.objects.get(pk=a.pk).draft
    assert stored == {
        "has_failure": True,
        "failures": [{"description": "half a thought", "L1_steps": [2], "L2_steps": []}],
        "comments": "hm",
    }


def test_visible_time_is_capped_by_wall_time(ready):
    study, p, a = ready
    assignment_save(participation=p, public_id=a.public_id, active_ms=10_000_000)
    stored = Assignment.objects.get(pk=a.pk)
    assert 0 < stored.active_seconds <= 91 + 3


# ---------------------------------------------------------------------------- over HTTP


def _enter(client: Client, study, pid: str) -> None:
    response = client.get(
        reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": "se"}
    )
    assert response.status_code == 302
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})


def _post(client: Client, url: str, body) -> tuple[int, dict]:
    response = client.post(url, data=json.dumps(body), content_type="application/json")
    return response.status_code, response.json()


def test_over_http_a_premature_submit_answers_400_with_the_reasons_and_a_reload_restores_the_draft():
    study = study_make(n_items=2, min_seconds=90)
    client = Client()
    _enter(client, study, "pidhttp")
    page = client.get(reverse("annotate:work", args=[study.slug]))
    assert page.status_code == 200
    a = Assignment.objects.get()
    save_url = reverse("annotate:save", args=[study.slug, a.public_id])
    submit_url = reverse("annotate:submit", args=[study.slug, a.public_id])
    draft = {
        "has_failure": True,
        "failures": [{"description": "Typed before reload", "L1_steps": [1], "L2_steps": [3]}],
        "comments": "c",
    }
    status, body = _post(
        client, save_url, {"draft": draft, "seq": 3, "events": [{"type": "goal_ack"}], "active_ms": 500}
    )
    assert status == 200 and body["draft_saved"]
    status, body = _post(client, submit_url, {"answer": draft, "submission_id": "x"})
    assert status == 400 and not body["ok"]
    assert {e["field"] for e in body["errors"]} == {"steps", "time"}
    assert not Annotation.objects.exists()
    reload = client.get(reverse("annotate:work", args=[study.slug]))
    state = json.loads(
        reload.content.decode().split('id="page-state" type="application/json">')[1].split("</script>")[0]
    )
    assert state["draft"] == draft and state["draftSeq"] == 3 and state["goalAcknowledged"]
    assert state["assignment"] == str(a.public_id) and state["elapsedSeconds"] < 90


def test_over_http_a_double_submit_stores_one_annotation_and_moves_on():
    study = study_make(n_items=2, min_seconds=0)
    client = Client()
    _enter(client, study, "piddouble")
    client.get(reverse("annotate:work", args=[study.slug]))
    a = Assignment.objects.get()
    read_everything(a.participation, a)
    url = reverse("annotate:submit", args=[study.slug, a.public_id])
    s1, b1 = _post(client, url, {"answer": NO_FAILURE, "submission_id": "same"})
    s2, b2 = _post(client, url, {"answer": NO_FAILURE, "submission_id": "same"})
    assert (s1, s2) == (200, 200) and b1["created"] and not b2["created"] and b1["annotation"] == b2["annotation"]
    assert b1["next"] == reverse("annotate:work", args=[study.slug])
    assert Annotation.objects.count() == 1


def test_annotators_reach_only_their_own_items():
    study = study_make(n_items=3)
    alice, bob = Client(), Client()
    _enter(alice, study, "alice")
    _enter(bob, study, "bob")
    alice.get(reverse("annotate:work", args=[study.slug]))
    a = Assignment.objects.get(annotator__pid="alice")
    for url in (
        reverse("annotate:save", args=[study.slug, a.public_id]),
        reverse("annotate:submit", args=[study.slug, a.public_id]),
    ):
        status, body = _post(bob, url, {"draft": NO_FAILURE, "seq": 1, "answer": NO_FAILURE})
        assert status == 404
        status, body = _post(Client(), url, {"draft": NO_FAILURE, "seq": 1})
        assert status == 403 and "Prolific" in body["message"]
    assert Assignment.objects.get(pk=a.pk).draft == {}
    # Pages of the annotator path without a session: 403 with a friendly page, never a login form.
    for name in ("annotate:consent", "annotate:training", "annotate:work", "annotate:done"):
        response = Client().get(reverse(name, args=[study.slug]))
        assert response.status_code == 403 and b"study link" in response.content


@pytest.mark.parametrize("query", [{}, {"PROLIFIC_PID": ""}, {"PROLIFIC_PID": "<script>"}, {"PROLIFIC_PID": "x" * 65}])
def test_a_missing_or_malformed_pid_gets_a_friendly_error_page(query):
    study = study_make(n_items=1)
    response = Client().get(reverse("annotate:entry", args=[study.slug]), query)
    assert response.status_code == 400
    assert b"Prolific ID" in response.content and b"Traceback" not in response.content


@pytest.mark.parametrize("pid", ["short1", "made-up-1", "x" * 65, "0123456789abcdef0123456g"])
def test_a_pid_refused_by_a_prolific_only_study_names_the_prolific_rule(pid):
    """A study that takes Prolific's ids only says what one is (24 hexadecimal characters),
    never the letters-and-digits rule "short1" already satisfies."""
    study = study_make(n_items=1, allow_other_pids=False)
    query = {"PROLIFIC_PID": pid, "STUDY_ID": "0123456789abcdef01234567", "SESSION_ID": "s"}
    response = Client().get(reverse("annotate:entry", args=[study.slug]), query)
    text = response.content.decode()
    assert response.status_code == 400
    assert "a Prolific ID is 24 hexadecimal characters" in text
    assert "letters and digits" not in text


def test_a_prolific_id_enters_a_prolific_only_study():
    study = study_make(n_items=1, allow_other_pids=False)
    query = {"PROLIFIC_PID": "0123456789ABCDEFabcdef01", "STUDY_ID": "0123456789abcdef01234567", "SESSION_ID": "s"}
    assert Client().get(reverse("annotate:entry", args=[study.slug]), query).status_code == 302


@pytest.mark.parametrize("pid", ["<script>", "x" * 65, "two words"])
def test_a_pid_refused_by_a_study_taking_other_ids_names_that_rule(pid):
    study = study_make(n_items=1, allow_other_pids=True)
    response = Client().get(
        reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": "s"}
    )
    text = response.content.decode()
    assert response.status_code == 400
    assert "1 to 64 letters, digits, &#x27;_&#x27; or &#x27;-&#x27;" in text and "hexadecimal" not in text


def test_an_unknown_study_answers_404_with_a_friendly_page():
    response = Client().get("/a/no-such-study/", {"PROLIFIC_PID": "abc"})
    assert response.status_code == 404 and b"no study at this address" in response.content


def test_resuming_on_another_device_gets_a_csrf_token_and_can_save():
    study = study_make(n_items=2)
    first = Client()
    _enter(first, study, "twodevices")
    first.get(reverse("annotate:work", args=[study.slug]))
    second = Client(enforce_csrf_checks=True)
    response = second.get(reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": "twodevices"})
    assert response["Location"] == reverse("annotate:work", args=[study.slug])
    page = second.get(response["Location"])
    assert page.status_code == 200 and "csrftoken" in second.cookies
    a = Assignment.objects.get()
    response = second.post(
        reverse("annotate:save", args=[study.slug, a.public_id]),
        data=json.dumps({"draft": NO_FAILURE, "seq": 1}),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=second.cookies["csrftoken"].value,
    )
    assert response.status_code == 200
    assert (
        Client(enforce_csrf_checks=True).post(reverse("annotate:save", args=[study.slug, a.public_id])).status_code
        == 403
    )
