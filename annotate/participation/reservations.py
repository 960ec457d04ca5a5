"""Reservations: which item an annotator gets next, under a lease.

An item is live for at most k annotators at once (reservations are atomic: the item row is
locked while its live slots are counted); a lease expires and the slot returns to the pool.
Slots cannot be hoarded (issue 18): a participant's reservations hold their slot only briefly
until the page reports activity. Lock order: participation, then item, then assignment."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q

from annotate import constants as C
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION
from annotate.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    Participation,
    ParticipationState,
    Qualification,
    StudyItem,
)
from annotate.participation import attention_plan, clock
from annotate.participation.allocation import is_dynamic
from annotate.participation.allocation_selectors import item_slots_wanted, open_item_order
from annotate.participation.selectors import main_items_open
from annotate.participation.services import participation_finish, participation_lock

# --------------------------------------------------------------------------- reservations


def _live_slots(item_id: int, now: datetime, exclude_pk: int | None = None) -> int:
    """Slots of an item that count toward k: submitted (not surplus) and unexpired reservations
    of real participants (a test participant's never count)."""
    qs = Assignment.objects.filter(item_id=item_id, is_test=False).filter(
        Q(status=AssignmentStatus.SUBMITTED, surplus=False)
        | Q(status=AssignmentStatus.RESERVED, lease_expires_at__gt=now)
    )
    if exclude_pk is not None:
        qs = qs.exclude(pk=exclude_pk)
    return qs.count()


def item_lock(item_id: int, *, skip_locked: bool) -> StudyItem | None:
    qs = StudyItem.objects.filter(pk=item_id)
    qs = qs.select_for_update(skip_locked=True) if skip_locked else qs.select_for_update()
    return qs.first()


def _shown_activity(p: Participation) -> bool:
    """Whether the participant's page has reported activity on any item (a save with an event or
    a draft), or they have submitted something: their reservations then get the study's lease."""
    return (
        Assignment.objects.filter(participation=p)
        .filter(Q(activity_seen_at__isnull=False) | Q(status=AssignmentStatus.SUBMITTED))
        .exists()
    )


def _lease_until(p: Participation, now: datetime) -> datetime:
    """The end of a lease granted now: the study's lease once the participant has shown
    activity, else the short initial lease (a reservation nobody acts on frees its slot soon)."""
    full = now + timedelta(minutes=p.study.lease_minutes)
    if _shown_activity(p):
        return full
    return min(full, now + timedelta(seconds=C.INITIAL_LEASE_SECONDS))


def _new_assignment(p: Participation, item: StudyItem, now: datetime) -> Assignment:
    return Assignment.objects.create(
        study_id=p.study_id,
        item=item,
        participation=p,
        annotator_id=p.annotator_id,
        role=item.role,
        is_test=p.is_test,
        reserved_at=now,
        lease_expires_at=_lease_until(p, now),
        first_served_at=now,
        last_activity_at=now,
    )


def _candidate_main_items(p: Participation, now: datetime, limit: int) -> list[int]:
    """Ids of main-pool items this annotator has never had, with fewer than k live slots
    (``main_items_open``), in study order (so items fill up one after another); under dynamic k
    and active selection, the items that want another label in the allocation's order
    (``open_item_order``). A test participant holds no slot, so every item they have not had is
    a candidate, full or not."""
    seen = Assignment.objects.filter(participation=p).values("item_id")
    if p.is_test:
        qs = StudyItem.objects.filter(study_id=p.study_id, role=ROLE_MAIN)
    elif is_dynamic(p.study.allocation_policy):
        # Dynamic k and active selection: the allocation's own order (allocation_selectors.py).
        had = set(seen.values_list("item_id", flat=True))
        return [pk for pk in open_item_order(p.study, now) if pk not in had][:limit]
    else:
        qs = main_items_open(p.study, now)
    return list(qs.exclude(pk__in=seen).order_by("position", "pk").values_list("pk", flat=True)[:limit])


def _capacity(p: Participation, item_id: int, now: datetime) -> int:
    """The live slots an item may hold: k (fixed), what it wants now (dynamic k:
    ``item_slots_wanted``), none once the study has reached its target width."""
    study = p.study
    if study.target_reached_at is not None:
        return 0
    return item_slots_wanted(study, item_id, now)


class _ItemFull(Exception):
    """Raised inside a savepoint to roll it back, which releases the item's row lock."""


_SKIPPED = object()


def _try_reserve(p: Participation, item_id: int, now: datetime, *, skip_locked: bool) -> Any:
    """Lock one item, count its live slots, and reserve it if one is free. Runs in a savepoint:
    when the item is full the savepoint is rolled back, which releases its row lock at once, so
    a reserver never holds one item while waiting for another (no deadlocks between reservers)."""
    try:
        with transaction.atomic():
            item = item_lock(item_id, skip_locked=skip_locked)
            if item is None:
                return _SKIPPED
            if p.is_test or _live_slots(item.pk, now) < _capacity(p, item.pk, now):
                return _new_assignment(p, item, now)
            raise _ItemFull
    except _ItemFull:
        return None


def _reserve_main(p: Participation, now: datetime) -> Assignment | None:
    """Reserve one main-pool item atomically. Each candidate item row is locked while its live
    slots are counted, so concurrent reservers never hand out more than k; rows locked by
    another reserver are skipped first and waited for only if nothing else is free."""
    for _attempt in range(20):
        candidates = _candidate_main_items(p, now, limit=8)
        if not candidates:
            return None
        skipped = []
        for item_id in candidates:
            result = _try_reserve(p, item_id, now, skip_locked=True)
            if result is _SKIPPED:
                skipped.append(item_id)
            elif result is not None:
                return result
        for item_id in skipped:
            result = _try_reserve(p, item_id, now, skip_locked=False)
            if result is not None:
                return result
    return None


def _reserve_free(p: Participation, role: str, now: datetime) -> Assignment | None:
    """Attention-check and qualification items have no k limit: the next one this annotator
    has not had; qualification items in study order, attention checks in the participant's own
    seeded order (annotate/participation/attention_plan.py)."""
    seen = Assignment.objects.filter(participation=p).values("item_id")
    candidates = (
        StudyItem.objects.filter(study_id=p.study_id, role=role).exclude(pk__in=seen).order_by("position", "pk")
    )
    if role == ROLE_ATTENTION:
        order = attention_plan.check_order(
            _attention_seed(p),
            list(
                StudyItem.objects.filter(study_id=p.study_id, role=role)
                .order_by("position", "pk")
                .values_list("pk", flat=True)
            ),
        )
        left = set(candidates.values_list("pk", flat=True))
        item_pk = next((pk for pk in order if pk in left), None)
        item = StudyItem.objects.filter(pk=item_pk).first() if item_pk is not None else None
    else:
        item = candidates.first()
    return _new_assignment(p, item, now) if item is not None else None


def _attention_seed(p: Participation) -> int:
    """The participant's seed (participations from before the seed existed get one now; the
    caller saves the participation)."""
    if p.attention_seed is None:
        p.attention_seed = attention_plan.new_seed()
    return p.attention_seed


def _attention_due(p: Participation) -> bool:
    """Whether the next item is an attention check: one check in every stretch of about 1/rate
    items, at a position drawn from the participant's seed (annotate/participation/attention_plan.py)."""
    rate = p.study.attention_check_rate
    if rate <= 0:
        return False
    seen_main = Assignment.objects.filter(participation=p, role=ROLE_MAIN).count()
    seen_attention = Assignment.objects.filter(participation=p, role=ROLE_ATTENTION).count()
    return attention_plan.check_due(
        _attention_seed(p), rate, served=seen_main + seen_attention, checks_served=seen_attention
    )


def _renew_or_expire(a: Assignment, p: Participation, now: datetime) -> bool:
    """An annotator is back on an item whose lease ran out: keep it if a slot is still free (a
    test participant holds no slot: always kept)."""
    if a.role != ROLE_MAIN or p.is_test:
        a.lease_expires_at = _lease_until(p, now)
        a.save(update_fields=["lease_expires_at"])
        return True
    try:
        with transaction.atomic():  # a savepoint: rolling it back releases the item lock
            item_lock(a.item_id, skip_locked=False)
            if _live_slots(a.item_id, now, exclude_pk=a.pk) >= _capacity(p, a.item_id, now):
                raise _ItemFull
            a.lease_expires_at = _lease_until(p, now)
            a.save(update_fields=["lease_expires_at"])
            return True
    except _ItemFull:
        pass
    a.status = AssignmentStatus.EXPIRED  # the draft stays stored; a late submit is still accepted
    a.save(update_fields=["status"])
    return False


def qualification_grade(p: Participation) -> None:
    """After the last gold item: pass or screen out, remembered per guideline version."""
    study = p.study
    n_total = StudyItem.objects.filter(study=study, role=ROLE_QUALIFICATION).count()
    answers = Annotation.objects.filter(participation=p, source=ROLE_QUALIFICATION)
    if answers.count() < n_total:
        return
    n_correct = answers.filter(correct=True).count()
    passed = n_correct >= study.qualification_pass
    Qualification.objects.get_or_create(
        annotator_id=p.annotator_id,
        guideline_version_id=study.guideline_version_id,
        defaults={"study": study, "passed": passed, "n_correct": n_correct, "n_total": n_total},
    )
    if passed:
        p.state = ParticipationState.ANNOTATING
    else:
        participation_finish(
            p,
            ParticipationState.SCREENED_OUT,
            f"qualification: {n_correct} of {n_total} correct, {study.qualification_pass} needed",
        )


def _current(p: Participation, roles: tuple[str, ...], held: Collection[int] = ()) -> Assignment | None:
    return (
        Assignment.objects.filter(participation=p, status=AssignmentStatus.RESERVED, role__in=roles)
        .exclude(pk__in=list(held))
        .select_related("item")
        .order_by("reserved_at", "pk")
        .first()
    )


def _has_annotated(p: Participation) -> bool:
    """Whether the participant has submitted a main-pool item (a completion code is for work)."""
    return Assignment.objects.filter(participation=p, role=ROLE_MAIN, status=AssignmentStatus.SUBMITTED).exists()


@transaction.atomic
def assignment_next(*, participation: Participation, held: Collection[int] = ()) -> Assignment | None:
    """The item this annotator should see now: their current reservation (renewed if its lease
    ran out and a slot is still free), else a newly reserved one (qualification items first,
    then main items with attention checks mixed in). None when there is nothing left, in which
    case the participation is completed (or screened out after a failed qualification), but
    only if they have annotated a main item (or are a test participant): one who has annotated
    none stays annotating with nothing to do, and the work page shows the study-full page (no
    completion code for zero items; an attention check is not served to them either then).

    ``held``: main-pool assignments already on the annotator's page (a page of several items):
    they are skipped, count towards the study's limit per annotator, and while there are any the
    participation is not completed when nothing more is left."""
    p = participation_lock(participation)
    now = clock.now()
    p.last_seen_at = now
    result = None
    if p.state == ParticipationState.QUALIFICATION:
        result = _current(p, (ROLE_QUALIFICATION,)) or _reserve_free(p, ROLE_QUALIFICATION, now)
        if result is None:
            qualification_grade(p)
            if p.state == ParticipationState.QUALIFICATION:  # gold items missing: nothing to grade
                participation_finish(p, ParticipationState.SCREENED_OUT, "no qualification items")
    if result is None and p.state == ParticipationState.ANNOTATING:
        current = _current(p, (ROLE_MAIN, ROLE_ATTENTION), held)
        if current is not None and (current.lease_expires_at > now or _renew_or_expire(current, p, now)):
            result = current
        else:
            done = Assignment.objects.filter(
                participation=p, role__in=(ROLE_MAIN, ROLE_ATTENTION), status=AssignmentStatus.SUBMITTED
            ).count()
            limit = p.study.max_items_per_annotator
            if limit is not None and done + len(held) >= limit:
                if not held:
                    participation_finish(p, ParticipationState.COMPLETED, f"reached the study's {limit} items")
            else:
                annotated = p.is_test or _has_annotated(p)
                # No check for someone who has annotated nothing while no item is left for them:
                # it would be work before the study-full page.
                if _attention_due(p) and (annotated or _candidate_main_items(p, now, limit=1)):
                    result = _reserve_free(p, ROLE_ATTENTION, now)
                result = result or _reserve_main(p, now)
                if result is None and not held and annotated:
                    participation_finish(p, ParticipationState.COMPLETED, "no more items to annotate")
                # Nothing left for one who has annotated no main item (the study filled while they
                # read the guidelines, trained or took the qualification test): no completion
                # code for zero items. They stay as they are, the work page shows the study-full
                # page, and a slot freed later is theirs when they open the link again.
    p.save()
    return result


def assignment_page(*, participation: Participation, size: int) -> list[Assignment]:
    """Up to ``size`` items for one page (a study that shows several items per page): the
    annotator's current reservations first, then new ones, each reserved by ``assignment_next``
    under the same rules. Qualification items are always shown one at a time."""
    page: list[Assignment] = []
    while len(page) < max(size, 1):
        a = assignment_next(participation=participation, held=[x.pk for x in page])
        if a is None or any(x.pk == a.pk for x in page):
            break
        page.append(a)
        participation.refresh_from_db()
        if a.role == ROLE_QUALIFICATION or participation.state != ParticipationState.ANNOTATING:
            break
    return page
