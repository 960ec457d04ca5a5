"""Writes of the mining app: topics and procedures (import, export)."""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from django.db import reset_queries, transaction
from django.utils.text import slugify

from mining.constants import IMPORT_BATCH_SIZE, TOPICS
from mining.models import Procedure, Split, Topic, procedure_identity
from mining.procedure_records import (
    HOW2MINE_SCHEMA_VERSION,
    ProcedureRecord,
    RecordFieldError,
    parse_procedure_record,
    to_flat,
    to_how2mine,
)
from mining.record_files import RecordFileError, atomic_output, iter_records


@dataclass(frozen=True)
class ImportResult:
    path: str
    created: int
    existing: int


def topics_ensure() -> None:
    """Create the 14 How2Everything topics if they are missing (idempotent)."""
    for position, name in enumerate(TOPICS):
        Topic.objects.get_or_create(name=name, defaults={"slug": slugify(name), "position": position})


class _TopicResolver:
    """Map a topic as written in a file (name in any case, or slug) to a Topic row."""

    def __init__(self, *, create: bool):
        self.create = create
        self.by_key: dict[str, Topic] = {}
        for topic in Topic.objects.all():
            self.by_key[topic.name.casefold()] = topic
            self.by_key[topic.slug] = topic

    def resolve(self, name: str) -> Topic | None:
        topic = self.by_key.get(name.casefold()) or self.by_key.get(slugify(name))
        if topic is None and self.create:
            topic = Topic.objects.create(name=name, slug=self._free_slug(name), position=1000)
            self.by_key[name.casefold()] = topic
            self.by_key[topic.slug] = topic
        return topic

    def _free_slug(self, name: str) -> str:
        base = slugify(name) or "topic"
        slug, n = base, 1
        while Topic.objects.filter(slug=slug).exists():
            n += 1
            slug = f"{base}-{n}"
        return slug

    def known(self) -> str:
        return ", ".join(sorted(Topic.objects.values_list("name", flat=True)))


def procedure_import(
    *, path: str | Path, split: str | None = None, topic_field: str = "topic", create_topics: bool = False
) -> ImportResult:
    """Import every procedure of one file, all or nothing.

    Raises ``RecordFileError`` naming the file, the line (or row) and the field of the
    first bad record; the database is then exactly as it was before the call."""
    if split is not None and split not in Split.values:
        raise ValueError(f"split must be one of {', '.join(Split.values)}")
    created = existing = 0
    with transaction.atomic():
        topics = _TopicResolver(create=create_topics)
        batch: list[Procedure] = []
        for position, raw in iter_records(path):
            try:
                record = parse_procedure_record(raw, topic_field=topic_field)
            except RecordFieldError as exc:
                raise RecordFileError(path, position, exc.message, exc.field) from exc
            topic = topics.resolve(record.topic)
            if topic is None:
                raise RecordFileError(
                    path, position,
                    f"unknown topic {record.topic!r} (known: {topics.known()}); "
                    "pass --create-topics to create it",
                    topic_field,
                )
            batch.append(_procedure_from_record(record, topic, split))
            if len(batch) >= IMPORT_BATCH_SIZE:
                n_created, n_existing = _insert_new(batch)
                created, existing = created + n_created, existing + n_existing
                batch = []
                reset_queries()  # with DEBUG on, Django would keep every SQL string in memory
        n_created, n_existing = _insert_new(batch)
    return ImportResult(path=str(path), created=created + n_created, existing=existing + n_existing)


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


EXPORT_FORMATS = ("jsonl", "parquet")
EXPORT_SHAPES = ("flat", HOW2MINE_SCHEMA_VERSION)


def _records(procedures: Iterable[Procedure]) -> Iterator[ProcedureRecord]:
    for p in procedures:
        yield ProcedureRecord(
            source_example_id=p.source_example_id,
            topic=p.topic.name,
            goal=p.goal,
            steps=p.steps,
            resources=p.resources,
            source_url=p.source_url,
            split=p.split,
            provenance=p.provenance or {},
        )


def procedure_export(
    *, output: str | Path, split: str | None = None, fmt: str = "jsonl", shape: str = "flat", topic: str | None = None
) -> int:
    """Write procedures to ``output`` and return how many were written.

    The file appears only when complete: it is written beside its final name and
    renamed at the end, so a crash never leaves a half-written export."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}")
    if shape not in EXPORT_SHAPES:
        raise ValueError(f"shape must be one of {', '.join(EXPORT_SHAPES)}")
    queryset = Procedure.objects.select_related("topic").order_by("id")
    if split:
        queryset = queryset.filter(split=split)
    if topic:
        queryset = queryset.filter(topic__slug=topic)
    convert = to_flat if shape == "flat" else to_how2mine
    records = (convert(r) for r in _records(queryset.iterator(chunk_size=IMPORT_BATCH_SIZE)))
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(output) as handle:
        if fmt == "jsonl":
            return _write_jsonl(handle, records)
        return _write_parquet(handle, records, shape)


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
        return pa.schema([
            ("source_example_id", pa.string()), ("topic", pa.string()), ("goal", pa.string()),
            ("steps", strings), ("resources", strings), ("source_url", pa.string()), ("split", pa.string()),
        ])
    return pa.schema([
        ("schema_version", pa.string()),
        ("source_example", pa.struct([("id", pa.string()), ("text", pa.string()), ("url", pa.string()), ("topic", pa.string())])),
        # Stage outputs differ from stage to stage and run to run, so a fixed Parquet schema
        # keeps them as JSON text; the importer decodes JSON text in any nested field.
        ("processed_example", pa.string()),
        ("final_procedure", pa.struct([("goal", pa.string()), ("steps", strings), ("resources", strings)])),
        ("mining_run", pa.string()), ("prompt_hashes", pa.string()), ("split", pa.string()),
    ])


def _write_parquet(handle, records: Iterator[dict], shape: str) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _parquet_schema(shape)
    json_columns = ("processed_example", "mining_run", "prompt_hashes") if shape != "flat" else ()
    count = 0
    chunk: list[dict] = []
    with pq.ParquetWriter(handle, schema) as writer:
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
