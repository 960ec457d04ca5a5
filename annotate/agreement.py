"""Agreement statistics for critical-failure annotations. Pure Python and NumPy, no Django.

What is computed (How2Everything §4.3 and Figure 3):

* **Krippendorff's alpha** over an items x annotators matrix with missing cells, in three
  kinds: ``binary`` (nominal over has_failure), ``first_failure_location`` (nominal over
  ``"none"`` / the smallest linked L2 step / ``"unlocated"``) and ``l2_step_sets_masi``
  (each annotation's set of linked L2 steps, MASI distance).
* **Human majority** per item: a strict majority of at least ``min_annotations`` (default
  2) non-excluded annotations; a tie has no majority, an item with fewer annotations has
  none either, and both are counted (``HumanMajority``).
* **Judge agreement** with the human majority: overall, per majority class, Cohen's kappa,
  the confusion matrix, n and a bootstrap interval for each rate.
* **Leave-one-out human agreement** per annotator (against the strict majority of the
  *other* annotators of each item, under the same threshold).
* **Pairwise agreement** between every two judges and every two annotators.
* **Calibrated judge score** (Rogan-Gladen), with a bootstrap interval.

``agreement_report`` puts all of it in one JSON-ready dict; the readers parse the JSONL
formats of ``annotation`` and ``judgment`` records with errors that name file, line and
field. Every undefined value is ``None`` (JSON null), never a made-up number.

Labels are booleans throughout: ``True`` means has_failure, ``False`` means no_failure.
Every result is independent of the order of the input rows: items, annotators, judges and
values are put in sorted order before anything is computed or resampled."""
from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Literal, TypeVar

import krippendorff
import numpy as np
import numpy.typing as npt

from annotate import constants as C
from core.intervals import percentile_interval
from mining.record_files import COMPRESSIONS, open_binary

HAS_FAILURE = "has_failure"
NO_FAILURE = "no_failure"
LOCATION_NONE = "none"
LOCATION_UNLOCATED = "unlocated"

AlphaKind = Literal["binary", "first_failure_location", "l2_step_sets_masi"]
ALPHA_KINDS: tuple[AlphaKind, ...] = ("binary", "first_failure_location", "l2_step_sets_masi")

DEFAULT_BOOTSTRAP = 1000
PAIR_SEPARATOR = "|"

# The krippendorff package builds dense arrays of (units x values x values) floats. Above
# this many cells the same coincidence computation runs in ``coincidence_alpha`` instead,
# which needs only (values x values) memory; the tests prove the two agree.
PACKAGE_MAX_CELLS = 4_000_000
# Bootstrap resamples are drawn in blocks so memory stays near this many cells per block.
_BOOTSTRAP_BLOCK_CELLS = 4_000_000

Location = str | int
V = TypeVar("V", bound=Hashable)


# --------------------------------------------------------------------------- input rows


@dataclass
class AnnotationRow:
    """One annotator's label of one item.

    ``failures`` is a list of ``{"description": str, "L1_steps": [int], "L2_steps": [int]}``
    (L1 is the reference procedure, L2 the generated one). ``excluded`` rows (e.g. failed
    attention checks) are left out of every statistic and counted in ``n_excluded``."""

    item_id: str
    annotator: str
    has_failure: bool
    failures: list[dict[str, Any]] = field(default_factory=list)
    excluded: bool = False


@dataclass
class JudgmentRow:
    """One judge's label of one item."""

    item_id: str
    judge: str
    has_failure: bool


class AgreementInputError(ValueError):
    """An input record is malformed. The message reads ``<file>, line <n>, field '<f>': <problem>``
    (the same shape as the record importers' errors); ``path``, ``line`` and ``field`` are
    kept as attributes."""

    def __init__(self, source: str, line: int | None, detail: str, field: str | None = None):
        self.path = source
        self.line = line
        self.field = field
        self.detail = detail
        where = source if line is None else f"{source}, line {line}"
        if field:
            where = f"{where}, field '{field}'"
        super().__init__(f"{where}: {detail}")


class _FieldError(ValueError):
    def __init__(self, detail: str, field: str | None = None):
        self.detail = detail
        self.field = field
        super().__init__(detail)


# --------------------------------------------------------------------------- readers


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _required(record: Mapping[str, Any], name: str) -> Any:
    if name not in record:
        raise _FieldError("missing", name)
    return record[name]


def _name_field(record: Mapping[str, Any], name: str) -> str:
    value = _required(record, name)
    if not isinstance(value, str):
        raise _FieldError(f"expected a string, got {_type_name(value)}", name)
    if not value.strip():
        raise _FieldError("must not be empty", name)
    return value


def _bool_field(record: Mapping[str, Any], name: str, default: bool | None = None) -> bool:
    if name not in record and default is not None:
        return default
    value = _required(record, name)
    if not isinstance(value, bool):
        raise _FieldError(f"expected true or false, got {_type_name(value)} {value!r}", name)
    return value


def _steps_field(failure: Mapping[str, Any], name: str, prefix: str) -> list[int]:
    if name not in failure:
        raise _FieldError("missing", f"{prefix}.{name}")
    value = failure[name]
    if not isinstance(value, list):
        raise _FieldError(f"expected a list of step numbers, got {_type_name(value)}", f"{prefix}.{name}")
    for index, step in enumerate(value):
        # bool is an int subclass in Python; true/false are not step numbers.
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise _FieldError(f"expected a step number (an integer >= 1), got {step!r}", f"{prefix}.{name}[{index}]")
    return list(value)


def parse_annotation_record(record: Any) -> AnnotationRow:
    """Check one decoded annotation record and return it as a row.

    Required: ``item_id`` (non-empty string), ``annotator`` (non-empty string),
    ``has_failure`` (bool), ``failures`` (list of objects with ``description`` (string),
    ``L1_steps`` and ``L2_steps`` (lists of integers >= 1)). Optional: ``excluded`` (bool,
    default false); ``source`` other than ``"main"`` (qualification or attention-check
    answers in an export) counts as excluded. ``has_failure: false`` with a non-empty ``failures`` list is a
    contradiction and is rejected; ``has_failure: true`` with no failures is accepted (its
    location is ``"unlocated"``). Other fields are ignored. Raises ``ValueError`` naming
    the field."""
    if not isinstance(record, dict):
        raise _FieldError(f"expected a JSON object, got {_type_name(record)}")
    item_id = _name_field(record, "item_id")
    annotator = _name_field(record, "annotator")
    has_failure = _bool_field(record, "has_failure")
    raw_failures = _required(record, "failures")
    if not isinstance(raw_failures, list):
        raise _FieldError(f"expected a list, got {_type_name(raw_failures)}", "failures")
    failures: list[dict[str, Any]] = []
    for index, failure in enumerate(raw_failures):
        prefix = f"failures[{index}]"
        if not isinstance(failure, dict):
            raise _FieldError(f"expected an object, got {_type_name(failure)}", prefix)
        if "description" not in failure:
            raise _FieldError("missing", f"{prefix}.description")
        if not isinstance(failure["description"], str):
            raise _FieldError(f"expected a string, got {_type_name(failure['description'])}", f"{prefix}.description")
        failures.append(
            {
                "description": failure["description"],
                "L1_steps": _steps_field(failure, "L1_steps", prefix),
                "L2_steps": _steps_field(failure, "L2_steps", prefix),
            }
        )
    if not has_failure and failures:
        raise _FieldError(f"has_failure is false but {len(failures)} failure(s) are listed", "has_failure")
    excluded = _bool_field(record, "excluded", default=False)
    # Exports also hold qualification and attention-check answers (``source`` other than
    # "main"); they measure the annotator, not the item, and are left out like exclusions.
    source = record.get("source")
    if source is not None and source != "main":
        excluded = True
    return AnnotationRow(
        item_id=item_id, annotator=annotator, has_failure=has_failure, failures=failures, excluded=excluded
    )


def parse_judgment_record(record: Any) -> JudgmentRow:
    """Check one decoded judgment record: ``item_id`` and ``judge`` (non-empty strings),
    ``has_failure`` (bool), optionally ``critical_failures`` (a list; its contents are not
    used here). Raises ``ValueError`` naming the field."""
    if not isinstance(record, dict):
        raise _FieldError(f"expected a JSON object, got {_type_name(record)}")
    item_id = _name_field(record, "item_id")
    judge = _name_field(record, "judge")
    has_failure = _bool_field(record, "has_failure")
    if "critical_failures" in record and not isinstance(record["critical_failures"], list):
        raise _FieldError(f"expected a list, got {_type_name(record['critical_failures'])}", "critical_failures")
    return JudgmentRow(item_id=item_id, judge=judge, has_failure=has_failure)


RowT = TypeVar("RowT", AnnotationRow, JudgmentRow)


def _parse_lines(
    lines: Iterable[bytes | str],
    source: str,
    parse: Callable[[Any], RowT],
    key: Callable[[RowT], tuple[str, str] | None],
) -> list[RowT]:
    rows: list[RowT] = []
    first_line: dict[tuple[str, str], int] = {}
    number = 0
    iterator = iter(lines)
    while True:
        try:
            raw = next(iterator)
        except StopIteration:
            break
        except (OSError, EOFError, ValueError) as exc:  # a damaged compressed stream
            raise AgreementInputError(source, number + 1, f"cannot read: {exc}") from exc
        number += 1
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise AgreementInputError(source, number, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        else:
            text = raw
        if not text.strip():
            continue  # blank lines (e.g. a trailing newline) are not records
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise AgreementInputError(source, number, f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
        try:
            row = parse(record)
        except _FieldError as exc:
            raise AgreementInputError(source, number, exc.detail, exc.field) from exc
        identity = key(row)
        if identity is not None:
            if identity in first_line:
                same = f"item_id {identity[0]!r}" + (f" and {identity[1]!r}" if identity[1] else "")
                raise AgreementInputError(source, number, f"duplicate of line {first_line[identity]} (same {same})")
            first_line[identity] = number
        rows.append(row)
    return rows


def _annotation_key(row: AnnotationRow) -> tuple[str, str] | None:
    return None if row.excluded else (row.item_id, row.annotator)


def _judgment_key(row: JudgmentRow) -> tuple[str, str] | None:
    return (row.item_id, row.judge)


def parse_annotation_lines(lines: Iterable[bytes | str], *, source: str = "<annotations>") -> list[AnnotationRow]:
    """Parse JSONL annotation records (one object per line; blank lines skipped).

    Returns every row, excluded ones included (with ``excluded=True``), so the report can
    count them. Two non-excluded rows for the same (item_id, annotator) are an error.
    Raises ``AgreementInputError`` with ``source`` and the 1-based line number."""
    return _parse_lines(lines, source, parse_annotation_record, _annotation_key)


def parse_judgment_lines(lines: Iterable[bytes | str], *, source: str = "<judgments>") -> list[JudgmentRow]:
    """Parse JSONL judgment records; two rows for the same (item_id, judge) are an error.
    Raises ``AgreementInputError`` with ``source`` and the 1-based line number."""
    return _parse_lines(lines, source, parse_judgment_record, _judgment_key)


def _read(path: str | Path, parse: Callable[..., list[RowT]]) -> list[RowT]:
    source = str(path)
    compression = COMPRESSIONS.get(Path(path).suffix.lower())
    try:
        with open_binary(path, compression) as handle:
            return parse(handle, source=source)
    except FileNotFoundError as exc:
        raise AgreementInputError(source, None, "no such file") from exc
    except IsADirectoryError as exc:
        raise AgreementInputError(source, None, "is a directory, not a file") from exc
    except PermissionError as exc:
        raise AgreementInputError(source, None, "permission denied") from exc


def read_annotations(path: str | Path) -> list[AnnotationRow]:
    """Read an annotations JSONL file (optionally .gz/.zst/.bz2/.xz); see ``parse_annotation_lines``."""
    return _read(path, parse_annotation_lines)


def read_judgments(path: str | Path) -> list[JudgmentRow]:
    """Read a judgments JSONL file (optionally .gz/.zst/.bz2/.xz); see ``parse_judgment_lines``."""
    return _read(path, parse_judgment_lines)


# --------------------------------------------------------------------------- labels


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


def _check_rows(annotations: Iterable[AnnotationRow]) -> tuple[list[AnnotationRow], int]:
    """Non-excluded rows (sorted by item, then annotator) and the number of excluded rows.
    Raises ``ValueError`` on a duplicate (item_id, annotator) or a contradictory row."""
    kept: dict[tuple[str, str], AnnotationRow] = {}
    n_excluded = 0
    for row in annotations:
        if row.excluded:
            n_excluded += 1
            continue
        key = (row.item_id, row.annotator)
        if key in kept:
            raise ValueError(f"two annotations of item {row.item_id!r} by annotator {row.annotator!r}")
        if not row.has_failure and row.failures:
            raise ValueError(
                f"annotation of item {row.item_id!r} by {row.annotator!r}: has_failure is false but failures are listed"
            )
        kept[key] = row
    return [kept[key] for key in sorted(kept)], n_excluded


def _judgment_labels(judgments: Iterable[JudgmentRow]) -> dict[str, dict[str, bool]]:
    """judge -> item_id -> has_failure, judges and items in sorted order."""
    by_judge: dict[str, dict[str, bool]] = defaultdict(dict)
    for row in judgments:
        if row.item_id in by_judge[row.judge]:
            raise ValueError(f"two judgments of item {row.item_id!r} by judge {row.judge!r}")
        by_judge[row.judge][row.item_id] = row.has_failure
    return {judge: dict(sorted(by_judge[judge].items())) for judge in sorted(by_judge)}


def _labels_by_item(rows: Sequence[AnnotationRow]) -> dict[str, dict[str, bool]]:
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
            f"(and at most {C.MIN_ANNOTATIONS_FOR_MAJORITY_MAX}), got {min_annotations}")
    return min_annotations


@dataclass(frozen=True)
class HumanMajority:
    """The human majority of every annotated item, and what has none.

    ``labels``: item_id -> strict majority (``True`` has_failure, ``False`` no_failure,
    ``None`` a tie) for the items with at least ``min_annotations`` non-excluded
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


def _majority_of_items(
    by_item: Mapping[str, Mapping[str, bool]], min_annotations: int
) -> HumanMajority:
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
    (>= 2) non-excluded annotations; items with fewer are counted in ``too_few``. Items whose
    annotations are all excluded do not appear. Raises ``ValueError`` for a threshold below 2."""
    check_min_annotations(min_annotations)
    rows, _ = _check_rows(annotations)
    return _majority_of_items(_labels_by_item(rows), min_annotations)


# --------------------------------------------------------------------------- alpha


def masi_distance(a: Iterable[int], b: Iterable[int]) -> float:
    """MASI distance (Passonneau 2006) between two sets: ``1 - J * M`` where J is the
    Jaccard index |A∩B|/|A∪B| and M is 1 when A = B, 2/3 when one is a proper subset of
    the other, 1/3 when they overlap otherwise and 0 when they are disjoint. Two empty
    sets are identical: distance 0."""
    set_a, set_b = frozenset(a), frozenset(b)
    if set_a == set_b:
        return 0.0
    inter = len(set_a & set_b)
    if inter == 0:
        return 1.0
    union = len(set_a | set_b)
    monotonicity = 2 / 3 if (set_a <= set_b or set_b <= set_a) else 1 / 3
    return 1.0 - (inter / union) * monotonicity


def masi_distance_matrix(sets: Sequence[frozenset[int]]) -> npt.NDArray[np.float64]:
    """Pairwise MASI distances between ``sets`` as a (len x len) array, vectorised."""
    steps = sorted({step for s in sets for step in s})
    column = {step: index for index, step in enumerate(steps)}
    member = np.zeros((len(sets), max(len(steps), 1)), dtype=np.float64)
    for row, s in enumerate(sets):
        for step in s:
            member[row, column[step]] = 1.0
    inter = member @ member.T
    size = member.sum(axis=1)
    size_a, size_b = size[:, None], size[None, :]
    union = size_a + size_b - inter
    jaccard = np.divide(inter, union, out=np.ones_like(inter), where=union > 0)
    equal = (inter == size_a) & (inter == size_b)
    subset = inter == np.minimum(size_a, size_b)
    monotonicity = np.where(equal, 1.0, np.where(subset & (inter > 0), 2 / 3, np.where(inter > 0, 1 / 3, 0.0)))
    distance = 1.0 - jaccard * monotonicity
    np.fill_diagonal(distance, 0.0)
    return distance


def _nominal_distance_matrix(n_values: int) -> npt.NDArray[np.float64]:
    return 1.0 - np.eye(n_values)


def _value_sort_key(value: Hashable) -> tuple[Any, ...]:
    """A total order over the values we meet (bools, ints, strings, frozensets of ints),
    so the value domain, and with it every float sum, does not depend on input order."""
    if isinstance(value, frozenset):
        return (3, len(value), tuple(sorted(value)))
    if isinstance(value, bool):
        return (0, int(value), "")
    if isinstance(value, int):
        return (1, value, "")
    return (2, 0, str(value))


@dataclass(frozen=True)
class _Pairable:
    """The pairable part of a reliability matrix: units holding at least two values.

    ``unit_of`` and ``value_of`` give, for every pairable value (sorted by unit), its unit
    and its index in ``domain``; ``m`` is the number of values per unit."""

    domain: list[Hashable]
    unit_of: npt.NDArray[np.intp]
    value_of: npt.NDArray[np.intp]
    m: npt.NDArray[np.float64]
    n_units: int
    n_single: int

    @property
    def n_values(self) -> int:
        return int(self.unit_of.size)

    def counts(self) -> npt.NDArray[np.float64]:
        """Units x values count matrix (dense)."""
        counts = np.zeros((self.n_units, len(self.domain)))
        np.add.at(counts, (self.unit_of, self.value_of), 1.0)
        return counts


def _pairable(matrix: Sequence[Sequence[Hashable | None]]) -> _Pairable:
    """Build the pairable units of an items x coders matrix (``None`` = missing cell)."""
    units = [[value for value in row if value is not None] for row in matrix]
    pairable = [unit for unit in units if len(unit) >= 2]
    n_single = sum(1 for unit in units if len(unit) == 1)
    domain = sorted({value for unit in pairable for value in unit}, key=_value_sort_key)
    index = {value: position for position, value in enumerate(domain)}
    unit_of = np.array([u for u, unit in enumerate(pairable) for _ in unit], dtype=np.intp)
    value_of = np.array([index[value] for unit in pairable for value in unit], dtype=np.intp)
    m = np.array([len(unit) for unit in pairable], dtype=np.float64)
    return _Pairable(domain, unit_of, value_of, m, len(pairable), n_single)


def _within_unit_disagreement(p: _Pairable, delta: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """For every unit u: the sum of distances over its ordered pairs of values (i != j)."""
    m_of_value = p.m.astype(np.intp)[p.unit_of]
    first_of_unit = np.concatenate(([0], np.cumsum(p.m.astype(np.intp))[:-1]))
    left = np.repeat(np.arange(p.n_values), m_of_value)
    offset = np.arange(left.size) - np.repeat(np.cumsum(m_of_value) - m_of_value, m_of_value)
    right = np.repeat(first_of_unit[p.unit_of], m_of_value) + offset
    # i == j pairs add delta[v, v] = 0, so they need no masking.
    weights = delta[p.value_of[left], p.value_of[right]]
    return np.bincount(p.unit_of[left], weights=weights, minlength=p.n_units)


def _alpha_from_pairable(p: _Pairable, delta: npt.NDArray[np.float64]) -> float | None:
    """alpha = 1 - D_o / D_e from the coincidence definition, where with n pairable values,
    m_u values in unit u, n_c pairable values equal to c and delta the distance:
    D_o = (1/n) * sum_u sum_{i != j in u} delta(v_i, v_j) / (m_u - 1) and
    D_e = (1/(n (n - 1))) * sum_{c, k} n_c n_k delta(c, k)."""
    if p.n_units == 0 or len(p.domain) < 2:
        return None
    n = p.m.sum()
    observed = (_within_unit_disagreement(p, delta) / (p.m - 1.0)).sum()
    n_c = np.bincount(p.value_of, minlength=len(p.domain)).astype(np.float64)
    expected = float(n_c @ delta @ n_c)
    if expected <= 0.0:
        return None
    return float(1.0 - (n - 1.0) * observed / expected)


def coincidence_alpha(
    matrix: Sequence[Sequence[V | None]], distance: Callable[[V, V], float] | None = None
) -> float | None:
    """Krippendorff's alpha over an items x coders matrix (``None`` = missing cell),
    computed here from the coincidence definition (see ``_alpha_from_pairable``) with any
    distance between values (nominal when ``distance`` is None). Only items with at least
    two values count. ``None`` when no item has two values or when the pairable values
    show no variation (D_e = 0): alpha is undefined there."""
    p = _pairable(matrix)
    if distance is None:
        delta = _nominal_distance_matrix(len(p.domain))
    else:
        delta = np.array([[distance(a, b) for b in p.domain] for a in p.domain], dtype=np.float64).reshape(
            len(p.domain), len(p.domain)
        )
    return _alpha_from_pairable(p, delta)


def _package_alpha(p: _Pairable, delta: npt.NDArray[np.float64], nominal: bool) -> float | None:
    """The krippendorff package on the same pairable counts (values by index, distances by
    a lookup into ``delta``), or this module's computation when the package's dense arrays
    would exceed ``PACKAGE_MAX_CELLS``."""
    if p.n_units == 0 or len(p.domain) < 2:
        return None
    n_c = np.bincount(p.value_of, minlength=len(p.domain)).astype(np.float64)
    if float(n_c @ delta @ n_c) <= 0.0:
        return None
    if p.n_units * len(p.domain) ** 2 > PACKAGE_MAX_CELLS:
        return _alpha_from_pairable(p, delta)

    def lookup(v1: Any, v2: Any, i1: Any, i2: Any, n_v: Any, dtype: Any = np.float64) -> Any:
        return delta[i1, i2].astype(dtype)

    metric: Any = "nominal" if nominal else lookup
    value = krippendorff.alpha(
        value_counts=p.counts(), value_domain=np.arange(len(p.domain)), level_of_measurement=metric
    )
    return float(value)


def nominal_alpha(matrix: Sequence[Sequence[Hashable | None]]) -> float | None:
    """Nominal Krippendorff's alpha with the krippendorff package, over an items x coders
    matrix with ``None`` for missing cells. ``None`` when undefined."""
    p = _pairable(matrix)
    return _package_alpha(p, _nominal_distance_matrix(len(p.domain)), nominal=True)


def nominal_alpha_interval(
    matrix: Sequence[Sequence[Hashable | None]], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: SeedLike = 0
) -> list[float] | None:
    """95 % percentile bootstrap interval of ``nominal_alpha`` over the same matrix, resampling
    its items (rows with at least two values) with replacement ``bootstrap`` times; resamples
    where alpha is undefined are left out. ``None`` when alpha is undefined or ``bootstrap`` is 0."""
    _check_bootstrap(bootstrap)
    p = _pairable(matrix)
    inputs = {"nominal": _AlphaInput(p, _nominal_distance_matrix(len(p.domain)), True)}
    return _alpha_bootstraps(inputs, bootstrap, np.random.default_rng(seed))["nominal"][0]


def masi_alpha(matrix: Sequence[Sequence[frozenset[int] | None]]) -> float | None:
    """Krippendorff's alpha over sets with MASI distance (0 between two empty sets), with
    the krippendorff package and a custom distance. ``None`` when undefined."""
    p = _pairable(matrix)
    return _package_alpha(p, masi_distance_matrix(p.domain), nominal=False)  # type: ignore[arg-type]


def _annotation_value(row: AnnotationRow, kind: AlphaKind) -> Hashable:
    if kind == "binary":
        return row.has_failure
    if kind == "first_failure_location":
        return first_failure_location(row)
    if kind == "l2_step_sets_masi":
        return annotation_l2_steps(row)
    raise ValueError(f"unknown alpha kind {kind!r}; expected one of {', '.join(ALPHA_KINDS)}")


def reliability_matrix(
    annotations: Iterable[AnnotationRow], kind: AlphaKind
) -> tuple[list[str], list[str], list[list[Hashable | None]]]:
    """(items, annotators, matrix): the items x annotators matrix of the values ``kind``
    compares, ``None`` where an annotator did not label an item. Excluded rows are left
    out; items and annotators are sorted."""
    rows, _ = _check_rows(annotations)
    items = sorted({row.item_id for row in rows})
    annotators = sorted({row.annotator for row in rows})
    item_index = {item: i for i, item in enumerate(items)}
    annotator_index = {annotator: j for j, annotator in enumerate(annotators)}
    matrix: list[list[Hashable | None]] = [[None] * len(annotators) for _ in items]
    for row in rows:
        matrix[item_index[row.item_id]][annotator_index[row.annotator]] = _annotation_value(row, kind)
    return items, annotators, matrix


def _kind_units(rows: Sequence[AnnotationRow], kind: AlphaKind) -> list[list[Hashable]]:
    """The non-missing cells of the reliability matrix, item by item: the same units as
    ``reliability_matrix`` without its (items x annotators) of mostly empty cells.
    ``rows`` must come from ``_check_rows`` (sorted by item, then annotator)."""
    units: list[list[Hashable]] = []
    previous: str | None = None
    for row in rows:
        if row.item_id != previous:
            units.append([])
            previous = row.item_id
        units[-1].append(_annotation_value(row, kind))
    return units


def _kind_delta(p: _Pairable, kind: AlphaKind) -> npt.NDArray[np.float64]:
    if kind == "l2_step_sets_masi":
        return masi_distance_matrix(p.domain)  # type: ignore[arg-type]
    return _nominal_distance_matrix(len(p.domain))


def krippendorff_alpha(annotations: Iterable[AnnotationRow], kind: AlphaKind) -> float | None:
    """Krippendorff's alpha of one kind over the non-excluded annotations:

    * ``binary``: nominal over has_failure;
    * ``first_failure_location``: nominal over ``first_failure_location``;
    * ``l2_step_sets_masi``: over ``annotation_l2_steps`` with ``masi_distance``.

    ``None`` when undefined (no item with two annotations, or no variation)."""
    if kind not in ALPHA_KINDS:
        raise ValueError(f"unknown alpha kind {kind!r}; expected one of {', '.join(ALPHA_KINDS)}")
    rows, _ = _check_rows(annotations)
    p = _pairable(_kind_units(rows, kind))
    return _package_alpha(p, _kind_delta(p, kind), nominal=kind != "l2_step_sets_masi")


def _draws(rng: np.random.Generator, n: int, size: int) -> npt.NDArray[np.integer]:
    """``size`` x ``n`` uniform draws from range(n) (32-bit when they fit: about 4x faster)."""
    dtype = np.int32 if size * n < 2**31 else np.int64
    return rng.integers(0, n, size=(size, n), dtype=dtype)


def _blocks(total: int, cells_per_resample: int) -> list[int]:
    """Split ``total`` resamples into blocks of about ``_BOOTSTRAP_BLOCK_CELLS`` cells."""
    block = max(1, min(total, _BOOTSTRAP_BLOCK_CELLS // max(cells_per_resample, 1)))
    return [min(block, total - start) for start in range(0, total, block)]


def _bootstrap_counts(rng: np.random.Generator, n_units: int, size: int) -> npt.NDArray[np.float64]:
    """``size`` resamples of ``n_units`` units with replacement, as a (n_units x size)
    array: how often each unit is drawn in each resample (one column per resample)."""
    draws = _draws(rng, n_units, size)
    flat = (draws * size + np.arange(size, dtype=draws.dtype)[:, None]).ravel()
    return np.bincount(flat, minlength=size * n_units).reshape(n_units, size).astype(np.float64)


@dataclass(frozen=True)
class _ResampleIndex:
    """What the vectorised alpha of weighted units needs, computed once per matrix."""

    per_unit: npt.NDArray[np.float64]  # sum of within-unit distances / (m_u - 1)
    sorted_units: npt.NDArray[np.intp]  # unit of every pairable value, values grouped by value
    starts: npt.NDArray[np.intp]  # where each value's group starts in sorted_units
    counts_t: npt.NDArray[np.float64] | None  # values x units counts, when small enough to keep dense


def _resample_index(p: _Pairable, delta: npt.NDArray[np.float64]) -> _ResampleIndex:
    order = np.argsort(p.value_of, kind="stable")
    dense = p.n_units * len(p.domain) <= _BOOTSTRAP_BLOCK_CELLS and len(p.domain) <= 64
    return _ResampleIndex(
        per_unit=_within_unit_disagreement(p, delta) / (p.m - 1.0),
        sorted_units=p.unit_of[order],
        starts=np.flatnonzero(np.r_[True, np.diff(p.value_of[order]) != 0]),
        counts_t=np.ascontiguousarray(p.counts().T) if dense else None,
    )


def _weighted_alphas(
    p: _Pairable, delta: npt.NDArray[np.float64], nominal: bool, index: _ResampleIndex, weights: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """alpha for each column of ``weights`` (units x resamples: how often each pairable
    unit is drawn), as if the drawn units had been listed that many times; NaN where
    undefined (D_e = 0). Same definition as ``_alpha_from_pairable``, with a matrix product
    per term."""
    observed = index.per_unit @ weights
    n = p.m @ weights
    if index.counts_t is not None:
        n_c = index.counts_t @ weights  # values x resamples
    else:  # many distinct values: sum the drawn units' rows value by value
        n_c = np.add.reduceat(weights[index.sorted_units], index.starts, axis=0)
    if nominal:
        expected = n * n - (n_c * n_c).sum(axis=0)
    else:
        expected = ((delta @ n_c) * n_c).sum(axis=0)
    alphas = np.full(weights.shape[1], np.nan)
    defined = expected > 0
    alphas[defined] = 1.0 - (n[defined] - 1.0) * observed[defined] / expected[defined]
    return alphas


@dataclass(frozen=True)
class _AlphaInput:
    pairable: _Pairable
    delta: npt.NDArray[np.float64]
    nominal: bool


def _alpha_bootstraps(
    inputs: Mapping[str, _AlphaInput], resamples: int, rng: np.random.Generator
) -> dict[str, tuple[list[float] | None, int]]:
    """Percentile intervals of alpha, for several kinds over the same matrix, from the same
    resamples of the pairable units (with replacement), and per kind the number of
    resamples where alpha was undefined (left out). All kinds must share their pairable
    units (they do: an item is pairable when it has two annotations, whatever the kind)."""
    usable = {kind: x for kind, x in inputs.items() if x.pairable.n_units > 0 and len(x.pairable.domain) >= 2}
    result: dict[str, tuple[list[float] | None, int]] = {kind: (None, 0) for kind in inputs}
    if resamples <= 0 or not usable:
        return result
    n_units = {x.pairable.n_units for x in usable.values()}
    if len(n_units) != 1:
        raise ValueError("alpha kinds resampled together must share their items")
    units = n_units.pop()
    indexes = {kind: _resample_index(x.pairable, x.delta) for kind, x in usable.items()}
    cells = 2 * units + sum(x.pairable.n_values + 2 * len(x.pairable.domain) for x in usable.values())
    alphas: dict[str, list[npt.NDArray[np.float64]]] = {kind: [] for kind in usable}
    for size in _blocks(resamples, cells):
        weights = _bootstrap_counts(rng, units, size)
        for kind, x in usable.items():
            alphas[kind].append(_weighted_alphas(x.pairable, x.delta, x.nominal, indexes[kind], weights))
    for kind in usable:
        values = np.concatenate(alphas[kind])
        defined = ~np.isnan(values)
        result[kind] = (percentile_interval(values[defined]), int((~defined).sum()))
    return result


# --------------------------------------------------------------------------- agreement


def _seed_sequence(seed: int, *labels: str) -> np.random.SeedSequence:
    """A seed for one statistic: the run's seed plus stable hashes of the labels, so a
    judge's interval does not change when another judge is added to the input."""
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    words = [int.from_bytes(hashlib.sha256(label.encode("utf-8")).digest()[:8], "big") for label in labels]
    return np.random.SeedSequence([seed, *words])


SeedLike = int | np.random.SeedSequence


def _check_bootstrap(bootstrap: int) -> None:
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be a non-negative number of resamples, got {bootstrap}")


def bootstrap_mean_interval(
    values: Sequence[float] | npt.NDArray[np.float64], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: SeedLike = 0
) -> list[float] | None:
    """95 % percentile bootstrap interval of a mean, resampling the values (items) with
    replacement ``bootstrap`` times with ``numpy.random.default_rng(seed)``. ``None`` when
    there are no values or ``bootstrap`` is 0."""
    _check_bootstrap(bootstrap)
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0 or bootstrap == 0:
        return None
    rng = np.random.default_rng(seed)
    means = [data[_draws(rng, data.size, size)].mean(axis=1) for size in _blocks(bootstrap, 2 * data.size)]
    return percentile_interval(np.concatenate(means))


def bootstrap_share_interval(
    successes: int, n: int, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: SeedLike = 0
) -> list[float] | None:
    """95 % percentile bootstrap interval of a share of 0/1 outcomes (``successes`` of
    ``n`` items), resampling the n items with replacement ``bootstrap`` times. For 0/1 values
    the resampled share is exactly Binomial(n, successes / n) / n, so it is drawn directly:
    the same interval as ``bootstrap_mean_interval`` in distribution, at a cost that does not
    grow with n. ``None`` when n is 0 or ``bootstrap`` is 0."""
    _check_bootstrap(bootstrap)
    if n == 0 or bootstrap == 0:
        return None
    rng = np.random.default_rng(seed)
    return percentile_interval(rng.binomial(n, successes / n, size=bootstrap) / n)


def _rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa between two paired label sequences: (p_o - p_e) / (1 - p_e) with p_o
    the observed agreement and p_e the agreement expected from each side's marginals.
    ``None`` when there are no pairs or when p_e = 1 (both sides always give the same
    single label), where kappa is undefined."""
    if len(a) != len(b):
        raise ValueError(f"label sequences differ in length ({len(a)} and {len(b)})")
    n = len(a)
    if n == 0:
        return None
    p_o = sum(1 for x, y in zip(a, b) if x == y) / n
    count_a: dict[Hashable, int] = defaultdict(int)
    count_b: dict[Hashable, int] = defaultdict(int)
    for x in a:
        count_a[x] += 1
    for y in b:
        count_b[y] += 1
    p_e = sum(count_a[label] * count_b[label] for label in count_a) / (n * n)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def _confusion(human: Sequence[bool], judge: Sequence[bool]) -> dict[str, dict[str, int]]:
    table = {f"human_{label_name(h)}": {f"judge_{label_name(j)}": 0 for j in (True, False)} for h in (True, False)}
    for h, j in zip(human, judge):
        table[f"human_{label_name(h)}"][f"judge_{label_name(j)}"] += 1
    return table


def _sub_seed(seed: SeedLike, label: str) -> np.random.SeedSequence:
    """An independent stream for one more statistic under the same seed."""
    word = int.from_bytes(hashlib.sha256(label.encode("utf-8")).digest()[:8], "big")
    if isinstance(seed, np.random.SeedSequence):
        return np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, word))
    return _seed_sequence(seed, label)


def kappa_interval(
    a: Sequence[bool], b: Sequence[bool], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: SeedLike = 0
) -> list[float] | None:
    """95 % percentile bootstrap interval of ``cohen_kappa`` between two paired boolean label
    sequences, resampling the pairs with replacement; resamples where kappa is undefined
    (p_e = 1) are left out. ``None`` when kappa itself is undefined or ``bootstrap`` is 0."""
    _check_bootstrap(bootstrap)
    if bootstrap == 0 or cohen_kappa(list(a), list(b)) is None:
        return None
    left = np.asarray(a, dtype=bool)
    right = np.asarray(b, dtype=bool)
    rng = np.random.default_rng(seed)
    values = []
    for size in _blocks(bootstrap, 4 * left.size):
        pick = _draws(rng, left.size, size)
        x, y = left[pick], right[pick]
        p_o = (x == y).mean(axis=1)
        p_x, p_y = x.mean(axis=1), y.mean(axis=1)
        p_e = p_x * p_y + (1.0 - p_x) * (1.0 - p_y)
        defined = p_e < 1.0
        values.append((p_o[defined] - p_e[defined]) / (1.0 - p_e[defined]))
    return percentile_interval(np.concatenate(values))


def judge_agreement(
    majority: HumanMajority,
    judge_labels: Mapping[str, bool],
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: SeedLike = 0,
) -> dict[str, Any]:
    """One judge against the human majority.

    ``majority`` is the items' human majority (``human_majority``); ``judge_labels`` maps
    item_id to the judge's has_failure label. The denominator ``n`` is the number of items
    with both a human majority and a judge label. Returns ``agreement`` (matches / n),
    ``agreement_has_failure`` (matches / majority-has_failure items, ``n_has_failure``),
    ``agreement_no_failure`` (matches / majority-no_failure items, ``n_no_failure``),
    ``cohen_kappa``, ``n``, 95 % percentile bootstrap intervals ``ci95`` (resampling the n
    items), ``ci95_has_failure`` and ``ci95_no_failure`` (resampling the items of that
    class) and ``cohen_kappa_ci95``, ``confusion`` (human majority row x judge column) and
    the judged items left out, by reason: ``n_human_tie`` (the annotators tie),
    ``n_too_few_annotations`` (fewer than ``majority.min_annotations`` annotations) and
    ``n_no_human_labels`` (nobody annotated it); ``n_judged`` = n + the three. Rates with a
    zero denominator are ``None``."""
    decided = majority.decided()
    items = sorted(item for item in judge_labels if item in decided)
    human = [decided[item] for item in items]
    judge = [judge_labels[item] for item in items]
    matches = [1.0 if h == j else 0.0 for h, j in zip(human, judge)]
    on_has = [m for m, h in zip(matches, human) if h]
    on_no = [m for m, h in zip(matches, human) if not h]
    reasons = [majority.reason(item) for item in judge_labels]
    return {
        "agreement": _rate(int(sum(matches)), len(items)),
        "agreement_has_failure": _rate(int(sum(on_has)), len(on_has)),
        "agreement_no_failure": _rate(int(sum(on_no)), len(on_no)),
        "cohen_kappa": cohen_kappa(human, judge),
        "n": len(items),
        "n_has_failure": len(on_has),
        "n_no_failure": len(on_no),
        "ci95": bootstrap_mean_interval(matches, bootstrap=bootstrap, seed=seed),
        "ci95_has_failure": bootstrap_share_interval(int(sum(on_has)), len(on_has), bootstrap=bootstrap,
                                                     seed=_sub_seed(seed, HAS_FAILURE)),
        "ci95_no_failure": bootstrap_share_interval(int(sum(on_no)), len(on_no), bootstrap=bootstrap,
                                                    seed=_sub_seed(seed, NO_FAILURE)),
        "cohen_kappa_ci95": kappa_interval(human, judge, bootstrap=bootstrap, seed=_sub_seed(seed, "kappa")),
        "confusion": _confusion(human, judge),
        "n_judged": len(judge_labels),
        "n_human_tie": reasons.count("tie"),
        "n_too_few_annotations": reasons.count("too_few"),
        "n_no_human_labels": reasons.count("no_annotations"),
    }


def leave_one_out_agreement(
    annotations: Iterable[AnnotationRow],
    *,
    min_annotations: int = C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT,
    bootstrap: int = 0,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """For each annotator (sorted): over the items they labelled, the fraction where their
    label equals the strict majority of the *other* non-excluded annotators of that item,
    under the same rule as the human majority: the others must number at least
    ``min_annotations``.

    Returns ``{"agreement", "ci95", "n", "n_items", "n_others_tie", "n_others_too_few",
    "n_no_others"}``: ``n`` is the denominator (items where the others have a majority);
    ``n_others_tie`` items (the others tie), ``n_others_too_few`` items (fewer than
    ``min_annotations`` others) and ``n_no_others`` items (nobody else labelled it) are left
    out, so ``n_items = n + n_others_tie + n_others_too_few + n_no_others``. ``ci95`` is a
    95 % percentile bootstrap over the annotator's n items (``None`` with ``bootstrap`` 0)."""
    check_min_annotations(min_annotations)
    rows, _ = _check_rows(annotations)
    by_item = _labels_by_item(rows)
    stats: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"matches": [], "n_items": 0, "tie": 0, "few": 0, "alone": 0})
    for labels in by_item.values():
        for annotator, label in labels.items():
            entry = stats[annotator]
            entry["n_items"] += 1
            others = [other for name, other in labels.items() if name != annotator]
            if not others:
                entry["alone"] += 1
                continue
            if len(others) < min_annotations:
                entry["few"] += 1
                continue
            others_majority = majority_label(others)
            if others_majority is None:
                entry["tie"] += 1
                continue
            entry["matches"].append(1.0 if label == others_majority else 0.0)
    return {
        annotator: {
            "agreement": _rate(int(sum(entry["matches"])), len(entry["matches"])),
            "ci95": bootstrap_share_interval(int(sum(entry["matches"])), len(entry["matches"]), bootstrap=bootstrap,
                                             seed=_seed_sequence(seed, "leave_one_out", annotator)),
            "n": len(entry["matches"]),
            "n_items": entry["n_items"],
            "n_others_tie": entry["tie"],
            "n_others_too_few": entry["few"],
            "n_no_others": entry["alone"],
        }
        for annotator, entry in sorted(stats.items())
    }


def pair_key(a: str, b: str) -> str:
    """``"<A>|<B>"`` with the two names in sorted order."""
    first, second = sorted((a, b))
    return f"{first}{PAIR_SEPARATOR}{second}"


def pairwise_agreement(
    labels_by_item: Mapping[str, Mapping[str, bool]],
    *,
    raters: Iterable[str] | None = None,
    bootstrap: int = 0,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Agreement between every two raters over the items both labelled.

    ``labels_by_item`` maps item_id to {rater: has_failure}. Keys are ``pair_key(A, B)``;
    each value holds ``raters`` ([A, B], sorted), ``agreement`` (equal labels / n),
    ``ci95`` (95 % percentile bootstrap over the n shared items; ``None`` with
    ``bootstrap`` 0), ``cohen_kappa`` and ``n`` (shared items). Without ``raters`` only pairs with at least
    one shared item appear; with ``raters`` every pair of them appears, ``agreement``
    ``None`` where they share no item. Raises ``ValueError`` if two different pairs would
    get the same key (names containing ``|``)."""
    pairs: dict[tuple[str, str], list[tuple[bool, bool]]] = defaultdict(list)
    if raters is not None:
        for a, b in combinations(sorted(set(raters)), 2):
            pairs[(a, b)] = []
    for item in sorted(labels_by_item):
        labels = labels_by_item[item]
        for a, b in combinations(sorted(labels), 2):
            if raters is None or (a, b) in pairs:
                pairs[(a, b)].append((labels[a], labels[b]))
    result: dict[str, dict[str, Any]] = {}
    for (a, b), shared in sorted(pairs.items()):
        key = pair_key(a, b)
        if key in result:
            raise ValueError(f"rater names {a!r} and {b!r} give a pair key {key!r} that is already used")
        left = [x for x, _ in shared]
        right = [y for _, y in shared]
        result[key] = {
            "raters": [a, b],
            "agreement": _rate(sum(1 for x, y in shared if x == y), len(shared)),
            "ci95": bootstrap_share_interval(sum(1 for x, y in shared if x == y), len(shared), bootstrap=bootstrap,
                                             seed=_seed_sequence(seed, "pair", key)),
            "cohen_kappa": cohen_kappa(left, right),
            "n": len(shared),
        }
    return result


# --------------------------------------------------------------------------- calibration


def rogan_gladen(observed: float, tpr: float, tnr: float) -> float | None:
    """Rogan-Gladen corrected prevalence of the positive class:
    (observed + TNR - 1) / (TPR + TNR - 1), clipped to [0, 1].

    Here the **positive class is success = no_failure** (How2Score counts no_failure):
    ``observed`` is the judge's fraction of no_failure labels, ``tpr`` = P(judge
    no_failure | human majority no_failure) and ``tnr`` = P(judge has_failure | human
    majority has_failure). ``None`` when TPR + TNR - 1 <= 0 (the judge is no better than
    chance, so its labels carry no information to correct with)."""
    youden = tpr + tnr - 1.0
    if youden <= 0.0:
        return None
    return min(1.0, max(0.0, (observed + tnr - 1.0) / youden))


def calibrated_score(
    judge_on_labelled: Sequence[bool],
    human_on_labelled: Sequence[bool],
    judge_on_target: Sequence[bool],
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: SeedLike = 0,
) -> dict[str, Any]:
    """A judge's success rate (How2Score as a fraction) corrected for its errors.

    The **positive class is success = no_failure**. ``judge_on_labelled`` and
    ``human_on_labelled`` are paired has_failure labels on items with a human majority;
    they give TPR (judge no_failure among human no_failure) and TNR (judge has_failure
    among human has_failure). ``judge_on_target`` are the judge's labels on the set to
    score (usually larger and unlabelled); their no_failure fraction is the observed score.
    ``corrected_score = rogan_gladen(observed, TPR, TNR)``.

    ``ci95`` is a 95 % percentile bootstrap interval resampling the labelled items and the
    target items independently; resamples where the correction is undefined (a class
    missing from the labelled resample, or TPR + TNR - 1 <= 0) are left out and counted in
    ``n_bootstrap_undefined``."""
    _check_bootstrap(bootstrap)
    if len(judge_on_labelled) != len(human_on_labelled):
        raise ValueError("judge_on_labelled and human_on_labelled differ in length")
    judge_l = np.asarray(judge_on_labelled, dtype=bool).reshape(-1)
    human_l = np.asarray(human_on_labelled, dtype=bool).reshape(-1)
    target = np.asarray(judge_on_target, dtype=bool).reshape(-1)
    positive = ~human_l  # human majority no_failure
    negative = human_l
    n_pos, n_neg = int(positive.sum()), int(negative.sum())
    tpr = _rate(int((positive & ~judge_l).sum()), n_pos)
    tnr = _rate(int((negative & judge_l).sum()), n_neg)
    observed = _rate(int((~target).sum()), int(target.size))
    corrected = None if tpr is None or tnr is None or observed is None else rogan_gladen(observed, tpr, tnr)
    interval: list[float] | None = None
    undefined = 0
    if bootstrap > 0 and judge_l.size > 0 and target.size > 0:
        rng = np.random.default_rng(seed)
        values: list[npt.NDArray[np.float64]] = []
        for size in _blocks(bootstrap, 3 * (judge_l.size + target.size)):
            pick = _draws(rng, judge_l.size, size)
            pick_target = _draws(rng, target.size, size)
            h, j = human_l[pick], judge_l[pick]
            n_positive = (~h).sum(axis=1)
            n_negative = h.sum(axis=1)
            both = (n_positive > 0) & (n_negative > 0)
            tpr_b = np.divide((~h & ~j).sum(axis=1), n_positive, out=np.zeros(size), where=both)
            tnr_b = np.divide((h & j).sum(axis=1), n_negative, out=np.zeros(size), where=both)
            observed_b = (~target[pick_target]).mean(axis=1)
            youden = tpr_b + tnr_b - 1.0
            defined = both & (youden > 0.0)
            undefined += int((~defined).sum())
            corrected_b = (observed_b[defined] + tnr_b[defined] - 1.0) / youden[defined]
            values.append(np.clip(corrected_b, 0.0, 1.0))
        interval = percentile_interval(np.concatenate(values))
    if corrected is None:
        interval = None  # no interval around an undefined value
    return {
        "positive_class": NO_FAILURE,
        "observed_score": observed,
        "n_target": int(target.size),
        "tpr": tpr,
        "tnr": tnr,
        "n_positive": n_pos,
        "n_negative": n_neg,
        "corrected_score": corrected,
        "ci95": interval,
        "n_bootstrap_undefined": undefined,
    }


# --------------------------------------------------------------------------- what a number rests on


def alpha_undefined_reason(details: Mapping[str, Any]) -> str | None:
    """Why alpha is undefined, as a sentence, from one kind's ``alpha_details``; ``None``
    when it is defined. Alpha needs items with two or more annotations (pairable units)
    whose values vary: with no pairable item there is nothing to compare, and with one
    value everywhere the expected disagreement D_e is 0 and alpha = 1 - D_o / D_e is 0/0."""
    if details["n_units"] == 0:
        single = details["n_single"]
        return (f"no item has two annotations ({single} item{'' if single == 1 else 's'} "
                f"ha{'s' if single == 1 else 've'} one), so no two annotators can be compared")
    if details["n_distinct_values"] < 2:
        return (f"every annotation of the {details['n_units']} items with two or more annotations gives the same "
                f"value, so there is no variation to measure agreement against (expected disagreement 0)")
    return None


def sample_size_note(n: int, ci95: Sequence[float] | None) -> str | None:
    """The note shown beside a number resting on a small sample: ``n`` items below
    ``SMALL_SAMPLE_ITEMS`` (30), or a 95 % interval wider than ``WIDE_INTERVAL`` (0.3, on the
    number's own scale). ``None`` when neither holds (annotate/constants.py says why)."""
    width = None if not ci95 else ci95[1] - ci95[0]
    reasons = []
    if n < C.SMALL_SAMPLE_ITEMS:
        reasons.append(f"n = {n} items, fewer than {C.SMALL_SAMPLE_ITEMS}")
    if width is not None and width > C.WIDE_INTERVAL:
        reasons.append(f"the 95% interval is {width:.2f} wide (more than {C.WIDE_INTERVAL})")
    if not reasons:
        return None
    return "Small sample: " + " and ".join(reasons) + "; the interval is wide, read the number with it."


# --------------------------------------------------------------------------- the report

def _alpha_section(rows: Sequence[AnnotationRow], bootstrap: int, seed: int) -> dict[str, Any]:
    """The report's alpha keys from checked rows (``_check_rows``): ``alpha``, ``alpha_ci95``,
    ``alpha_details``, ``alpha_undefined`` and ``alpha_small_sample``."""
    alpha: dict[str, float | None] = {}
    alpha_ci95: dict[str, list[float] | None] = {}
    alpha_details: dict[str, dict[str, Any]] = {}
    inputs: dict[str, _AlphaInput] = {}
    for kind in ALPHA_KINDS:
        p = _pairable(_kind_units(rows, kind))
        inputs[kind] = _AlphaInput(p, _kind_delta(p, kind), nominal=kind != "l2_step_sets_masi")
        alpha[kind] = _package_alpha(p, inputs[kind].delta, inputs[kind].nominal)
    # One stream of resamples for the three kinds, so their intervals are paired.
    intervals = _alpha_bootstraps(inputs, bootstrap, np.random.default_rng(_seed_sequence(seed, "alpha")))
    for kind, x in inputs.items():
        interval, undefined = intervals[kind]
        alpha_ci95[kind] = interval if alpha[kind] is not None else None
        alpha_details[kind] = {
            "n_units": x.pairable.n_units,
            "n_values": x.pairable.n_values,
            "n_single": x.pairable.n_single,
            "n_distinct_values": len(x.pairable.domain),
            "n_bootstrap_undefined": undefined if alpha[kind] is not None else 0,
        }
    return {
        "alpha": alpha,
        "alpha_ci95": alpha_ci95,
        "alpha_details": alpha_details,
        "alpha_undefined": {kind: alpha_undefined_reason(alpha_details[kind]) if alpha[kind] is None else None
                            for kind in ALPHA_KINDS},
        "alpha_small_sample": {kind: sample_size_note(alpha_details[kind]["n_units"], alpha_ci95[kind])
                               if alpha[kind] is not None else None for kind in ALPHA_KINDS},
    }


def alpha_report(
    annotations: Iterable[AnnotationRow], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0
) -> dict[str, Any]:
    """The alpha keys of ``agreement_report`` alone (the same values and intervals for the
    same rows, bootstrap and seed): for pages that show alpha without the rest."""
    _check_bootstrap(bootstrap)
    _seed_sequence(seed)
    rows, _ = _check_rows(annotations)
    return _alpha_section(rows, bootstrap, seed)


DENOMINATORS: dict[str, str] = {
    "n_items": "distinct item_id values with at least one non-excluded annotation",
    "n_annotators": "distinct annotators with at least one non-excluded annotation",
    "n_annotations": "non-excluded annotation rows; rows with excluded=true are counted in n_excluded and used nowhere",
    "alpha": (
        "Krippendorff's alpha over items with at least two non-excluded annotations (alpha_details.n_units); "
        "items with one annotation cannot be paired and are counted in alpha_details.n_single; null when no "
        "item has two annotations or the paired values never vary"
    ),
    "alpha.first_failure_location": (
        "nominal over 'none' (no failure reported), the smallest linked L2 step, or 'unlocated' "
        "(failures reported, no L2 step linked)"
    ),
    "alpha.l2_step_sets_masi": "the union of linked L2 steps per annotation; MASI distance, 0 between two empty sets",
    "alpha_ci95": (
        "95% percentile bootstrap resampling the pairable items with replacement (the same resamples for the three "
        "kinds); resamples where alpha is undefined are left out and counted in alpha_details.n_bootstrap_undefined"
    ),
    "human_majority": (
        "strict majority (more than half) of an item's non-excluded has_failure labels, for items with at least "
        "min_annotations (default 2, never fewer) of them: one annotation is a label, not a majority; items with "
        "fewer are counted in n_too_few and left out of judge agreement, leave-one-out and calibration; an even "
        "split is a tie, has no majority and is counted in n_ties; "
        "n_items = n_with_majority + n_ties + n_too_few and n_with_majority = has_failure + no_failure"
    ),
    "leave_one_out": (
        "per annotator: agreement = matches / n, n = their items where the OTHER annotators, at least "
        "min_annotations of them, have a strict majority; items where the others tie (n_others_tie), number fewer "
        "than min_annotations (n_others_too_few) or nobody else labelled it (n_no_others) are left out; ci95 is a "
        "95% percentile bootstrap over the n items"
    ),
    "judges": (
        "agreement = matches / n, n = items with a human majority and a label from this judge; "
        "agreement_has_failure and agreement_no_failure divide by n_has_failure and n_no_failure (the human "
        "majority class); judged items with a human tie (n_human_tie), with fewer than min_annotations "
        "annotations (n_too_few_annotations) or without annotations (n_no_human_labels) are left out, so "
        "n_judged = n + n_human_tie + n_too_few_annotations + n_no_human_labels; ci95 is a 95% percentile "
        "bootstrap of agreement resampling the n items, ci95_has_failure and ci95_no_failure resample the items "
        "of that class, cohen_kappa_ci95 resamples the n items; confusion rows are the human majority, columns "
        "the judge"
    ),
    "judge_pairs": (
        "agreement = equal labels / n, n = items both judges labelled (annotations not needed); every pair of "
        "judges, keys 'A|B' with the names sorted; ci95 is a 95% percentile bootstrap over the n items"
    ),
    "annotator_pairs": (
        "agreement = equal labels / n, n = items both annotators labelled (non-excluded); only pairs with n > 0; "
        "ci95 is a 95% percentile bootstrap over the n items"
    ),
    "alpha_undefined": "per kind: null when alpha is defined, otherwise the sentence saying why it is not",
    "alpha_small_sample": "per kind: the small-sample note of alpha over its n_units items and its interval, or null",
    "small_sample": (
        f"a number resting on fewer than {C.SMALL_SAMPLE_ITEMS} items, or whose 95% interval is wider than "
        f"{C.WIDE_INTERVAL}, is shown with a note that its interval is wide"
    ),
    "calibration": (
        "Rogan-Gladen with positive class success = no_failure: corrected_score = (observed_score + tnr - 1) / "
        "(tpr + tnr - 1) clipped to [0, 1]; tpr = judge no_failure among human-majority no_failure (n_positive), "
        "tnr = judge has_failure among human-majority has_failure (n_negative), observed_score = the judge's "
        "no_failure fraction over all n_target items it judged; null when tpr + tnr - 1 <= 0 or a class is missing; "
        "only items with a human majority (see human_majority) give tpr and tnr"
    ),
    "null": "a rate whose denominator is 0, or a statistic that is undefined, is null",
}


def agreement_report(
    annotations: Iterable[AnnotationRow],
    judgments: Iterable[JudgmentRow],
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    min_annotations: int = C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT,
) -> dict[str, Any]:
    """The whole agreement report as a JSON-ready dict.

    Required keys (the command's interface): ``n_items``, ``n_annotators``,
    ``n_annotations``, ``alpha`` {binary, first_failure_location, l2_step_sets_masi},
    ``human_majority`` {min_annotations, n_items, n_with_majority, has_failure, no_failure,
    n_ties, n_too_few} (``HumanMajority.summary``), ``leave_one_out``
    {annotator: {agreement, n, ...}}, ``judges`` {judge: {agreement,
    agreement_has_failure, agreement_no_failure, cohen_kappa, n, ci95, ...}},
    ``judge_pairs`` {"A|B": {agreement, n, ...}}. Also: ``n_excluded``, ``n_judgments``,
    ``alpha_ci95``, ``alpha_details``, ``alpha_undefined`` (per kind, why alpha is null),
    ``alpha_small_sample`` and each judge's ``small_sample`` (``sample_size_note``),
    ``annotator_pairs``, ``calibration``, ``bootstrap`` and ``denominators`` (the text of
    every denominator and tie rule).

    ``min_annotations`` (>= 2) is how many non-excluded annotations an item needs for a
    human majority; items with fewer count in ``human_majority.n_too_few``.

    Bootstrap intervals use ``bootstrap`` resamples (0 turns them off: ``null``) and a
    generator seeded from ``seed`` and the statistic's name, so the report is the same on
    every run and for any order of the input rows. Raises ``ValueError`` for a negative
    ``bootstrap`` or ``seed``, a ``min_annotations`` below 2, duplicate (item, annotator)
    or (item, judge) rows, or an annotation with has_failure false and failures listed."""
    _check_bootstrap(bootstrap)
    _seed_sequence(seed)  # validates the seed
    check_min_annotations(min_annotations)
    rows, n_excluded = _check_rows(annotations)
    judgment_list = list(judgments)
    by_judge = _judgment_labels(judgment_list)
    by_item = _labels_by_item(rows)
    majority = _majority_of_items(by_item, min_annotations)
    decided = majority.decided()

    alphas = _alpha_section(rows, bootstrap, seed)

    judges = {
        judge: judge_agreement(majority, labels, bootstrap=bootstrap, seed=_seed_sequence(seed, "judge", judge))
        for judge, labels in by_judge.items()
    }
    for result in judges.values():
        result["small_sample"] = sample_size_note(result["n"], result["ci95"]) if result["n"] else None
    judge_items: dict[str, dict[str, bool]] = defaultdict(dict)
    for judge, labels in by_judge.items():
        for item, label in labels.items():
            judge_items[item][judge] = label
    calibration = {}
    for judge, labels in by_judge.items():
        labelled = sorted(item for item in labels if item in decided)
        calibration[judge] = calibrated_score(
            [labels[item] for item in labelled],
            [decided[item] for item in labelled],
            list(labels.values()),
            bootstrap=bootstrap,
            seed=_seed_sequence(seed, "calibration", judge),
        )

    return {
        "n_items": len(by_item),
        "n_annotators": len({row.annotator for row in rows}),
        "n_annotations": len(rows),
        "n_excluded": n_excluded,
        "n_judgments": len(judgment_list),
        **alphas,
        "human_majority": majority.summary(),
        "leave_one_out": leave_one_out_agreement(rows, min_annotations=min_annotations, bootstrap=bootstrap, seed=seed),
        "annotator_pairs": pairwise_agreement(by_item, bootstrap=bootstrap, seed=seed),
        "judges": judges,
        "judge_pairs": pairwise_agreement(judge_items, raters=by_judge, bootstrap=bootstrap, seed=seed),
        "calibration": calibration,
        "bootstrap": {
            "resamples": bootstrap,
            "seed": seed,
            "interval": "95% percentile (2.5th and 97.5th percentiles, linear interpolation)",
            "resampling": "items with replacement; labelled and target items independently for calibration",
        },
        "denominators": DENOMINATORS,
    }
