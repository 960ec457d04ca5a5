"""Annotation exports: JSONL (the agreement report's input) and CSV (for spreadsheets).

A file export is written to a temporary file beside the target and renamed when complete,
so a failed export never leaves a partial file."""
from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from annotate.models import Study
from annotate.selectors import EXPORT_FIELDS, annotation_export_rows, choice_tier_records
from core.csv_cells import csv_writer
from mining.record_files import atomic_output

JSON_CELLS = {"failures", "steps_opened", "click_log", "item_source", "answer"}


def annotation_export(*, study: Study, output: str | Path) -> int:
    """Write one JSON line per annotation of the study; returns the number of lines."""
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with atomic_output(output) as handle:
        for row in annotation_export_rows(study):
            handle.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
            count += 1
    return count


def _csv_cell(name: str, value: Any) -> Any:
    if name in JSON_CELLS:
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def annotation_csv_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """CSV text, one chunk per row (for a streaming HTTP response); list cells are JSON, and no
    cell starts a formula (core/csv_cells.py)."""
    buffer = io.StringIO()
    writer = csv_writer(buffer)
    writer.writerow(EXPORT_FIELDS)
    yield buffer.getvalue()
    for row in rows:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow([_csv_cell(name, row.get(name)) for name in EXPORT_FIELDS])
        yield buffer.getvalue()


def choice_tier_export(*, study: Study, tier: str, output: str | Path) -> int:
    """Write the items of a multiple-choice study's gold or harder tier as goal-step task lines."""
    records = choice_tier_records(study, tier)
    with atomic_output(output) as handle:
        for record in records:
            handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
    return len(records)
