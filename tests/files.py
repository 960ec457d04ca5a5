"""Helpers that write record files in every supported format, for the tests."""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

COMPRESSORS = {
    "": lambda data: data,
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".zst": lambda data: zstandard.ZstdCompressor().compress(data),
}


def jsonl_bytes(records: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def csv_bytes(records: list[dict]) -> bytes:
    """CSV with list and object cells JSON-encoded (the importer decodes them)."""
    fields: list[str] = []
    for record in records:
        fields += [k for k in record if k not in fields]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    for record in records:
        writer.writerow(
            {k: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v for k, v in record.items()}
        )
    return buffer.getvalue().encode("utf-8")


def columnar_bytes(records: list[dict], fmt: str) -> bytes:
    table = pa.Table.from_pylist(records)
    sink = io.BytesIO()
    if fmt == "parquet":
        pq.write_table(table, sink)
    else:
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    return sink.getvalue()


def write_records(directory: Path, name: str, records: list[dict], fmt: str, compression: str = "") -> Path:
    """Write ``records`` as ``<name>.<fmt><compression>`` and return the path."""
    if fmt == "jsonl":
        data = jsonl_bytes(records)
    elif fmt == "csv":
        data = csv_bytes(records)
    else:
        data = columnar_bytes(records, fmt)
    path = directory / f"{name}.{fmt}{compression}"
    path.write_bytes(COMPRESSORS[compression](data))
    return path
