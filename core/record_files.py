"""The one reader of record files: JSONL, CSV, Parquet and Arrow/Feather, plain or
compressed (.gz, .zst, .bz2, .xz), and its one error, :class:`RecordError`. Pure Python, no
Django: every importer uses it (procedures, corpora, generations and judgments, study items,
the agreement statistics' annotations, judgments and generations).

Every record comes out as ``(position, record)`` where ``position`` names where it was
read ("line 12" for text formats, "row 12" for columnar ones), so errors can say where.
Memory stays flat: text files are read line by line, columnar files batch by batch. A UTF-8
byte order mark at the very start of a JSONL or CSV file (Windows tools write one) is dropped,
once decompressed; one anywhere else is data (JSON refuses it).

Every file is hostile until read: :class:`ReadLimits` bounds a line (or a CSV record, or a
Parquet/Arrow row), the number of records, the bytes a file decompresses to, how many times
its own size a compressed file may decode to (each record counted as
:data:`RECORD_CHARGE_BYTES` more than its bytes) and the nesting of its JSON, and each bound
is checked *while* reading, so a 2 MB gzip holding one 2 GiB line fails after reading one
line's worth, and a compressed Parquet file is checked for its magic bytes before it is
decompressed to a temporary file, and never past the limit. Work is counted, not just bytes:
blank lines are skipped in runs at C speed (:func:`blank_runs`) and their bytes count like any
other, so a file of a billion newlines costs what decompressing its first MiB costs; Parquet
and Arrow files are checked from their metadata, and each batch's rows are measured before
they become Python objects (:func:`columnar_batches`). JSON lines refuse ``NaN``,
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
from typing import IO, TYPE_CHECKING, Any, overload

from core.strict_json import nesting_depth

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

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
# A compressed file may always decode to this much, whatever its compression ratio (small
# files of repetitive records compress far better than large ones).
RATIO_FLOOR_BYTES = 1 << 20
# Against the compression ratio, each line (or Parquet/Arrow row) of a compressed file counts
# this many bytes on top of its own: a record costs its importer far more than its bytes, so a
# file of a million two-byte records ("{}") is refused as the bomb it is.
RECORD_CHARGE_BYTES = 512
# Blank lines: whitespace only. Runs of them are skipped at C speed, never line by line.
TEXT_BLANK = b" \t\n\r\x0b\x0c"
# Columnar files are read this many decoded bytes at a time (at most COLUMNAR_BATCH_ROWS rows),
# and rows become Python objects this many bytes at a time.
COLUMNAR_BATCH_BYTES = 16 << 20
# The most a Parquet batch may decode to, reckoned from the metadata's worst case (each row
# holding its column's whole dictionary page): what a batch can cost in Arrow's memory before
# its rows are measured. (Reading a row group already holds its compressed columns.)
COLUMNAR_DECODE_MAX_BYTES = 256 << 20


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
        return type(self)(path, self.line if self.line is not None else line, self.field, self.message)


@dataclass(frozen=True)
class ReadLimits:
    """Bounds checked while a file is read; ``scope`` names the settings in messages.
    The defaults are the ``RECORD_MAX_...`` settings' defaults."""

    max_line_bytes: int = 8 << 20
    max_records: int = 5_000_000
    max_decompressed_bytes: int = 20 << 30
    max_json_depth: int = 64
    max_compression_ratio: int = 100
    scope: str = "RECORD"

    @classmethod
    def from_settings(cls, settings: Any, scope: str = "RECORD") -> ReadLimits:
        """The limits ``<scope>_MAX_...`` of a settings object (``django.conf.settings``)."""
        return cls(
            max_line_bytes=getattr(settings, f"{scope}_MAX_LINE_BYTES"),
            max_records=getattr(settings, f"{scope}_MAX_RECORDS"),
            max_decompressed_bytes=getattr(settings, f"{scope}_MAX_DECOMPRESSED_BYTES"),
            max_json_depth=getattr(settings, f"{scope}_MAX_JSON_DEPTH"),
            max_compression_ratio=getattr(settings, f"{scope}_MAX_COMPRESSION_RATIO"),
            scope=scope,
        )

    def decoded_budget(self, stored_bytes: int | None) -> tuple[int, str]:
        """The most bytes a file of ``stored_bytes`` on disk may decode to, and the message
        that refuses one more: ``max_decompressed_bytes``, or ``max_compression_ratio`` times
        its size when that is less (never less than :data:`RATIO_FLOOR_BYTES`). ``None``:
        a file read as it is stored (no ratio)."""
        if stored_bytes is not None:
            by_ratio = max(RATIO_FLOOR_BYTES, stored_bytes * self.max_compression_ratio)
            if by_ratio < self.max_decompressed_bytes:
                return by_ratio, self.too_compressed(stored_bytes)
        return self.max_decompressed_bytes, self.too_large()

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

    def too_compressed(self, stored_bytes: int) -> str:
        return (
            f"the file decompresses to more than {self.max_compression_ratio} times its size of "
            f"{_size(stored_bytes)}, each record counted as {RECORD_CHARGE_BYTES} bytes more "
            f"({self.scope}_MAX_COMPRESSION_RATIO)"
        )


class LimitReached(RecordError):
    """A limit on the file as a whole was reached (the bytes it decodes to, its compression
    ratio, its number of records): the file is refused; nothing more of it is read."""


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
        budget = limits.decoded_budget(None if compression is None else os.stat(path).st_size)
        charge = 0 if compression is None else RECORD_CHARGE_BYTES
        handle = io.BufferedReader(_BoundedReader(handle, *budget, charge), buffer_size=1 << 16)
    try:
        yield handle
    finally:
        handle.close()


class _BoundedReader(io.RawIOBase):
    """Counts every byte read from ``inner`` (blank lines and whitespace included), and
    ``record_charge`` for each line read (:func:`bounded_readline`), and refuses to go past
    ``budget`` (``ReadLimits.decoded_budget``) with ``message``."""

    def __init__(self, inner: IO[bytes], budget: int, message: str, record_charge: int = 0):
        self._inner = inner
        self._budget = budget
        self._message = message
        self.record_charge = record_charge
        self.count = 0

    def charge(self, size: int) -> None:
        """Count ``size`` more bytes against the budget (a record's own charge)."""
        self.count += size
        if self.count > self._budget:
            raise LimitReached(None, None, None, self._message)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        allowed = self._budget + 1 - self.count
        if allowed <= 0:
            raise LimitReached(None, None, None, self._message)
        # Every stream open_binary wraps is buffered and has readinto; typeshed's IO[bytes] does not list it.
        size = self._inner.readinto(memoryview(buffer)[:allowed]) or 0  # type: ignore[attr-defined]
        self.count += size
        if self.count > self._budget:
            raise LimitReached(None, None, None, self._message)
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
        self._taken = 0  # bytes of _pending already returned (never sliced off: that copies the rest)
        self._input = b""
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        while self._taken >= len(self._pending):
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
            self._taken = 0
        # A buffered reader hands a writable memoryview of bytes (format "B": its length is its size).
        target = memoryview(buffer)
        size = min(len(target), len(self._pending) - self._taken)
        target[:size] = memoryview(self._pending)[self._taken : self._taken + size]
        self._taken += size
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
            raise LimitReached(path, position, None, limits.too_many_records())
        yield position, record


def bounded_lines(
    raw: IO[bytes], limits: ReadLimits, what: str = "line", *, blank: bytes = b""
) -> Iterator[bytes | int]:
    """The lines of a binary stream, each read with a size limit: a line without an end
    within ``max_line_bytes`` is refused after reading that much, never more (a
    :class:`RecordError` without a file: the caller knows which line it was).

    With ``blank`` (the bytes a blank line is made of, e.g. :data:`TEXT_BLANK`), a blank line
    and the run of blank lines after it come out as their number (an ``int``) instead,
    skipped at C speed (:func:`blank_runs`): a file of a billion newlines costs what
    decompressing it costs, and its bytes still count against the decoded limits."""
    while True:
        line = bounded_readline(raw, limits, what)
        if not line:
            return
        if blank and line[:1] in blank and not line.strip(blank):  # a record's first byte is no blank
            yield 1
            yield from blank_runs(raw, blank)
            continue
        yield line


def bounded_readline(raw: IO[bytes], limits: ReadLimits, what: str = "line") -> bytes:
    """One line of ``raw`` (b"" at the end), refused past ``max_line_bytes`` (see
    :func:`bounded_lines`); a stream of :func:`open_binary` with limits charges it."""
    meter = getattr(raw, "raw", None)
    if isinstance(meter, _BoundedReader) and meter.record_charge:
        meter.charge(meter.record_charge)
    line = raw.readline(limits.max_line_bytes + 1)
    if len(line) > limits.max_line_bytes and not line.endswith(b"\n"):
        raise RecordError(None, None, None, limits.line_too_long(what))
    return line


def blank_runs(raw: IO[bytes], blank: bytes) -> Iterator[int]:
    """Consume the whole lines at the stream's position made only of the bytes ``blank``,
    saying how many as it goes (one count per buffer, so a limit reached in the middle of a
    run is placed near its line). ``raw`` must have ``peek`` (a buffered reader): each step
    looks at what is buffered, strips the run of blank bytes and consumes it up to its last
    newline, so the work per buffer is a few C calls, whatever the number of lines in it."""
    while True:
        data = raw.peek(1)  # type: ignore[attr-defined]  # every stream open_binary gives is buffered
        if not data:
            return
        run = len(data) - len(data.lstrip(blank))
        end = data.rfind(b"\n", 0, run) + 1  # after the run's last newline; 0 if it has none
        if end == 0:
            return  # the line goes on with something else, or past what is buffered
        raw.read(end)
        yield data.count(b"\n", 0, end)
        if run < len(data):
            return  # something other than blank follows in this buffer


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
        lines = bounded_lines(raw, limits, blank=TEXT_BLANK)
        yield from jsonl_records(lines, path, limits, on_error=on_error, objects_only=objects_only)


def jsonl_records(
    lines: Iterable[bytes | str | int],
    path: str | Path,
    limits: ReadLimits | None = None,
    *,
    on_error: Callable[[RecordError], None] | None = None,
    objects_only: bool = True,
) -> Iterator[tuple[int, Any]]:
    """``(line number, record)`` for every JSON object of the ``lines`` of a JSONL file (read
    from ``path``, or already in memory, ``path`` then naming where they came from), within
    ``limits``; blank lines are skipped (an ``int`` among the lines is a run of that many
    blank lines, from :func:`bounded_lines`). With ``objects_only=False`` any JSON value is a
    record (the caller checks its shape). Every line that costs a parse (a record, a bad line,
    a line of Unicode spaces) counts against ``max_records``, so bad lines reported through
    ``on_error`` cannot go on for ever either.

    Without ``on_error`` the first problem raises a :class:`RecordError`. With it, a line's
    own problem (not UTF-8, not JSON, not an object, nested too deep) is passed to it, placed
    at its line, and reading goes on; a problem of the file (a limit, a damaged compressed
    stream) still raises, and so does ``on_error``'s own exception."""
    limits = limits or ReadLimits()
    iterator = iter(lines)
    line_no = 0
    parsed = 0
    while True:
        try:
            line = next(iterator, None)
        except RecordError as exc:  # a limit: reading stops here
            raise exc.at(path, line_no + 1) from exc
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise RecordError(path, line_no + 1, None, f"cannot decompress: {exc}") from exc
        if line is None:
            return
        if isinstance(line, int):  # a run of blank lines
            line_no += line
            continue
        line_no += 1
        parsed += 1
        if parsed > limits.max_records:
            raise LimitReached(path, line_no, None, limits.too_many_records())
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
    # the last record may not add up to more than max_line_bytes. Blank lines between records
    # (whitespace only) are skipped in runs at C speed; inside a quoted cell a blank line is
    # data, so runs are skipped only where a record starts.
    if csv.field_size_limit() < limits.max_line_bytes:
        csv.field_size_limit(limits.max_line_bytes)
    with open_binary(path, compression, limits=limits) as raw:
        since_record = 0  # bytes of the record being read; 0 where a record starts
        line_no = 0  # lines read so far
        record_start = 1  # the line the record being read starts on

        def lines() -> Iterator[str]:
            nonlocal since_record, line_no, record_start
            while True:
                try:
                    line = bounded_readline(raw, limits, "record")
                except RecordError as exc:
                    raise exc.at(path, line_no + 1) from exc
                if not line:
                    return
                line_no += 1
                if since_record == 0 and line_no > 1 and line[:1] in TEXT_BLANK and not line.strip(TEXT_BLANK):
                    # A blank line where a record starts (after the header): the csv module
                    # would skip an empty one and make a record of empty cells of one of
                    # spaces; it and the blank lines after it are skipped here in bulk.
                    for skipped in blank_runs(raw, TEXT_BLANK):
                        line_no += skipped
                    continue
                if since_record == 0:
                    record_start = line_no
                since_record += len(line)
                if since_record > limits.max_line_bytes:
                    raise RecordError(path, line_no, None, limits.line_too_long("record"))
                try:
                    yield (_without_bom(line) if line_no == 1 else line).decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise RecordError(
                        path, line_no, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
                    ) from exc

        reader = csv.DictReader(lines())
        try:
            _ = reader.fieldnames  # the header, read now so that blank lines before the first record are skipped too
            since_record = 0
            for row in reader:
                position = f"line {record_start}"
                since_record = 0
                if None in row:
                    raise RecordError(path, position, None, "more cells than header columns")
                yield position, dict(row)
        except csv.Error as exc:
            raise RecordError(path, line_no, None, f"malformed CSV ({exc})") from exc
        except RecordError as exc:  # a limit (no file yet), or a record's error from above
            raise exc.at(path, line_no + 1)
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise RecordError(path, line_no + 1, None, f"cannot decompress: {exc}") from exc


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


def _iter_columnar(path: str | Path, kind: FileKind, limits: ReadLimits) -> Iterator[tuple[str, dict[str, Any]]]:
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
                sizes = _row_sizes(batch)
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


def _text_like(data_type: Any) -> bool:
    import pyarrow as pa

    return bool(
        pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_large_binary(data_type)
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
                        page = _page_uncompressed_size(handle, column.dictionary_page_offset)
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


def _page_uncompressed_size(handle: IO[bytes], offset: int | None) -> int | None:
    """The uncompressed size of the Parquet page at ``offset``, from its header (Thrift's
    compact protocol: PageHeader's fields 1-3 are i32s, type, uncompressed size and
    compressed size, each a one-byte field header and a zigzag varint); None if it does not
    read as one."""
    if not offset or offset < 0:
        return None
    handle.seek(offset)
    head = handle.read(32)
    position = 0
    values = []
    for _ in range(3):
        if position >= len(head) or head[position] != 0x15:  # field delta 1, type i32
            return None
        position += 1
        value = shift = 0
        while True:
            if position >= len(head) or shift > 35:
                return None
            byte = head[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        values.append((value >> 1) ^ -(value & 1))
    return values[1] if values[1] >= 0 else None


def _arrow_batches(path: str | Path, local: str, limits: ReadLimits, budget: int, too_big: str) -> Iterator[Any]:
    import pyarrow as pa

    messages = _ipc_decoded_sizes(local)
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


def _ipc_decoded_sizes(local: str) -> list[tuple[int | None, int]]:
    """``(rows, decoded bytes)`` of every record batch of an Arrow IPC file or stream (rows
    None for a dictionary batch), read from the messages' metadata: a compressed buffer
    starts with its decoded length, so nothing is decompressed to learn it."""
    import pyarrow as pa

    sizes: list[tuple[int | None, int]] = []
    with pa.memory_map(local, "r") as source:
        source.seek(8 if source.read(6) == b"ARROW1" else 0)
        reader = pa.ipc.MessageReader.open_stream(source)
        while True:
            try:
                message = reader.read_next_message()
            except StopIteration:
                return sizes
            if message.type not in ("record batch", "dictionary"):
                continue
            is_dictionary = message.type == "dictionary"
            rows, buffers, compressed = _ipc_batch_layout(message.metadata.to_pybytes(), is_dictionary)
            body = memoryview(message.body) if message.body is not None else memoryview(b"")
            decoded = 0
            for offset, length in buffers:
                if offset < 0 or length < 0 or offset + length > len(body):
                    raise ValueError("a buffer lies outside its message")
                if compressed and length >= 8:
                    prefix = int.from_bytes(body[offset : offset + 8], "little", signed=True)
                    decoded += length - 8 if prefix == -1 else prefix
                else:
                    decoded += length
            sizes.append((None if is_dictionary else rows, decoded))


def _ipc_batch_layout(meta: bytes, is_dictionary: bool) -> tuple[int, list[tuple[int, int]], bool]:
    """Rows, buffers ``(offset, length)`` and whether the body is compressed, from the
    flatbuffer of an IPC message (Arrow's format/Message.fbs: Message.header is a
    RecordBatch, or a DictionaryBatch whose ``data`` is one)."""

    def number(at: int, size: int, signed: bool = False) -> int:
        if at < 0 or at + size > len(meta):
            raise ValueError("damaged message metadata")
        return int.from_bytes(meta[at : at + size], "little", signed=signed)

    def table(at: int) -> tuple[int, int]:
        return at, at - number(at, 4, signed=True)

    def field(where: tuple[int, int], index: int) -> int | None:
        at, vtable = where
        slot = 4 + 2 * index
        if slot + 2 > number(vtable, 2):
            return None
        offset = number(vtable + slot, 2)
        return at + offset if offset else None

    def target(at: int | None) -> tuple[int, int]:
        if at is None:
            raise ValueError("damaged message metadata")
        return table(at + number(at, 4))

    batch = target(field(table(number(0, 4)), 2))  # Message.header
    if is_dictionary:
        batch = target(field(batch, 1))  # DictionaryBatch.data
    length_at = field(batch, 0)  # RecordBatch.length
    rows = number(length_at, 8, signed=True) if length_at is not None else 0
    buffers: list[tuple[int, int]] = []
    buffers_at = field(batch, 2)  # RecordBatch.buffers: [Buffer{offset: long, length: long}]
    if buffers_at is not None:
        vector = buffers_at + number(buffers_at, 4)
        count = number(vector, 4)
        if vector + 4 + 16 * count > len(meta):
            raise ValueError("damaged message metadata")
        for k in range(count):
            base = vector + 4 + 16 * k
            buffers.append((number(base, 8, signed=True), number(base + 8, 8, signed=True)))
    if rows < 0:
        raise ValueError("damaged message metadata")
    return rows, buffers, field(batch, 3) is not None  # RecordBatch.compression


def _row_sizes(batch: Any) -> Any:
    """What each row of a record batch decodes to, in bytes (a numpy array): text and binary
    by their length, dictionary values by the value each row points at, lists and structs by
    what they hold, fixed-width values by their width. Computed with Arrow's and numpy's
    kernels, without making a Python object of a row."""
    import numpy as np

    sizes = np.zeros(batch.num_rows, dtype=np.int64)
    for column in batch.columns:
        sizes += _value_sizes(column)
    return sizes


def _value_sizes(array: Any) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    count = len(array)
    data_type = array.type
    if pa.types.is_dictionary(data_type):
        values = _value_sizes(array.dictionary)
        if not len(values):
            return np.zeros(count, dtype=np.int64)
        indices = array.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        return np.where(array.is_valid().to_numpy(zero_copy_only=False), values[indices], 0)
    if _text_like(data_type):
        return pc.binary_length(array).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        child = array.flatten()
        sizes = np.full(count, 8, dtype=np.int64)
        if len(child):
            parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
            if len(parents) != len(child):  # not seen; spread what the values hold evenly rather than guess
                return sizes + int(_value_sizes(child).sum()) // max(count, 1)
            sizes += np.bincount(parents, weights=_value_sizes(child), minlength=count).astype(np.int64)
        return sizes
    if pa.types.is_struct(data_type):
        sizes = np.zeros(count, dtype=np.int64)
        for child in array.flatten():
            sizes += _value_sizes(child)
        return sizes
    try:
        width = max(data_type.bit_width // 8, 1)
    except ValueError:  # not a fixed-width type: its bytes spread evenly over its rows
        width = array.nbytes // max(count, 1)
    return np.full(count, width, dtype=np.int64)


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
