"""Labels and the human majority. Pure Python, no Django.

An item's **human majority** is a strict majority of at least ``min_annotations`` (default
2) counted annotations (``check_rows``: not excluded, not surplus); a tie has no majority, an item with fewer annotations has none
either, and both are counted (``HumanMajority``). Every report that compares with "the human
majority" (the agreement report, metric agreement, calibration) reads it from here, so they
count alike. Labels are booleans: ``True`` means has_failure, ``False`` means no_failure;
items, annotators and judges are put in sorted order before anything is computed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from annotate import constants as C
from annotate.stats.records import HAS_FAILURE, NO_FAILURE, AnnotationRow, JudgmentRow

LOCATION_NONE = "none"
LOCATION_UNLOCATED = "unlocated"

Location = str | int


def annotation_l2_steps(row: AnnotationRow) -> frozenset[int]:
    """The set of L2 (generated-procedure) steps the annotation links: the union over its
    failures. Empty for a no_failure annotation."""
    if not row.has_failure:
        return frozenset()
    return frozenset(step for failure in row.failures for step in failure.get("L2_steps", []))


def first_failure_location(row: AnnotationRow) -> Location:
    """``"none"`` when the annotation reports no failure; otherwise the smallest L2 step
    linked by any of its failures; ``"unlocated"`` when it reports a failure but links no
    L2 step."""
    if not row.has_failure:
        return LOCATION_NONE
    steps = annotation_l2_steps(row)
    return min(steps) if steps else LOCATION_UNLOCATED


def label_name(has_failure: bool) -> str:
    return HAS_FAILURE if has_failure else NO_FAILURE


def majority_label(labels: Sequence[bool]) -> bool | None:
    """Strict majority of has_failure labels: ``True`` (has_failure) when more than half
    say has_failure, ``False`` (no_failure) when more than half say no_failure, ``None``
    for a tie or an empty list. How many labels make a *human majority* at all is decided
    by ``human_majority`` (``min_annotations``), not here."""
    n_has = sum(1 for label in labels if label)
    n_no = len(labels) - n_has
    if 2 * n_has > len(labels):
        return True
    if 2 * n_no > len(labels):
        return False
    return None


@dataclass(frozen=True)
class LeftOut:
    """The rows ``check_rows`` left out: ``excluded`` ones (failed attention checks,
    qualification and attention-check answers) and ``surplus`` ones (late submits into an item
    that already had its k counted annotations; a row that is both counts as excluded) and
    ``broken`` ones (flagged "This item is broken" by the annotator; counted as broken only
    when neither excluded nor surplus)."""

    excluded: int = 0
    surplus: int = 0
    broken: int = 0


def check_rows(annotations: Iterable[AnnotationRow]) -> tuple[list[AnnotationRow], LeftOut]:
    """The counted rows (``AnnotationRow.counted``: not excluded, not surplus, not flagged broken; sorted by item,
    then annotator) and how many were left out, and why. Every statistic reads its rows from
    here. Raises ``ValueError`` on a duplicate (item_id, annotator) or a contradictory row."""
    kept: dict[tuple[str, str], AnnotationRow] = {}
    n_excluded = n_surplus = n_broken = 0
    for row in annotations:
        if not row.counted:
            n_excluded += int(row.excluded)
            n_surplus += int(row.surplus and not row.excluded)
            n_broken += int(row.broken and not row.excluded and not row.surplus)
            continue
        key = (row.item_id, row.annotator)
        if key in kept:
            raise ValueError(f"two annotations of item {row.item_id!r} by annotator {row.annotator!r}")
        if not row.has_failure and row.failures:
            raise ValueError(
                f"annotation of item {row.item_id!r} by {row.annotator!r}: has_failure is false but failures are listed"
            )
        kept[key] = row
    return [kept[key] for key in sorted(kept)], LeftOut(excluded=n_excluded, surplus=n_surplus, broken=n_broken)


def judgment_labels(judgments: Iterable[JudgmentRow]) -> dict[str, dict[str, bool]]:
    """judge -> item_id -> has_failure, judges and items in sorted order."""
    by_judge: dict[str, dict[str, bool]] = defaultdict(dict)
    for row in judgments:
        if row.item_id in by_judge[row.judge]:
            raise ValueError(f"two judgments of item {row.item_id!r} by judge {row.judge!r}")
        by_judge[row.judge][row.item_id] = row.has_failure
    return {judge: dict(sorted(by_judge[judge].items())) for judge in sorted(by_judge)}


def labels_by_item(rows: Sequence[AnnotationRow]) -> dict[str, dict[str, bool]]:
    """item_id -> annotator -> has_failure of checked rows (``check_rows``), items and
    annotators in sorted order."""
    by_item: dict[str, dict[str, bool]] = defaultdict(dict)
    for row in rows:
        by_item[row.item_id][row.annotator] = row.has_failure
    return {item: dict(sorted(labels.items())) for item, labels in sorted(by_item.items())}


def check_min_annotations(min_annotations: int) -> int:
    """``min_annotations`` if it is a whole number of at least 2; ``ValueError`` otherwise
    (one annotation is a label, not a majority)."""
    if isinstance(min_annotations, bool) or not isinstance(min_annotations, int):
        raise ValueError(f"a human majority needs a whole number of annotations, got {min_annotations!r}")
    if not C.MIN_ANNOTATIONS_FOR_MAJORITY_MIN <= min_annotations <= C.MIN_ANNOTATIONS_FOR_MAJORITY_MAX:
        raise ValueError(
            f"a human majority needs at least {C.MIN_ANNOTATIONS_FOR_MAJORITY_MIN} annotations "
            f"(and at most {C.MIN_ANNOTATIONS_FOR_MAJORITY_MAX}), got {min_annotations}"
        )
    return min_annotations


@dataclass(frozen=True)
class HumanMajority:
    """The human majority of every annotated item, and what has none.

    ``labels``: item_id -> strict majority (``True`` has_failure, ``False`` no_failure,
    ``None`` a tie) for the items with at least ``min_annotations`` counted
    annotations. ``too_few``: item_id -> its number of annotations, for the annotated items
    with fewer (they have no majority: one annotation is a label, not a majority). Every
    report that compares with "the human majority" reads it from here, so they count alike."""

    labels: Mapping[str, bool | None]
    too_few: Mapping[str, int] = field(default_factory=dict)
    min_annotations: int = C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT

    def label(self, item_id: str) -> bool | None:
        """The item's majority, ``None`` for a tie, too few annotations or none at all."""
        return self.labels.get(item_id)

    def decided(self) -> dict[str, bool]:
        """item_id -> majority for the items that have one, sorted by item."""
        return {item: bool(label) for item, label in sorted(self.labels.items()) if label is not None}

    def reason(self, item_id: str) -> str:
        """Why an item has (or lacks) a majority: ``majority``, ``tie``, ``too_few`` or
        ``no_annotations``."""
        if item_id in self.too_few:
            return "too_few"
        if item_id not in self.labels:
            return "no_annotations"
        return "tie" if self.labels[item_id] is None else "majority"

    def summary(self) -> dict[str, int]:
        """The counts every page shows, which add up: ``n_items`` (annotated items) =
        ``n_with_majority`` + ``n_ties`` + ``n_too_few``, and ``n_with_majority`` =
        ``has_failure`` + ``no_failure``."""
        has = sum(1 for label in self.labels.values() if label is True)
        no = sum(1 for label in self.labels.values() if label is False)
        return {
            "min_annotations": self.min_annotations,
            "n_items": len(self.labels) + len(self.too_few),
            "n_with_majority": has + no,
            "has_failure": has,
            "no_failure": no,
            "n_ties": len(self.labels) - has - no,
            "n_too_few": len(self.too_few),
        }


def majority_of_items(by_item: Mapping[str, Mapping[str, bool]], min_annotations: int) -> HumanMajority:
    """The human majority of items given as item_id -> annotator -> has_failure
    (``labels_by_item``)."""
    check_min_annotations(min_annotations)
    labels: dict[str, bool | None] = {}
    too_few: dict[str, int] = {}
    for item, by_annotator in by_item.items():
        if len(by_annotator) < min_annotations:
            too_few[item] = len(by_annotator)
        else:
            labels[item] = majority_label(list(by_annotator.values()))
    return HumanMajority(labels=labels, too_few=too_few, min_annotations=min_annotations)


def human_majority(
    annotations: Iterable[AnnotationRow], *, min_annotations: int = C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT
) -> HumanMajority:
    """The strict-majority has_failure label of every item with at least ``min_annotations``
    (>= 2) counted annotations (not excluded, not surplus); items with fewer are counted in
    ``too_few``. Items none of whose annotations count do not appear. Raises ``ValueError`` for a threshold below 2."""
    check_min_annotations(min_annotations)
    rows, _ = check_rows(annotations)
    return majority_of_items(labels_by_item(rows), min_annotations)
