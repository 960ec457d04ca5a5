"""Record files: what every reader and importer of them shares. The kind of a file (its format
and compression, from its name), the bounds it is read within (:class:`ReadLimits`) and the
one error, :class:`RecordError`. Pure Python, no Django.

The reader is split by feature: ``core/record_reader.py`` (:func:`~core.record_reader.iter_records`,
the entry every importer uses, and ``decodes_beyond``), ``core/record_streams.py`` (opening
and decompressing a file, bounded lines), ``core/record_text.py`` (JSONL and CSV, bounded
JSON), ``core/record_columnar.py`` (Parquet and Arrow), ``core/columnar_sizes.py`` (what a
columnar file decodes to, from its metadata) and ``core/record_output.py`` (writing a file
atomically).

Every file is hostile until read: :class:`ReadLimits` bounds a line (or a CSV record, or a
Parquet/Arrow row), the number of records, the bytes a file decompresses to, how many times
its own size a compressed file may decode to (each record counted as
:data:`RECORD_CHARGE_BYTES` more than its bytes) and the nesting of its JSON, and each bound
is checked *while* reading. The limits' defaults are those of the ``RECORD`` scope of
``config/settings/uploads.py`` (not imported: importing ``config`` starts Celery; a test
checks that the two agree); importers pass the configured ones.

Every problem, a limit reached included, is a :class:`RecordError` naming the file, the line
(or row) and the field. A record's checker, which knows neither the file nor the line,
raises one without them, and the reader's caller places it (:meth:`RecordError.at`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
# A compressed file may always decode to this much, whatever its compression ratio (small
# files of repetitive records compress far better than large ones).
RATIO_FLOOR_BYTES = 1 << 20
# Against the compression ratio, each line (or Parquet/Arrow row) of a compressed file counts
# this many bytes on top of its own: a record costs its importer far more than its bytes, so a
# file of a million two-byte records ("{}") is refused as the bomb it is.
RECORD_CHARGE_BYTES = 512


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
        return f"{what} longer than {size_text(self.max_line_bytes)} ({self.scope}_MAX_LINE_BYTES)"

    def too_many_records(self) -> str:
        return f"more than {self.max_records:,} records ({self.scope}_MAX_RECORDS)"

    def too_large(self) -> str:
        return (
            f"the file decompresses to more than {size_text(self.max_decompressed_bytes)} "
            f"({self.scope}_MAX_DECOMPRESSED_BYTES)"
        )

    def too_deep(self) -> str:
        return f"JSON nested more than {self.max_json_depth} levels deep ({self.scope}_MAX_JSON_DEPTH)"

    def too_compressed(self, stored_bytes: int) -> str:
        return (
            f"the file decompresses to more than {self.max_compression_ratio} times its size of "
            f"{size_text(stored_bytes)}, each record counted as {RECORD_CHARGE_BYTES} bytes more "
            f"({self.scope}_MAX_COMPRESSION_RATIO)"
        )


class LimitReached(RecordError):
    """A limit on the file as a whole was reached (the bytes it decodes to, its compression
    ratio, its number of records): the file is refused; nothing more of it is read."""


def size_text(n: int) -> str:
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
