"""Streaming readers for record files: JSONL, CSV, Parquet and Arrow/Feather, plain or
compressed (.gz, .zst, .bz2, .xz). Pure Python, no Django: used by procedure import
and (later) corpus import.

Every record comes out as ``(position, record)`` where ``position`` names where it was
read ("line 12" for text formats, "row 12" for columnar ones), so errors can say where.
Memory stays flat: text files are read line by line, columnar files batch by batch."""
from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".bz2": "bz2", ".xz": "xz"}
FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
}
COLUMNAR_BATCH_ROWS = 1000


class RecordFileError(ValueError):
    """A record file cannot be read; the message says which file and where."""

    def __init__(self, path: str | Path, position: str | None, message: str, field: str | None = None):
        self.path = str(path)
        self.position = position
        self.field = field
        self.detail = message
        where = self.path if position is None else f"{self.path}, {position}"
        if field:
            where = f"{where}, field '{field}'"
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class FileKind:
    format: str
    compression: str | None


def file_kind(path: str | Path) -> FileKind:
    """Format and compression from the file name, e.g. ``procs.jsonl.zst``."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    compression = None
    if suffixes and suffixes[-1] in COMPRESSIONS:
        compression = COMPRESSIONS[suffixes.pop()]
    if not suffixes or suffixes[-1] not in FORMATS:
        known = ", ".join(sorted(FORMATS))
        raise RecordFileError(path, None, f"unknown file type; expected one of {known}, optionally with .gz/.zst/.bz2/.xz")
    return FileKind(format=FORMATS[suffixes[-1]], compression=compression)


@contextmanager
def open_binary(path: str | Path, compression: str | None) -> Iterator[IO[bytes]]:
    """Open a file for reading, decompressing on the fly."""
    if compression is None:
        handle: IO[bytes] = open(path, "rb")
    elif compression == "gzip":
        handle = gzip.open(path, "rb")
    elif compression == "bz2":
        handle = bz2.open(path, "rb")
    elif compression == "xz":
        handle = lzma.open(path, "rb")
    elif compression == "zstd":
        handle = io.BufferedReader(_ZstdReader(open(path, "rb")), buffer_size=1 << 16)
    else:  # pragma: no cover - file_kind only returns the names above
        raise ValueError(compression)
    try:
        yield handle
    finally:
        handle.close()


@contextmanager
def open_binary_writer(path: str | Path) -> Iterator[IO[bytes]]:
    """Open a file for writing, compressing according to its suffix."""
    suffix = Path(path).suffix.lower()
    compression = COMPRESSIONS.get(suffix)
    if compression is None:
        handle: IO[bytes] = open(path, "wb")
    elif compression == "gzip":
        handle = gzip.open(path, "wb")
    elif compression == "bz2":
        handle = bz2.open(path, "wb")
    elif compression == "xz":
        handle = lzma.open(path, "wb")
    else:
        import zstandard

        raw = open(path, "wb")
        handle = zstandard.ZstdCompressor().stream_writer(raw, closefd=True)
    try:
        yield handle
    finally:
        handle.close()


class _ZstdReader(io.RawIOBase):
    """Streaming zstd decompression that reports a truncated file.

    zstandard's ``stream_reader`` ends quietly when the input stops in the middle of a
    frame; an importer must not mistake half a file for a whole one."""

    def __init__(self, raw: IO[bytes]):
        import zstandard

        self._zstd = zstandard
        self._raw = raw
        self._decompressor = zstandard.ZstdDecompressor().decompressobj()
        self._pending = b""
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            chunk = self._raw.read(1 << 16)
            if not chunk:
                if self._in_frame:
                    raise EOFError("zstd data ends in an incomplete frame (truncated file?)")
                return 0
            self._pending = self._feed(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def _feed(self, chunk: bytes) -> bytes:
        out = []
        while chunk:
            try:
                out.append(self._decompressor.decompress(chunk))
            except self._zstd.ZstdError as exc:
                raise EOFError(f"invalid zstd data ({exc})") from exc
            self._in_frame = not self._decompressor.eof
            chunk = self._decompressor.unused_data if self._decompressor.eof else b""
            if self._decompressor.eof:  # the next frame, if any, needs a fresh decompressor
                self._decompressor = self._zstd.ZstdDecompressor().decompressobj()
        return b"".join(out)

    def close(self) -> None:
        self._raw.close()
        super().close()


def iter_records(path: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(position, record)`` for every record of a file, streaming."""
    kind = file_kind(path)
    if kind.format == "jsonl":
        yield from _iter_jsonl(path, kind.compression)
    elif kind.format == "csv":
        yield from _iter_csv(path, kind.compression)
    else:
        yield from _iter_columnar(path, kind)


def _text_lines(path: str | Path, compression: str | None) -> Iterator[tuple[int, str]]:
    with open_binary(path, compression) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        line_no = 0
        try:
            for line_no, line in enumerate(text, start=1):
                yield line_no, line
        except UnicodeDecodeError as exc:
            raise RecordFileError(path, f"line {line_no + 1}", f"not valid UTF-8 ({exc.reason})") from exc
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise RecordFileError(path, f"line {line_no + 1}", f"cannot decompress: {exc}") from exc


def _iter_jsonl(path: str | Path, compression: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
    for line_no, line in _text_lines(path, compression):
        if not line.strip():
            continue
        position = f"line {line_no}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordFileError(path, position, f"invalid JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(record, dict):
            raise RecordFileError(path, position, f"expected a JSON object, got {type(record).__name__}")
        yield position, record


def _iter_csv(path: str | Path, compression: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
    with open_binary(path, compression) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        reader = csv.DictReader(text)
        previous_end = 1  # the header line
        try:
            for row in reader:
                position = f"line {previous_end + 1}"
                previous_end = reader.line_num
                if None in row:
                    raise RecordFileError(path, position, "more cells than header columns")
                yield position, dict(row)
        except csv.Error as exc:
            raise RecordFileError(path, f"line {reader.line_num}", f"malformed CSV ({exc})") from exc
        except UnicodeDecodeError as exc:
            raise RecordFileError(path, f"line {reader.line_num + 1}", f"not valid UTF-8 ({exc.reason})") from exc


@contextmanager
def _seekable(path: str | Path, compression: str | None) -> Iterator[str]:
    """Columnar formats need random access: decompress to a temporary file first."""
    if compression is None:
        yield str(path)
        return
    with tempfile.NamedTemporaryFile(suffix=".columnar") as tmp:
        try:
            with open_binary(path, compression) as raw:
                shutil.copyfileobj(raw, tmp, length=1 << 20)
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise RecordFileError(path, None, f"cannot decompress: {exc}") from exc
        tmp.flush()
        yield tmp.name


def _iter_columnar(path: str | Path, kind: FileKind) -> Iterator[tuple[str, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _seekable(path, kind.compression) as local:
        try:
            if kind.format == "parquet":
                batches = pq.ParquetFile(local).iter_batches(batch_size=COLUMNAR_BATCH_ROWS)
            else:
                batches = _arrow_batches(local)
        except (pa.ArrowInvalid, OSError) as exc:
            raise RecordFileError(path, None, f"not a readable {kind.format} file ({exc})") from exc
        row = 0
        for batch in batches:
            for record in batch.to_pylist():
                row += 1
                yield f"row {row}", record


def _arrow_batches(local: str):
    import pyarrow as pa

    source = pa.memory_map(local, "r")
    try:
        reader = pa.ipc.open_file(source)
        return (reader.get_batch(i) for i in range(reader.num_record_batches))
    except pa.ArrowInvalid:
        source.seek(0)
        return iter(pa.ipc.open_stream(source))


def output_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be written as an output file, or None."""
    target = Path(path)
    if target.is_dir():
        return f"{path}: is a folder"
    if not target.parent.is_dir():
        return f"{path}: the folder {target.parent} does not exist"
    return None


@contextmanager
def atomic_output(path: str | Path) -> Iterator[IO[bytes]]:
    """A binary handle whose content replaces ``path`` only when the block succeeds.

    The data goes to a temporary file beside ``path`` (compressed when the name ends in
    .gz/.zst/.bz2/.xz), is flushed to disk and renamed over ``path`` at the end; on any
    error the temporary file is removed and ``path`` is left as it was."""
    problem = output_problem(path)
    if problem:
        raise RecordFileError(path, None, problem.split(": ", 1)[1])
    target = Path(path)
    suffix = target.suffix.lower() if target.suffix.lower() in COMPRESSIONS else ""
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=f".partial{suffix}")
    os.close(fd)
    try:
        with open_binary_writer(temporary) as handle:
            yield handle
        synced = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(synced)
        finally:
            os.close(synced)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
