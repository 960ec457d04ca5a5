"""Submits (How2Everything App. C.1 and the annotation issue), and their preview twins that
store nothing.

A submit is refused, with nothing stored, unless the goal was acknowledged, every step of both
lists was opened (recorded by the server as it happened), the study's minimum seconds have
passed since the item was first served, and the kind's answer rules hold. A submit is
idempotent (one annotation per assignment); a late submit is stored and marked surplus when
the item was already filled."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.db import IntegrityError, transaction

from annotate import constants as C
from annotate.errors import SubmissionRejected, field_errors
from annotate.kinds import kind_get
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION, FieldError, StudyKind
from annotate.models import Annotation, Assignment, AssignmentStatus, Participation, ParticipationState, StudyItem
from annotate.participation import clock
from annotate.participation.allocation_selectors import item_slots_wanted
from annotate.participation.allocation_services import study_target_check
from annotate.participation.drafts import (
    assignment_events_apply,
    assignment_get_own,
    draft_clean,
    save_values_checked,
)
from annotate.participation.flags import FLAG_BROKEN, flag_split, flag_validate
from annotate.participation.reservations import item_lock, qualification_grade
from annotate.participation.services import participation_finish, participation_lock
from core.strict_json import StrictJSONError, check_text, check_value

# --------------------------------------------------------------------------- submit


def submission_problems(a: Assignment, now: datetime) -> list[FieldError]:
    """The interface rules (App. C.1), checked against what the server recorded."""
    errors = []
    kind = kind_get(a.study.kind)
    if kind.requires_goal_acknowledgement and a.goal_acknowledged_at is None:
        errors.append(FieldError("goal", "Confirm that you have read the goal: tick the box under the goal."))
    required = kind.required_openings(len(a.item.reference_steps), len(a.item.candidate_steps))
    missing = [name for name in required if name not in a.steps_opened]
    if missing:
        shown = ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")
        errors.append(
            FieldError(
                "steps",
                f"Click every step of L1 and L2 to confirm you have read it; {len(missing)} not yet read: {shown}.",
            )
        )
    elapsed = (now - a.first_served_at).total_seconds() if a.first_served_at else 0.0
    if elapsed < a.study.min_seconds:
        remaining = math.ceil(a.study.min_seconds - elapsed)
        errors.append(
            FieldError(
                "time",
                f"Submission opens {a.study.min_seconds} seconds after the item was first shown; "
                f"{remaining} second{'s' if remaining != 1 else ''} to go.",
            )
        )
    return errors


@dataclass
class CheckedAnswer:
    """A submitted answer checked by the kind, and its flag (annotate/participation/flags.py)."""

    cleaned: dict[str, Any] | None
    flag: dict[str, str] | None
    errors: list[FieldError]

    @property
    def broken(self) -> bool:
        return self.flag is not None and self.flag["flag"] == FLAG_BROKEN


def answer_check(kind: Any, item: StudyItem, answer: Any) -> CheckedAnswer:
    """The flag checked (``flag_validate``) and the kind's answer: a broken flag needs none of
    the kind's questions (whatever was answered is kept, cleaned as a draft is); any other
    answer, unsure or not, is checked by the kind's rules."""
    rest, raw_flag = flag_split(answer)
    flag, errors = flag_validate(raw_flag)
    if isinstance(raw_flag, dict) and raw_flag.get("flag") == FLAG_BROKEN:
        cleaned = draft_clean(item.study.kind, item, rest)
        return CheckedAnswer(None if errors else cleaned, flag, errors)
    cleaned, answer_errors = kind.validate_submission(rest, len(item.reference_steps), len(item.candidate_steps))
    return CheckedAnswer(cleaned, flag, errors + answer_errors)


def _screen_out_for_attention(p: Participation) -> None:
    reason = f"failed {p.attention_failures} attention checks (allowed: {p.study.attention_max_failures})"
    participation_finish(p, ParticipationState.SCREENED_OUT, reason)
    p.excluded = True
    p.exclusion_reason = "failed_attention_checks"
    Annotation.objects.filter(participation=p, source=ROLE_MAIN).update(
        excluded=True, exclusion_reason="failed_attention_checks"
    )
    Assignment.objects.filter(participation=p, status=AssignmentStatus.RESERVED).update(
        status=AssignmentStatus.RELEASED
    )


def _values_checked(answer: Any, submission_id: Any) -> str:
    """The answer and the submission id checked as plain values (no NaN, no NUL, nothing
    over-long) before anything is locked, refused naming the field; returns the submission id
    as it is stored."""
    try:
        check_value(answer, field="answer", max_string_length=C.MAX_DRAFT_STRING_LENGTH)
        return check_text(submission_id, field="submission_id", max_length=C.SUBMISSION_ID_MAX_LENGTH)
    except StrictJSONError as exc:
        raise SubmissionRejected(
            f"The answer was not submitted: {exc.field}: {exc.message}", field_errors(exc)
        ) from None


def _answer_accepted(
    a: Assignment, kind: StudyKind, item: StudyItem, answer: Any, now: datetime
) -> tuple[CheckedAnswer, dict[str, Any]]:
    """The interface rules and the kind's answer rules checked together, so that a refusal
    names every problem at once; returns the checked answer and its cleaned values."""
    errors = submission_problems(a, now)
    checked = answer_check(kind, item, answer)
    errors += checked.errors
    if errors or checked.cleaned is None:
        raise SubmissionRejected("The answer was not submitted: " + " ".join(e.message for e in errors), errors)
    return checked, checked.cleaned


def _is_surplus(a: Assignment, p: Participation, item: StudyItem, *, late: bool, now: datetime) -> bool:
    """Whether a main answer arrives once its item already has what it wants: the other
    submitted answers count, and for a late submit also the other leases still running. A
    test answer never fills a slot, nor is it surplus."""
    if a.role != ROLE_MAIN or p.is_test:
        return False
    filled = (
        Assignment.objects.filter(item=item, status=AssignmentStatus.SUBMITTED, surplus=False, is_test=False)
        .exclude(pk=a.pk)
        .count()
    )
    if late:
        filled += (
            Assignment.objects.filter(
                item=item, status=AssignmentStatus.RESERVED, lease_expires_at__gt=now, is_test=False
            )
            .exclude(pk=a.pk)
            .count()
        )
    return filled >= item_slots_wanted(a.study, item.pk, now)


def _exclusion(a: Assignment, p: Participation) -> tuple[bool, str]:
    """Whether the annotation is left out of the study's figures from the start, and why:
    qualification and attention items are, and so is every answer of an excluded participant."""
    if a.role == ROLE_QUALIFICATION:
        return True, "qualification_item"
    if a.role == ROLE_ATTENTION:
        return True, "attention_check_item"
    if p.excluded:
        return True, p.exclusion_reason
    return False, ""


@dataclass
class _Decision:
    """What the submit decided about an accepted answer before writing it."""

    checked: CheckedAnswer
    cleaned: dict[str, Any]
    submission_id: str
    now: datetime
    late: bool
    surplus: bool
    # None: the item has no known answer, or it is flagged broken (neither a pass nor a miss)
    correct: bool | None


def _annotation_create(
    a: Assignment, p: Participation, item: StudyItem, kind: StudyKind, decision: _Decision
) -> Annotation:
    """The annotation row: the cleaned answer with its flag, the item's and the interface's
    versions, and the timing and openings the server recorded for the assignment."""
    checked, cleaned, now = decision.checked, decision.cleaned, decision.now
    flag = checked.flag or {"flag": "", "reason": "", "note": ""}
    excluded, reason = _exclusion(a, p)
    served_at = cast(datetime, a.first_served_at)  # set when the assignment was reserved
    return Annotation.objects.create(
        assignment=a,
        study=a.study,
        item=item,
        participation=p,
        annotator_id=a.annotator_id,
        source=a.role,
        has_failure=None if checked.broken else kind.has_failure(cleaned),
        failures=[] if checked.broken else cleaned.get("failures", []),
        comments=cleaned.get("comments", ""),
        answer=cleaned,
        guideline_version=a.study.guideline_version.label,
        l1_hash=item.l1_hash,
        l2_hash=item.l2_hash,
        interface_version=kind.interface_version,
        first_served_at=served_at,
        submitted_at=now,
        wall_seconds=round((now - served_at).total_seconds(), 3),
        active_seconds=a.active_seconds,
        goal_acknowledged_at=a.goal_acknowledged_at,
        steps_opened=a.steps_opened,
        click_log=a.click_log,
        surplus=decision.surplus,
        late=decision.late,
        is_test=p.is_test,
        correct=decision.correct,
        excluded=excluded,
        exclusion_reason=reason,
        submission_id=decision.submission_id,
        flag=flag["flag"],
        flag_reason=flag["reason"],
        flag_note=flag["note"],
    )


def _attention_count(p: Participation, passed: bool, max_failures: int) -> None:
    """An attention item's outcome counted on the participation, which is screened out once
    its misses pass what the study allows (unless it already ended that way or was returned)."""
    if passed:
        p.attention_passed += 1
        return
    p.attention_failures += 1
    if p.attention_failures > max_failures and p.state not in (
        ParticipationState.SCREENED_OUT,
        ParticipationState.RETURNED,
    ):
        _screen_out_for_attention(p)


def _submitted_record(a: Assignment, p: Participation, decision: _Decision) -> None:
    """What a stored answer changes around it: the assignment is submitted, the participation
    counts an attention item, grades its qualification once its last qualification item is in,
    and the study is checked against its target interval width."""
    a.status = AssignmentStatus.SUBMITTED
    a.submitted_at = decision.now
    a.surplus = decision.surplus
    a.save(update_fields=["status", "submitted_at", "surplus"])
    p.last_seen_at = decision.now
    study = a.study
    if a.role == ROLE_ATTENTION and decision.correct is not None:
        _attention_count(p, decision.correct, study.attention_max_failures)
    if a.role == ROLE_QUALIFICATION and p.state == ParticipationState.QUALIFICATION:
        qualification_grade(p)
    p.save()
    if a.role == ROLE_MAIN and not p.is_test and study.target_interval_width is not None:
        study_target_check(study=study)  # stops the study once its interval is narrow enough


@dataclass
class SubmitResult:
    annotation: Annotation
    created: bool


@transaction.atomic
def annotation_submit(
    *, participation: Participation, public_id: Any, answer: Any, submission_id: str = ""
) -> SubmitResult:
    """Store the annotation once. A repeated submit (double click, network retry) returns the
    stored annotation unchanged. A late submit (lease expired or released) is stored too, and
    marked surplus when the item already had its k annotations. A malformed answer or
    submission id (NaN, NUL, over-long) is refused naming the field before anything is locked."""
    submission_id = _values_checked(answer, submission_id)
    p = participation_lock(participation)
    a = assignment_get_own(public_id, p, lock=False)
    existing = Annotation.objects.filter(assignment=a).first()
    if existing is not None:
        return SubmitResult(existing, False)
    item = item_lock(a.item_id, skip_locked=False)
    assert item is not None  # waiting for the lock, never skipping: the assignment's item is there
    a = assignment_get_own(public_id, p, lock=True)
    existing = Annotation.objects.filter(assignment=a).first()
    if existing is not None:
        return SubmitResult(existing, False)
    now = clock.now()
    kind = kind_get(a.study.kind)
    checked, cleaned = _answer_accepted(a, kind, item, answer, now)
    late = a.status != AssignmentStatus.RESERVED or now > a.lease_expires_at
    decision = _Decision(
        checked=checked,
        cleaned=cleaned,
        submission_id=submission_id,
        now=now,
        late=late,
        surplus=_is_surplus(a, p, item, late=late, now=now),
        correct=None if checked.broken else kind.is_correct(cleaned, item),
    )
    try:
        with transaction.atomic():
            annotation = _annotation_create(a, p, item, kind, decision)
    except IntegrityError:  # the same assignment submitted concurrently (backstop of the lock)
        return SubmitResult(Annotation.objects.get(assignment=a), False)
    _submitted_record(a, p, decision)
    return SubmitResult(annotation, True)


# --------------------------------------------------------------------------- preview (nothing stored)


def preview_assignment(
    *,
    item: StudyItem,
    served_at: datetime,
    steps_opened: dict[str, str] | None = None,
    goal_acknowledged_at: datetime | None = None,
) -> Assignment:
    """An assignment that is never saved: what a researcher's preview of an item checks its saves
    and submits against (docs/annotation.md, "Preview"). It has no participation or annotator."""
    return Assignment(
        study=item.study,
        item=item,
        role=item.role,
        reserved_at=served_at,
        lease_expires_at=served_at,
        first_served_at=served_at,
        steps_opened=dict(steps_opened or {}),
        goal_acknowledged_at=goal_acknowledged_at,
        click_log=[],
    )


def assignment_save_preview(
    *, assignment: Assignment, draft: Any = None, seq: Any = None, events: Any = None, active_ms: Any = 0
) -> Assignment:
    """A save checked exactly as ``assignment_save`` checks it (the same 400 naming the field)
    and applied to the unsaved ``assignment`` in memory: step openings and the goal
    acknowledgement are recorded on it, the draft is cleaned by the kind; nothing is written."""
    _seconds, checked_events = save_values_checked(draft=draft, seq=seq, events=events, active_ms=active_ms)
    now = clock.now()
    assignment_events_apply(assignment, checked_events, now)
    if draft is not None:
        item = assignment.item
        assignment.draft = draft_clean(item.study.kind, item, draft)
        assignment.draft_seq = seq
    return assignment


def annotation_submit_preview(*, assignment: Assignment, answer: Any, submission_id: Any = "") -> dict[str, Any]:
    """What ``annotation_submit`` would decide for the unsaved ``assignment``: the same checks of
    the values, the interface rules (goal acknowledged, every step opened, the study's minimum
    seconds since the item was shown) and the kind's answer rules. Raises ``SubmissionRejected``
    with every problem, as a real submit would; otherwise returns the cleaned answer (and, for
    a check or gold item, whether it matched the known answer). Nothing is written."""
    _values_checked(answer, submission_id)
    item = assignment.item
    kind = kind_get(item.study.kind)
    checked, cleaned = _answer_accepted(assignment, kind, item, answer, clock.now())
    correct = None if checked.broken else kind.is_correct(cleaned, item)
    return {"answer": cleaned, "correct": correct, "flag": checked.flag}
