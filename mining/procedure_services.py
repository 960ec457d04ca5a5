"""Procedures in: the 14 How2Everything topics (``topics_ensure``, and ``TopicResolver``, which
maps a topic as a file writes it to a row), the procedure importer (``procedure_import``: a file
of records, checked and stored in batches, in one transaction), and ``record_read_limits``, the
configured limits every record importer reads with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import reset_queries, transaction
from django.utils.text import slugify

from core.app_errors import InvalidInput
from core.record_files import ReadLimits, RecordError
from core.record_reader import iter_records
from core.stored_values import StrictJSONError, check_field_value, check_stored_values, max_length_of
from mining.constants import IMPORT_BATCH_SIZE, TOPICS
from mining.models import Procedure, Split, Topic, procedure_identity
from mining.procedure_records import NO_TOPIC, ProcedureRecord, parse_procedure_record


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
