"""Reads of the researchers' study pages: the list, one study, its progress toward k, its
annotators and items a page at a time, its flagged items, its item counts (its pilot rounds:
round_selectors.py)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from django.utils import timezone

from annotate import constants as C
from annotate.kinds import kind_get
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION
from annotate.models import (
    FINISHED_STATES,
    Annotation,
    Assignment,
    AssignmentStatus,
    Participation,
    ParticipationState,
    Qualification,
    Study,
    StudyItem,
)
from annotate.participation.flags import BROKEN_REASONS, FLAG_BROKEN, FLAG_UNSURE
from annotate.stats.records import LEFT_OUT_FLAGS
from core.intervals import share_estimate


def _count_of(queryset: QuerySet, field: str) -> Coalesce:
    """The number of rows of ``queryset`` (already filtered on ``field=OuterRef(...)``) per
    outer row, as a correlated subquery grouped on ``field``; 0 when there are none."""
    counts = queryset.order_by().values(field).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counts, output_field=IntegerField()), 0)


def _count_per_study(queryset: QuerySet) -> Coalesce:
    """The number of ``queryset``'s rows of each study, as a correlated subquery (one
    grouped count per study row, using the table's study index), 0 when it has none."""
    return _count_of(queryset.filter(study=OuterRef("pk")), "study")


def study_list() -> QuerySet[Study]:
    """Studies with their main items, main-pool annotations and participants. Each count is
    its own subquery: counting all three over one join would read items × annotations ×
    participants rows per study (tests/security/test_query_linearity.py)."""
    return Study.objects.select_related("guideline_version").annotate(
        n_items=_count_per_study(StudyItem.objects.filter(role=ROLE_MAIN)),
        n_annotations=_count_per_study(Annotation.objects.filter(source=ROLE_MAIN, is_test=False)),
        n_participants=_count_per_study(Participation.objects.filter(is_test=False)),
    )


def study_get(*, slug: str) -> Study:
    return get_object_or_404(Study.objects.select_related("guideline_version", "first_round"), slug=slug)


# Each of ``LEFT_OUT_FLAGS`` as the database stores it.
LEFT_OUT_WHERE: dict[str, Q] = {
    "excluded": Q(excluded=True),
    "surplus": Q(surplus=True),
    "broken": Q(flag=FLAG_BROKEN),
}
assert set(LEFT_OUT_WHERE) == set(LEFT_OUT_FLAGS), "every left-out flag needs its database condition"


def annotations_counted(queryset: QuerySet[Annotation]) -> QuerySet[Annotation]:
    """The annotations of ``queryset`` that count: none of ``LEFT_OUT_FLAGS`` (not excluded,
    not surplus, not flagged "This item is broken"), the rule the agreement statistics apply
    to their rows (``AnnotationRow.counted``), so every "counted" number agrees with them.
    An "I'm unsure" answer counts."""
    left_out = Q()
    for flag in LEFT_OUT_FLAGS:
        left_out |= LEFT_OUT_WHERE[flag]
    return queryset.exclude(left_out)


def study_annotations_counted(studies: Study | Iterable[Study]) -> QuerySet[Annotation]:
    """What a study's results count (every kind's results read it): its main-pool annotations
    that are not a test participant's and count (``annotations_counted``), of one study or of
    several."""
    scope = Q(study=studies) if isinstance(studies, Study) else Q(study__in=studies)
    return annotations_counted(Annotation.objects.filter(scope, source=ROLE_MAIN, is_test=False))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# The implied hourly pay needs a median active time of at least this many seconds: below it
# (annotations submitted at once, clocks that did not run) payment x 3600 / median is no wage.
MIN_SECONDS_FOR_PAY = 1.0


def study_progress_get(study: Study) -> dict[str, Any]:
    """Items complete / in progress / left incomplete / open, live annotators, median active
    time, implied pay, attention-check and qualification pass rates.

    The items partition the main pool: ``items_complete`` (k slots filled),
    ``items_in_progress`` (below k, started: a filled slot or a live reservation),
    ``items_incomplete`` (a closed study's items below k with a filled slot and no live
    reservation: no new annotator comes to fill them; always 0 while the study is open, and a
    closed study's item someone still holds is in progress) and ``items_open`` (the rest:
    nothing filled, nothing held).

    Every count is one aggregate the database computes (a few rows come back whatever the
    study's size); only the active and wall times are read one value per annotation, for
    their medians. Test participants (``is_test``) are left out of every number.

    ``hourly_pay`` is None when the median active time is under ``MIN_SECONDS_FOR_PAY`` (1 s):
    a payment divided by a fraction of a second is no wage anyone earned (the page says the
    pay cannot be estimated, with the n). ``attention_checks`` and ``qualification`` are the
    pass rates as shares with their n and 95% Wilson interval (``share_estimate``), as the
    API gives them."""
    now = timezone.now()
    main = Annotation.objects.filter(study=study, source=ROLE_MAIN, is_test=False)
    return {
        "k": study.annotators_per_item,
        **_items_progress(study, now),
        **_annotations_progress(main),
        **_participants_progress(study, now),
        **_times_and_pay(study, main),
        **_pass_rates(study),
    }


def _items_progress(study: Study, now: datetime) -> dict[str, int]:
    """The main pool's items complete, in progress, left incomplete and open (their total)."""
    k = study.annotators_per_item
    # Per item: filled slots and live reservations, grouped over the study's assignments,
    # then counted by state in the same query (items without any assignment are open).
    per_item = (
        Assignment.objects.filter(study=study, role=ROLE_MAIN, is_test=False)
        .values("item")
        .annotate(
            filled=Count("pk", filter=Q(status=AssignmentStatus.SUBMITTED, surplus=False)),
            live=Count("pk", filter=Q(status=AssignmentStatus.RESERVED, lease_expires_at__gt=now)),
        )
    )
    counts = per_item.aggregate(
        complete=Count("item", filter=Q(filled__gte=k)),
        held=Count("item", filter=Q(filled__lt=k, live__gt=0)),
        started=Count("item", filter=Q(filled__lt=k, filled__gt=0, live=0)),
    )
    complete = counts["complete"]
    # Below k and started: in progress while the study is open. Once it is closed no new
    # annotator comes to fill such an item: it is left incomplete, unless someone already in
    # the study holds a live reservation on it (they can still submit).
    if study.is_open:
        in_progress, incomplete = counts["held"] + counts["started"], 0
    else:
        in_progress, incomplete = counts["held"], counts["started"]
    total = StudyItem.objects.filter(study=study, role=ROLE_MAIN).count()
    return {
        "items_total": total,
        "items_complete": complete,
        "items_in_progress": in_progress,
        "items_incomplete": incomplete,
        "items_open": total - complete - in_progress - incomplete,
    }


def _annotations_progress(main: QuerySet[Annotation]) -> dict[str, int]:
    """The main pool's annotations, and the excluded, surplus, broken and unsure ones among them."""
    annotations = main.aggregate(
        n=Count("pk"),
        excluded=Count("pk", filter=Q(excluded=True)),
        surplus=Count("pk", filter=Q(surplus=True)),
        broken=Count("pk", filter=Q(flag=FLAG_BROKEN)),
        unsure=Count("pk", filter=Q(flag=FLAG_UNSURE)),
    )
    return {
        "annotations_main": annotations["n"],
        "annotations_excluded": annotations["excluded"],
        "annotations_surplus": annotations["surplus"],
        # flagged by their annotators: broken ones are left out of every count that counts,
        # unsure ones are kept (annotate/participation/flags.py)
        "annotations_broken": annotations["broken"],
        "annotations_unsure": annotations["unsure"],
    }


def _participants_progress(study: Study, now: datetime) -> dict[str, Any]:
    """Live reservations, test participants, live annotators, and the participants by state."""
    live_since = now - timedelta(seconds=C.LIVE_WINDOW_SECONDS)
    recently_active = Assignment.objects.filter(participation=OuterRef("pk"), last_activity_at__gte=live_since)
    participations = Participation.objects.filter(study=study, is_test=False)
    live_annotators = (
        participations.exclude(state__in=FINISHED_STATES)
        .filter(Q(last_seen_at__gte=live_since) | Exists(recently_active))
        .count()
    )
    states = dict(participations.order_by().values_list("state").annotate(n=Count("pk")))
    return {
        "live_reservations": Assignment.objects.filter(
            study=study, status=AssignmentStatus.RESERVED, lease_expires_at__gt=now, is_test=False
        ).count(),
        "test_participants": Participation.objects.filter(study=study, is_test=True).count(),
        "live_annotators": live_annotators,
        "participants": sum(states.values()),
        "states": states,
    }


def _times_and_pay(study: Study, main: QuerySet[Annotation]) -> dict[str, Any]:
    """The median active and wall times of the counted main-pool annotations, and the hourly
    pay they imply (None below ``MIN_SECONDS_FOR_PAY``)."""
    times = list(annotations_counted(main).values_list("active_seconds", "wall_seconds"))
    median_active = _median([active for active, _ in times])
    hourly = None
    if study.payment_per_item is not None and median_active is not None and median_active >= MIN_SECONDS_FOR_PAY:
        hourly = float(study.payment_per_item) * 3600.0 / median_active
    return {
        "median_active_seconds": median_active,
        # main-pool annotations that count (not excluded, not surplus): the medians are over them
        "n_counted_annotations": len(times),
        "median_wall_seconds": _median([wall for _, wall in times]),
        "hourly_pay": hourly,
        "paper_hourly_rate": C.PAPER_HOURLY_RATE_USD,
    }


def _pass_rates(study: Study) -> dict[str, Any]:
    """The attention checks' and the qualification's pass rates, with their n and interval."""
    attention = Annotation.objects.filter(
        study=study, source=ROLE_ATTENTION, correct__isnull=False, is_test=False
    ).aggregate(n=Count("pk"), passed=Count("pk", filter=Q(correct=True)))
    # A test participant's annotator takes part in nothing else: its qualification is left out.
    qualification = (
        Qualification.objects.filter(study=study)
        .exclude(annotator__participations__is_test=True)
        .aggregate(n=Count("pk"), passed=Count("pk", filter=Q(passed=True)))
    )
    return {
        "attention_total": attention["n"],
        "attention_pass_rate": attention["passed"] / attention["n"] if attention["n"] else None,
        "attention_checks": share_estimate(attention["passed"], attention["n"]),
        "qualification_total": qualification["n"],
        "qualification_pass_rate": qualification["passed"] / qualification["n"] if qualification["n"] else None,
        "qualification": share_estimate(qualification["passed"], qualification["n"]),
    }


def study_annotators(
    study: Study, *, participation_ids: list[int] | None = None, include_test: bool = False
) -> list[dict[str, Any]]:
    """One row per annotator who started the study (oldest first): the counts the study page,
    the annotators report and its CSV all show, so they cannot disagree.

    ``n_main``: submitted main-pool annotations (excluded and surplus ones included);
    ``n_counted``: those that count (``annotations_counted``: not excluded, not surplus, not
    flagged broken; the ones the agreement statistics use); ``n_broken`` / ``n_unsure``: their
    main-pool annotations flagged "This item is broken" / "I'm unsure";
    ``n_reserved``: items reserved now; ``checks_passed`` / ``checks_failed``: graded
    attention-check answers; ``median_active_seconds`` over the main-pool annotations;
    ``excluded`` / ``exclusion_reason`` come from the participation alone (never from the
    rows of check and qualification items, which are always set aside): excluded when its
    answers were excluded (failed attention checks) or it was screened out (a failed
    qualification), with the participation's reason. Each count is its own grouped
    query over one table: two ``Count``s over one join would multiply each other.

    ``participation_ids``: only these participations (a page of the study page's table).
    ``include_test``: test participants too (the study page lists them, marked ``is_test``);
    the annotators report and its CSV leave them out."""

    def mine(queryset: QuerySet) -> QuerySet:
        return queryset if participation_ids is None else queryset.filter(participation_id__in=participation_ids)

    def grouped(queryset: QuerySet) -> dict[int, int]:
        counts = mine(queryset).order_by().values("participation_id").annotate(n=Count("pk"))
        return dict(counts.values_list("participation_id", "n"))

    main = Annotation.objects.filter(study=study, source=ROLE_MAIN)
    attention = Annotation.objects.filter(study=study, source=ROLE_ATTENTION, correct__isnull=False)
    n_main = grouped(main)
    n_counted = grouped(annotations_counted(main))
    n_broken = grouped(main.filter(flag=FLAG_BROKEN))
    n_unsure = grouped(main.filter(flag=FLAG_UNSURE))
    n_reserved = grouped(Assignment.objects.filter(study=study, status=AssignmentStatus.RESERVED))
    passed = grouped(attention.filter(correct=True))
    failed = grouped(attention.filter(correct=False))
    active = defaultdict(list)
    for pid, seconds in mine(main).values_list("participation_id", "active_seconds"):
        active[pid].append(seconds)
    rows = []
    participations = Participation.objects.filter(study=study)
    if not include_test:
        participations = participations.filter(is_test=False)
    if participation_ids is not None:
        participations = participations.filter(pk__in=participation_ids)
    for p in participations.select_related("annotator").order_by("started_at", "pk"):
        rows.append(
            {
                "participation": p,
                "pid": p.annotator.pid,
                "is_test": p.is_test,
                "n_main": n_main.get(p.pk, 0),
                "n_counted": n_counted.get(p.pk, 0),
                "n_broken": n_broken.get(p.pk, 0),
                "n_unsure": n_unsure.get(p.pk, 0),
                "n_reserved": n_reserved.get(p.pk, 0),
                "checks_passed": passed.get(p.pk, 0),
                "checks_failed": failed.get(p.pk, 0),
                "median_active_seconds": _median(active[p.pk]),
                **_participation_exclusion(p),
            }
        )
    return rows


# Annotators the study page lists at once (the annotators report and its CSV list them all).
STUDY_PAGE_ANNOTATORS = 100


def study_annotators_page(study: Study, *, page: Any = 1, per_page: int = STUDY_PAGE_ANNOTATORS) -> dict[str, Any]:
    """One page of ``study_annotators`` (oldest first), read as leniently as ``study_items_page``;
    test participants are listed too, marked (``is_test``). Each row also says whether a
    release of its slots applies (``releasable``: ``participation_release_refusal`` has no
    objection) and whether it would mark them returned (``release_marks_returned``)."""
    ids = Participation.objects.filter(study=study).order_by("started_at", "pk").values_list("pk", flat=True)
    current = Paginator(ids, per_page).get_page(_page_number(page))
    rows = study_annotators(study, participation_ids=list(current.object_list), include_test=True)
    for row in rows:  # the release control only where a release applies, saying what it does
        p = row["participation"]
        row["releasable"] = participation_release_refusal(p, n_reserved=row["n_reserved"]) is None
        row["release_marks_returned"] = participation_release_marks_returned(p)
    return {"page": current, "rows": rows}


def _page_number(value: Any) -> Any:
    """A page number as the paginator reads it; anything else (too long, not text) is page 1."""
    return value if isinstance(value, (int, str)) and len(str(value)) <= 12 else 1


def _participation_exclusion(p: Participation) -> dict[str, Any]:
    """Whether the participation is excluded, and why: its own exclusion (failed attention
    checks), else a screening-out (qualification) with the state's reason."""
    if p.excluded:
        return {"excluded": True, "exclusion_reason": p.exclusion_reason or p.state_reason}
    if p.state == ParticipationState.SCREENED_OUT:
        return {"excluded": True, "exclusion_reason": p.state_reason or "screened out"}
    return {"excluded": False, "exclusion_reason": ""}


# Items the study page shows at once, each with its annotations (the rest are a page away).
STUDY_PAGE_ITEMS = 50


def study_items_page(study: Study, *, page: Any = 1, per_page: int = STUDY_PAGE_ITEMS) -> dict[str, Any]:
    """One page of the study's items (by role, then position) with their annotations, oldest
    first: the work of a render stays the same whatever the study's size. ``page`` is read
    leniently (anything that is not a page number gives the first page, a number past the
    end the last), as Django's paginator does."""
    paginator = Paginator(StudyItem.objects.filter(study=study).order_by("role", "position", "pk"), per_page)
    current = paginator.get_page(_page_number(page))
    items = list(current.object_list)
    annotations: dict[int, list[Annotation]] = defaultdict(list)
    for a in (
        Annotation.objects.filter(item__in=[i.pk for i in items])
        .select_related("annotator", "study")  # the study's kind summarizes each answer (label)
        .order_by("submitted_at", "pk")
    ):
        annotations[a.item_id].append(a)
    kind = kind_get(study.kind)
    return {
        "page": current,
        "rows": [
            # ``expected``: the item's known answer in one line, as its kind says it (None: none)
            {"item": item, "annotations": annotations[item.pk], "expected": kind.known_answer_summary(item.expected)}
            for item in items
        ],
    }


# Flagged items the study page lists at once (the annotations API filters them all: ?flag=broken).
STUDY_PAGE_FLAGGED_ITEMS = 100


def study_flagged_items(study: Study, *, limit: int = STUDY_PAGE_FLAGGED_ITEMS) -> dict[str, Any]:
    """The items whose annotators flagged them ("This item is broken" or "I'm unsure"; test
    participants' aside), most broken flags first: per item ``n_broken``, ``n_unsure`` and
    each flag with its annotator, reason (as the page's list says it) and note, oldest first.
    ``n_items``: how many items are flagged in all; ``rows``: the first ``limit`` of them."""
    flagged = (
        Annotation.objects.filter(study=study, is_test=False)
        .exclude(flag="")
        .select_related("item", "annotator")
        .order_by("submitted_at", "pk")
    )
    by_item: dict[int, dict[str, Any]] = {}
    for a in flagged.iterator(chunk_size=2000):
        row = by_item.setdefault(a.item_id, {"item": a.item, "n_broken": 0, "n_unsure": 0, "flags": []})
        row["n_broken" if a.flag == FLAG_BROKEN else "n_unsure"] += 1
        row["flags"].append(
            {
                "pid": a.annotator.pid,
                "flag": a.flag,
                "reason": BROKEN_REASONS.get(a.flag_reason, ""),
                "note": a.flag_note,
                "source": a.source,
            }
        )
    rows = sorted(by_item.values(), key=lambda r: (-r["n_broken"], -r["n_unsure"], r["item"].role, r["item"].position))
    return {"n_items": len(rows), "rows": rows[:limit]}


def study_item_counts(study: Study) -> dict[str, int]:
    """The study's items by role (main, attention, qualification), zeros included."""
    counts = dict(
        StudyItem.objects.filter(study=study).order_by().values("role").annotate(n=Count("pk")).values_list("role", "n")
    )
    return {role: counts.get(role, 0) for role in (ROLE_MAIN, ROLE_ATTENTION, ROLE_QUALIFICATION)}


def participation_reserved_count(participation: Participation) -> int:
    """How many slots the participant holds reserved now (what a release gives back)."""
    return Assignment.objects.filter(participation=participation, status=AssignmentStatus.RESERVED).count()


def participation_release_refusal(participation: Participation, *, n_reserved: int) -> str | None:
    """Why releasing the participant's slots does not apply (``participation_release``
    refuses with this message, and the study page offers no release), or None when it does:
    a returned participant's slots were already released, and a finished one (completed or
    screened out) with nothing reserved has nothing to give back. ``n_reserved``: the slots
    they hold now (``participation_reserved_count``)."""
    pid = participation.annotator.pid
    if participation.state == ParticipationState.RETURNED:
        return f"{pid} is already returned; their slots were released"
    if participation.state in FINISHED_STATES and n_reserved == 0:
        return f"{pid} is {participation.state} and holds no reserved slot; nothing to release"
    return None


def participation_release_marks_returned(participation: Participation) -> bool:
    """Whether a release marks the participant returned: only one still on the path (a
    completed or screened-out participant keeps that state; only their slots are released)."""
    return participation.state not in FINISHED_STATES
