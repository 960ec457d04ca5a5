"""Opening a record file: decompressing it on the fly (.gz, .zst, .bz2, .xz) within its
limits, and reading its lines with a size limit. Pure Python, no Django.

A stream of :func:`open_binary` with limits counts every byte as it comes out of the
decompressor (blank lines and whitespace included) and, for a compressed file, charges each
line :data:`~core.record_files.RECORD_CHARGE_BYTES` more, so a bomb stops at the limit. Work
is counted, not just bytes: blank lines are skipped in runs at C speed (:func:`blank_runs`)
and their bytes count like any other, so a file of a billion newlines costs what
decompressing its first MiB costs."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

from core.record_files import RECORD_CHARGE_BYTES, LimitReached, ReadLimits, RecordError

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# Blank lines: whitespace only. Runs of them are skipped at C speed, never line by line.
TEXT_BLANK = b" \t\n\r\x0b\x0c"


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
