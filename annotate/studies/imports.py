"""Studies created from an uploaded items file: at once when the file is small, by a Celery
worker when it is large.

The upload mechanism is the corpus upload's (``mining/uploads.py``): the file is stored under
``VAR_DIR/uploads/studies``; the study is created in the request only when the file and what
it decompresses to are at most ``UPLOAD_BACKGROUND_MIN_BYTES`` and it holds at most
``UPLOAD_BACKGROUND_MIN_RECORDS`` items (and the stored file is removed); otherwise a ``StudyImport`` row records the file with the form's settings, the
task ``annotate.study_import_run`` creates the study, and the import's page shows its status
and, when it fails, every file-line-field problem. The row ends ``done`` (with its study) or
``failed`` (with its problems), and a failure creates nothing. A worker killed in the middle
of an import (having created nothing) stops its heartbeat, and the import's page or API
settles the row ``failed`` (``study_imports_settle_stalled``, core/heartbeats.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.core.files import File
from django.db import transaction
from django.utils import timezone

from annotate.errors import AnnotateError
from annotate.models import Study, StudyImport
from annotate.studies.item_sources import study_items_gather
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings, study_settings_from
from core.heartbeats import import_run, stalled_settle
from core.record_files import RecordError
from mining.models import CorpusImportStatus as ImportStatus
from mining.uploads import upload_delete, upload_runs_in_background, upload_save, upload_storage

# The heartbeat key prefix of a running import (core/heartbeats.py).
STUDY_IMPORT_HEARTBEAT = "study-import"

logger = logging.getLogger(__name__)

STORAGE_KIND = "studies"


def study_upload_storage():
    """Where uploaded item files wait for their import: ``VAR_DIR/uploads/studies``."""
    return upload_storage(STORAGE_KIND)


def study_settings_as_json(settings: StudySettings) -> dict[str, Any]:
    data = asdict(settings)
    if data.get("payment_per_item") is not None:
        data["payment_per_item"] = str(data["payment_per_item"])
    return data


def study_settings_from_json(data: dict[str, Any]) -> StudySettings:
    data = dict(data)
    if data.get("payment_per_item") is not None:
        data["payment_per_item"] = Decimal(data["payment_per_item"])
    return StudySettings(**data)


def study_create_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``options`` of a new study (``study_create_from_sources``, ``study_import_queue``)
    from the values of the New study page, the API or ``manage.py create_study``, by their
    names: name, kind, instructions, slug, judge, n_judged, seed, topics, models, judge_runs,
    and ``StudySettings``' fields (mapped by ``study_settings_from``)."""
    return {
        "name": values["name"],
        "kind": values["kind"],
        "instructions": values.get("instructions") or "",
        "slug": values.get("slug") or "",
        "judge": values.get("judge") or "",
        "n_judged": values.get("n_judged"),
        "seed": values.get("seed") or 0,
        "topics": list(values.get("topics") or []),
        "models": list(values.get("models") or []),
        "judge_runs": list(values.get("judge_runs") or []),
        "settings": study_settings_as_json(study_settings_from(values)),
    }


def study_create_from_sources(
    *,
    options: dict[str, Any],
    file_path: str | Path | None = None,
    file_name: str | None = None,
    created_by: Any = None,
) -> Study:
    """Gather the items (``study_items_gather``) and create the study (``study_create``)
    from the ``options`` of the New study page, the API or ``manage.py create_study``: name, kind, instructions, slug, judge, n_judged, seed,
    optionally topics, models and judge_runs (the API's selection), and settings
    (``study_settings_as_json``)."""
    items = study_items_gather(
        kind=options["kind"],
        judge=options.get("judge"),
        n_judged=options.get("n_judged"),
        seed=options.get("seed") or 0,
        file_path=file_path,
        file_name=file_name,
        topics=options.get("topics"),
        models=options.get("models"),
        judge_runs=options.get("judge_runs"),
    )
    return study_create(
        name=options["name"],
        kind=options["kind"],
        items=items,
        instructions=options.get("instructions") or None,
        slug=options.get("slug") or None,
        created_by=created_by,
        settings=study_settings_from_json(options.get("settings") or {}),
    )


@dataclass(frozen=True)
class StoredUpload:
    name: str  # in the uploads storage
    path: str
    original_name: str
    size_bytes: int
    background: bool  # too large to read in the request


def study_upload_store(upload: File) -> StoredUpload:
    """Stream ``upload`` to ``VAR_DIR/uploads/studies`` and say whether it is too large (in
    size or once decompressed) to be read in the request."""
    storage = study_upload_storage()
    stored = upload_save(storage, upload)
    path = storage.path(stored)
    return StoredUpload(
        name=stored,
        path=path,
        original_name=Path(upload.name or "upload").name[:500],
        size_bytes=upload.size or 0,
        background=upload_runs_in_background(path),
    )


def study_upload_discard(stored: StoredUpload) -> None:
    """Remove a stored upload read in the request (and its folder)."""
    upload_delete(study_upload_storage(), stored.name)


def study_import_queue(*, stored: StoredUpload, options: dict[str, Any], created_by: Any = None) -> StudyImport:
    """Record a stored upload and send it to a worker once the row is committed."""
    from annotate.tasks import study_import_run_task

    with transaction.atomic():
        job = StudyImport.objects.create(
            study_name=str(options.get("name", ""))[:200],
            kind=str(options.get("kind", ""))[:40],
            file_name=stored.name,
            original_name=stored.original_name,
            size_bytes=stored.size_bytes,
            options=options,
            created_by=created_by if getattr(created_by, "pk", None) else None,
        )
        transaction.on_commit(lambda: study_import_run_task.delay(job.pk))
    return job


def upload_problem_lines(exc: RecordError, original_name: str) -> list[str]:
    """An items file's bad lines as the page, the API and the import's status page list them."""
    lines = [f"{original_name}, {problem}" for problem in exc.problems]
    if exc.more:
        lines.append(f"... and {exc.more} more bad lines")
    return lines


@dataclass(frozen=True)
class StudyUploadOutcome:
    """What the New study page or the API started: the study, or the import a worker runs."""

    study: Study | None = None
    job: StudyImport | None = None


def study_create_from_upload(*, options: dict[str, Any], upload: File | None, created_by: Any) -> StudyUploadOutcome:
    """The New study page's and the API's one path: an upload too large to read in the request
    is stored for a worker (``job``); otherwise the study is created now from the upload and/or
    the judged generations the options name, and the stored file is removed either way. Bad
    lines of the file raise ``RecordError`` (``upload_problem_lines`` lists them); other
    refusals raise ``AnnotateError``; nothing is created then."""
    stored = study_upload_store(upload) if upload else None
    if stored is not None and stored.background:
        return StudyUploadOutcome(job=study_import_queue(stored=stored, options=options, created_by=created_by))
    try:
        study = study_create_from_sources(
            options=options,
            file_path=stored.path if stored else None,
            file_name=upload.name if upload else None,
            created_by=created_by,
        )
    finally:
        if stored is not None:
            study_upload_discard(stored)
    return StudyUploadOutcome(study=study)


def _problem_lines(exc: Exception, original_name: str) -> list[str]:
    if isinstance(exc, RecordError):
        return upload_problem_lines(exc, original_name)
    if isinstance(exc, AnnotateError) and exc.errors:
        return [f"{error.field}: {error.message}" for error in exc.errors]
    return [str(getattr(exc, "message", exc))]


def study_import_run(*, study_import_id: int) -> StudyImport:
    """Create the study of a stored upload and record the outcome on the row."""
    return import_run(StudyImport, study_import_id, _study_import_work, key_prefix=STUDY_IMPORT_HEARTBEAT)


def _study_import_work(job: StudyImport) -> None:
    storage = study_upload_storage()
    status, problems, error, study = ImportStatus.FAILED, [], "", None
    try:
        study = study_create_from_sources(
            options=job.options,
            file_path=storage.path(job.file_name),
            file_name=job.original_name,
            created_by=job.created_by,
        )
    except (RecordError, AnnotateError) as exc:
        problems = _problem_lines(exc, job.original_name)
        error = "The items file has bad lines" if isinstance(exc, RecordError) else "The study was not created"
        error += "; nothing was created."
    except Exception as exc:  # noqa: BLE001 - the row must never stay "running"
        logger.exception("study import %s stopped on an unexpected error", job.pk)
        error = (
            f"The import stopped on an unexpected error ({exc.__class__.__name__}); nothing was created "
            "(the server log has the details)."
        )
    else:
        status = ImportStatus.DONE
        upload_delete(storage, job.file_name)  # the items are in the database now
    StudyImport.objects.filter(pk=job.pk).update(
        status=status, problems=problems, error=error, study=study, finished_at=timezone.now()
    )


def study_imports_settle_stalled() -> int:
    """Settle ``failed`` every running import whose worker is gone (core/heartbeats.py)."""
    return stalled_settle(StudyImport, key_prefix=STUDY_IMPORT_HEARTBEAT)
