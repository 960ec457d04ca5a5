"""Reads of the studies API (annotate/studies/apis.py, item_apis.py): studies with their progress toward k, items
with their annotations counted, annotations and participants, each as a queryset the API
filters and pages. The numbers come from the same tables and rules as the study page
(annotate/studies/selectors.py): a slot toward k is a submitted main-pool annotation that is not
surplus; coverage is filled slots over items × k. Test participants (``is_test``) count
nowhere, as on the page; the lists show them beside the others with ``include_test``."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, TypedDict, cast

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from annotate.kinds.base import ROLE_MAIN
from annotate.models import Annotation, Assignment, AssignmentStatus, Participation, Study, StudyItem
from annotate.participation.flags import FLAG_BROKEN, FLAG_UNSURE
from annotate.studies.exports import annotation_list
from annotate.studies.selectors import study_list, study_progress_get
from core.intervals import share_estimate


def _count(queryset: QuerySet, field: str) -> Coalesce:
    """Rows of ``queryset`` (already filtered on ``field=OuterRef(...)``) per outer row, as a
    correlated subquery; 0 when there are none."""
    counts = queryset.order_by().values(field).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counts, output_field=IntegerField()), 0)


def _filled() -> QuerySet[Assignment]:
    """Slots counted toward k: submitted main-pool assignments that were not surplus (a test
    participant's never count toward k)."""
    return Assignment.objects.filter(role=ROLE_MAIN, status=AssignmentStatus.SUBMITTED, surplus=False, is_test=False)


class StudyCounts(TypedDict):
    """The counts ``study_api_list`` annotates each study with."""

    n_items: int
    n_annotations: int
    n_participants: int
    n_filled: int


class ItemCounts(TypedDict):
    """The counts ``study_item_api_list`` annotates each item with."""

    n_annotations: int
    n_filled: int
    n_broken: int
    n_unsure: int
    n_reserved: int


if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    CountedStudy = WithAnnotations[Study, StudyCounts]
    CountedItem = WithAnnotations[StudyItem, ItemCounts]


def study_api_list() -> QuerySet[CountedStudy]:
    """``study_list`` (main items, main-pool annotations, participants) with the filled slots."""
    # study_list annotates the other three counts (its QuerySet[Study] does not say so).
    counted = study_list().annotate(n_filled=_count(_filled().filter(study=OuterRef("pk")), "study"))
    return cast("QuerySet[CountedStudy]", counted)


def study_coverage(*, n_items: int, k: int, n_filled: int) -> dict[str, Any]:
    """Filled slots over items × k, as a share with its n (the slots) and Wilson interval."""
    slots = n_items * k
    return {"slots": slots, "slots_filled": n_filled, **share_estimate(min(n_filled, slots), slots)}


def study_items_by_annotations(study: Study) -> dict[str, int]:
    """How many main-pool items have 0, 1, ..., k slots filled (k: every item at k or more)."""
    k = study.annotators_per_item
    per_item = (
        _filled().filter(study=study).order_by().values("item").annotate(n=Count("pk")).values_list("n", flat=True)
    )
    histogram = Counter(min(n, k) for n in per_item)
    total = StudyItem.objects.filter(study=study, role=ROLE_MAIN).count()
    histogram[0] += total - sum(histogram.values())
    return {str(n): histogram.get(n, 0) for n in range(k + 1)}


def study_api_progress(study: Study) -> dict[str, Any]:
    """The study page's progress (``study_progress_get``) with the pass rates as shares with
    their n and interval, and the items by filled slots."""
    progress = study_progress_get(study)

    def passed(rate: float | None, n: int) -> int:  # the page's rate back to its count
        return round(rate * n) if rate is not None else 0

    attention = {
        "n": progress["attention_total"],
        "passed": passed(progress["attention_pass_rate"], progress["attention_total"]),
    }
    qualification = {
        "n": progress["qualification_total"],
        "passed": passed(progress["qualification_pass_rate"], progress["qualification_total"]),
    }
    n_filled = _filled().filter(study=study).count()
    return {
        **progress,
        "coverage": study_coverage(n_items=progress["items_total"], k=progress["k"], n_filled=n_filled),
        "items_by_annotations": study_items_by_annotations(study),
        "attention_checks": share_estimate(attention["passed"], attention["n"]),
        "qualification": share_estimate(qualification["passed"], qualification["n"]),
        # n_counted_annotations is the page's own (``study_progress_get``: not excluded, not surplus)
    }


def study_item_api_list(study: Study, *, include_test: bool = False) -> QuerySet[CountedItem]:
    """The study's items (role, then position) with ``n_annotations`` (every submitted
    annotation of the item), ``n_broken`` / ``n_unsure`` (those flagged "This item is broken" /
    "I'm unsure"), ``n_filled`` (slots toward k, never a test participant's) and
    ``n_reserved`` (reservations held now, live or not yet expired by a visit); test
    participants' annotations and reservations only with ``include_test``."""
    item = OuterRef("pk")
    annotations = Annotation.objects.filter(item=item)
    reserved = Assignment.objects.filter(item=item, status=AssignmentStatus.RESERVED)
    if not include_test:
        annotations, reserved = annotations.filter(is_test=False), reserved.filter(is_test=False)
    return (
        StudyItem.objects.filter(study=study)
        .annotate(
            n_annotations=_count(annotations, "item"),
            n_filled=_count(_filled().filter(item=item), "item"),
            n_broken=_count(annotations.filter(flag=FLAG_BROKEN), "item"),
            n_unsure=_count(annotations.filter(flag=FLAG_UNSURE), "item"),
            n_reserved=_count(reserved, "item"),
        )
        .order_by("role", "position", "pk")
    )


def study_annotation_api_list(study: Study, *, include_test: bool = False) -> QuerySet[Annotation]:
    """The study's annotations, oldest first (the export's order), with what a row shows;
    test participants' only with ``include_test``."""
    return (
        annotation_list(study, include_test=include_test)
        .select_related("item", "annotator", "participation", "study")
        .order_by("submitted_at", "pk")
    )


def study_participation_api_list(study: Study, *, include_test: bool = False) -> QuerySet[Participation]:
    """The study's participants, oldest first (the study page's order); test participants
    only with ``include_test``."""
    participations = Participation.objects.filter(study=study)
    if not include_test:
        participations = participations.filter(is_test=False)
    return participations.select_related("annotator").order_by("started_at", "pk")
