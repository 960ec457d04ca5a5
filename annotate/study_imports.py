"""Studies created from an uploaded items file: at once when the file is small, by a Celery
worker when it is large.

The upload mechanism is the corpus upload's (``mining/uploads.py``): the file is stored under
``VAR_DIR/uploads/studies``; the study is created in the request only when the file and what
it decompresses to are at most ``UPLOAD_BACKGROUND_MIN_BYTES`` (and the stored file is
removed); otherwise a ``StudyImport`` row records the file with the form's settings, the
task ``annotate.study_import_run`` creates the study, and the import's page shows its status
and, when it fails, every file-line-field problem. The row ends ``done`` (with its study) or
``failed`` (with its problems), and a failure creates nothing. Only a worker killed in the
middle of an import leaves the row ``running`` (having created nothing)."""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.core.files import File
from django.db import transaction
from django.utils import timezone

from annotate.item_files import ItemFileError
from annotate.item_sources import items_from_file, items_from_judgments
from annotate.kinds.base import ItemSpec
from annotate.models import Study, StudyImport
from annotate.services import AnnotateError, StudySettings, study_create
from mining.models import CorpusImportStatus as ImportStatus
from mining.uploads import upload_runs_in_background, upload_save, upload_storage

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


def study_items_collect(
    *, kind: str, judge: str | None = None, n_judged: int | None = None, seed: int = 0,
    file_path: str | Path | None = None, file_name: str | None = None,
) -> list[ItemSpec]:
    """The items of a new study: judged generations and/or the lines of an items file.
    Raises ``ItemFileError`` (bad lines) or ``AnnotateError``."""
    items: list[ItemSpec] = []
    if judge:
        items += items_from_judgments(judge=judge, n=n_judged or 0, seed=seed or 0)
        if not items:
            raise AnnotateError(f"The judge {judge!r} has no judged generations with steps.")
    if file_path is not None:
        name = file_name or Path(file_path).name
        file_items = items_from_file(path=file_path, kind=kind, file_name=name)
        for spec in file_items:
            spec.source["file"] = name
        taken = {i.item_id for i in items}
        clash = [i.item_id for i in file_items if i.item_id in taken]
        if clash:
            raise AnnotateError(f"{name}: item_id {clash[0]!r} is also a sampled generation's id.")
        items += file_items
    return items


def study_create_from_sources(
    *, options: dict[str, Any], file_path: str | Path | None = None, file_name: str | None = None,
    created_by: Any = None,
) -> Study:
    """Collect the items (``study_items_collect``) and create the study (``study_create``)
    from the form's ``options``: name, kind, instructions, slug, judge, n_judged, seed and
    settings (``study_settings_as_json``)."""
    items = study_items_collect(kind=options["kind"], judge=options.get("judge"), n_judged=options.get("n_judged"),
                                seed=options.get("seed") or 0, file_path=file_path, file_name=file_name)
    return study_create(
        name=options["name"], kind=options["kind"], items=items, instructions=options.get("instructions") or None,
        slug=options.get("slug") or None, created_by=created_by,
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
    return StoredUpload(name=stored, path=path, original_name=Path(upload.name or "upload").name[:500],
                        size_bytes=upload.size or 0, background=upload_runs_in_background(path))


def study_upload_discard(stored: StoredUpload) -> None:
    """Remove a stored upload read in the request (and its folder)."""
    study_upload_storage().delete(stored.name)
    try:
        Path(stored.path).parent.rmdir()
    except OSError:
        pass


def study_import_queue(*, stored: StoredUpload, options: dict[str, Any], created_by: Any = None) -> StudyImport:
    """Record a stored upload and send it to a worker once the row is committed."""
    from annotate.tasks import study_import_run_task

    with transaction.atomic():
        job = StudyImport.objects.create(
            study_name=str(options.get("name", ""))[:200], kind=str(options.get("kind", ""))[:40],
            file_name=stored.name, original_name=stored.original_name, size_bytes=stored.size_bytes,
            options=options, created_by=created_by if getattr(created_by, "pk", None) else None,
        )
        transaction.on_commit(lambda: study_import_run_task.delay(job.pk))
    return job


def _problem_lines(exc: Exception, original_name: str) -> list[str]:
    if isinstance(exc, ItemFileError):
        lines = [f"{original_name}, {problem}" for problem in exc.problems]
        if exc.more:
            lines.append(f"... and {exc.more} more bad lines")
        return lines
    if isinstance(exc, AnnotateError) and exc.errors:
        return [f"{error.field}: {error.message}" for error in exc.errors]
    return [str(getattr(exc, "message", exc))]


def study_import_run(*, study_import_id: int) -> StudyImport:
    """Create the study of a stored upload and record the outcome on the row."""
    job = StudyImport.objects.select_related("created_by").get(pk=study_import_id)
    StudyImport.objects.filter(pk=job.pk).update(status=ImportStatus.RUNNING)
    storage = study_upload_storage()
    status, problems, error, study = ImportStatus.FAILED, [], "", None
    try:
        study = study_create_from_sources(options=job.options, file_path=storage.path(job.file_name),
                                          file_name=job.original_name, created_by=job.created_by)
    except (ItemFileError, AnnotateError) as exc:
        problems = _problem_lines(exc, job.original_name)
        error = ("The items file has bad lines" if isinstance(exc, ItemFileError) else "The study was not created")
        error += "; nothing was created."
    except Exception as exc:  # noqa: BLE001 - the row must never stay "running"
        logger.exception("study import %s stopped on an unexpected error", job.pk)
        error = (f"The import stopped on an unexpected error ({exc.__class__.__name__}); nothing was created "
                 "(the server log has the details).")
    else:
        status = ImportStatus.DONE
        storage.delete(job.file_name)  # the items are in the database now
    StudyImport.objects.filter(pk=job.pk).update(status=status, problems=problems, error=error, study=study,
                                                 finished_at=timezone.now())
    job.refresh_from_db()
    return job
