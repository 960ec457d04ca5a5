"""Writing record files: a file compressed according to its suffix, replacing its target
only once it is whole (:func:`atomic_output`). Pure Python, no Django."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from core.record_files import COMPRESSIONS, RecordError


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
