"""Reading item files for ``create_study``: JSONL (plain or compressed), one item per line.

Every line is checked before anything is created; errors name the file, the line and the
field, and all of them (up to a limit) are reported together. Pure Python: no Django.

The file is read within ``ReadLimits`` (the ``STUDY_ITEMS`` scope of
config/settings/uploads.py unless the caller passes others): a line longer than
``max_line_bytes``, more than ``max_records`` items or more than ``max_decompressed_bytes``
after decompression stop the reading at once (reported as the file's problem, nothing
created); JSON nested deeper than ``max_json_depth``, NaN, Infinity and absurd numbers are
that line's problem. ``check`` (given by the caller) says whether an item fits the database
(lengths, NUL characters), so that too is a line error rather than a failed write."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from annotate.kinds import kind_get
from annotate.kinds.base import ItemRecordError, ItemSpec
from mining.record_files import (
    COMPRESSIONS,
    JsonDepthError,
    ReadLimitError,
    ReadLimits,
    bounded_lines,
    json_loads_bounded,
    open_binary,
)

SCOPE = "STUDY_ITEMS"

MAX_REPORTED_ERRORS = 20


@dataclass
class ItemFileProblem:
    line: int  # 0: the file as a whole
    message: str
    field: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "the file"
        if self.field:
            return f"{where}, field '{self.field}': {self.message}"
        return f"{where}: {self.message}"


class ItemFileError(ValueError):
    def __init__(self, path: str, problems: list[ItemFileProblem], more: int = 0):
        self.path = path
        self.problems = problems
        self.more = more
        lines = [f"{path}, {problem}" for problem in problems]
        if more:
            lines.append(f"... and {more} more bad lines")
        super().__init__("\n".join(lines))


# The defaults of the STUDY_ITEMS_MAX_... settings (config/settings/uploads.py; a test
# checks that the two agree): used when the caller passes no limits.
DEFAULT_LIMITS = ReadLimits(max_line_bytes=1 << 20, max_records=100_000, max_decompressed_bytes=1 << 30,
                            max_json_depth=32, scope=SCOPE)


def items_read(
    path: str | Path,
    *,
    kind: str,
    limits: ReadLimits | None = None,
    check: Callable[[ItemSpec], None] | None = None,
    file_name: str | None = None,
) -> list[ItemSpec]:
    """All items of a JSONL file, or ItemFileError listing every bad line (nothing half-read).

    ``check`` raises ``ItemRecordError`` for an item that could not be stored; ``file_name``
    is recorded as each item's ``source.file`` (default: the file's own name)."""
    limits = limits or DEFAULT_LIMITS
    parse = kind_get(kind).parse_record
    items: list[ItemSpec] = []
    problems: list[ItemFileProblem] = []
    more = 0
    seen: dict[str, int] = {}

    def problem(line: int, message: str, field: str | None = None) -> None:
        nonlocal more
        if len(problems) < MAX_REPORTED_ERRORS:
            problems.append(ItemFileProblem(line, message, field))
        else:
            more += 1

    path = Path(path)
    if not path.is_file():
        raise ItemFileError(str(path), [ItemFileProblem(0, "no such file")])
    n_records = 0
    with open_binary(path, COMPRESSIONS.get(path.suffix.lower()), limits=limits) as handle:
        line_no = 0
        try:
            for line_no, raw in enumerate(bounded_lines(handle, limits), start=1):
                try:
                    text = raw.decode("utf-8").strip()
                except UnicodeDecodeError as exc:
                    problem(line_no, f"not valid UTF-8 ({exc.reason})")
                    continue
                if not text:
                    continue
                n_records += 1
                if n_records > limits.max_records:
                    problem(line_no, limits.too_many_records())
                    break
                try:
                    record = json_loads_bounded(text, limits.max_json_depth)
                except JsonDepthError:
                    problem(line_no, limits.too_deep())
                    continue
                except ValueError as exc:
                    problem(line_no, str(exc))
                    continue
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
        except ReadLimitError as exc:  # too long a line, too much data: reading stops here
            problem(line_no + 1, str(exc))
        except (OSError, EOFError, ValueError) as exc:  # truncated or corrupt compressed file
            problem(line_no + 1, f"the file could not be read to the end: {exc}")
    if not items and not problems:
        problem(0, "the file contains no items")
    if problems:
        raise ItemFileError(str(path), problems, more)
    return items
