"""Corpora: importing documents from record files (``corpus_import``, with its report of duplicate
and bad rows), the upload page's path (``corpus_upload_create`` saves the files and queues
``corpus_import_run``, which imports them in one transaction with a heartbeat), and settling an
import whose worker died (``corpus_imports_settle_stalled``)."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.core.files import File
from django.core.files.storage import FileSystemStorage
from django.db import reset_queries, transaction
from django.utils import timezone

from core.app_errors import InvalidInput
from core.heartbeats import import_run, stalled_settle
from core.record_files import RecordError, file_kind
from core.record_reader import iter_records
from core.stored_values import StrictJSONError, check_stored_values
from mining.constants import (
    CORPUS_IMPORT_BATCH_SIZE,
    CORPUS_IMPORT_HEARTBEAT,
    CORPUS_REPORT_MAX_BAD_ROWS,
    CORPUS_REPORT_MAX_DUPLICATES,
)
from mining.document_records import DocumentFields, DocumentRecord, corpus_files, parse_document_record
from mining.models import Corpus, CorpusImport, CorpusImportStatus, Document, Topic, text_hash
from mining.procedure_services import TopicResolver, record_read_limits
from mining.uploads import upload_delete, upload_runs_in_background, upload_save, upload_storage

logger = logging.getLogger(__name__)


class CorpusImportFailed(Exception):
    """Bad rows without ``skip_bad``: nothing was imported. ``report`` lists them."""

    def __init__(self, report: CorpusImportReport):
        self.report = report
        super().__init__(f"{report.bad} bad row{'s' if report.bad != 1 else ''}; nothing was imported")


@dataclass
class CorpusImportReport:
    corpus: str
    files: list[str]
    skip_bad: bool
    rows: int = 0
    created: int = 0
    duplicates: int = 0
    duplicate_examples: list[str] = field(default_factory=list)
    bad: int = 0
    bad_rows: list[str] = field(default_factory=list)
    imported: bool = False

    def add_bad(self, message: str) -> None:
        self.bad += 1
        if len(self.bad_rows) < CORPUS_REPORT_MAX_BAD_ROWS:
            self.bad_rows.append(message)

    def add_duplicate(self, message: str) -> None:
        self.duplicates += 1
        if len(self.duplicate_examples) < CORPUS_REPORT_MAX_DUPLICATES:
            self.duplicate_examples.append(message)

    def as_dict(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        """The report as text, the same on the command line and the upload page."""
        head = (
            f"corpus {self.corpus!r}: {len(self.files)} file{'s' if len(self.files) != 1 else ''}, "
            f"{self.rows} rows read, {self.created} documents created, "
            f"{self.duplicates} duplicate ids skipped, {self.bad} bad rows"
            + (" skipped" if self.skip_bad and self.bad else "")
        )
        out = [head]
        if self.duplicates:
            out.append(f"duplicate ids (first {len(self.duplicate_examples)} of {self.duplicates}):")
            out += [f"  {line}" for line in self.duplicate_examples]
        if self.bad:
            out.append(f"bad rows (first {len(self.bad_rows)} of {self.bad}):")
            out += [f"  {line}" for line in self.bad_rows]
        if not self.imported:
            out.append("Nothing was imported: the file has bad rows (ask to skip bad rows to import the good ones).")
        return out


def corpus_import(
    *,
    name: str,
    path: str | Path,
    fields: DocumentFields = DocumentFields(),
    include: str | None = None,
    skip_bad: bool = False,
    create_topics: bool = False,
    description: str = "",
    fixed_topic: str = "",
) -> CorpusImportReport:
    """Import the documents of a file, or of every matching file below a folder, into the
    corpus ``name`` (created if needed), streaming, in batches of bulk inserts.

    Duplicate ids (within the import or already in the corpus) are counted and skipped.
    A bad row (missing or empty id or text, unknown topic) is counted and listed with
    its file, line and field. Without ``skip_bad`` one bad row means nothing is stored
    (the whole import is one transaction) and ``CorpusImportFailed`` carries the report;
    an unreadable file (malformed JSON or CSV, truncated compression) raises
    ``RecordError`` and stores nothing, with or without ``skip_bad``.

    ``fixed_topic`` (created if needed) is every document's topic, whatever its row
    says: the reference configurations' no-topics mode mines all documents as one topic."""
    name = _corpus_name_checked(name, description)
    files = corpus_files(path, include)
    if not files:
        raise InvalidInput(f"{path}: no record files" + (f" matching {include!r}" if include else ""))
    report = CorpusImportReport(corpus=name, files=[str(f) for f in files], skip_bad=skip_bad)
    with transaction.atomic():
        corpus, created = Corpus.objects.get_or_create(name=name, defaults={"description": description})
        if description and not created and corpus.description != description:
            corpus.description = description
            corpus.save(update_fields=["description"])
        stored_before = corpus.documents.order_by("-pk").values_list("pk", flat=True).first() or 0
        topics = TopicResolver(create=create_topics)
        the_topic = TopicResolver(create=True).resolve(fixed_topic) if fixed_topic else None
        batch: list[tuple[str, Document]] = []
        limits = record_read_limits()
        for file in files:
            for position, raw in iter_records(file, limits):
                report.rows += 1
                try:
                    record = parse_document_record(raw, fields)
                    _check_document_storable(record, fields)
                    topic = the_topic or _document_topic(record, topics, fields)
                except RecordError as exc:
                    report.add_bad(str(exc.at(file, position)))
                    continue
                batch.append(
                    (
                        f"{file}, {position}",
                        Document(
                            corpus=corpus,
                            doc_id=record.doc_id,
                            url=record.url,
                            topic=topic,
                            text=record.text,
                            text_hash=text_hash(record.text),
                        ),
                    )
                )
                if len(batch) >= CORPUS_IMPORT_BATCH_SIZE:
                    report.created += _documents_insert(corpus, batch, report, stored_before)
                    batch = []
                    reset_queries()
        report.created += _documents_insert(corpus, batch, report, stored_before)
        if report.bad and not skip_bad:
            report.created = 0
            raise CorpusImportFailed(report)  # leaving the block with an exception rolls everything back
        corpus.n_documents = corpus.documents.count()
        corpus.save(update_fields=["n_documents"])
        report.imported = True
    return report


def _check_document_storable(record: DocumentRecord, fields: DocumentFields) -> None:
    try:
        check_stored_values(
            Document,
            {"doc_id": record.doc_id, "url": record.url, "text": record.text},
            labels={"doc_id": fields.id, "url": fields.url, "text": fields.text},
        )
    except StrictJSONError as exc:
        raise RecordError(None, None, exc.field, exc.message) from exc


def _document_topic(record: DocumentRecord, topics: TopicResolver, fields: DocumentFields) -> Topic | None:
    if not record.topic:
        return None
    topic = topics.resolve(record.topic, label=fields.topic)
    if topic is None:
        raise RecordError(
            None,
            None,
            fields.topic,
            f"unknown topic {record.topic!r} (not a topic name or slug; create topics to accept it)",
        )
    return topic


def _documents_insert(
    corpus: Corpus, batch: list[tuple[str, Document]], report: CorpusImportReport, stored_before: int
) -> int:
    """Insert the batch's documents whose id is new to the corpus; report the others."""
    if not batch:
        return 0
    stored = dict(
        Document.objects.filter(corpus=corpus, doc_id__in={d.doc_id for _, d in batch}).values_list("doc_id", "pk")
    )
    fresh: dict[str, Document] = {}
    for where, document in batch:
        if document.doc_id in stored or document.doc_id in fresh:
            pk = stored.get(document.doc_id)
            origin = "already in the corpus" if pk is not None and pk <= stored_before else "earlier in this import"
            report.add_duplicate(f"{where}: id {document.doc_id!r} ({origin})")
            continue
        fresh[document.doc_id] = document
    Document.objects.bulk_create(list(fresh.values()), batch_size=CORPUS_IMPORT_BATCH_SIZE)
    return len(fresh)


def _corpus_name_checked(name: str, description: str) -> str:
    """The stripped name, or ``ValueError`` naming the field that cannot be stored."""
    name = (name or "").strip()
    if not name:
        raise InvalidInput("a corpus needs a name")
    try:
        check_stored_values(Corpus, {"name": name, "description": description})
    except StrictJSONError as exc:
        raise InvalidInput(f"{exc.field}: {exc.message}") from exc
    return name


def corpus_upload_storage() -> FileSystemStorage:
    """Where uploaded corpus files are kept: ``VAR_DIR/uploads/corpora``."""
    return upload_storage("corpora")


def corpus_upload_create(
    *,
    name: str,
    upload: File,
    fields: DocumentFields = DocumentFields(),
    skip_bad: bool = False,
    create_topics: bool = False,
    description: str = "",
    user: str = "",
) -> CorpusImport:
    """Store an uploaded file and import it: at once when it is small, else on a worker.

    The file goes to its own folder under ``VAR_DIR/uploads/corpora`` with its original
    name (the suffixes say its format). Files whose size and decoded size are at most
    ``UPLOAD_BACKGROUND_MIN_BYTES``, of at most ``UPLOAD_BACKGROUND_MIN_RECORDS`` records,
    are imported before this returns; larger ones are
    queued for the Celery task ``mining.corpus_import_run`` once the row is committed, so
    a web worker never spends more than a small file's worth of work on an upload
    (``mining/uploads.py``)."""
    original = Path(upload.name or "").name
    file_kind(original)  # raises RecordError for a file type we cannot read
    name = _corpus_name_checked(name, description)
    storage = corpus_upload_storage()
    stored = upload_save(storage, upload)
    background = upload_runs_in_background(storage.path(stored))
    options = {
        "fields": asdict(fields),
        "skip_bad": skip_bad,
        "create_topics": create_topics,
        "description": description,
    }
    with transaction.atomic():
        job = CorpusImport.objects.create(
            corpus_name=name,
            file_name=stored,
            original_name=original[:500],
            size_bytes=upload.size or 0,
            options=options,
            created_by=user[:150],
        )
        if background:
            from mining.tasks import corpus_import_run_task

            transaction.on_commit(lambda: corpus_import_run_task.delay(job.pk))
    if not background:
        job = corpus_import_run(corpus_import_id=job.pk)
    return job


def corpus_import_run(*, corpus_import_id: int) -> CorpusImport:
    """Run a queued upload's import and store its report on the row (done or failed).

    Whatever the file or the code does, the row ends ``done`` or ``failed``: a bad file
    gives its file-line-field error; anything unexpected is logged with its traceback and
    the row says so (the import's transaction has stored nothing). A worker killed in the
    middle (``kill -9``, a lost machine) stops its heartbeat: the next page that shows the row
    settles it ``failed`` (``corpus_imports_settle_stalled``); its transaction stored nothing,
    and the file is kept for a new upload."""
    return import_run(CorpusImport, corpus_import_id, _corpus_import_work, key_prefix=CORPUS_IMPORT_HEARTBEAT)


def _corpus_import_work(job: CorpusImport) -> None:
    storage = corpus_upload_storage()
    options = job.options or {}
    status, report, error, corpus = CorpusImportStatus.FAILED, {}, "", None
    try:
        result = corpus_import(
            name=job.corpus_name,
            path=storage.path(job.file_name),
            fields=DocumentFields(**options.get("fields", {})),
            skip_bad=bool(options.get("skip_bad")),
            create_topics=bool(options.get("create_topics")),
            description=options.get("description", ""),
        )
    except CorpusImportFailed as exc:
        report = exc.report.as_dict()
        error = str(exc)
    except (RecordError, ValueError, FileNotFoundError) as exc:
        error = str(exc).replace(storage.path(job.file_name), job.original_name)
    except Exception as exc:  # noqa: BLE001 - the row must never stay "running"
        logger.exception("corpus import %s stopped on an unexpected error", job.pk)
        error = (
            f"the import stopped on an unexpected error ({exc.__class__.__name__}); nothing was imported "
            "(the server log has the details)"
        )
    else:
        status, report = CorpusImportStatus.DONE, result.as_dict()
        corpus = Corpus.objects.get(name=job.corpus_name)
        upload_delete(storage, job.file_name)  # the documents are in the database now
    if report:
        local = storage.path(job.file_name)
        report["files"] = [job.original_name if f == local else f for f in report.get("files", [])]
        for key in ("bad_rows", "duplicate_examples"):
            report[key] = [line.replace(local, job.original_name) for line in report.get(key, [])]
    CorpusImport.objects.filter(pk=job.pk).update(
        status=status, report=report, error=error, corpus=corpus, finished_at=timezone.now()
    )


def corpus_imports_settle_stalled() -> int:
    """Settle ``failed`` every running upload whose worker is gone (core/heartbeats.py)."""
    return stalled_settle(CorpusImport, key_prefix=CORPUS_IMPORT_HEARTBEAT)


def corpus_import_report_lines(report: dict) -> list[str]:
    """A stored report (``CorpusImport.report``) as the same text lines the command prints."""
    if not report:
        return []
    return CorpusImportReport(**report).lines()
