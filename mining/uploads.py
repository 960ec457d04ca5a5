"""Files uploaded through the web pages (corpora, study items): where they are kept and
whether they are imported in the request or by a Celery worker.

An upload is streamed to its own folder under ``VAR_DIR/uploads/<kind>/`` (Django has
already spooled a large one to a temporary file, never to memory), a job row records it,
and the import runs at once only when the file is small: its size *and* the size it
decodes to are at most ``UPLOAD_BACKGROUND_MIN_BYTES`` and it holds at most
``UPLOAD_BACKGROUND_MIN_RECORDS`` records. Anything larger goes to a worker, so a web worker
never spends more than a small file's worth of work on an upload, however well it
compresses. The decoded size is measured, never guessed from the stored size
(``core.record_reader.decodes_beyond``): a compressed text file by decompressing at most one
byte more than the threshold (its lines counted on the way, blank ones too); a Parquet or
Arrow file, whose columns are compressed inside it, from its metadata and its batches'
sizes, with nothing made into Python objects. Used by corpus uploads (``mining.corpus_services``) and study item
uploads (``annotate.studies.imports``)."""

from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage
from django.utils.text import get_valid_filename

from core.record_reader import decodes_beyond

# Stored names are <32 hex>/<name>; a name is cut to keep the whole within the 500
# characters of the job rows' file_name columns (browsers send at most 255 anyway).
MAX_STORED_NAME = 200


def upload_storage(kind: str) -> FileSystemStorage:
    """Where uploads of one kind are kept: ``VAR_DIR/uploads/<kind>``."""
    return FileSystemStorage(location=Path(settings.VAR_DIR) / "uploads" / kind)


def upload_save(storage: FileSystemStorage, upload: File) -> str:
    """Store ``upload`` in a folder of its own under its (sanitised) original name, whose
    suffixes say its format; returns the stored name."""
    original = get_valid_filename(Path(upload.name or "upload").name) or "upload"
    if len(original) > MAX_STORED_NAME:
        suffixes = "".join(Path(original).suffixes[-2:])[:40]
        original = original[: MAX_STORED_NAME - len(suffixes)] + suffixes
    return storage.save(f"{uuid.uuid4().hex}/{original}", upload)


def upload_delete(storage: FileSystemStorage, name: str) -> None:
    """Remove a stored upload (``upload_save``'s name) and its own folder once that is empty;
    the folder of the kind's uploads stays."""
    storage.delete(name)
    folder = Path(name).parent
    if folder.parts:  # <32 hex>/, never the storage's own folder
        try:
            Path(storage.path(str(folder))).rmdir()
        except OSError:  # gone already, or not empty
            pass


def upload_runs_in_background(path: str | Path) -> bool:
    """True when the stored upload is too large to import in the request: it decodes to more
    than ``UPLOAD_BACKGROUND_MIN_BYTES`` or holds more than ``UPLOAD_BACKGROUND_MIN_RECORDS``
    records (lines of a text file)."""
    return Path(path).stat().st_size > settings.UPLOAD_BACKGROUND_MIN_BYTES or decodes_beyond(
        path, settings.UPLOAD_BACKGROUND_MIN_BYTES, max_records=settings.UPLOAD_BACKGROUND_MIN_RECORDS
    )
