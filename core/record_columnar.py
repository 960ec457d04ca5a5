"""The columnar formats of record files: Parquet and Arrow/Feather, read batch by batch within
the file's limits. Pure Python, no Django; pyarrow is imported when a file is read.

A compressed file is checked for its magic bytes before it is decompressed to a temporary
file, and never past the limit. What the file says about itself (its rows, the sizes of its
row groups or record batches) is checked before anything is decoded, and each batch's rows
are measured (``core/columnar_sizes.py``) before they become Python objects
(:func:`columnar_batches`)."""

from __future__ import annotations

import lzma
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from core.columnar_sizes import ipc_decoded_sizes, page_uncompressed_size, row_sizes
from core.record_files import RECORD_CHARGE_BYTES, FileKind, LimitReached, ReadLimits, RecordError, size_text
from core.record_streams import open_binary

COLUMNAR_BATCH_ROWS = 1000
# The first bytes of each columnar format (Arrow's stream format starts with a continuation
# marker); a file that does not start with them is refused before anything is decompressed.
COLUMNAR_MAGIC = {"parquet": (b"PAR1",), "arrow": (b"ARROW1", b"\xff\xff\xff\xff")}
# Columnar files are read this many decoded bytes at a time (at most COLUMNAR_BATCH_ROWS rows),
# and rows become Python objects this many bytes at a time.
COLUMNAR_BATCH_BYTES = 16 << 20
# The most a Parquet batch may decode to, reckoned from the metadata's worst case (each row
# holding its column's whole dictionary page): what a batch can cost in Arrow's memory before
# its rows are measured. (Reading a row group already holds its compressed columns.)
COLUMNAR_DECODE_MAX_BYTES = 256 << 20


def _check_magic(path: str | Path, kind: FileKind, head: bytes) -> None:
    if not head.startswith(COLUMNAR_MAGIC[kind.format]):
        name = {"parquet": "a Parquet", "arrow": "an Arrow"}[kind.format]
        raise RecordError(path, None, None, f"not {name} file (it does not start with the format's signature)")


# A compressed columnar file is decompressed to a temporary file; that file stops short of
# leaving less than this much disk free (the decompressed-size limit may be far above it).
TEMP_DISK_RESERVE_BYTES = 1 << 30
_DISK_CHECK_EVERY_BYTES = 64 << 20


def _copy_keeping_disk_reserve(raw: IO[bytes], tmp: IO[bytes]) -> None:
    written_since_check = _DISK_CHECK_EVERY_BYTES  # check before the first chunk
    while chunk := raw.read(1 << 20):
        if written_since_check >= _DISK_CHECK_EVERY_BYTES:
            free = shutil.disk_usage(os.path.dirname(tmp.name) or ".").free
            if free - _DISK_CHECK_EVERY_BYTES < TEMP_DISK_RESERVE_BYTES:
                raise RecordError(
                    None,
                    None,
                    None,
                    f"decompressing needs more temporary disk space than is free ({size_text(free)} free, "
                    f"{size_text(TEMP_DISK_RESERVE_BYTES)} kept in reserve); upload the file uncompressed or free space",
                )
            written_since_check = 0
        tmp.write(chunk)
        written_since_check += len(chunk)


@contextmanager
def _seekable(path: str | Path, kind: FileKind, limits: ReadLimits) -> Iterator[str]:
    """Columnar formats need random access: a compressed file is decompressed to a temporary
    file first, after its first bytes were checked, and never past the decompressed limit."""
    if kind.compression is None:
        with open(path, "rb") as handle:
            _check_magic(path, kind, handle.read(8))
        if Path(path).stat().st_size > limits.max_decompressed_bytes:
            raise LimitReached(path, None, None, limits.too_large())
        yield str(path)
        return
    with tempfile.NamedTemporaryFile(suffix=".columnar") as tmp:
        try:
            with open_binary(path, kind.compression, limits=limits) as raw:
                head = raw.read(8)
                _check_magic(path, kind, head)
                tmp.write(head)
                _copy_keeping_disk_reserve(raw, tmp)
        except RecordError as exc:  # a limit (no file yet), or the signature's error
            raise exc.at(path, None)
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise RecordError(path, None, None, f"cannot decompress: {exc}") from exc
        tmp.flush()
        yield tmp.name


def columnar_records(path: str | Path, kind: FileKind, limits: ReadLimits) -> Iterator[tuple[str, dict[str, Any]]]:
    for first_row, batch, sizes in columnar_batches(path, kind, limits):
        # Rows become Python objects about COLUMNAR_BATCH_BYTES at a time (a dictionary-encoded
        # batch may expand to far more than it holds), one row at least.
        ends = sizes.cumsum()
        start = 0
        while start < batch.num_rows:
            before = int(ends[start - 1]) if start else 0
            end = max(int(ends.searchsorted(before + COLUMNAR_BATCH_BYTES, side="right")), start + 1)
            for offset, record in enumerate(batch.slice(start, end - start).to_pylist()):
                yield f"row {first_row + start + offset}", record
            start = end


def columnar_batches(path: str | Path, kind: FileKind, limits: ReadLimits) -> Iterator[tuple[int, Any, Any]]:
    """``(first row number, record batch, each row's decoded bytes)`` of a Parquet or Arrow
    file, each batch checked before a Python object is made of its rows.

    Before anything is decoded, what the file says about itself is checked: its rows against
    ``max_records``, its decoded size against ``ReadLimits.decoded_budget`` (the decompressed
    limit, or the compression ratio times the file's size), and each row group (Parquet) or
    record batch (Arrow, whose compressed buffers carry their decoded length) against
    ``max_line_bytes`` times its rows: a group larger than that holds a record over the limit,
    and is refused without being decoded. Parquet is then read a row group at a time, in
    batches of about :data:`COLUMNAR_BATCH_BYTES`, cut further where a dictionary or delta
    encoding could expand (see ``_parquet_batches``); each batch's rows are measured (C speed)
    before they are materialised, so one huge cell is a record over ``max_line_bytes`` and a
    dictionary value repeated a million times counts what it expands to. A limit on the whole
    file is a :class:`LimitReached`."""
    import pyarrow as pa

    budget, too_big = limits.decoded_budget(os.stat(path).st_size)
    with _seekable(path, kind, limits) as local:
        try:
            if kind.format == "parquet":
                batches = _parquet_batches(path, local, limits, budget, too_big)
            else:
                batches = _arrow_batches(path, local, limits, budget, too_big)
            row = 0
            decoded = 0
            while True:
                try:
                    batch = next(batches, None)
                except (pa.ArrowException, OSError) as exc:
                    raise RecordError(
                        path, f"row {row + 1}", None, f"not a readable {kind.format} file ({exc})"
                    ) from exc
                if batch is None:
                    return
                if row + batch.num_rows > limits.max_records:
                    raise LimitReached(path, f"row {limits.max_records + 1}", None, limits.too_many_records())
                sizes = row_sizes(batch)
                if len(sizes):
                    over = (sizes > limits.max_line_bytes).nonzero()[0]
                    if len(over):  # the first row over the limit
                        raise RecordError(path, f"row {row + int(over[0]) + 1}", None, limits.line_too_long("record"))
                    decoded += int(sizes.sum()) + RECORD_CHARGE_BYTES * len(sizes)
                    if decoded > budget:
                        raise LimitReached(path, f"row {row + 1}", None, too_big)
                yield row + 1, batch, sizes
                row += batch.num_rows
        except RecordError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise RecordError(path, None, None, f"not a readable {kind.format} file ({exc})") from exc


def _rows_span(first: int, count: int) -> str:
    return f"row {first}" if count <= 1 else f"rows {first}-{first + count - 1}"


def _group_too_large(path: str | Path, limits: ReadLimits, first: int, rows: int, decoded: int) -> None:
    """A row group or batch of ``rows`` rows that decodes to more than ``max_line_bytes`` per
    row holds a record over the limit: refused before it is decoded."""
    if decoded > limits.max_line_bytes * max(rows, 1):
        raise RecordError(
            path,
            _rows_span(first, rows),
            None,
            f"{limits.line_too_long('record')}: the file says these rows decode to {decoded:,} bytes",
        )


def _parquet_batches(path: str | Path, local: str, limits: ReadLimits, budget: int, too_big: str) -> Iterator[Any]:
    import pyarrow.parquet as pq

    metadata = pq.ParquetFile(local).metadata
    if metadata.num_rows > limits.max_records:
        raise LimitReached(path, None, None, limits.too_many_records())
    groups = [metadata.row_group(i) for i in range(metadata.num_row_groups)]
    # total_byte_size is what the row group's columns take uncompressed: at least what they decode to
    # (a dictionary or a run-length encoding decodes to more, which the batches' sizes count).
    if sum(group.total_byte_size for group in groups) + RECORD_CHARGE_BYTES * metadata.num_rows > budget:
        raise LimitReached(path, None, None, too_big)
    first = 1
    for group in groups:
        _group_too_large(path, limits, first, group.num_rows, group.total_byte_size)
        first += group.num_rows
    # A dictionary-encoded or DELTA_BYTE_ARRAY text column decodes to more than it stores (a
    # value repeated on every row). A top-level one holds one value a row, at most its
    # dictionary page (or, delta-encoded, its column chunk) uncompressed: batches are cut so
    # that that many bytes a row stay within COLUMNAR_DECODE_MAX_BYTES, and each batch's rows
    # are measured before any becomes a Python object. A row of a list may hold a value any number
    # of times, so a text leaf inside a list or struct stored with a dictionary is read
    # dictionary-encoded: the value is held once and its expansion is what the rows measure.
    top_level = set(pq.ParquetFile(local).schema_arrow.names)
    keep_dictionary: set[str] = set()
    largest_value = [0] * len(groups)
    with open(local, "rb") as handle:
        for index, group in enumerate(groups):
            for position in range(group.num_columns):
                column = group.column(position)
                if column.physical_type != "BYTE_ARRAY":
                    continue
                bound = 0
                if column.has_dictionary_page:
                    if column.path_in_schema not in top_level:
                        keep_dictionary.add(column.path_in_schema)
                    else:
                        page = page_uncompressed_size(handle, column.dictionary_page_offset)
                        bound = page if page is not None else column.total_uncompressed_size
                if "DELTA_BYTE_ARRAY" in column.encodings:
                    bound = max(bound, column.total_uncompressed_size)
                largest_value[index] = max(largest_value[index], bound)
    parquet = pq.ParquetFile(local, read_dictionary=sorted(keep_dictionary) or None)
    for index, group in enumerate(groups):
        per_row = max(group.total_byte_size // max(group.num_rows, 1), 1)
        worst = max(largest_value[index], 1)
        rows = max(1, min(COLUMNAR_BATCH_ROWS, COLUMNAR_BATCH_BYTES // per_row, COLUMNAR_DECODE_MAX_BYTES // worst))
        yield from parquet.iter_batches(batch_size=rows, row_groups=[index])


def _arrow_batches(path: str | Path, local: str, limits: ReadLimits, budget: int, too_big: str) -> Iterator[Any]:
    import pyarrow as pa

    messages = ipc_decoded_sizes(local)
    rows_in_file = sum(rows or 0 for rows, _ in messages)
    if rows_in_file > limits.max_records:
        raise LimitReached(path, None, None, limits.too_many_records())
    if sum(decoded for _, decoded in messages) + RECORD_CHARGE_BYTES * rows_in_file > budget:
        raise LimitReached(path, None, None, too_big)
    first = 1
    for rows, decoded in messages:
        if rows is not None:  # a record batch (None: a dictionary)
            _group_too_large(path, limits, first, rows, decoded)
            first += rows
    with pa.memory_map(local, "r") as source:
        try:
            reader = pa.ipc.open_file(source)
        except pa.ArrowInvalid:
            source.seek(0)
            yield from pa.ipc.open_stream(source)
            return
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)
