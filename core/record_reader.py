"""The one reader of record files: JSONL, CSV, Parquet and Arrow/Feather, plain or
compressed (.gz, .zst, .bz2, .xz). Pure Python, no Django: every importer uses it
(procedures, corpora, generations and judgments, study items, the agreement statistics'
annotations, judgments and generations).

Every record comes out as ``(position, record)`` where ``position`` names where it was
read ("line 12" for text formats, "row 12" for columnar ones), so errors can say where.
Memory stays flat: text files are read line by line (``core/record_text.py``), columnar files
batch by batch (``core/record_columnar.py``), each within the file's
:class:`~core.record_files.ReadLimits`, checked *while* reading: a 2 MB gzip holding one 2 GiB
line fails after reading one line's worth. Every problem, a limit reached included, is a
:class:`~core.record_files.RecordError`."""

from __future__ import annotations

import lzma
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.record_columnar import columnar_batches, columnar_records
from core.record_files import LimitReached, ReadLimits, RecordError, file_kind
from core.record_streams import open_binary
from core.record_text import csv_records, jsonl_positions


def iter_records(path: str | Path, limits: ReadLimits | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(position, record)`` for every record of a file, streaming, within ``limits``
    (the defaults when None). Any problem, a limit included, is a ``RecordError``."""
    limits = limits or ReadLimits()
    kind = file_kind(path)
    if kind.format == "jsonl":
        records = jsonl_positions(path, kind.compression, limits)
    elif kind.format == "csv":
        records = csv_records(path, kind.compression, limits)
    else:
        records = columnar_records(path, kind, limits)
    count = 0
    for position, record in records:
        count += 1
        if count > limits.max_records:
            raise LimitReached(path, position, None, limits.too_many_records())
        yield position, record


def decodes_beyond(path: str | Path, limit: int, *, max_records: int | None = None) -> bool:
    """Whether the file decodes to more than ``limit`` bytes, or (given ``max_records``) holds
    more records than that, found cheaply: a text file by decompressing at most ``limit + 1``
    bytes (its lines counted as records: blank ones too), a Parquet or Arrow file from its
    metadata and the sizes of its batches (checked as :func:`columnar_batches` checks them,
    with nothing made into Python objects). A file that cannot be read says False: reading
    it properly reports the problem with its position."""
    try:
        kind = file_kind(path)
    except RecordError:
        return False
    if kind.format in ("parquet", "arrow"):
        probe = ReadLimits(
            max_line_bytes=1 << 62,
            max_records=max_records or (1 << 62),
            max_decompressed_bytes=limit,
            max_compression_ratio=1 << 62,
        )
        try:
            for _ in columnar_batches(path, kind, probe):
                pass
        except LimitReached:
            return True
        except RecordError:
            return False
        return False
    lines = 0
    try:
        with open_binary(path, kind.compression) as raw:
            remaining = limit + 1
            while remaining > 0:
                chunk = raw.read(min(remaining, 1 << 20))
                if not chunk:
                    return False
                lines += chunk.count(b"\n")
                if max_records is not None and lines > max_records:
                    return True
                remaining -= len(chunk)
            return True
    except (OSError, EOFError, lzma.LZMAError):
        return False
