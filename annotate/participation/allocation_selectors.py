"""Reads behind a study's allocation (annotate/participation/allocation.py has the rules): each
main item's counted labels and slots, the items open to a new annotator in the order they are
offered, and where the study stands against its target interval width.

An item's *counted labels* are the has_failure labels of its main-pool annotations by real
participants that are not excluded, not surplus, not flagged broken and not rejected in review
(a corrected annotation counts with the correction, which is stored in its has_failure); its
*slots* are its submitted, non-surplus assignments of real participants; *live* adds their
unexpired reservations. Under fixed k an item wants ``annotators_per_item`` slots; under dynamic
k it wants one more label than it has while it is undecided (``item_undecided``), and no more
once it is decided (``slots_wanted``)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count

from annotate.kinds.base import ROLE_MAIN
from annotate.models import Assignment, AssignmentStatus, Study, StudyItem
from annotate.participation.allocation import (
    POLICY_ACTIVE,
    POLICY_FIXED,
    POLICY_LABELS,
    StratumState,
    calibration_interval,
    expected_annotations,
    interval_unsettled,
    interval_width,
    is_dynamic,
    item_undecided,
    judge_has_failure_of,
    shuffle_key,
    strata_order,
    stratum_key,
    target_reached,
)
from annotate.stats.majority import majority_label
from annotate.studies.selectors import study_annotations_counted
from judging.how2score import percent_forms


@dataclass
class ItemTally:
    """One main item as the allocation sees it (module docstring)."""

    pk: int
    item_id: str
    topic: str
    position: int
    judge_has_failure: bool | None
    votes: list[bool] = field(default_factory=list)
    slots: int = 0
    live: int = 0


def study_k_range(study: Study) -> tuple[int, int]:
    """The fewest and the most counted labels an item gets: k and k under fixed k; under dynamic
    k the study's minimum (annotators per item, at least the labels a human majority needs) and
    its maximum."""
    if not is_dynamic(study.allocation_policy):
        return study.annotators_per_item, study.annotators_per_item
    low = max(study.annotators_per_item, study.min_annotations_for_majority)
    high = study.max_annotators_per_item or low + 1
    return low, max(low, high)


def item_tallies(study: Study, now: datetime, *, item_pks: list[int] | None = None) -> list[ItemTally]:
    """Every main item of the study (or those of ``item_pks``) with its counted labels, slots and
    live slots, in study order."""
    items = StudyItem.objects.filter(study_id=study.pk, role=ROLE_MAIN)
    assignments = Assignment.objects.filter(study_id=study.pk, role=ROLE_MAIN, is_test=False)
    # The counted annotations every result reads (one rule: study_annotations_counted) that carry
    # a has_failure label, less any whose review is a rejection (which the review service also
    # excludes: the allocation never lets a rejected label decide an item).
    annotations = study_annotations_counted(study).filter(has_failure__isnull=False).exclude(review="reject")
    if item_pks is not None:
        items = items.filter(pk__in=item_pks)
        assignments = assignments.filter(item_id__in=item_pks)
        annotations = annotations.filter(item_id__in=item_pks)
    tallies = {
        pk: ItemTally(
            pk=pk, item_id=item_id, topic=topic, position=position, judge_has_failure=judge_has_failure_of(source)
        )
        for pk, item_id, topic, position, source in items.order_by("position", "pk").values_list(
            "pk", "item_id", "topic", "position", "source"
        )
    }
    submitted = assignments.filter(status=AssignmentStatus.SUBMITTED, surplus=False)
    for item_pk, n in submitted.values_list("item_id").annotate(n=Count("pk")).values_list("item_id", "n"):
        if item_pk in tallies:
            tallies[item_pk].slots = n
            tallies[item_pk].live += n
    reserved = assignments.filter(status=AssignmentStatus.RESERVED, lease_expires_at__gt=now)
    for item_pk, n in reserved.values_list("item_id").annotate(n=Count("pk")).values_list("item_id", "n"):
        if item_pk in tallies:
            tallies[item_pk].live += n
    for item_pk, has_failure in annotations.order_by("submitted_at", "pk").values_list("item_id", "has_failure"):
        if item_pk in tallies:
            tallies[item_pk].votes.append(bool(has_failure))
    return list(tallies.values())


def item_closed(study: Study, tally: ItemTally) -> bool:
    """Whether the item needs no further label: it has its k (fixed) or is decided (dynamic)."""
    low, high = study_k_range(study)
    return not item_undecided(tally.votes, judge_has_failure=tally.judge_has_failure, min_k=low, max_k=high)


def slots_wanted(study: Study, tally: ItemTally) -> int:
    """The slots the item may fill now: k under fixed k; under dynamic k its slots that carry
    no counted label (an excluded or flagged annotation keeps its slot) plus the labels it
    still wants, one at a time past the minimum while it is undecided."""
    if not is_dynamic(study.allocation_policy):
        return study.annotators_per_item
    low, _high = study_k_range(study)
    uncounted = max(0, tally.slots - len(tally.votes))
    if item_closed(study, tally):
        return uncounted + len(tally.votes)
    return uncounted + max(low, len(tally.votes) + 1)


def item_slots_wanted(study: Study, item_pk: int, now: datetime) -> int:
    """``slots_wanted`` of one item (the reservation and submit paths ask under the item's lock)."""
    if not is_dynamic(study.allocation_policy):
        return study.annotators_per_item
    tallies = item_tallies(study, now, item_pks=[item_pk])
    return slots_wanted(study, tallies[0]) if tallies else 0


def _strata(study: Study, tallies: list[ItemTally]) -> list[StratumState]:
    """Where each topic stands (items with the judge's label only: the interval's items)."""
    fields = ("pool", "pool_judge_no_failure", "decided", "no_failure", "judge_no_failure", "both_no_failure")
    counts: dict[str, dict[str, int]] = defaultdict(
        lambda: dict.fromkeys((*fields, "annotations", "started", "open"), 0)
    )
    for t in tallies:
        if t.judge_has_failure is None:
            continue
        c = counts[stratum_key(t.topic)]
        judge_no_failure = not t.judge_has_failure
        c["pool"] += 1  # every item of the topic: ppi_score's unlabelled set is the whole study
        c["pool_judge_no_failure"] += int(judge_no_failure)
        if item_closed(study, t) and t.votes:
            c["annotations"] += len(t.votes)
            label = majority_label(t.votes)
            if label is not None:
                c["decided"] += 1
                c["no_failure"] += int(not label)
                c["judge_no_failure"] += int(judge_no_failure)
                c["both_no_failure"] += int(judge_no_failure and not label)
        elif t.live > 0 or t.votes:
            c["started"] += 1
        else:
            c["open"] += 1
    return [StratumState(key=key, **c) for key, c in sorted(counts.items())]


def open_item_order(study: Study, now: datetime) -> list[int]:
    """Ids of the main items a participant could be given now, in the order they are offered.
    None once the study has reached its target width. Fixed k: items with fewer than k live
    slots in study order. Dynamic k: items whose live slots are fewer than they want, those
    already started first (an undecided item gets its next label before a new item is opened).
    Active selection: started items first, then new items topic by topic (``strata_order``),
    each topic's in its seeded random order (``shuffle_key``)."""
    if study.target_reached_at is not None:
        return []
    tallies = item_tallies(study, now)
    wanting = [t for t in tallies if t.live < slots_wanted(study, t)]
    if study.allocation_policy == POLICY_FIXED:
        return [t.pk for t in wanting]
    started = [t.pk for t in wanting if t.live > 0 or t.votes]
    fresh = [t for t in wanting if not (t.live > 0 or t.votes)]
    if study.allocation_policy != POLICY_ACTIVE:
        return started + [t.pk for t in fresh]
    low, high = study_k_range(study)
    order = strata_order(_strata(study, tallies), prior_cost=expected_annotations(low, high))
    rank = {key: i for i, key in enumerate(order)}
    fresh.sort(
        key=lambda t: (
            rank.get(stratum_key(t.topic), len(rank)) if t.judge_has_failure is not None else len(rank),
            shuffle_key(study.pk, t.item_id),
        )
    )
    return started + [t.pk for t in fresh]


def study_allocation(study: Study, *, now: datetime | None = None) -> dict[str, Any]:
    """Where the study stands: its policy, k range, the annotations counted and the items
    decided, and the PPI++ How2Score interval of its items (strata topics;
    ``calibration_interval``) with its width against the target. The study page and the API
    show this; ``study_target_check`` stops the study from it. Scores and widths on 0-1, each
    with its ``_percent`` sibling."""
    from annotate.participation import clock

    now = now or clock.now()
    tallies = item_tallies(study, now)
    low, high = study_k_range(study)
    closed = [t for t in tallies if item_closed(study, t)]
    labelled = [
        (t.topic, t.judge_has_failure, label)
        for t in closed
        if t.judge_has_failure is not None
        and (label := majority_label(t.votes)) is not None
        and len(t.votes) >= study.min_annotations_for_majority
    ]
    unlabelled = [(t.topic, t.judge_has_failure) for t in tallies if t.judge_has_failure is not None]
    interval: dict[str, Any] | None = None
    width = None
    unsettled: str | None = "no item has the judge's label"
    if unlabelled:
        interval = calibration_interval(labelled, unlabelled)
        width = interval_width(interval)
        unsettled = interval_unsettled(interval, labelled, unlabelled)
    target = study.target_interval_width
    n_annotations = sum(len(t.votes) for t in tallies)
    state = {
        "policy": study.allocation_policy,
        "policy_label": POLICY_LABELS.get(study.allocation_policy, study.allocation_policy),
        "min_annotators_per_item": low,
        "max_annotators_per_item": high,
        "n_items": len(tallies),
        "n_items_decided": len(closed),
        "n_items_labelled": len(labelled),
        "n_annotations": n_annotations,
        "n_annotations_submitted": sum(t.slots for t in tallies),
        "annotations_per_decided_item": (sum(len(t.votes) for t in closed) / len(closed) if closed else None),
        "estimate": None if interval is None else interval["estimate"],
        "ci95": None if interval is None else interval["ci95"],
        "interval_width": width,
        "interval_not_estimable": None if interval is None else interval["not_estimable"],
        "interval_name": "PPI++ stratified by topic (95%)",
        "target_interval_width": target,
        "interval_unsettled": unsettled,
        "target_reached": study.target_reached_at is not None or target_reached(width, target, unsettled=unsettled),
        "target_reached_at": study.target_reached_at,
    }
    return percent_forms(state, ["estimate", "ci95", "interval_width", "target_interval_width"])
