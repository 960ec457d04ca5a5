"""Writes of the mining app: topics and procedures (import, export), corpora, the bench/train split."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage
from django.db import reset_queries, transaction
from django.utils import timezone
from django.utils.text import slugify

from core.app_errors import InvalidInput
from core.heartbeats import import_run, stalled_settle
from core.record_files import (
    ReadLimits,
    RecordError,
    atomic_output,
    file_kind,
    iter_records,
    output_problem,
)
from core.stored_values import StrictJSONError, check_field_value, check_stored_values, max_length_of
from mining.constants import (
    BENCH_PER_TOPIC,
    CORPUS_IMPORT_BATCH_SIZE,
    CORPUS_IMPORT_HEARTBEAT,
    CORPUS_REPORT_MAX_BAD_ROWS,
    CORPUS_REPORT_MAX_DUPLICATES,
    DEDUP_TAU,
    IMPORT_BATCH_SIZE,
    TOPICS,
)
from mining.document_records import DocumentFields, DocumentRecord, corpus_files, parse_document_record
from mining.embeddings import configured_model_name, embed_texts, embedding_device
from mining.models import (
    Corpus,
    CorpusImport,
    CorpusImportStatus,
    Document,
    Procedure,
    Split,
    SplitReport,
    Topic,
    procedure_identity,
    text_hash,
)
from mining.procedure_records import (
    EXAMPLE_SCHEMA_VERSION,
    HOW2MINE_SCHEMA_VERSION,
    MINING_STAGES_KEY,
    NO_TOPIC,
    ProcedureRecord,
    parse_procedure_record,
    to_example,
    to_flat,
    to_how2mine,
)
from mining.selectors import procedures_of_mining_run
from mining.split_dedup import nearest_train, procedure_text, select_benchmark
from mining.uploads import upload_delete, upload_runs_in_background, upload_save, upload_storage

logger = logging.getLogger(__name__)


def record_read_limits() -> ReadLimits:
    """The configured limits on every record file an importer reads (``RECORD_MAX_...``)."""
    return ReadLimits.from_settings(settings, "RECORD")


@dataclass(frozen=True)
class ImportResult:
    path: str
    created: int
    existing: int
    # With ``collect_ids``: the ids of the file's procedures (new or already stored), in file order.
    procedure_ids: tuple[int, ...] = ()


def topics_ensure() -> None:
    """Create the 14 How2Everything topics if they are missing (idempotent)."""
    for position, name in enumerate(TOPICS):
        Topic.objects.get_or_create(name=name, defaults={"slug": slugify(name), "position": position})


class TopicResolver:
    """Map a topic as written in a file (name in any case, or slug) to a Topic row."""

    def __init__(self, *, create: bool):
        self.create = create
        self.by_key: dict[str, Topic] = {}
        for topic in Topic.objects.all():
            self.by_key[topic.name.casefold()] = topic
            self.by_key[topic.slug] = topic

    def resolve(self, name: str, *, label: str = "topic") -> Topic | None:
        """The topic ``name`` names; raises ``RecordError`` (its field ``label``) for a name that
        could not be stored (too long, NUL), before it reaches the database."""
        try:
            check_stored_values(Topic, {"name": name}, labels={"name": label})
        except StrictJSONError as exc:
            raise RecordError(None, None, exc.field, exc.message) from exc
        topic = self.by_key.get(name.casefold()) or self.by_key.get(slugify(name))
        if topic is None and (self.create or name == NO_TOPIC):  # topic-less records: always accepted
            topic = Topic.objects.create(name=name, slug=self._free_slug(name), position=1000)
            self.by_key[name.casefold()] = topic
            self.by_key[topic.slug] = topic
        return topic

    def _free_slug(self, name: str) -> str:
        base = (slugify(name) or "topic")[: max_length_of(Topic, "slug") - 10].strip("-") or "topic"
        slug, n = base, 1
        while Topic.objects.filter(slug=slug).exists():
            n += 1
            slug = f"{base}-{n}"
        return slug

    def known(self) -> str:
        return ", ".join(sorted(Topic.objects.values_list("name", flat=True)))


def procedure_import(
    *,
    path: str | Path,
    split: str | None = None,
    topic_field: str = "topic",
    create_topics: bool = False,
    collect_ids: bool = False,
) -> ImportResult:
    """Import every procedure of one file, all or nothing. With ``collect_ids``, the result
    names the file's procedures (for a run over exactly that file); without it memory stays
    flat whatever the file's size.

    Raises ``RecordError`` naming the file, the line (or row) and the field of the
    first bad record; the database is then exactly as it was before the call."""
    if split is not None and split not in Split.values:
        raise InvalidInput(f"split must be one of {', '.join(Split.values)}")
    created = existing = 0
    identities: dict[str, None] = {}  # file order, each once
    with transaction.atomic():
        topics = TopicResolver(create=create_topics)
        batch: list[Procedure] = []
        for position, raw in iter_records(path, record_read_limits()):
            try:
                record = parse_procedure_record(raw, topic_field=topic_field)
                _check_procedure_storable(record)
                topic = topics.resolve(record.topic, label=record.label("topic"))
            except RecordError as exc:
                raise exc.at(path, position) from exc
            if topic is None:
                raise RecordError(
                    path,
                    position,
                    topic_field,
                    f"unknown topic {record.topic!r} (known: {topics.known()}); pass --create-topics to create it",
                )
            batch.append(_procedure_from_record(record, topic, split))
            if collect_ids:
                identities.setdefault(batch[-1].identity)
            if len(batch) >= IMPORT_BATCH_SIZE:
                n_created, n_existing = _insert_new(batch)
                created, existing = created + n_created, existing + n_existing
                batch = []
                reset_queries()  # with DEBUG on, Django would keep every SQL string in memory
        n_created, n_existing = _insert_new(batch)
    procedure_ids: list[int] = []
    if collect_ids:
        order = list(identities)
        for start in range(0, len(order), IMPORT_BATCH_SIZE):
            chunk = order[start : start + IMPORT_BATCH_SIZE]
            by_identity = dict(Procedure.objects.filter(identity__in=chunk).values_list("identity", "id"))
            procedure_ids += [by_identity[identity] for identity in chunk]
    return ImportResult(
        path=str(path), created=created + n_created, existing=existing + n_existing, procedure_ids=tuple(procedure_ids)
    )


def _check_procedure_storable(record: ProcedureRecord) -> None:
    """Every value of ``record`` fits its column (lengths, NUL, JSON values); raises
    ``RecordError`` naming the field as the file calls it."""
    names = ("source_example_id", "goal", "steps", "resources", "source_url")
    try:
        check_stored_values(
            Procedure,
            {name: getattr(record, name) for name in names},
            labels={name: record.label(name) for name in names},
        )
        provenance = Procedure._meta.get_field("provenance")
        for key, value in record.provenance.items():
            check_field_value(provenance, value, label=record.label(key))
    except StrictJSONError as exc:
        raise RecordError(None, None, exc.field, exc.message) from exc


def _procedure_from_record(record: ProcedureRecord, topic: Topic, split: str | None) -> Procedure:
    return Procedure(
        topic=topic,
        goal=record.goal,
        steps=record.steps,
        resources=record.resources,
        source_example_id=record.source_example_id,
        source_url=record.source_url,
        split=split or record.split or Split.NONE,
        provenance=record.provenance,
        identity=procedure_identity(record.source_example_id, record.goal),
    )


def _insert_new(batch: list[Procedure]) -> tuple[int, int]:
    """Insert the procedures whose identity is not stored yet; return (created, existing)."""
    if not batch:
        return 0, 0
    identities = {p.identity for p in batch}
    stored = set(Procedure.objects.filter(identity__in=identities).values_list("identity", flat=True))
    fresh: dict[str, Procedure] = {}
    for procedure in batch:
        if procedure.identity not in stored and procedure.identity not in fresh:
            fresh[procedure.identity] = procedure
    Procedure.objects.bulk_create(list(fresh.values()), batch_size=IMPORT_BATCH_SIZE)
    return len(fresh), len(batch) - len(fresh)


EXPORT_FORMATS = ("jsonl", "parquet", "arrow")  # arrow: an Arrow IPC file (the reference's arrow_ipc)
EXPORT_SHAPES = ("flat", HOW2MINE_SCHEMA_VERSION, EXAMPLE_SCHEMA_VERSION)


def _records(procedures: Iterable[Procedure]) -> Iterator[ProcedureRecord]:
    """Procedures as records. A mined procedure's source text is read from its document
    (stored once, never copied into the procedure), a chunk of documents at a time."""
    chunk: list[Procedure] = []

    def flush() -> Iterator[ProcedureRecord]:
        doc_ids = {p.provenance.get("document_id") for p in chunk if (p.provenance or {}).get("document_id")}
        texts = dict(Document.objects.filter(pk__in=doc_ids).values_list("pk", "text")) if doc_ids else {}
        for p in chunk:
            provenance = dict(p.provenance or {})
            if provenance.get("document_id") in texts and not provenance.get("source_text"):
                provenance["source_text"] = texts[provenance["document_id"]]
            yield ProcedureRecord(
                source_example_id=p.source_example_id,
                topic=p.topic.name,
                goal=p.goal,
                steps=p.steps,
                resources=p.resources,
                source_url=p.source_url,
                split=p.split,
                provenance=provenance,
            )

    for procedure in procedures:
        chunk.append(procedure)
        if len(chunk) >= IMPORT_BATCH_SIZE:
            yield from flush()
            chunk = []
    yield from flush()


def shard_path(output: str | Path, index: int, total: int) -> Path:
    """``bench.jsonl.zst`` → ``bench-00001-of-00003.jsonl.zst`` (shards numbered from 0)."""
    path = Path(output)
    name = path.name
    cut = name.find(".")
    stem, suffixes = (name, "") if cut <= 0 else (name[:cut], name[cut:])
    return path.with_name(f"{stem}-{index:05d}-of-{total:05d}{suffixes}")


def reference_shard_path(output: str | Path, index: int, total: int) -> Path:
    """``all_valid.jsonl.zst`` → ``all_valid_00001.jsonl.zst``: the reference CLI's shard
    names (numbered from 0, without the total), used for the exports of reference configs."""
    path = Path(output)
    name = path.name
    cut = name.find(".")
    stem, suffixes = (name, "") if cut <= 0 else (name[:cut], name[cut:])
    return path.with_name(f"{stem}_{index:05d}{suffixes}")


def procedure_export(
    *,
    output: str | Path,
    split: str | None = None,
    fmt: str = "jsonl",
    shape: str = "flat",
    topic: str | None = None,
    mining_run: str | None = None,
    shard_size: int | None = None,
    shard_name: Callable[[str | Path, int, int], Path] = shard_path,
) -> int:
    """Write procedures to ``output`` and return how many were written.

    The file appears only when complete: it is written beside its final name and
    renamed at the end, so a crash never leaves a half-written export. With
    ``shard_size`` the records go to numbered shards of at most that many records each
    (named by ``shard_name``: :func:`shard_path`, or :func:`reference_shard_path`); if one
    shard fails, the shards already written are removed."""
    if fmt not in EXPORT_FORMATS:
        raise InvalidInput(f"format must be one of {', '.join(EXPORT_FORMATS)}")
    if shape not in EXPORT_SHAPES:
        raise InvalidInput(f"shape must be one of {', '.join(EXPORT_SHAPES)}")
    if shard_size is not None and shard_size < 1:
        raise InvalidInput("shard size must be at least 1 record")
    queryset = Procedure.objects.select_related("topic").order_by("id")
    if split:
        queryset = queryset.filter(split=split)
    if topic:
        queryset = queryset.filter(topic__slug=topic)
    if mining_run:
        queryset = procedures_of_mining_run(queryset, mining_run)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    if shard_size is None:
        return _export_file(output, queryset.iterator(chunk_size=IMPORT_BATCH_SIZE), fmt, shape)
    ids = list(queryset.values_list("id", flat=True))
    total = max(1, -(-len(ids) // shard_size))
    written: list[Path] = []
    try:
        for index in range(total):
            part = ids[index * shard_size : (index + 1) * shard_size]
            path = shard_name(output, index, total)
            _export_file(path, queryset.filter(id__in=part).iterator(chunk_size=IMPORT_BATCH_SIZE), fmt, shape)
            written.append(path)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return len(ids)


def _export_file(output: str | Path, procedures: Iterable[Procedure], fmt: str, shape: str) -> int:
    convert = {"flat": to_flat, EXAMPLE_SCHEMA_VERSION: to_example}.get(shape, to_how2mine)
    records = (convert(r) for r in _records(procedures))
    with atomic_output(output) as handle:
        if fmt == "jsonl":
            return _write_jsonl(handle, records)
        return _write_parquet(handle, records, shape, arrow=fmt == "arrow")


def _write_jsonl(handle, records: Iterator[dict]) -> int:
    count = 0
    for record in records:
        handle.write(json.dumps(record, ensure_ascii=False).encode("utf-8"))
        handle.write(b"\n")
        count += 1
    return count


def _parquet_schema(shape: str):
    import pyarrow as pa

    strings = pa.list_(pa.string())
    if shape == "flat":
        return pa.schema(
            [
                ("source_example_id", pa.string()),
                ("topic", pa.string()),
                ("goal", pa.string()),
                ("steps", strings),
                ("resources", strings),
                ("url", pa.string()),
                ("source_url", pa.string()),
                ("split", pa.string()),
            ]
        )
    if shape == EXAMPLE_SCHEMA_VERSION:
        return pa.schema(
            [
                ("schema_version", pa.string()),
                ("source_example_id", pa.string()),
                ("url", pa.string()),
                ("source_text", pa.string()),
                ("topic", pa.string()),
                ("goal", pa.string()),
                ("resources", strings),
                ("steps", strings),
                ("split", pa.string()),
            ]
        )
    return pa.schema(
        [
            ("schema_version", pa.string()),
            (
                "source_example",
                pa.struct([("id", pa.string()), ("text", pa.string()), ("url", pa.string()), ("topic", pa.string())]),
            ),
            # Stage outputs differ from stage to stage and run to run, so a fixed Parquet schema
            # keeps them as JSON text; the importer decodes JSON text in any nested field.
            ("processed_example", pa.string()),
            ("final_procedure", pa.struct([("goal", pa.string()), ("steps", strings), ("resources", strings)])),
            (MINING_STAGES_KEY, pa.string()),
            ("mining_run", pa.string()),
            ("prompt_hashes", pa.string()),
            ("split", pa.string()),
        ]
    )


def _write_parquet(handle, records: Iterator[dict], shape: str, *, arrow: bool = False) -> int:
    """Parquet, or with ``arrow`` an Arrow IPC file of the same schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _parquet_schema(shape)
    json_columns = (
        ("processed_example", MINING_STAGES_KEY, "mining_run", "prompt_hashes")
        if shape == HOW2MINE_SCHEMA_VERSION
        else ()
    )
    count = 0
    chunk: list[dict] = []
    with pa.ipc.new_file(handle, schema) if arrow else pq.ParquetWriter(handle, schema) as writer:
        for record in records:
            for key in json_columns:
                if key in record:
                    record[key] = json.dumps(record[key], ensure_ascii=False)
            chunk.append(record)
            count += 1
            if len(chunk) >= IMPORT_BATCH_SIZE:
                writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
                chunk = []
        writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
    return count


# --- Corpora -------------------------------------------------------------------------


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


# --- How2Bench / How2Train split -------------------------------------------------------


def procedure_split(
    *,
    per_topic: int = BENCH_PER_TOPIC,
    seed: int = 0,
    tau: float = DEDUP_TAU,
    embedding_model: str | None = None,
    report_path: str | Path | None = None,
) -> SplitReport:
    """Split every procedure into How2Bench (up to ``per_topic`` per topic, seeded) and
    How2Train (the rest), dropping benchmark candidates whose nearest other procedure is
    above ``tau`` (How2Everything App. E.1; the rule is explained in ``split_dedup``).

    Embedding happens before the transaction; the splits, the ``SplitReport`` row and the
    JSON report file are written together (the file appears only when complete, and a
    failure leaves every split as it was)."""
    if per_topic < 0:
        raise InvalidInput("per_topic must not be negative")
    if not 0.0 <= tau <= 1.0:
        raise InvalidInput("tau must be between 0 and 1")
    if report_path is not None:
        problem = output_problem(report_path)
        if problem:
            raise InvalidInput(problem)
    # Constrained procedures (CoScript) are a slice of their own and keep their split.
    rows = list(
        Procedure.objects.exclude(split=Split.CONSTRAINED)
        .order_by("id")
        .values_list("id", "topic__name", "goal", "steps")
    )
    if not rows:
        raise InvalidInput("there are no procedures to split")
    model_name = configured_model_name(embedding_model or getattr(settings, "EMBEDDING_MODEL", ""))
    vectors = embed_texts((procedure_text(goal, steps) for _, _, goal, steps in rows), model=model_name)
    # The search runs where the embeddings ran (a GPU when there is one), with the same result.
    device = embedding_device(model_name)
    ids = [row[0] for row in rows]
    topics = [row[1] for row in rows]
    del rows
    selection = select_benchmark(topics=topics, vectors=vectors, per_topic=per_topic, seed=seed, tau=tau, device=device)
    neighbours = nearest_train(vectors, selection.bench, selection.train, device=device)
    records = [
        {
            "procedure_id": ids[b],
            "topic": topics[b],
            "nearest_train_id": ids[t] if t >= 0 else None,
            "cosine": None if c is None else round(c, 6),
        }
        for b, (t, c) in zip(selection.bench, neighbours)
    ]
    dropped = []
    for d in selection.dropped:
        other, cosine = selection.candidate_neighbour[d]
        dropped.append(
            {"procedure_id": ids[d], "topic": topics[d], "nearest_id": ids[other], "cosine": round(cosine, 6)}
        )
    topic_rows = [{"topic": topic, **counts} for topic, counts in selection.per_topic.items()]
    with transaction.atomic():
        for split, members in ((Split.TRAIN, selection.train), (Split.BENCH, selection.bench)):
            for start in range(0, len(members), 900):  # SQLite's historical limit of bound variables
                chunk = [ids[i] for i in members[start : start + 900]]
                Procedure.objects.filter(id__in=chunk).update(split=split)
        report = SplitReport.objects.create(
            embedding_model=model_name,
            per_topic=per_topic,
            seed=seed,
            tau=tau,
            n_procedures=len(ids),
            n_bench=len(selection.bench),
            n_train=len(selection.train),
            topics=topic_rows,
            records=records,
            dropped=dropped,
        )
        target = Path(report_path) if report_path else Path(settings.VAR_DIR) / "splits" / f"split-{report.pk}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(target) as handle:
            handle.write(json.dumps(split_report_document(report), ensure_ascii=False, indent=1).encode("utf-8"))
        report.report_file = str(target)
        report.save(update_fields=["report_file"])
    return report


def split_report_document(report: SplitReport) -> dict:
    """The JSON report of a split: its parameters, per-topic counts, and the per-procedure records."""
    return {
        "split_report_id": report.pk,
        "created_at": report.created_at.isoformat() if report.created_at else None,
        "embedding_model": report.embedding_model,
        "per_topic": report.per_topic,
        "seed": report.seed,
        "tau": report.tau,
        "n_procedures": report.n_procedures,
        "n_bench": report.n_bench,
        "n_train": report.n_train,
        "topics": report.topics,
        "bench": report.records,
        "dropped": report.dropped,
    }
