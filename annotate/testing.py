"""Helpers that build studies and walk annotators through them, for the tests and the
benchmark (no test framework imports). Studies of the default kind (critical failure) here;
a study of another kind is built by the helpers of its own package (``testing.py`` beside the
kind's definition, as the multiple-choice kind has) with ``plain_settings``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION, ItemSpec
from annotate.models import Assignment, Participation, Study
from annotate.participation.drafts import assignment_save
from annotate.participation.reservations import assignment_next
from annotate.participation.services import participation_consent, participation_enter
from annotate.participation.submissions import annotation_submit
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings


def item_spec(
    n: int,
    *,
    role: str = ROLE_MAIN,
    expected: bool | None = None,
    n_l1: int = 3,
    n_l2: int = 3,
    topic: str = "Food & Dining",
) -> ItemSpec:
    prefix = {ROLE_MAIN: "item", ROLE_ATTENTION: "attn", ROLE_QUALIFICATION: "gold"}[role]
    return ItemSpec(
        item_id=f"{prefix}-{n}",
        topic=topic,
        goal=f"Goal number {n}: make a pot of tea.",
        reference_steps=[f"Reference step {i} of item {n}." for i in range(1, n_l1 + 1)],
        candidate_steps=[f"Candidate step {i} of item {n}." for i in range(1, n_l2 + 1)],
        role=role,
        expected=expected,
        explanation="Known answer." if role != ROLE_MAIN else "",
    )


def plain_settings(**settings: Any) -> StudySettings:
    """A test study's settings: no training or qualification, no minimum time, any PID (test
    PIDs such as "p1" are not Prolific's 24 hexadecimal characters), then ``settings``."""
    defaults: dict[str, Any] = {
        "training_enabled": False,
        "qualification_enabled": False,
        "min_seconds": 0,
        "allow_other_pids": True,
    }
    return StudySettings(**{**defaults, **settings})


def study_make(
    *,
    n_items: int = 4,
    n_gold: int = 0,
    n_attention: int = 0,
    name: str = "Test study",
    gold_answers: list[bool] | None = None,
    attention_answers: list[bool] | None = None,
    **settings: Any,
) -> Study:
    items = [item_spec(i) for i in range(1, n_items + 1)]
    answers = gold_answers or [i % 2 == 0 for i in range(1, n_gold + 1)]
    items += [item_spec(i, role=ROLE_QUALIFICATION, expected=answers[i - 1]) for i in range(1, n_gold + 1)]
    checks = attention_answers or [True] * n_attention
    items += [item_spec(i, role=ROLE_ATTENTION, expected=checks[i - 1]) for i in range(1, n_attention + 1)]
    # Test PIDs ("p1", "pid-ready") are not Prolific's 24 hexadecimal characters.
    defaults: dict[str, Any] = {
        "training_enabled": False,
        "qualification_enabled": n_gold > 0,
        "min_seconds": 0,
        "allow_other_pids": True,
    }
    defaults.update(settings)
    return study_create(name=name, items=items, settings=StudySettings(**defaults))


def annotator_start(study: Study, pid: str) -> Participation:
    """Enter and accept the guidelines (training and qualification as the study says)."""
    p = participation_enter(study=study, pid=pid, prolific_study_id="S", session_id=f"session-{pid}")
    return participation_consent(participation=p)


def read_everything(p: Participation, a: Assignment) -> None:
    n1, n2 = len(a.item.reference_steps), len(a.item.candidate_steps)
    events = [{"type": "goal_ack"}] + [{"type": "step_open", "target": f"L1.{i}"} for i in range(1, n1 + 1)]
    events += [{"type": "step_open", "target": f"L2.{i}"} for i in range(1, n2 + 1)]
    assignment_save(participation=p, public_id=a.public_id, events=events)


def backdate(a: Assignment, seconds: float) -> None:
    """Pretend the item was first served ``seconds`` ago (instead of sleeping in tests)."""
    assert a.first_served_at is not None, "a reserved assignment was served"
    Assignment.objects.filter(pk=a.pk).update(
        first_served_at=a.first_served_at - timedelta(seconds=seconds),
        reserved_at=a.reserved_at - timedelta(seconds=seconds),
        last_activity_at=a.first_served_at - timedelta(seconds=seconds),
    )


NO_FAILURE = {"has_failure": False, "failures": [], "comments": ""}
ONE_FAILURE = {
    "has_failure": True,
    "failures": [{"description": "Step order breaks it.", "L1_steps": [1], "L2_steps": [2]}],
    "comments": "",
}


def annotate_next(p: Participation, answer: dict | None = None, *, label: bool | None = None):
    """Take the next item, read it all and submit (``label`` picks NO_FAILURE / ONE_FAILURE)."""
    a = assignment_next(participation=p)
    if a is None:
        return None
    read_everything(p, a)
    if answer is None:
        answer = ONE_FAILURE if label else NO_FAILURE
    return annotation_submit(participation=p, public_id=a.public_id, answer=answer, submission_id="t")


def judged_generation_study(
    *, name: str, annotators_per_item: int, judge: str = "How2Judge", n: int = 10, **settings: Any
) -> Study:
    """A study of ``n`` judged generations of ``judge`` (seed 0), without training or
    qualification: what the agreement tests compare judges and people on."""
    from annotate.studies.item_sources import items_from_judgments

    defaults: dict[str, Any] = {
        "training_enabled": False,
        "qualification_enabled": False,
        "min_seconds": 0,
        "annotators_per_item": annotators_per_item,
        "allow_other_pids": True,
    }
    defaults.update(settings)
    return study_create(
        name=name, items=items_from_judgments(judge=judge, n=n, seed=0), settings=StudySettings(**defaults)
    )


def annotate_all(p: Participation, label: Any) -> int:
    """Label every item the participant is given; ``label(k)`` is the k-th item's has_failure
    (or a constant). Returns how many were submitted."""
    k = 0
    while annotate_next(p, label=label(k) if callable(label) else label) is not None:
        k += 1
    return k


def label_as_the_judge(study: Study, pids: tuple[str, ...]) -> None:
    """Each annotator ``pids`` names labels every item of a study of judged generations as
    its judge did (TPR = TNR = 1)."""
    from judging.models import Judgment

    for pid in pids:
        participation = annotator_start(study, pid)
        while (assignment := assignment_next(participation=participation)) is not None:
            judgment = Judgment.objects.get(pk=assignment.item.source["judgment_id"])
            read_everything(participation, assignment)
            annotation_submit(
                participation=participation,
                public_id=assignment.public_id,
                answer=ONE_FAILURE if judgment.has_failure else NO_FAILURE,
                submission_id="t",
            )
