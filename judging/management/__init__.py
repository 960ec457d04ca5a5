"""Helpers shared by the judging app's management commands: reading JSONL input with
positions for error messages, and writing output files atomically."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from django.core.management.base import CommandError

from core.record_files import RecordError, file_kind
from core.record_output import atomic_output as record_output_atomic_output
from core.record_output import output_problem
from core.record_reader import iter_records


def jsonl_records(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(position, record)`` for every line of a JSONL file (plain or .gz/.zst/.bz2/.xz).

    Blank lines are skipped; ``position`` is ``"line N"`` (1-based). Raises
    ``CommandError`` for a missing file, another file type, bad JSON or bad UTF-8."""
    if not os.path.isfile(path):
        raise CommandError(f"{path}: no such file")
    try:
        kind = file_kind(path)
    except RecordError as exc:
        raise CommandError(str(exc)) from exc
    if kind.format != "jsonl":
        raise CommandError(f"{path}: expected a JSONL file (.jsonl, optionally .gz/.zst/.bz2/.xz)")
    try:
        yield from iter_records(path)
    except RecordError as exc:
        raise CommandError(str(exc)) from exc


def record_error(path: str, position: str, field: str | None, message: str) -> CommandError:
    """``<file>, line <n>, field '<field>': <problem>``, as every importer says it."""
    return CommandError(str(RecordError(path, position, field, message)))


@contextmanager
def atomic_output(path: str) -> Iterator[IO[bytes]]:
    """``core.record_output.atomic_output`` with a CommandError for an unusable path."""
    problem = output_problem(path)
    if problem:
        raise CommandError(problem)
    with record_output_atomic_output(path) as handle:
        yield handle
