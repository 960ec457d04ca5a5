"""Records the agreement statistics read: annotations, judgments and generations, one JSON
object per line (JSONL, optionally .gz/.zst/.bz2/.xz). Pure Python, no Django.

Files are read by the one record reader (core/record_reader.py, within its default limits);
every error is its ``RecordError``, naming the file, the line and the field. Labels are booleans throughout: ``True`` means has_failure,
``False`` means no_failure."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from core.record_files import COMPRESSIONS, ReadLimits, RecordError
from core.record_text import iter_jsonl, jsonl_records
from judging.how2score import check_has_failure_agrees

HAS_FAILURE: Final = "has_failure"
NO_FAILURE: Final = "no_failure"

# Which annotations count, the one rule every statistic and every "counted" number applies: an
# annotation counts unless it carries one of these flags (``excluded``: failed attention checks,
# qualification and attention-check answers; ``surplus``: a late submit into an item that
# already had its k counted annotations; ``broken``: the annotator flagged the item "This item
# is broken", so the row holds no label). Rows read it through ``AnnotationRow.counted``, the
# database through ``annotations_counted`` (annotate/studies/selectors.py). A row with several
# is counted once, as the first of them in this order. "I'm unsure" is not among them: an
# unsure answer is an answer, and counts.
LEFT_OUT_FLAGS: Final = ("excluded", "surplus", "broken")
FLAG_BROKEN: Final = "broken"
FLAG_UNSURE: Final = "unsure"


# --------------------------------------------------------------------------- input rows


@dataclass
class AnnotationRow:
    """One annotator's label of one item.

    ``failures`` is a list of ``{"description": str, "L1_steps": [int], "L2_steps": [int]}``
    (L1 is the reference procedure, L2 the generated one). Only ``counted`` rows enter any
    statistic: ``excluded`` rows (e.g. failed attention checks) are left out and counted in
    ``n_excluded``; ``surplus`` rows (a late submit into an item that already had its k
    counted annotations) are left out and counted in ``n_surplus`` (a row both excluded and
    surplus is counted once, as excluded); ``broken`` rows (flagged "This item is broken": no
    label; ``has_failure`` is then False and means nothing) are left out and counted in
    ``n_broken``."""

    item_id: str
    annotator: str
    has_failure: bool
    failures: list[dict[str, Any]] = field(default_factory=list)
    excluded: bool = False
    surplus: bool = False
    broken: bool = False
    # Flagged "I'm unsure": counted as any other row (shown as n_unsure), never left out.
    unsure: bool = False

    @property
    def counted(self) -> bool:
        """Whether the row counts: it carries none of ``LEFT_OUT_FLAGS`` (not excluded, not
        surplus, not flagged broken)."""
        return not any(getattr(self, flag) for flag in LEFT_OUT_FLAGS)


@dataclass
class JudgmentRow:
    """One judge's label of one item."""

    item_id: str
    judge: str
    has_failure: bool


@dataclass(frozen=True)
class GenerationRow:
    """One line of a generations file: an item's reference and generated steps and the model."""

    item_id: str
    reference_steps: tuple[str, ...]
    candidate_steps: tuple[str, ...]
    model: str | None


# --------------------------------------------------------------------------- readers


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _required(record: Mapping[str, Any], name: str) -> Any:
    if name not in record:
        raise RecordError(None, None, name, "missing")
    return record[name]


def _name_field(record: Mapping[str, Any], name: str) -> str:
    value = _required(record, name)
    if not isinstance(value, str):
        raise RecordError(None, None, name, f"expected a string, got {_type_name(value)}")
    if not value.strip():
        raise RecordError(None, None, name, "must not be empty")
    return value


def _bool_field(record: Mapping[str, Any], name: str, default: bool | None = None) -> bool:
    if name not in record and default is not None:
        return default
    value = _required(record, name)
    if not isinstance(value, bool):
        raise RecordError(None, None, name, f"expected true or false, got {_type_name(value)} {value!r}")
    return value


def _steps_field(failure: Mapping[str, Any], name: str, prefix: str) -> list[int]:
    if name not in failure:
        raise RecordError(None, None, f"{prefix}.{name}", "missing")
    value = failure[name]
    if not isinstance(value, list):
        raise RecordError(None, None, f"{prefix}.{name}", f"expected a list of step numbers, got {_type_name(value)}")
    for index, step in enumerate(value):
        # bool is an int subclass in Python; true/false are not step numbers.
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise RecordError(
                None, None, f"{prefix}.{name}[{index}]", f"expected a step number (an integer >= 1), got {step!r}"
            )
    return list(value)


def parse_annotation_record(record: Any) -> AnnotationRow:
    """Check one decoded annotation record and return it as a row.

    Required: ``item_id`` (non-empty string), ``annotator`` (non-empty string),
    ``has_failure`` (bool), ``failures`` (list of objects with ``description`` (string),
    ``L1_steps`` and ``L2_steps`` (lists of integers >= 1)). Optional: ``excluded`` (bool,
    default false); ``surplus`` (bool, default false: an export's late submit into a full
    item, left out and counted apart); ``source`` other than ``"main"`` (qualification or
    attention-check answers in an export) counts as excluded; ``flag`` (a string or null)
    ``"broken"`` marks a row flagged "This item is broken", left out as ``broken`` (its
    ``has_failure`` may then be null). ``has_failure: false`` with a non-empty ``failures`` list is a
    contradiction and is rejected; ``has_failure: true`` with no failures is accepted (its
    location is ``"unlocated"``). Other fields are ignored. Raises ``ValueError`` naming
    the field."""
    if not isinstance(record, dict):
        raise RecordError(None, None, None, f"expected a JSON object, got {_type_name(record)}")
    item_id = _name_field(record, "item_id")
    annotator = _name_field(record, "annotator")
    flag = record.get("flag")
    if flag is not None and not isinstance(flag, str):
        raise RecordError(None, None, "flag", f"expected a string or null, got {_type_name(flag)}")
    broken = flag == FLAG_BROKEN
    # A broken-flagged row holds no label: it is left out of everything, so its has_failure
    # (null in an export) is read as False and never used.
    has_failure = False if broken and record.get("has_failure") is None else _bool_field(record, "has_failure")
    raw_failures = _required(record, "failures")
    if not isinstance(raw_failures, list):
        raise RecordError(None, None, "failures", f"expected a list, got {_type_name(raw_failures)}")
    failures: list[dict[str, Any]] = []
    for index, failure in enumerate(raw_failures):
        prefix = f"failures[{index}]"
        if not isinstance(failure, dict):
            raise RecordError(None, None, prefix, f"expected an object, got {_type_name(failure)}")
        if "description" not in failure:
            raise RecordError(None, None, f"{prefix}.description", "missing")
        if not isinstance(failure["description"], str):
            raise RecordError(
                None, None, f"{prefix}.description", f"expected a string, got {_type_name(failure['description'])}"
            )
        failures.append(
            {
                "description": failure["description"],
                "L1_steps": _steps_field(failure, "L1_steps", prefix),
                "L2_steps": _steps_field(failure, "L2_steps", prefix),
            }
        )
    if not has_failure and failures:
        raise RecordError(None, None, "has_failure", f"has_failure is false but {len(failures)} failure(s) are listed")
    excluded = _bool_field(record, "excluded", default=False)
    # Exports also hold qualification and attention-check answers (``source`` other than
    # "main"); they measure the annotator, not the item, and are left out like exclusions.
    source = record.get("source")
    if source is not None and source != "main":
        excluded = True
    # A surplus answer (submitted after the item already had its k counted annotations) is
    # stored and exported, but counts nowhere: the study page and the report agree on k.
    surplus = _bool_field(record, "surplus", default=False)
    return AnnotationRow(
        item_id=item_id,
        annotator=annotator,
        has_failure=has_failure,
        failures=failures,
        excluded=excluded,
        surplus=surplus,
        broken=broken,
        unsure=flag == FLAG_UNSURE,
    )


def parse_judgment_record(record: Any) -> JudgmentRow:
    """Check one decoded judgment record: ``item_id`` and ``judge`` (non-empty strings),
    ``has_failure`` (bool), optionally ``critical_failures`` (a list; its contents are not
    used here). A ``has_failure`` that contradicts the record's own failures (the list,
    ``n_failures`` or a readable ``judge_completion``) is refused, as every judgment reader
    does (``judging.how2score.check_has_failure_agrees``; How2Everything §4.2). Raises
    ``ValueError`` naming the field."""
    if not isinstance(record, dict):
        raise RecordError(None, None, None, f"expected a JSON object, got {_type_name(record)}")
    item_id = _name_field(record, "item_id")
    judge = _name_field(record, "judge")
    has_failure = _bool_field(record, "has_failure")
    if "critical_failures" in record and not isinstance(record["critical_failures"], list):
        raise RecordError(
            None, None, "critical_failures", f"expected a list, got {_type_name(record['critical_failures'])}"
        )
    check_has_failure_agrees(record)
    return JudgmentRow(item_id=item_id, judge=judge, has_failure=has_failure)


RowT = TypeVar("RowT", AnnotationRow, JudgmentRow, GenerationRow)


def _rows(
    records: Iterable[tuple[int, Any]],
    source: str,
    parse: Callable[[Any], RowT],
    key: Callable[[RowT], tuple[str, str] | None],
) -> list[RowT]:
    """The checked rows of ``(line number, decoded record)`` pairs (the record reader's)."""
    rows: list[RowT] = []
    first_line: dict[tuple[str, str], int] = {}
    for number, record in records:
        try:
            row = parse(record)
        except RecordError as exc:
            raise exc.at(source, number) from exc
        identity = key(row)
        if identity is not None:
            if identity in first_line:
                same = f"item_id {identity[0]!r}" + (f" and {identity[1]!r}" if identity[1] else "")
                raise RecordError(source, number, None, f"duplicate of line {first_line[identity]} (same {same})")
            first_line[identity] = number
        rows.append(row)
    return rows


def _annotation_key(row: AnnotationRow) -> tuple[str, str] | None:
    return (row.item_id, row.annotator) if row.counted else None


def _judgment_key(row: JudgmentRow) -> tuple[str, str] | None:
    return (row.item_id, row.judge)


def parse_annotation_lines(lines: Iterable[bytes | str], *, source: str = "<annotations>") -> list[AnnotationRow]:
    """Parse JSONL annotation records (one object per line; blank lines skipped).

    Returns every row, excluded and surplus ones included (flagged), so the report can
    count them. Two counted rows for the same (item_id, annotator) are an error.
    Raises ``RecordError`` with ``source`` and the 1-based line number."""
    return _rows(jsonl_records(lines, source, objects_only=False), source, parse_annotation_record, _annotation_key)


def parse_judgment_lines(lines: Iterable[bytes | str], *, source: str = "<judgments>") -> list[JudgmentRow]:
    """Parse JSONL judgment records; two rows for the same (item_id, judge) are an error.
    Raises ``RecordError`` with ``source`` and the 1-based line number."""
    return _rows(jsonl_records(lines, source, objects_only=False), source, parse_judgment_record, _judgment_key)


def _generation_key(row: GenerationRow) -> tuple[str, str] | None:
    return (row.item_id, "")


def _read(
    path: str | Path,
    parse: Callable[[Any], RowT],
    key: Callable[[RowT], tuple[str, str] | None],
) -> list[RowT]:
    """The rows of a JSONL file read by the record reader (within its default limits)."""
    source = str(path)
    records = iter_jsonl(
        path, ReadLimits(), compression=COMPRESSIONS.get(Path(path).suffix.lower()), objects_only=False
    )
    try:
        return _rows(records, source, parse, key)
    except FileNotFoundError as exc:
        raise RecordError(source, None, None, "no such file") from exc
    except IsADirectoryError as exc:
        raise RecordError(source, None, None, "is a directory, not a file") from exc
    except PermissionError as exc:
        raise RecordError(source, None, None, "permission denied") from exc


def read_annotations(path: str | Path) -> list[AnnotationRow]:
    """Read an annotations JSONL file (optionally .gz/.zst/.bz2/.xz); see ``parse_annotation_lines``."""
    return _read(path, parse_annotation_record, _annotation_key)


def read_judgments(path: str | Path) -> list[JudgmentRow]:
    """Read a judgments JSONL file (optionally .gz/.zst/.bz2/.xz); see ``parse_judgment_lines``."""
    return _read(path, parse_judgment_record, _judgment_key)


def _steps(record: Mapping[str, Any], name: str, *, non_empty: bool) -> tuple[str, ...]:
    if name not in record:
        raise RecordError(None, None, name, "missing")
    value = record[name]
    if not isinstance(value, list):
        raise RecordError(None, None, name, f"expected a list of steps (strings), got {_type_name(value)}")
    if non_empty and not value:
        raise RecordError(None, None, name, "expected at least one step, got an empty list")
    for index, step in enumerate(value):
        if not isinstance(step, str):
            raise RecordError(None, None, f"{name}[{index}]", f"expected a string, got {_type_name(step)}")
    return tuple(value)


def parse_generation_record(record: Any) -> GenerationRow:
    """Check one decoded generations record: ``item_id`` (non-empty string),
    ``reference_steps`` (non-empty list of strings), ``candidate_steps`` (list of strings),
    optionally ``model`` (non-empty string or null; when absent, ``source.model`` is read, so
    a study's items file serves as is). Other fields are ignored. Raises ``ValueError``
    naming the field."""
    if not isinstance(record, dict):
        raise RecordError(None, None, None, f"expected a JSON object, got {_type_name(record)}")
    item_id = _name_field(record, "item_id")
    reference = _steps(record, "reference_steps", non_empty=True)
    candidate = _steps(record, "candidate_steps", non_empty=False)
    field, model = "model", record.get("model")
    if "model" not in record and isinstance(record.get("source"), dict):
        field, model = "source.model", record["source"].get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise RecordError(None, None, field, f"expected a non-empty string or null, got {_type_name(model)} {model!r}")
    return GenerationRow(item_id=item_id, reference_steps=reference, candidate_steps=candidate, model=model)


def parse_generation_lines(lines: Iterable[bytes | str], *, source: str = "<generations>") -> list[GenerationRow]:
    """Parse JSONL generations records; two lines with the same ``item_id`` are an error.
    Raises ``RecordError`` with ``source`` and the 1-based line number."""
    return _rows(jsonl_records(lines, source, objects_only=False), source, parse_generation_record, _generation_key)


def read_generations(path: str | Path) -> list[GenerationRow]:
    """Read a generations JSONL file (optionally .gz/.zst/.bz2/.xz)."""
    return _read(path, parse_generation_record, _generation_key)
