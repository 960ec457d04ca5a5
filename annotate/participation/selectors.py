"""Reads of the annotator's path: the participation an annotator's session holds, and what an
annotator is told (items to expect, the study's terms, where they are)."""

from __future__ import annotations

from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet

from annotate import constants as C
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION
from annotate.models import Assignment, AssignmentStatus, Participation, ParticipationState, Study, StudyItem
from annotate.participation import clock
from annotate.participation.allocation import is_dynamic
from annotate.participation.allocation_selectors import open_item_order
from annotate.studies.selectors import study_item_counts


def participation_for_session(*, slug: str, participation_id: Any) -> Participation | None:
    """The participation kept in an annotator's session, if it belongs to this study."""
    if not isinstance(participation_id, int):
        return None
    return (
        Participation.objects.select_related("study__guideline_version", "annotator")
        .filter(pk=participation_id, study__slug=slug)
        .first()
    )


# --------------------------------------------------------------------------- room for a participant


def main_items_open(study: Study, now: datetime) -> QuerySet[StudyItem]:
    """The study's main-pool items with fewer than k live slots: the items a participant who
    has had none of them could be given. A live slot counts toward k: a submitted annotation
    that is not surplus, or an unexpired reservation, of a real participant (a test
    participant's never count). Under dynamic k and active selection, the items that want another
    label (annotate/participation/allocation_selectors.py); none once the study has reached its
    target interval width. ``_candidate_main_items`` (reservations.py) reserves from here;
    ``study_full`` asks whether anything is left."""
    live = Count(
        "assignments",
        filter=Q(assignments__is_test=False)
        & (
            Q(assignments__status=AssignmentStatus.SUBMITTED, assignments__surplus=False)
            | Q(assignments__status=AssignmentStatus.RESERVED, assignments__lease_expires_at__gt=now)
        ),
    )
    items = StudyItem.objects.filter(study_id=study.pk, role=ROLE_MAIN)
    if study.target_reached_at is not None:
        return items.none()  # the interval reached the study's target width: nothing more is offered
    if is_dynamic(study.allocation_policy):
        return items.filter(pk__in=open_item_order(study, now))
    return items.annotate(live=live).filter(live__lt=study.annotators_per_item)


def study_full(study: Study) -> bool:
    """Whether the study has no item a new participant could be given (``main_items_open`` is
    empty: every main item has its k counted annotations or live reservations covering it).
    A new participant is then turned away at the entry, and one who has not consented yet is
    not shown the consent page's promise (``StudyFull``); a slot freed later (a lease running
    out, a release) opens it again."""
    return not main_items_open(study, clock.now()).exists()


def participation_study_full(p: Participation) -> bool:
    """Whether ``p`` is shown the study-full page instead of the consent page (and refused
    consent): a real participant who has not consented yet, in a full study (``study_full``).
    A test participant holds no slot, so no study is full for them."""
    return not p.is_test and p.state == ParticipationState.CONSENT and study_full(p.study)


# --------------------------------------------------------------------------- what an annotator is told


def study_items_per_participant(study: Study, *, seed: int | None) -> int:
    """The number N of "item X of N": main-pool items and attention checks together (a check
    must look like any other item, so it is counted like one; qualification items are counted
    apart). N is the study's items per annotator when it sets one, else every main item plus
    the checks the participant's plan mixes in among them (``attention_plan.checks_met``; the
    preview's plan has seed 0). When other annotators fill items first, a participant may finish
    before N: N is the most they can be given."""
    from annotate.participation.attention_plan import checks_met

    counts = study_item_counts(study)
    checks = checks_met(
        seed or 0,
        study.attention_check_rate,
        main_items=counts[ROLE_MAIN],
        check_items=counts[ROLE_ATTENTION],
        limit=study.max_items_per_annotator,
    )
    total = counts[ROLE_MAIN] + checks
    if study.max_items_per_annotator is not None:
        total = min(total, study.max_items_per_annotator)
    return total


def study_items_most(study: Study) -> tuple[int, int]:
    """The most items (main items and attention checks) any participant of ``study`` can be
    given, ``study_items_per_participant`` over every seed, and the most attention checks among
    them (``attention_plan.checks_most``)."""
    from annotate.participation.attention_plan import checks_most

    counts = study_item_counts(study)
    checks = checks_most(
        study.attention_check_rate,
        main_items=counts[ROLE_MAIN],
        check_items=counts[ROLE_ATTENTION],
        limit=study.max_items_per_annotator,
    )
    total = counts[ROLE_MAIN] + checks
    if study.max_items_per_annotator is not None:
        total = min(total, study.max_items_per_annotator)
    return total, checks


def study_terms(study: Study) -> dict[str, Any]:
    """What the study asks of a participant and pays, from its settings: one set of numbers for
    the consent page, the preview and the Prolific draft (its estimated time and reward), so they
    never disagree. N (``n_items``) is the most items anyone can be given
    (``study_items_most``: main items and attention checks, whichever checks a participant's
    seed brings), then the qualification items and training examples before them, the minimum
    seconds per item, the expected time and the pay.

    Expected time: every item (qualification items too) at the study's minimum seconds or the
    kind's typical time, whichever is longer (StudyKind.typical_seconds_per_item), plus a minute
    per training example, rounded up to whole minutes; pay: the payment per item times N (None
    when no payment is set), ``pay_cents`` the same in whole cents (half up). ``n_checks``: the
    most attention checks among the N items (so at least N − n_checks of them are main items)."""
    from annotate.kinds import codebook_get, kind_get

    counts = study_item_counts(study)
    n_items, n_checks = study_items_most(study)
    n_qualification = counts[ROLE_QUALIFICATION] if study.qualification_enabled else 0
    n_training = len((codebook_get(study.kind) or {}).get("examples", [])) if study.training_enabled else 0
    seconds_per_item = max(study.min_seconds, kind_get(study.kind).typical_seconds_per_item)
    expected_seconds = (n_items + n_qualification) * seconds_per_item + n_training * C.TRAINING_SECONDS_PER_EXAMPLE
    pay = study.payment_per_item * n_items if study.payment_per_item is not None else None
    pay_cents = int((pay * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP)) if pay is not None else None
    return {
        "n_items": n_items,
        "n_checks": n_checks,
        "n_qualification": n_qualification,
        "n_training": n_training,
        "min_seconds": study.min_seconds,
        "seconds_per_item": seconds_per_item,
        "expected_minutes": max(1, -(-expected_seconds // 60)),
        "payment_per_item": study.payment_per_item,
        "pay_total": pay,
        "pay_cents": pay_cents,
        "max_items_per_annotator": study.max_items_per_annotator,
    }


def participation_position(participation: Participation, role: str) -> dict[str, Any]:
    """Where the participant's current item stands: ``number`` of ``total`` among their items
    (main items and attention checks, ``study_items_per_participant``), or among the
    qualification items during the qualification test. ``number`` is one more than the items of
    that kind they have submitted."""
    study = participation.study
    if role == ROLE_QUALIFICATION:
        done = Assignment.objects.filter(
            participation=participation, role=ROLE_QUALIFICATION, status=AssignmentStatus.SUBMITTED
        ).count()
        return {"number": done + 1, "total": study_item_counts(study)[ROLE_QUALIFICATION], "qualification": True}
    done = Assignment.objects.filter(
        participation=participation, role__in=(ROLE_MAIN, ROLE_ATTENTION), status=AssignmentStatus.SUBMITTED
    ).count()
    total = study_items_per_participant(study, seed=participation.attention_seed)
    return {"number": done + 1, "total": max(total, done + 1), "qualification": False}
