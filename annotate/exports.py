"""Annotation exports: JSONL (the agreement report's input) and CSV (for spreadsheets).

A file export is written to a temporary file beside the target and renamed when complete,
so a failed export never leaves a partial file."""
from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from annotate.models import Study
from annotate.selectors import EXPORT_FIELDS, annotation_export_rows

JSON_CELLS = {"failures", "steps_opened", "click_log", "item_source"}


def annotation_export(*, study: Study, output: str | Path) -> int:
    """Write one JSON line per annotation of the study; returns the number of lines."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent)
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for row in annotation_export_rows(study):
                handle.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
                count += 1
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
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
    """CSV text, one chunk per row (for a streaming HTTP response); list cells are JSON."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(EXPORT_FIELDS)
    yield buffer.getvalue()
    for row in rows:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow([_csv_cell(name, row.get(name)) for name in EXPORT_FIELDS])
        yield buffer.getvalue()
