"""Reading item files for ``create_study``: JSONL (plain or compressed), one item per line.

Every line is checked before anything is created; errors name the file, the line and the
field, and all of them (up to a limit) are reported together, as one ``RecordError`` of
core/record_files.py (read by core/record_text.py, which reads the lines). Pure Python: no Django.

The file is read within ``ReadLimits`` (the ``STUDY_ITEMS`` scope of
config/settings/uploads.py unless the caller passes others): a line longer than
``max_line_bytes``, more than ``max_records`` items or more than ``max_decompressed_bytes``
after decompression stop the reading at once (reported as the file's problem, nothing
created); JSON nested deeper than ``max_json_depth``, NaN, Infinity and absurd numbers are
that line's problem. ``check`` (given by the caller) says whether an item fits the database
(lengths, NUL characters), so that too is a line error rather than a failed write."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from annotate.kinds import kind_get
from annotate.kinds.base import ItemRecordError, ItemSpec
from core.record_files import COMPRESSIONS, ReadLimits, RecordError
from core.record_text import iter_jsonl

SCOPE = "STUDY_ITEMS"

MAX_REPORTED_ERRORS = 20


# The defaults of the STUDY_ITEMS_MAX_... settings (config/settings/uploads.py; a test
# checks that the two agree): used when the caller passes no limits.
DEFAULT_LIMITS = ReadLimits(
    max_line_bytes=1 << 20, max_records=100_000, max_decompressed_bytes=1 << 30, max_json_depth=32, scope=SCOPE
)


def items_read(
    path: str | Path,
    *,
    kind: str,
    limits: ReadLimits | None = None,
    check: Callable[[ItemSpec], None] | None = None,
    file_name: str | None = None,
) -> list[ItemSpec]:
    """All items of a JSONL file, or a ``RecordError`` listing every bad line in its
    ``problems`` (nothing half-read).

    ``check`` raises ``ItemRecordError`` for an item that could not be stored; ``file_name``
    is recorded as each item's ``source.file`` (default: the file's own name)."""
    limits = limits or DEFAULT_LIMITS
    parse = kind_get(kind).parse_record
    items: list[ItemSpec] = []
    problems: list[RecordError] = []
    more = 0
    seen: dict[str, int] = {}

    def problem(line: int | str | None, message: str, field: str | None = None) -> None:
        nonlocal more
        if len(problems) < MAX_REPORTED_ERRORS:
            problems.append(RecordError(None, line, field, message))
        else:
            more += 1

    path = Path(path)
    if not path.is_file():
        raise RecordError.several(path, [RecordError(None, None, None, "no such file")])
    n_records = 0
    try:
        records = iter_jsonl(
            path,
            limits,
            compression=COMPRESSIONS.get(path.suffix.lower()),
            on_error=lambda error: problem(error.line, error.message, error.field),
            objects_only=False,
        )  # the kind's parser says what a record must be
        for line_no, record in records:
            n_records += 1
            if n_records > limits.max_records:
                problem(line_no, limits.too_many_records())
                break
            try:
                spec = parse(record)
                if check is not None:
                    check(spec)
            except ItemRecordError as exc:
                problem(line_no, exc.message, exc.field)
                continue
            if spec.item_id in seen:
                problem(line_no, f"{spec.item_id!r} already appears on line {seen[spec.item_id]}", "item_id")
                continue
            seen[spec.item_id] = line_no
            spec.source.setdefault("file", file_name or Path(path).name)
            spec.source.setdefault("line", line_no)
            items.append(spec)
    except RecordError as exc:  # too long a line, too much data, a damaged file: reading stops here
        problems.append(RecordError(None, exc.line, None, exc.message))  # always said, however many came before
    if not items and not problems:
        problem(None, "the file contains no items")
    if problems:
        raise RecordError.several(path, problems, more)
    return items
