"""Helpers shared by the judging app's management commands: reading JSONL input with
positions for error messages, and writing output files atomically."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from django.core.management.base import CommandError

from mining.record_files import COMPRESSIONS, RecordFileError, file_kind, iter_records, open_binary_writer


def jsonl_records(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(position, record)`` for every line of a JSONL file (plain or .gz/.zst/.bz2/.xz).

    Blank lines are skipped; ``position`` is ``"line N"`` (1-based). Raises
    ``CommandError`` for a missing file, another file type, bad JSON or bad UTF-8."""
    if not os.path.isfile(path):
        raise CommandError(f"{path}: no such file")
    try:
        kind = file_kind(path)
    except RecordFileError as exc:
        raise CommandError(str(exc)) from exc
    if kind.format != "jsonl":
        raise CommandError(f"{path}: expected a JSONL file (.jsonl, optionally .gz/.zst/.bz2/.xz)")
    try:
        yield from iter_records(path)
    except RecordFileError as exc:
        raise CommandError(str(exc)) from exc


def record_error(path: str, position: str, field: str | None, message: str) -> CommandError:
    """``<file>, line <n>, field '<field>': <problem>``, as every importer says it."""
    return CommandError(str(RecordFileError(path, position, message, field=field)))


@contextmanager
def atomic_output(path: str) -> Iterator[IO[bytes]]:
    """A binary handle whose content replaces ``path`` only when the block succeeds.

    The data goes to a temporary file beside ``path`` (compressed when the name ends in
    .gz/.zst/.bz2/.xz) and is renamed over it at the end; on any error the temporary file
    is removed and ``path`` is left as it was."""
    target = Path(path)
    if not target.parent.is_dir():
        raise CommandError(f"{path}: the folder {target.parent} does not exist")
    if target.is_dir():
        raise CommandError(f"{path}: is a folder")
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
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
