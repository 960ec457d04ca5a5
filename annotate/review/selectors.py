"""Reads of review and adjudication: the review list, an annotation's history, gold labels,
the human labels a calibration reads (majority, gold, or gold where there is one), and
agreement with gold beside agreement with the majority per annotator and per judge
(annotate/stats/gold.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet

from annotate.kinds import kind_get
from annotate.kinds.base import REPORT_AGREEMENT, ROLE_MAIN, ROLE_QUALIFICATION, StudyKind
from annotate.models import Annotation, Study, StudyItem
from annotate.review import rules
from annotate.review.models import AnnotationReview, GoldLabel
from annotate.stats.gold import leave_one_out_majority, reference_agreement
from annotate.stats.majority import majority_of_items
from annotate.studies.exports import annotation_list
from annotate.studies.selectors import annotations_counted
from core.app_errors import InvalidInput
from judging.calibration import HUMAN_GOLD, HUMAN_MAJORITY, HUMAN_SOURCES

# Where the human label of an item comes from, for calibration and the PPI How2Score.
# The review list's status filter: not yet reviewed, or the latest decision.
REVIEW_UNREVIEWED = "unreviewed"
REVIEW_STATUSES = (REVIEW_UNREVIEWED, *rules.DECISIONS)


def human_source_check(value: Any, field: str = "human") -> str:
    if value in (None, ""):
        return HUMAN_MAJORITY
    if not isinstance(value, str) or value not in HUMAN_SOURCES:
        raise InvalidInput(
            f"{field}: choose one of {', '.join(HUMAN_SOURCES)}", {field: f"one of {', '.join(HUMAN_SOURCES)}"}
        )
    return value


def review_status_check(value: Any, field: str = "status") -> str:
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or value not in REVIEW_STATUSES:
        raise InvalidInput(
            f"{field}: choose one of {', '.join(REVIEW_STATUSES)}", {field: f"one of {', '.join(REVIEW_STATUSES)}"}
        )
    return value


def review_list(study: Study, *, status: str = "", item: StudyItem | None = None) -> QuerySet[Annotation]:
    """The study's main-pool annotations by real participants, as the review page and the API
    list them (item by item, oldest first): all, the unreviewed ones, or those whose latest
    decision is ``status``."""
    qs = annotation_list(study).filter(source=ROLE_MAIN).select_related("item", "annotator", "study")
    if status == REVIEW_UNREVIEWED:
        qs = qs.filter(review="")
    elif status:
        qs = qs.filter(review=status)
    if item is not None:
        qs = qs.filter(item=item)
    return qs.order_by("item__position", "item_id", "submitted_at", "pk")


def review_counts(study: Study) -> dict[str, int]:
    """How many main-pool annotations are unreviewed, accepted, rejected, corrected."""
    qs = annotation_list(study).filter(source=ROLE_MAIN)
    counts = qs.aggregate(
        unreviewed=Count("pk", filter=Q(review="")),
        **{decision: Count("pk", filter=Q(review=decision)) for decision in rules.DECISIONS},
    )
    counts["gold_labels"] = GoldLabel.objects.filter(study=study).count()
    return counts


def review_history(annotation: Annotation) -> list[AnnotationReview]:
    return list(annotation.reviews.select_related("reviewer").order_by("created_at", "pk"))


def gold_label_list(study: Study) -> list[GoldLabel]:
    return list(
        GoldLabel.objects.filter(study=study)
        .select_related("item", "adjudicator")
        .prefetch_related("settled")
        .order_by("item__position", "item_id")
    )


def gold_label_map(study: Study) -> dict[str, GoldLabel]:
    """item_id (the importer's) -> gold label."""
    return {g.item.item_id: g for g in GoldLabel.objects.filter(study=study).select_related("item", "adjudicator")}


def gold_label_get(item: StudyItem) -> GoldLabel | None:
    return GoldLabel.objects.filter(item=item).select_related("adjudicator").first()


def gold_has_failure_labels(study: Study) -> dict[str, bool]:
    """item_id -> the gold has_failure label, for kinds whose answers carry one."""
    return {
        item_id: bool(label)
        for item_id, label in GoldLabel.objects.filter(study=study, has_failure__isnull=False).values_list(
            "item__item_id", "has_failure"
        )
    }


def human_labels(study: Study, source: str, majority: dict[str, bool]) -> dict[str, bool]:
    """The human has_failure label of each item by ``source`` (``HUMAN_SOURCES``), given the
    study's decided majority (``HumanMajority.decided``)."""
    if source == HUMAN_MAJORITY:
        return dict(majority)
    gold = gold_has_failure_labels(study)
    if source == HUMAN_GOLD:
        return dict(sorted(gold.items()))
    return dict(sorted({**majority, **gold}.items()))


@dataclass(frozen=True)
class _Known:
    """A gold label as a known answer, in the shape the kind's ``answer_correct`` reads."""

    role: str
    expected: Any


def gold_match(kind: StudyKind, answer: dict[str, Any], gold: GoldLabel) -> bool | None:
    """Whether an answer matches the gold label: the kind's known-answer check with the gold
    label as a qualification item's known answer; for a kind without that hook, the
    has_failure labels; None when the kind can do neither."""
    if kind.expected_from_answer is not None and kind.answer_correct is not None:
        return kind.is_correct(answer, _Known(role=ROLE_QUALIFICATION, expected=kind.gold_expected(gold.answer)))
    if kind.answer_label is not None and gold.has_failure is not None:
        return kind.has_failure(answer) == gold.has_failure
    return None


def gold_agreement(study: Study, judgments: list[Any] | None = None) -> dict[str, Any]:
    """Agreement with the adjudicated gold per annotator and per judge, beside agreement with
    the majority on the same items (annotate/stats/gold.py), each a share with its n and 95 %
    Wilson interval. Counted annotations only (a rejected one is excluded; a corrected one
    counts with its correction). ``judgments``: the study's judge rows
    (``study_judgment_rows``) for kinds with has_failure labels."""
    kind = kind_get(study.kind)
    golds = gold_label_map(study)
    counted = annotations_counted(annotation_list(study).filter(source=ROLE_MAIN))
    has_labels = kind.has_report(REPORT_AGREEMENT)
    by_item: dict[str, dict[str, bool]] = {}
    gold_matches: dict[str, dict[str, bool]] = {}
    rows = list(counted.values_list("item__item_id", "annotator__pid", "answer", "has_failure"))
    if has_labels:
        for item_id, pid, _, has_failure in rows:
            if has_failure is not None:
                by_item.setdefault(item_id, {})[pid] = bool(has_failure)
    for item_id, pid, answer, _ in rows:
        gold = golds.get(item_id)
        if gold is None:
            continue
        match = gold_match(kind, answer, gold)
        if match is not None:
            gold_matches.setdefault(pid, {})[item_id] = match
    majority_matches: dict[str, dict[str, bool | None]] | None = None
    min_annotations = study.min_annotations_for_majority
    if has_labels:
        majority_matches = {}
        for pid, items in gold_matches.items():
            for item_id in items:
                labels = by_item.get(item_id, {})
                loo = leave_one_out_majority(labels, pid, min_annotations=min_annotations)
                majority_matches.setdefault(pid, {})[item_id] = None if loo is None else labels[pid] == loo
    annotators = reference_agreement(gold_matches, majority_matches)
    judges: dict[str, Any] = {}
    if has_labels and judgments:
        majority = majority_of_items(by_item, min_annotations)
        judge_gold: dict[str, dict[str, bool]] = {}
        judge_majority: dict[str, dict[str, bool | None]] = {}
        for row in judgments:
            gold = golds.get(row.item_id)
            if gold is None or gold.has_failure is None:
                continue
            judge_gold.setdefault(row.judge, {})[row.item_id] = row.has_failure == gold.has_failure
            label = majority.label(row.item_id)
            judge_majority.setdefault(row.judge, {})[row.item_id] = None if label is None else row.has_failure == label
        judges = reference_agreement(judge_gold, judge_majority)
    return {
        "n_gold_items": len(golds),
        "annotators": annotators,
        "judges": judges,
        "majority_compared": has_labels,
        "min_annotations": min_annotations,
        "rule": (
            "Over the items with a gold label: gold = the share of those items on which the rater's answer matched "
            "the gold label (the kind's known-answer check); majority = on the same items, the share on which the "
            "rater's has_failure label matched the human majority (an annotator: of the other counted annotations, "
            f"at least {min_annotations}; a judge: of every counted annotation); items without a majority are "
            "counted in n_no_majority. Counted annotations only: a rejected annotation is excluded, a corrected one "
            "counts with its correction. Intervals: 95% Wilson."
        ),
    }


def gold_sources(study: Study) -> list[Study]:
    """Other studies of the same kind with at least one gold label: where this study may take
    qualification items from."""
    return list(
        Study.objects.filter(kind=study.kind, gold_labels__isnull=False)
        .exclude(pk=study.pk)
        .distinct()
        .order_by("name")
    )


def gold_groups(report: dict[str, Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """The gold agreement's tables as the pages show them: annotators, then judges (where the
    kind's answers carry has_failure labels)."""
    groups = [("annotators", sorted(report["annotators"].items()))]
    if report["majority_compared"]:
        groups.append(("judges", sorted(report["judges"].items())))
    return groups


def participant_rejections(study: Study) -> dict[int, tuple[str, str]]:
    """participation id -> (message, category) of the latest rejection among its annotations
    whose latest decision is a rejection (real participants only): what the participant's
    Prolific review carries (prolific/review_services.py, ``prolific_review``)."""
    out: dict[int, tuple[str, str]] = {}
    reviews = (
        AnnotationReview.objects.filter(
            study=study,
            decision=rules.DECISION_REJECT,
            annotation__review=rules.DECISION_REJECT,
            annotation__is_test=False,
        )
        .order_by("created_at", "pk")
        .values_list("annotation__participation_id", "reason", "rejection_category")
    )
    for participation_id, reason, category in reviews:
        out[participation_id] = (reason, category)
    return out
