"""The one reader of record files: JSONL, CSV, Parquet and Arrow/Feather, plain or
compressed (.gz, .zst, .bz2, .xz), and its one error, :class:`RecordError`. Pure Python, no
Django: every importer uses it (procedures, corpora, generations and judgments, study items,
the agreement statistics' annotations, judgments and generations).

Every record comes out as ``(position, record)`` where ``position`` names where it was
read ("line 12" for text formats, "row 12" for columnar ones), so errors can say where.
Memory stays flat: text files are read line by line, columnar files batch by batch. A UTF-8
byte order mark at the very start of a JSONL or CSV file (Windows tools write one) is dropped,
once decompressed; one anywhere else is data (JSON refuses it).

Every file is hostile until read: :class:`ReadLimits` bounds a line (or a CSV record), the
number of records, the bytes a file decompresses to and the nesting of its JSON, and each
bound is checked *while* reading, so a 2 MB gzip holding one 2 GiB line fails after reading
one line's worth, and a compressed Parquet file is checked for its magic bytes before it is
decompressed to a temporary file, and never past the limit. JSON lines refuse ``NaN``,
``Infinity``, numbers that overflow to infinity and absurdly long integer literals; the
nesting is measured before parsing, so deep nesting is a line error, never a
``RecursionError``. The limits' defaults are those of the ``RECORD`` scope of
``config/settings/uploads.py`` (not imported: importing ``config`` starts Celery; a test
checks that the two agree); importers pass the configured ones.

Every problem, a limit reached included, is a :class:`RecordError` naming the file, the line
(or row) and the field. A record's checker, which knows neither the file nor the line,
raises one without them, and the reader's caller places it (:meth:`RecordError.at`)."""

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
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, overload

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
# The UTF-8 byte order mark: dropped at the start of a text file, nowhere else.
UTF8_BOM = b"\xef\xbb\xbf"


@overload
def _without_bom(first_line: bytes) -> bytes: ...
@overload
def _without_bom(first_line: str) -> str: ...
def _without_bom(first_line: bytes | str) -> bytes | str:
    """A text file's first line without the one UTF-8 byte order mark in front of it, if any."""
    if isinstance(first_line, bytes):
        return first_line.removeprefix(UTF8_BOM)
    return first_line.removeprefix("\ufeff")


class RecordError(ValueError):
    """What is wrong with a record file, or with one record in it, and where.

    ``path`` is the file (None while a record is checked on its own, before the reader's
    caller places the error with :meth:`at`); ``line`` the 1-based line, or the position as
    the reader gives it (``"line 12"``, ``"row 12"`` for columnar files), None for the file
    as a whole; ``field`` the record's field (``steps[2]``, ``failures[0].L1_steps``) or
    None; ``message`` what is wrong. The text reads
    ``<path>, line <n>, field '<field>': <message>``, leaving out what is not known."""

    def __init__(self, path: str | Path | None, line: int | str | None, field: str | None, message: str):
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        self.message = message
        self._several: list[RecordError] = []
        self.more = 0
        super().__init__(self._text())

    @classmethod
    def several(cls, path: str | Path, problems: Sequence[RecordError], more: int = 0) -> RecordError:
        """One error for a file with several bad records: ``problems`` (each placed at its
        line, without the file; the first gives the error its line, field and message) and
        ``more`` left unlisted. The text has one line per problem."""
        first = problems[0]
        error = cls(path, first.line, first.field, first.message)
        error._several = list(problems)
        error.more = more
        lines = [str(problem.at(path, problem.line)) for problem in problems]
        if more:
            lines.append(f"... and {more} more bad lines")
        error.args = ("\n".join(lines),)
        return error

    @property
    def problems(self) -> list[RecordError]:
        """Every problem this error reports, each without the file (its text starts with
        the line): several for :meth:`several`, else this one alone."""
        return self._several or [RecordError(None, self.line, self.field, self.message)]

    @property
    def position(self) -> str | None:
        """``"line 12"`` (or ``"row 12"``), None for the file as a whole."""
        if self.line is None:
            return None
        return f"line {self.line}" if isinstance(self.line, int) else self.line

    def _text(self) -> str:
        where = ", ".join(part for part in (self.path, self.position) if part)
        if self.field:
            where = f"{where}, field '{self.field}'" if where else f"field '{self.field}'"
        return f"{where}: {self.message}" if where else self.message

    def at(self, path: str | Path, line: int | str | None) -> RecordError:
        """This error placed in ``path`` at ``line`` (its own line when it has one); one
        that already names its file is returned as it is."""
        if self.path is not None:
            return self
        return RecordError(path, self.line if self.line is not None else line, self.field, self.message)


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
    def from_settings(cls, settings: Any, scope: str = "RECORD") -> ReadLimits:
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
        return (
            f"the file decompresses to more than {_size(self.max_decompressed_bytes)} "
            f"({self.scope}_MAX_DECOMPRESSED_BYTES)"
        )

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
        raise RecordError(
            path, None, None, f"unknown file type; expected one of {known}, optionally with .gz/.zst/.bz2/.xz"
        )
    return FileKind(format=FORMATS[suffixes[-1]], compression=compression)


@contextmanager
def open_binary(path: str | Path, compression: str | None, *, limits: ReadLimits | None = None) -> Iterator[IO[bytes]]:
    """Open a file for reading, decompressing on the fly. With ``limits``, reading past
    ``max_decompressed_bytes`` raises a :class:`RecordError` without a file (counted as the
    bytes come out of the decompressor, so a bomb stops at the limit)."""
    if compression is None:
        handle: IO[bytes] = open(path, "rb")
    elif compression == "gzip":
        # A GzipFile is a binary stream; typeshed does not make it an IO[bytes] (BZ2File and LZMAFile it does).
        handle = gzip.open(path, "rb")  # type: ignore[assignment]
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
            raise RecordError(None, None, None, self._limits.too_large())
        # Every stream open_binary wraps is buffered and has readinto; typeshed's IO[bytes] does not list it.
        size = self._inner.readinto(memoryview(buffer)[:allowed]) or 0  # type: ignore[attr-defined]
        self.count += size
        if self.count > self._limits.max_decompressed_bytes:
            raise RecordError(None, None, None, self._limits.too_large())
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
        handle = gzip.open(path, "wb")  # type: ignore[assignment]  # a binary stream, as above
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
                piece, self._input = self._input[: self.FEED_BYTES], self._input[self.FEED_BYTES :]
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
    (the defaults when None). Any problem, a limit included, is a ``RecordError``."""
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
            raise RecordError(path, position, None, limits.too_many_records())
        yield position, record


def bounded_lines(raw: IO[bytes], limits: ReadLimits, what: str = "line") -> Iterator[bytes]:
    """The lines of a binary stream, each read with a size limit: a line without an end
    within ``max_line_bytes`` is refused after reading that much, never more (a
    :class:`RecordError` without a file: the caller knows which line it was)."""
    while True:
        line = raw.readline(limits.max_line_bytes + 1)
        if not line:
            return
        if len(line) > limits.max_line_bytes and not line.endswith(b"\n"):
            raise RecordError(None, None, None, limits.line_too_long(what))
        yield line


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


def json_too_deep(text: str, max_depth: int) -> bool:
    """Whether the JSON text nests deeper than ``max_depth``, measured without parsing it.
    Counting brackets is cheap; the exact (string-aware) depth is measured only when there
    are enough of them to matter."""
    return text.count("[") + text.count("{") > max_depth and nesting_depth(text) > max_depth


def json_loads_bounded(text: str, max_depth: int | ReadLimits) -> Any:
    """Parse one JSON value from an untrusted file: nesting deeper than ``max_depth`` (measured
    before parsing), NaN, Infinity, overflowing numbers and overlong integers are refused with
    a :class:`RecordError` without a file whose message says why. Given the ``ReadLimits``,
    the nesting's message names the setting to raise."""
    if isinstance(max_depth, ReadLimits):
        depth, too_deep = max_depth.max_json_depth, max_depth.too_deep()
    else:
        depth, too_deep = max_depth, f"JSON nested more than {max_depth} levels deep"
    if json_too_deep(text, depth):
        raise RecordError(None, None, None, too_deep)
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        # Some of json's messages end in "at" themselves ("Invalid control character at").
        message = exc.msg.removesuffix(" at")
        raise RecordError(None, None, None, f"invalid JSON ({message} at column {exc.colno})") from exc
    except RecursionError:  # a backstop: the depth was measured above
        raise RecordError(None, None, None, too_deep) from None
    except ValueError as exc:
        raise RecordError(None, None, None, f"invalid JSON ({exc})") from exc


def _iter_jsonl(path: str | Path, compression: str | None, limits: ReadLimits) -> Iterator[tuple[str, dict[str, Any]]]:
    for line_no, record in iter_jsonl(path, limits, compression=compression):
        yield f"line {line_no}", record


def iter_jsonl(
    path: str | Path,
    limits: ReadLimits | None = None,
    *,
    compression: str | None = None,
    on_error: Callable[[RecordError], None] | None = None,
    objects_only: bool = True,
) -> Iterator[tuple[int, Any]]:
    """``(line number, record)`` for every JSON object of a JSONL file, whatever its name
    (``compression`` says how it is compressed), within ``limits``; see :func:`jsonl_records`."""
    limits = limits or ReadLimits()
    with open_binary(path, compression, limits=limits) as raw:
        yield from jsonl_records(bounded_lines(raw, limits), path, limits, on_error=on_error, objects_only=objects_only)


def jsonl_records(
    lines: Iterable[bytes | str],
    path: str | Path,
    limits: ReadLimits | None = None,
    *,
    on_error: Callable[[RecordError], None] | None = None,
    objects_only: bool = True,
) -> Iterator[tuple[int, Any]]:
    """``(line number, record)`` for every JSON object of the ``lines`` of a JSONL file (read
    from ``path``, or already in memory, ``path`` then naming where they came from), within
    ``limits``; blank lines are skipped. With ``objects_only=False`` any JSON value is a
    record (the caller checks its shape).

    Without ``on_error`` the first problem raises a :class:`RecordError`. With it, a line's
    own problem (not UTF-8, not JSON, not an object, nested too deep) is passed to it, placed
    at its line, and reading goes on; a problem of the file (a limit, a damaged compressed
    stream) still raises, and so does ``on_error``'s own exception."""
    limits = limits or ReadLimits()
    iterator = iter(lines)
    line_no = 0
    while True:
        try:
            line = next(iterator, None)
        except RecordError as exc:  # a limit: reading stops here
            raise exc.at(path, line_no + 1) from exc
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise RecordError(path, line_no + 1, None, f"cannot decompress: {exc}") from exc
        if line is None:
            return
        line_no += 1
        if line_no == 1:
            line = _without_bom(line)
        try:
            text = line.decode("utf-8") if isinstance(line, bytes) else line
            if not text.strip():
                continue
            record = json_loads_bounded(text, limits)
            if objects_only and not isinstance(record, dict):
                raise RecordError(None, None, None, f"expected a JSON object, got {type(record).__name__}")
        except UnicodeDecodeError as exc:
            error = RecordError(path, line_no, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
            if on_error is None:
                raise error from exc
            on_error(error)
            continue
        except RecordError as exc:
            if on_error is None:
                raise exc.at(path, line_no) from exc
            on_error(exc.at(path, line_no))
            continue
        yield line_no, record


def _iter_csv(path: str | Path, compression: str | None, limits: ReadLimits) -> Iterator[tuple[str, dict[str, Any]]]:
    # A quoted cell may span lines, so a record is bounded as a whole: the lines read since
    # the last record may not add up to more than max_line_bytes.
    if csv.field_size_limit() < limits.max_line_bytes:
        csv.field_size_limit(limits.max_line_bytes)
    with open_binary(path, compression, limits=limits) as raw:
        since_record = [0]

        def lines() -> Iterator[str]:
            for number, line in enumerate(bounded_lines(raw, limits, "record")):
                since_record[0] += len(line)
                if since_record[0] > limits.max_line_bytes:
                    raise RecordError(None, None, None, limits.line_too_long("record"))
                yield (_without_bom(line) if number == 0 else line).decode("utf-8")

        reader = csv.DictReader(lines())
        previous_end = 1  # the header line
        try:
            for row in reader:
                since_record[0] = 0
                position = f"line {previous_end + 1}"
                previous_end = reader.line_num
                if None in row:
                    raise RecordError(path, position, None, "more cells than header columns")
                yield position, dict(row)
        except csv.Error as exc:
            raise RecordError(path, reader.line_num, None, f"malformed CSV ({exc})") from exc
        except UnicodeDecodeError as exc:
            raise RecordError(
                path, reader.line_num + 1, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from exc
        except RecordError as exc:  # a limit (no file yet), or a record's error from above
            raise exc.at(path, reader.line_num + 1)
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise RecordError(path, reader.line_num + 1, None, f"cannot decompress: {exc}") from exc


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
                    f"decompressing needs more temporary disk space than is free ({_size(free)} free, "
                    f"{_size(TEMP_DISK_RESERVE_BYTES)} kept in reserve); upload the file uncompressed or free space",
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
            raise RecordError(path, None, None, limits.too_large())
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
            raise RecordError(path, None, None, f"not a readable {kind.format} file ({exc})") from exc
        row = 0
        decoded = 0
        while True:
            try:
                batch = next(batches, None)
            except (pa.ArrowException, OSError) as exc:
                raise RecordError(path, f"row {row + 1}", None, f"not a readable {kind.format} file ({exc})") from exc
            if batch is None:
                return
            # Columns may be compressed inside the file: what they decode to counts too.
            decoded += batch.nbytes
            if decoded > limits.max_decompressed_bytes:
                raise RecordError(path, f"row {row + 1}", None, limits.too_large())
            for record in batch.to_pylist():
                row += 1
                yield f"row {row}", record


def _check_parquet_metadata(path: str | Path, metadata: Any, limits: ReadLimits) -> None:
    """What the file says about itself, checked before any row is decoded."""
    if metadata.num_rows > limits.max_records:
        raise RecordError(path, None, None, limits.too_many_records())
    decoded = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    if decoded > limits.max_decompressed_bytes:
        raise RecordError(path, None, None, limits.too_large())


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
        raise RecordError(path, None, None, problem.split(": ", 1)[1])
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
