"""Annotation that spends people where they matter, in a study: dynamic k gives an item its next
annotator only while it is undecided, active selection spreads new items over the strata of
topic and judge label, a target interval width stops the study (and its Prolific study), and the
settings are checked naming the field, from the service, the New study page and the API."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from annotate.errors import AnnotateError, StudyFull
from annotate.kinds.base import ItemSpec
from annotate.models import Annotation, Study
from annotate.participation.allocation_selectors import study_allocation
from annotate.participation.allocation_services import (
    target_reached_hook_register,
    target_reached_hook_unregister,
)
from annotate.participation.reservations import assignment_next
from annotate.participation.selectors import study_full
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import annotate_next, annotator_start, item_spec

pytestmark = pytest.mark.django_db

HAS, NO = "has_failure", "no_failure"


def _item(n: int, judge: str | None, topic: str = "Food & Dining") -> ItemSpec:
    spec = item_spec(n, topic=topic)
    spec.source = {} if judge is None else {"judge_label": judge}
    return spec


def _study(items: list[ItemSpec], **settings: Any) -> Study:
    defaults: dict[str, Any] = {
        "training_enabled": False,
        "qualification_enabled": False,
        "min_seconds": 0,
        "allow_other_pids": True,
        "annotators_per_item": 2,
    }
    defaults.update(settings)
    return study_create(name="Allocation", items=items, settings=StudySettings(**defaults))


def _label(study: Study, pid: str, label: bool) -> Annotation | None:
    """One annotator takes the next item and answers ``label`` (True = has_failure)."""
    result = annotate_next(annotator_start(study, pid), label=label)
    return None if result is None else result.annotation


# --------------------------------------------------------------------------- dynamic k


def test_dynamic_k_stops_at_two_when_the_first_two_agree_with_the_judge():
    study = _study([_item(1, HAS)], allocation_policy="dynamic", max_annotators_per_item=3)
    third = annotator_start(study, "p3")  # in before the item is decided
    assert _label(study, "p1", True) is not None
    assert _label(study, "p2", True) is not None
    assert assignment_next(participation=third) is None
    assert study_full(study)
    with pytest.raises(StudyFull):
        annotator_start(study, "p4")
    assert Annotation.objects.filter(study=study, surplus=False).count() == 2


def test_dynamic_k_gives_a_third_annotator_when_the_first_two_agree_against_the_judge():
    study = _study([_item(1, NO)], allocation_policy="dynamic", max_annotators_per_item=3)
    _label(study, "p1", True)
    _label(study, "p2", True)
    assert not study_full(study)
    fourth = annotator_start(study, "p4")
    third = _label(study, "p3", False)
    assert third is not None and not third.surplus
    # The maximum is 3: nobody gets a fourth look, whatever the three said (here 2 to 1).
    assert assignment_next(participation=fourth) is None
    allocation = study_allocation(study)
    assert (allocation["n_items_decided"], allocation["n_annotations"]) == (1, 3)


def test_dynamic_k_gives_a_third_annotator_when_the_first_two_disagree():
    study = _study([_item(1, HAS), _item(2, HAS)], allocation_policy="dynamic", max_annotators_per_item=3)
    first = annotator_start(study, "p1")
    second = annotator_start(study, "p2")
    a1 = annotate_next(first, label=True)  # item-1
    a2 = annotate_next(second, label=False)  # item-1 again: the first one started, and still short of 2
    assert a1.annotation.item_id == a2.annotation.item_id
    # The undecided item comes before the item nobody has started.
    nxt = assignment_next(participation=annotator_start(study, "p3"))
    assert nxt is not None and nxt.item_id == a1.annotation.item_id


def test_an_item_holds_only_the_slots_it_wants_and_a_late_answer_beyond_them_is_surplus():
    from datetime import timedelta

    from django.utils import timezone

    from annotate.models import Assignment
    from annotate.participation.submissions import annotation_submit
    from annotate.testing import ONE_FAILURE, read_everything

    study = _study([_item(1, HAS)], allocation_policy="dynamic", max_annotators_per_item=3)
    people = [annotator_start(study, pid) for pid in ("p1", "p2", "p3", "p4")]
    late = assignment_next(participation=people[0])
    assert late is not None
    assert assignment_next(participation=people[1]) is not None
    assert assignment_next(participation=people[2]) is None  # two slots wanted, two held
    read_everything(people[0], late)
    Assignment.objects.filter(pk=late.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    # The first lease ran out: its slot goes to the next person; the two agree with the judge.
    annotate_next(people[1], label=True)
    annotate_next(people[2], label=True)
    assert study_full(study)
    assert assignment_next(participation=people[3]) is None
    # The first one answers after all: stored, but beyond the two labels the item wanted.
    result = annotation_submit(participation=people[0], public_id=late.public_id, answer=ONE_FAILURE, submission_id="t")
    assert result.annotation.surplus
    assert study_allocation(study)["n_annotations"] == 2


# --------------------------------------------------------------------------- active selection


def test_active_selection_spreads_the_first_items_over_the_topics():
    # In study order the first six items are all one topic; active selection takes one item of
    # each topic before a second of any (each topic's pilot labels come first).
    items = [_item(n, HAS if n % 2 else NO, "Food & Dining") for n in range(1, 7)]
    items += [_item(n, NO, "Travel") for n in range(7, 10)]
    items += [_item(n, HAS, "Health") for n in range(10, 13)]
    study = _study(items, allocation_policy="active", max_annotators_per_item=3)
    taken: dict[str, str] = {}
    for n in range(6):  # two annotators per item: the second of each pair takes the started item
        a = assignment_next(participation=annotator_start(study, f"p{n}"))
        assert a is not None
        taken[a.item.item_id] = a.item.topic
    assert sorted(taken.values()) == ["Food & Dining", "Health", "Travel"]

    fixed = _study(items, annotators_per_item=1)
    first = []
    for i in range(3):
        served = assignment_next(participation=annotator_start(fixed, f"f{i}"))
        assert served is not None
        first.append(served.item.item_id)
    assert first == ["item-1", "item-2", "item-3"]


# --------------------------------------------------------------------------- target width


def _run_until_stopped(study: Study, label_of: dict[str, bool], limit: int = 200) -> int:
    """Annotators, one item each, answering as ``label_of`` says, until the study stops."""
    for n in range(limit):
        try:
            p = annotator_start(study, f"a{n}")
        except StudyFull:
            return n
        a = assignment_next(participation=p)
        if a is None:
            return n
        from annotate.participation.submissions import annotation_submit
        from annotate.testing import NO_FAILURE, ONE_FAILURE, read_everything

        read_everything(p, a)
        answer = ONE_FAILURE if label_of[a.item.item_id] else NO_FAILURE
        annotation_submit(participation=p, public_id=a.public_id, answer=answer, submission_id="t")
    return limit


def _calibration_items(n: int) -> tuple[list[ItemSpec], dict[str, bool]]:
    """``n`` items, half judged has_failure; people agree with the judge on all but every fifth."""
    items, truth = [], {}
    for i in range(1, n + 1):
        judge = HAS if i % 2 else NO
        items.append(_item(i, judge))
        truth[f"item-{i}"] = (judge == HAS) != (i % 5 == 0)
    return items, truth


def test_a_study_stops_offering_items_once_its_interval_reaches_the_target_width(django_capture_on_commit_callbacks):
    items, truth = _calibration_items(60)
    study = _study(items, allocation_policy="dynamic", max_annotators_per_item=3, target_interval_width=0.45)
    seen: list[Study] = []
    target_reached_hook_register(seen.append)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            _run_until_stopped(study, truth)
    finally:
        target_reached_hook_unregister(seen.append)
    study.refresh_from_db()
    assert study.target_reached_at is not None
    allocation = study_allocation(study)
    assert allocation["target_reached"] and allocation["interval_width"] <= 0.45
    assert allocation["n_items_decided"] < 60  # stopped before every item was labelled
    assert [s.pk for s in seen] == [study.pk]  # the hook ran once, after the commit
    assert study_full(study)
    with pytest.raises(StudyFull):
        annotator_start(study, "late")


def test_a_study_without_a_target_labels_every_item():
    items, truth = _calibration_items(8)
    study = _study(items, allocation_policy="dynamic", max_annotators_per_item=3)
    _run_until_stopped(study, truth)
    study.refresh_from_db()
    assert study.target_reached_at is None
    assert study_allocation(study)["n_items_decided"] == 8


# --------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"allocation_policy": "greedy"}, "allocation_policy"),
        ({"allocation_policy": "dynamic", "max_annotators_per_item": 1}, "max_annotators_per_item"),
        ({"max_annotators_per_item": 4}, "max_annotators_per_item"),
        ({"target_interval_width": 0}, "target_interval_width"),
        ({"target_interval_width": 1.5}, "target_interval_width"),
    ],
)
def test_allocation_settings_are_refused_naming_the_field(settings, field):
    with pytest.raises(AnnotateError) as refused:
        _study([_item(1, HAS)], **settings)
    assert refused.value.status == 400
    assert field in [e.field for e in refused.value.errors]


def test_active_selection_and_a_target_need_the_judges_label_of_every_item():
    with pytest.raises(AnnotateError) as refused:
        _study([_item(1, HAS), _item(2, None)], allocation_policy="active")
    assert [e.field for e in refused.value.errors] == ["allocation_policy"]
    assert "item-2" in refused.value.errors[0].message
    with pytest.raises(AnnotateError) as refused:
        _study([_item(1, None)], target_interval_width=0.1)
    assert [e.field for e in refused.value.errors] == ["target_interval_width"]


def test_dynamic_k_is_refused_for_a_kind_without_has_failure_labels():
    from annotate.kinds import kind_get
    from annotate.studies.settings import settings_problems

    problems = settings_problems(
        StudySettings(allocation_policy="dynamic"), [_item(1, None)], kind_get("multiple_choice")
    )
    assert "allocation_policy" in [p.field for p in problems]


def test_a_new_round_keeps_the_allocation_settings():
    from annotate.studies.services import study_round_create

    study = _study([_item(1, HAS)], allocation_policy="active", max_annotators_per_item=4, target_interval_width=0.2)
    new = study_round_create(study=study, instructions="Round two.")
    assert (new.allocation_policy, new.max_annotators_per_item, new.target_interval_width) == ("active", 4, 0.2)


# --------------------------------------------------------------------------- page and API


def _items_file(tmp_path, n: int = 4) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    lines = []
    for i in range(1, n + 1):
        spec = _item(i, HAS if i % 2 else NO)
        lines.append(
            json.dumps(
                {
                    "item_id": spec.item_id,
                    "topic": spec.topic,
                    "goal": spec.goal,
                    "reference_steps": spec.reference_steps,
                    "candidate_steps": spec.candidate_steps,
                    "source": spec.source,
                }
            )
        )
    return SimpleUploadedFile("items.jsonl", ("\n".join(lines) + "\n").encode(), content_type="application/jsonl")


def test_the_api_creates_a_dynamic_study_with_a_target_and_shows_where_it_stands(researcher_client, tmp_path):
    response = researcher_client.post(
        "/api/studies/",
        {
            "name": "Calibration by API",
            "items_file": _items_file(tmp_path),
            "annotators_per_item": 2,
            "allocation_policy": "active",
            "max_annotators_per_item": 3,
            "target_interval_width": 0.2,
        },
    )
    assert response.status_code == 201, response.content
    slug = response.json()["slug"]
    detail = researcher_client.get(f"/api/studies/{slug}/").json()
    assert (detail["allocation_policy"], detail["max_annotators_per_item"], detail["target_interval_width"]) == (
        "active",
        3,
        0.2,
    )
    allocation = detail["allocation"]
    assert allocation["policy"] == "active" and allocation["n_annotations"] == 0
    assert allocation["target_interval_width_percent"] == pytest.approx(20.0)
    assert allocation["interval_width"] is None and allocation["target_reached"] is False


def test_the_api_refuses_a_target_width_outside_0_to_1_naming_the_field(researcher_client, tmp_path):
    response = researcher_client.post(
        "/api/studies/",
        {"name": "Too wide", "items_file": _items_file(tmp_path), "target_interval_width": 2},
    )
    assert response.status_code == 400
    assert "target_interval_width" in json.dumps(response.json())
    assert not Study.objects.filter(name="Too wide").exists()


def test_the_new_study_page_creates_a_dynamic_study_and_the_study_page_shows_its_allocation(
    researcher_client, tmp_path
):
    page = researcher_client.get(reverse("annotate:study_new"))
    assert b'name="allocation_policy"' in page.content and b'name="target_interval_width"' in page.content
    response = researcher_client.post(
        reverse("annotate:study_new"),
        {
            "name": "Calibration by page",
            "kind": "critical_failure",
            "items_file": _items_file(tmp_path),
            "annotators_per_item": 2,
            "lease_minutes": 30,
            "attention_max_failures": 1,
            "allocation_policy": "dynamic",
            "max_annotators_per_item": 3,
            "target_interval_width": 0.25,
            "allow_other_pids": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    study = Study.objects.get(name="Calibration by page")
    assert (study.allocation_policy, study.max_annotators_per_item, study.target_interval_width) == ("dynamic", 3, 0.25)
    study.min_seconds = 0
    study.save(update_fields=["min_seconds"])
    _label(study, "p1", True)
    detail = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert 'id="allocation"' in detail and "Dynamic k" in detail
    assert "25.0 points" in detail  # the target, beside the current width
    # One label: the interval cannot stop the study yet, and the page says why.
    unsettled = detail.split('id="allocation-unsettled">', 1)[1].split("</p>", 1)[0]
    assert "cannot stop the study yet" in unsettled, unsettled
    annotations = detail.split('id="allocation-annotations">', 1)[1].split("<", 1)[0]
    assert annotations == "1"


def test_the_study_page_refuses_a_bad_target_beside_its_field(researcher_client, tmp_path):
    response = researcher_client.post(
        reverse("annotate:study_new"),
        {
            "name": "Bad target",
            "kind": "critical_failure",
            "items_file": _items_file(tmp_path),
            "annotators_per_item": 2,
            "lease_minutes": 30,
            "attention_max_failures": 1,
            "allocation_policy": "fixed",
            "max_annotators_per_item": 3,
        },
    )
    assert response.status_code == 400
    assert "max_annotators_per_item" in response.content.decode() or "most annotators" in response.content.decode()
    assert not Study.objects.filter(name="Bad target").exists()


def test_the_create_study_command_takes_the_allocation_settings(tmp_path):
    from django.core.management import call_command

    path = tmp_path / "items.jsonl"
    path.write_bytes(_items_file(tmp_path).read())
    call_command(
        "create_study",
        "--name",
        "By command",
        "--items",
        str(path),
        "--allocation-policy",
        "active",
        "--max-annotators-per-item",
        "4",
        "--target-interval-width",
        "0.15",
        "--allow-other-pids",
    )
    study = Study.objects.get(name="By command")
    assert (study.allocation_policy, study.max_annotators_per_item, study.target_interval_width) == ("active", 4, 0.15)


# --------------------------------------------------------------------------- Prolific


def test_reaching_the_target_stops_the_linked_prolific_study_so_no_more_places_are_paid(
    settings, researcher, django_capture_on_commit_callbacks
):
    from prolific.allocation import prolific_study_stop_for_target
    from prolific.models import ProlificStudyLink
    from prolific.publish_services import prolific_study_publish, prolific_study_publish_now
    from prolific.token_services import prolific_token_save
    from tests.scripted_prolific import ScriptedProlific

    server = ScriptedProlific().start()
    try:
        settings.PROLIFIC_API_URL = server.base_url
        settings.PROLIFIC_API_TOKEN = ""
        settings.PROLIFIC_SITE_URL = "https://studio.example.org"
        prolific_token_save(user=researcher, token=server.token)
        items, truth = _calibration_items(60)
        study = _study(
            items,
            allocation_policy="dynamic",
            max_annotators_per_item=3,
            target_interval_width=0.45,
            payment_per_item=Decimal("0.20"),
            max_items_per_annotator=1,
        )
        prolific_study_publish(study=study, user=researcher)
        prolific_study_publish_now(study=study, user=researcher)
        link = ProlificStudyLink.objects.get(study=study)
        assert prolific_study_stop_for_target(study=study) == "target not reached"
        queued: list[int] = []
        import prolific.tasks

        original = prolific.tasks.prolific_stop_for_target_task.delay
        prolific.tasks.prolific_stop_for_target_task.delay = queued.append  # type: ignore[method-assign, assignment]
        try:
            with django_capture_on_commit_callbacks(execute=True):
                _run_until_stopped(study, truth)
        finally:
            prolific.tasks.prolific_stop_for_target_task.delay = original  # type: ignore[method-assign]
        assert queued == [study.pk]  # the hook queued the stop once
        assert server.calls("POST", "transition") and not [
            c for c in server.calls("POST", "transition") if '"STOP"' in json.dumps(c.get("body"))
        ]
        study.refresh_from_db()
        assert prolific.tasks.prolific_stop_for_target_task(study.pk) == "stopped"
        stops = [c for c in server.calls("POST", "transition") if (c.get("body") or {}).get("action") == "STOP"]
        assert len(stops) == 1
        link.refresh_from_db()
        assert link.status == "AWAITING REVIEW"
        # Sent once: the sync (the reconciler) finds the Prolific study closed and sends nothing.
        assert prolific_study_stop_for_target(study=study) == "no open Prolific study"
        assert (
            len([c for c in server.calls("POST", "transition") if (c.get("body") or {}).get("action") == "STOP"]) == 1
        )
    finally:
        server.stop()


def test_the_prolific_draft_of_a_dynamic_study_has_places_for_its_most_annotators_per_item():
    from prolific.publish_services import prolific_draft

    items = [_item(n, HAS) for n in range(1, 11)]
    settings = {"payment_per_item": Decimal("0.20"), "max_items_per_annotator": 5}
    fixed = _study(items, **settings)
    dynamic = _study(items, allocation_policy="dynamic", max_annotators_per_item=4, **settings)
    assert (prolific_draft(study=fixed).k, prolific_draft(study=fixed).places) == (2, 4)
    assert (prolific_draft(study=dynamic).k, prolific_draft(study=dynamic).places) == (4, 8)
