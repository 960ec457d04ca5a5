"""Reading item files for ``create_study``: JSONL (plain or compressed), one item per line.

Every line is checked before anything is created; errors name the file, the line and the
field, and all of them (up to a limit) are reported together. Pure Python: no Django."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from annotate.kinds import kind_get
from annotate.kinds.base import ItemRecordError, ItemSpec
from mining.record_files import COMPRESSIONS, open_binary

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


def items_read(path: str | Path, *, kind: str) -> list[ItemSpec]:
    """All items of a JSONL file, or ItemFileError listing every bad line (nothing half-read)."""
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
    with open_binary(path, COMPRESSIONS.get(path.suffix.lower())) as handle:
        line_no = 0
        try:
            for line_no, raw in enumerate(handle, start=1):
                text = raw.strip()
                if not text:
                    continue
                try:
                    record = json.loads(text)
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    problem(line_no, f"invalid JSON: {getattr(exc, 'msg', exc)}")
                    continue
                try:
                    spec = parse(record)
                except ItemRecordError as exc:
                    problem(line_no, exc.message, exc.field)
                    continue
                if spec.item_id in seen:
                    problem(line_no, f"{spec.item_id!r} already appears on line {seen[spec.item_id]}", "item_id")
                    continue
                seen[spec.item_id] = line_no
                spec.source.setdefault("file", Path(path).name)
                spec.source.setdefault("line", line_no)
                items.append(spec)
        except (OSError, EOFError, ValueError) as exc:  # truncated or corrupt compressed file
            problem(line_no + 1, f"the file could not be read to the end: {exc}")
    if not items and not problems:
        problem(0, "the file contains no items")
    if problems:
        raise ItemFileError(str(path), problems, more)
    return items
