"""Streaming readers for record files: JSONL, CSV, Parquet and Arrow/Feather, plain or
compressed (.gz, .zst, .bz2, .xz). Pure Python, no Django: used by procedure import
and (later) corpus import.

Every record comes out as ``(position, record)`` where ``position`` names where it was
read ("line 12" for text formats, "row 12" for columnar ones), so errors can say where.
Memory stays flat: text files are read line by line, columnar files batch by batch.

Every file is hostile until read: :class:`ReadLimits` bounds a line (or a CSV record), the
number of records, the bytes a file decompresses to and the nesting of its JSON, and each
bound is checked *while* reading, so a 2 MB gzip holding one 2 GiB line fails after reading
one line's worth, and a compressed Parquet file is checked for its magic bytes before it is
decompressed to a temporary file, and never past the limit. JSON lines refuse ``NaN``,
``Infinity``, numbers that overflow to infinity and absurdly long integer literals; the
nesting is measured before parsing, so deep nesting is a line error, never a
``RecursionError``. The limits' defaults are those of the ``RECORD`` scope of
``config/settings/uploads.py`` (not imported: importing ``config`` starts Celery; a test
checks that the two agree); importers pass the configured ones."""
from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from core.strict_json import nesting_depth

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
# The first bytes of each columnar format (Arrow's stream format starts with a continuation
# marker); a file that does not start with them is refused before anything is decompressed.
COLUMNAR_MAGIC = {"parquet": (b"PAR1",), "arrow": (b"ARROW1", b"\xff\xff\xff\xff")}
# Integer literals longer than this are refused in JSON lines (no column holds them).
MAX_INT_DIGITS = 30


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


class ReadLimitError(ValueError):
    """A limit of :class:`ReadLimits` was reached while reading."""


class JsonDepthError(ValueError):
    """A JSON value nests deeper than allowed."""


@dataclass(frozen=True)
class ReadLimits:
    """Bounds checked while a file is read; ``scope`` names the settings in messages.
    The defaults are the ``RECORD_MAX_...`` settings' defaults."""

    max_line_bytes: int = 8 << 20
    max_records: int = 5_000_000
    max_decompressed_bytes: int = 20 << 30
    max_json_depth: int = 64
    scope: str = "RECORD"

    @classmethod
    def from_settings(cls, settings: Any, scope: str = "RECORD") -> "ReadLimits":
        """The limits ``<scope>_MAX_...`` of a settings object (``django.conf.settings``)."""
        return cls(
            max_line_bytes=getattr(settings, f"{scope}_MAX_LINE_BYTES"),
            max_records=getattr(settings, f"{scope}_MAX_RECORDS"),
            max_decompressed_bytes=getattr(settings, f"{scope}_MAX_DECOMPRESSED_BYTES"),
            max_json_depth=getattr(settings, f"{scope}_MAX_JSON_DEPTH"),
            scope=scope,
        )

    def line_too_long(self, what: str = "line") -> str:
        return f"{what} longer than {_size(self.max_line_bytes)} ({self.scope}_MAX_LINE_BYTES)"

    def too_many_records(self) -> str:
        return f"more than {self.max_records:,} records ({self.scope}_MAX_RECORDS)"

    def too_large(self) -> str:
        return (f"the file decompresses to more than {_size(self.max_decompressed_bytes)} "
                f"({self.scope}_MAX_DECOMPRESSED_BYTES)")

    def too_deep(self) -> str:
        return f"JSON nested more than {self.max_json_depth} levels deep ({self.scope}_MAX_JSON_DEPTH)"


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n:,} bytes"


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
def open_binary(path: str | Path, compression: str | None, *, limits: ReadLimits | None = None) -> Iterator[IO[bytes]]:
    """Open a file for reading, decompressing on the fly. With ``limits``, reading past
    ``max_decompressed_bytes`` raises :class:`ReadLimitError` (counted as the bytes come out
    of the decompressor, so a bomb stops at the limit)."""
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
    if limits is not None:
        handle = io.BufferedReader(_BoundedReader(handle, limits), buffer_size=1 << 16)
    try:
        yield handle
    finally:
        handle.close()


class _BoundedReader(io.RawIOBase):
    """Counts the bytes read from ``inner`` and refuses to go past the decompressed limit."""

    def __init__(self, inner: IO[bytes], limits: ReadLimits):
        self._inner = inner
        self._limits = limits
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        allowed = self._limits.max_decompressed_bytes + 1 - self.count
        if allowed <= 0:
            raise ReadLimitError(self._limits.too_large())
        size = self._inner.readinto(memoryview(buffer)[:allowed]) or 0
        self.count += size
        if self.count > self._limits.max_decompressed_bytes:
            raise ReadLimitError(self._limits.too_large())
        return size

    def close(self) -> None:
        self._inner.close()
        super().close()


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
    frame; an importer must not mistake half a file for a whole one. The decompressor is fed
    small slices of input and stops feeding once enough output is waiting: zstd compresses a
    run of zeros about 32,000 to 1, so one large slice could expand to gigabytes at once."""

    FEED_BYTES = 512  # at most ~16 MiB of output per slice (zstd expands at most ~32,768 to 1)
    READ_BYTES = 1 << 16
    ENOUGH_PENDING = 1 << 20

    def __init__(self, raw: IO[bytes]):
        import zstandard

        self._zstd = zstandard
        self._raw = raw
        self._decompressor = zstandard.ZstdDecompressor().decompressobj()
        self._pending = b""
        self._input = b""
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            if not self._input:
                self._input = self._raw.read(self.READ_BYTES)
                if not self._input:
                    if self._in_frame:
                        raise EOFError("zstd data ends in an incomplete frame (truncated file?)")
                    return 0
            out = []
            waiting = 0
            while self._input and waiting < self.ENOUGH_PENDING:
                piece, self._input = self._input[:self.FEED_BYTES], self._input[self.FEED_BYTES:]
                data = self._feed(piece)
                out.append(data)
                waiting += len(data)
            self._pending = b"".join(out)
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


def iter_records(path: str | Path, limits: ReadLimits | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(position, record)`` for every record of a file, streaming, within ``limits``
    (the defaults when None). Any problem, a limit included, is a ``RecordFileError``."""
    limits = limits or ReadLimits()
    kind = file_kind(path)
    if kind.format == "jsonl":
        records = _iter_jsonl(path, kind.compression, limits)
    elif kind.format == "csv":
        records = _iter_csv(path, kind.compression, limits)
    else:
        records = _iter_columnar(path, kind, limits)
    count = 0
    for position, record in records:
        count += 1
        if count > limits.max_records:
            raise RecordFileError(path, position, limits.too_many_records())
        yield position, record


def bounded_lines(raw: IO[bytes], limits: ReadLimits, what: str = "line") -> Iterator[bytes]:
    """The lines of a binary stream, each read with a size limit: a line without an end
    within ``max_line_bytes`` is refused after reading that much, never more."""
    while True:
        line = raw.readline(limits.max_line_bytes + 1)
        if not line:
            return
        if len(line) > limits.max_line_bytes and not line.endswith(b"\n"):
            raise ReadLimitError(limits.line_too_long(what))
        yield line


def _text_lines(path: str | Path, compression: str | None, limits: ReadLimits) -> Iterator[tuple[int, str]]:
    with open_binary(path, compression, limits=limits) as raw:
        line_no = 0
        try:
            for line_no, line in enumerate(bounded_lines(raw, limits), start=1):
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise RecordFileError(path, f"line {line_no}", f"not valid UTF-8 ({exc.reason})") from exc
                yield line_no, text
        except ReadLimitError as exc:
            raise RecordFileError(path, f"line {line_no + 1}", str(exc)) from exc
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise RecordFileError(path, f"line {line_no + 1}", f"cannot decompress: {exc}") from exc


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses to infinity
        raise ValueError(f"the number {text} is too large to store")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer with more than {MAX_INT_DIGITS} digits")
    return int(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def json_loads_bounded(text: str, max_depth: int) -> Any:
    """Parse one JSON value from an untrusted file: nesting deeper than ``max_depth`` (measured
    before parsing), NaN, Infinity, overflowing numbers and overlong integers are refused with
    a ``ValueError`` whose message says why (:class:`JsonDepthError` for the nesting)."""
    # Counting brackets is cheap; the exact (string-aware) depth is measured only when
    # there are enough of them to matter.
    if text.count("[") + text.count("{") > max_depth and nesting_depth(text) > max_depth:
        raise JsonDepthError(f"JSON nested more than {max_depth} levels deep")
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg} at column {exc.colno})") from exc
    except RecursionError:  # a backstop: the depth was measured above
        raise JsonDepthError(f"JSON nested more than {max_depth} levels deep") from None
    except ValueError as exc:
        raise ValueError(f"invalid JSON ({exc})") from exc


def _iter_jsonl(path: str | Path, compression: str | None, limits: ReadLimits) -> Iterator[tuple[str, dict[str, Any]]]:
    for line_no, line in _text_lines(path, compression, limits):
        if not line.strip():
            continue
        position = f"line {line_no}"
        try:
            record = json_loads_bounded(line, limits.max_json_depth)
        except JsonDepthError as exc:
            raise RecordFileError(path, position, limits.too_deep()) from exc
        except ValueError as exc:
            raise RecordFileError(path, position, str(exc)) from exc
        if not isinstance(record, dict):
            raise RecordFileError(path, position, f"expected a JSON object, got {type(record).__name__}")
        yield position, record


def _iter_csv(path: str | Path, compression: str | None, limits: ReadLimits) -> Iterator[tuple[str, dict[str, Any]]]:
    # A quoted cell may span lines, so a record is bounded as a whole: the lines read since
    # the last record may not add up to more than max_line_bytes.
    if csv.field_size_limit() < limits.max_line_bytes:
        csv.field_size_limit(limits.max_line_bytes)
    with open_binary(path, compression, limits=limits) as raw:
        since_record = [0]

        def lines() -> Iterator[str]:
            for line in bounded_lines(raw, limits, "record"):
                since_record[0] += len(line)
                if since_record[0] > limits.max_line_bytes:
                    raise ReadLimitError(limits.line_too_long("record"))
                yield line.decode("utf-8")

        reader = csv.DictReader(lines())
        previous_end = 1  # the header line
        try:
            for row in reader:
                since_record[0] = 0
                position = f"line {previous_end + 1}"
                previous_end = reader.line_num
                if None in row:
                    raise RecordFileError(path, position, "more cells than header columns")
                yield position, dict(row)
        except csv.Error as exc:
            raise RecordFileError(path, f"line {reader.line_num}", f"malformed CSV ({exc})") from exc
        except UnicodeDecodeError as exc:
            raise RecordFileError(path, f"line {reader.line_num + 1}", f"not valid UTF-8 ({exc.reason})") from exc
        except ReadLimitError as exc:
            raise RecordFileError(path, f"line {reader.line_num + 1}", str(exc)) from exc
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise RecordFileError(path, f"line {reader.line_num + 1}", f"cannot decompress: {exc}") from exc


def _check_magic(path: str | Path, kind: FileKind, head: bytes) -> None:
    if not head.startswith(COLUMNAR_MAGIC[kind.format]):
        name = {"parquet": "a Parquet", "arrow": "an Arrow"}[kind.format]
        raise RecordFileError(path, None, f"not {name} file (it does not start with the format's signature)")


@contextmanager
def _seekable(path: str | Path, kind: FileKind, limits: ReadLimits) -> Iterator[str]:
    """Columnar formats need random access: a compressed file is decompressed to a temporary
    file first, after its first bytes were checked, and never past the decompressed limit."""
    if kind.compression is None:
        with open(path, "rb") as handle:
            _check_magic(path, kind, handle.read(8))
        if Path(path).stat().st_size > limits.max_decompressed_bytes:
            raise RecordFileError(path, None, limits.too_large())
        yield str(path)
        return
    with tempfile.NamedTemporaryFile(suffix=".columnar") as tmp:
        try:
            with open_binary(path, kind.compression, limits=limits) as raw:
                head = raw.read(8)
                _check_magic(path, kind, head)
                tmp.write(head)
                shutil.copyfileobj(raw, tmp, length=1 << 20)
        except ReadLimitError as exc:
            raise RecordFileError(path, None, str(exc)) from exc
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise RecordFileError(path, None, f"cannot decompress: {exc}") from exc
        tmp.flush()
        yield tmp.name


def _iter_columnar(path: str | Path, kind: FileKind, limits: ReadLimits) -> Iterator[tuple[str, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _seekable(path, kind, limits) as local:
        try:
            if kind.format == "parquet":
                parquet = pq.ParquetFile(local)
                _check_parquet_metadata(path, parquet.metadata, limits)
                batches = parquet.iter_batches(batch_size=COLUMNAR_BATCH_ROWS)
            else:
                batches = _arrow_batches(local)
        except (pa.ArrowException, OSError) as exc:
            raise RecordFileError(path, None, f"not a readable {kind.format} file ({exc})") from exc
        row = 0
        decoded = 0
        while True:
            try:
                batch = next(batches, None)
            except (pa.ArrowException, OSError) as exc:
                raise RecordFileError(path, f"row {row + 1}", f"not a readable {kind.format} file ({exc})") from exc
            if batch is None:
                return
            # Columns may be compressed inside the file: what they decode to counts too.
            decoded += batch.nbytes
            if decoded > limits.max_decompressed_bytes:
                raise RecordFileError(path, f"row {row + 1}", limits.too_large())
            for record in batch.to_pylist():
                row += 1
                yield f"row {row}", record


def _check_parquet_metadata(path: str | Path, metadata: Any, limits: ReadLimits) -> None:
    """What the file says about itself, checked before any row is decoded."""
    if metadata.num_rows > limits.max_records:
        raise RecordFileError(path, None, limits.too_many_records())
    decoded = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    if decoded > limits.max_decompressed_bytes:
        raise RecordFileError(path, None, limits.too_large())


def _arrow_batches(local: str):
    import pyarrow as pa

    source = pa.memory_map(local, "r")
    try:
        reader = pa.ipc.open_file(source)
        return (reader.get_batch(i) for i in range(reader.num_record_batches))
    except pa.ArrowInvalid:
        source.seek(0)
        return iter(pa.ipc.open_stream(source))


def decompresses_beyond(path: str | Path, limit: int) -> bool:
    """Whether the file holds more than ``limit`` bytes once decompressed, found by
    decompressing at most ``limit + 1`` bytes. A file that cannot be decompressed says
    False: reading it properly reports the problem with its position."""
    compression = COMPRESSIONS.get(Path(path).suffix.lower())
    if compression is None:
        return Path(path).stat().st_size > limit
    try:
        with open_binary(path, compression) as raw:
            remaining = limit + 1
            while remaining > 0:
                chunk = raw.read(min(remaining, 1 << 20))
                if not chunk:
                    return False
                remaining -= len(chunk)
            return True
    except (OSError, EOFError, lzma.LZMAError):
        return False


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
