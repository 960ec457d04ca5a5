"""The text formats of record files: JSON lines and CSV, read line by line within the file's
limits, and the bounded JSON parser. Pure Python, no Django.

A UTF-8 byte order mark at the very start of a JSONL or CSV file (Windows tools write one) is
dropped, once decompressed; one anywhere else is data (JSON refuses it). JSON lines refuse
``NaN``, ``Infinity``, numbers that overflow to infinity and absurdly long integer literals;
the nesting is measured before parsing, so deep nesting is a line error, never a
``RecursionError``."""

from __future__ import annotations

import csv
import json
import lzma
import math
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, overload

from core.record_files import LimitReached, ReadLimits, RecordError
from core.record_streams import TEXT_BLANK, blank_runs, bounded_lines, bounded_readline, open_binary
from core.strict_json import nesting_depth

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


def jsonl_positions(
    path: str | Path, compression: str | None, limits: ReadLimits
) -> Iterator[tuple[str, dict[str, Any]]]:
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


def csv_records(path: str | Path, compression: str | None, limits: ReadLimits) -> Iterator[tuple[str, dict[str, Any]]]:
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
