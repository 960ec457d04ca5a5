"""The record shapes procedures travel in, parsed and written without Django.

Shapes (How2Mine's public export formats):

* ``how2mine.v1``: ``{"schema_version": "how2mine.v1", "source_example": {"id", "text",
  "url", "topic"}, "processed_example": {<stage>: {...}}, "final_procedure": {"goal",
  "steps", "resources"}}``
* ``flat`` (also How2Bench rows): ``{"source_example_id", "topic", "goal", "steps",
  "resources"}``

* ``how2bench.example.v1``: the flat fields with ``schema_version``, ``url`` and
  ``source_text`` (other fields are kept and written back)

All may carry ``split`` ("bench", "train", "none" or "constrained") and the flat shape ``source_url``;
these are written by our exports so that export -> import round-trips exactly, and
ignored by tools that do not know them. In columnar files a nested object or list may
also arrive as a JSON string (CSV cells always do)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.link_urls import http_url
from core.record_files import RecordError
from core.record_text import json_loads_bounded, json_too_deep

HOW2MINE_SCHEMA_VERSION = "how2mine.v1"
# How2Bench's example record (the reference CLI's BenchExample): the flat fields plus
# ``url`` and ``source_text``.
EXAMPLE_SCHEMA_VERSION = "how2bench.example.v1"
SHAPES = ("flat", HOW2MINE_SCHEMA_VERSION, EXAMPLE_SCHEMA_VERSION)
# The topic of a record without one (a file mined without topics writes topic ""); written
# back as "" in every shape.
NO_TOPIC = "none"
# The keys of processed_example in a how2mine.v1 record (one per stage of the reference
# pipeline). Our own stages' answers travel beside them under MINING_STAGES_KEY, so the
# how2mine.v1 label never carries stage keys of ours.
HOW2MINE_STAGE_KEYS = ("procedures", "prefilter", "filter", "postprocess", "resources", "final_filter")
MINING_STAGES_KEY = "mining_stages"
# The fields of an example record kept in columns; any other field is kept in the
# procedure's provenance (``record_extra``) and written back on export.
EXAMPLE_FIELDS = (
    "schema_version",
    "source_example_id",
    "url",
    "source_text",
    "topic",
    "goal",
    "resources",
    "steps",
    "split",
)
# The values of mining.models.Split (this module imports no Django): "constrained" is the
# slice of chosen CoScript scripts (docs/coscript.md), exported and imported like the others.
SPLITS = ("bench", "train", "none", "constrained")
# How deeply a JSON-encoded cell may nest (a whole JSON line is bounded by the reader).
MAX_CELL_JSON_DEPTH = 64


@dataclass
class ProcedureRecord:
    source_example_id: str
    topic: str
    goal: str
    steps: list[str]
    resources: list[str] = field(default_factory=list)
    source_url: str = ""
    split: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    # Where each attribute came from in the file ("final_procedure.goal"), for error
    # messages about values found later (too long to store, ...); absent: the attribute name.
    labels: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def label(self, name: str) -> str:
        return self.labels.get(name, name)


def _maybe_json(value: Any, field_name: str) -> Any:
    """Decode a JSON-encoded cell (CSV, or a columnar column stored as text)."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        if json_too_deep(value, MAX_CELL_JSON_DEPTH):
            raise RecordError(
                None, None, field_name, f"cell is JSON nested more than {MAX_CELL_JSON_DEPTH} levels deep"
            )
        try:
            return json_loads_bounded(value, MAX_CELL_JSON_DEPTH)
        except RecordError as exc:
            raise RecordError(None, None, field_name, f"cell is not valid JSON ({exc.message})") from exc
    return value


def _text(value: Any, field_name: str, *, required: bool) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise RecordError(None, None, field_name, "missing or empty")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RecordError(None, None, field_name, f"expected a string, got {type(value).__name__}")
    return str(value)


def _topic(value: Any, field_name: str) -> str:
    """A record's topic; empty or absent is ``NO_TOPIC`` (a file made without topics)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return NO_TOPIC
    return _text(value, field_name, required=True)


def _resources(value: Any, field_name: str) -> list[str]:
    """A resource list; empty strings in it are left out (no resource), as How2Bench's
    readers do, so a list written as ``["oil", ""]`` imports as ``["oil"]``."""
    value = _maybe_json(value, field_name)
    if isinstance(value, (list, tuple)):
        value = [item for item in value if not (isinstance(item, str) and not item.strip())]
    return _string_list(value, field_name, required=False)


def _string_list(value: Any, field_name: str, *, required: bool) -> list[str]:
    value = _maybe_json(value, field_name)
    if value is None or value == "":
        if required:
            raise RecordError(None, None, field_name, "missing; expected a list of non-empty strings")
        return []
    if not isinstance(value, (list, tuple)):
        raise RecordError(None, None, field_name, f"expected a list of non-empty strings, got {type(value).__name__}")
    if required and not value:
        raise RecordError(None, None, field_name, "is an empty list; a procedure needs at least one step")
    items = []
    for index, item in enumerate(value, start=1):
        if not isinstance(item, str) or not item.strip():
            raise RecordError(None, None, f"{field_name}[{index}]", "must be a non-empty string")
        items.append(item)
    return items


def web_url(value: Any, field_name: str) -> str:
    """A page address: empty, or an absolute http(s) URL. Anything else (``javascript:``,
    ``data:``, a bare word) is refused, so no imported address can ever become script."""
    url = _text(value, field_name, required=False).strip()
    if url and not http_url(url):
        shown = url if len(url) <= 60 else url[:57] + "..."
        raise RecordError(None, None, field_name, f"must be an http:// or https:// URL, not {shown!r}")
    return url


def _object(value: Any, field_name: str) -> dict[str, Any]:
    value = _maybe_json(value, field_name)
    if not isinstance(value, dict):
        raise RecordError(None, None, field_name, f"expected an object, got {type(value).__name__}")
    return value


def _split(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or value not in SPLITS:
        raise RecordError(None, None, "split", f"{value!r} is not one of {', '.join(SPLITS)}")
    return value


def record_shape(record: dict[str, Any]) -> str:
    version = record.get("schema_version")
    if version is None:
        return "flat"
    if not isinstance(version, str) or version not in (HOW2MINE_SCHEMA_VERSION, EXAMPLE_SCHEMA_VERSION):
        raise RecordError(
            None,
            None,
            "schema_version",
            f"unsupported value {version!r}; expected {HOW2MINE_SCHEMA_VERSION!r} or {EXAMPLE_SCHEMA_VERSION!r}",
        )
    return version


def parse_procedure_record(record: dict[str, Any], *, topic_field: str = "topic") -> ProcedureRecord:
    """Validate one record of any shape and return it normalised."""
    shape = record_shape(record)
    if shape == HOW2MINE_SCHEMA_VERSION:
        return _parse_how2mine(record, topic_field)
    parsed = _parse_flat(record, topic_field)
    if shape == EXAMPLE_SCHEMA_VERSION:
        if record.get("source_text"):
            parsed.provenance["source_text"] = _text(record["source_text"], "source_text", required=False)
        extra = {key: value for key, value in record.items() if key not in EXAMPLE_FIELDS and key != topic_field}
        if extra:
            parsed.provenance["record_extra"] = extra
    return parsed


def _parse_flat(record: dict[str, Any], topic_field: str) -> ProcedureRecord:
    url_field = "source_url" if record.get("source_url") or not record.get("url") else "url"
    return ProcedureRecord(
        source_example_id=_text(record.get("source_example_id"), "source_example_id", required=False),
        topic=_topic(record.get(topic_field), topic_field),
        goal=_text(record.get("goal"), "goal", required=True),
        steps=_string_list(record.get("steps"), "steps", required=True),
        resources=_resources(record.get("resources"), "resources"),
        source_url=web_url(record.get(url_field), url_field),
        split=_split(record.get("split")),
        labels={"topic": topic_field, "source_url": url_field},
    )


# Where a how2mine.v1 record keeps each attribute (provenance entries by their key).
HOW2MINE_LABELS = {
    "source_example_id": "source_example.id",
    "goal": "final_procedure.goal",
    "steps": "final_procedure.steps",
    "resources": "final_procedure.resources",
    "source_url": "source_example.url",
    "source_text": "source_example.text",
}


def _parse_how2mine(record: dict[str, Any], topic_field: str) -> ProcedureRecord:
    if "source_example" not in record:
        raise RecordError(None, None, "source_example", "missing")
    if "final_procedure" not in record:
        raise RecordError(None, None, "final_procedure", "missing")
    source = _object(record["source_example"], "source_example")
    final = _object(record["final_procedure"], "final_procedure")
    processed = _object(record.get("processed_example") or {}, "processed_example")
    topic_value = final.get(topic_field) or source.get(topic_field) or record.get(topic_field)
    provenance: dict[str, Any] = {}
    if processed:
        provenance["processed_example"] = processed
    if record.get(MINING_STAGES_KEY):
        provenance[MINING_STAGES_KEY] = _object(record[MINING_STAGES_KEY], MINING_STAGES_KEY)
    if source.get("text"):
        provenance["source_text"] = _text(source["text"], "source_example.text", required=False)
    for key in ("mining_run", "prompt_hashes"):
        if record.get(key) is not None:
            provenance[key] = _maybe_json(record[key], key)
    return ProcedureRecord(
        source_example_id=_text(source.get("id"), "source_example.id", required=False),
        topic=_topic(topic_value, f"source_example.{topic_field}"),
        goal=_text(final.get("goal"), "final_procedure.goal", required=True),
        steps=_string_list(final.get("steps"), "final_procedure.steps", required=True),
        resources=_resources(final.get("resources"), "final_procedure.resources"),
        source_url=web_url(source.get("url"), "source_example.url"),
        split=_split(record.get("split")),
        provenance=provenance,
        labels=HOW2MINE_LABELS | {"topic": f"source_example.{topic_field}"},
    )


def _written_topic(procedure: ProcedureRecord) -> str:
    return "" if procedure.topic == NO_TOPIC else procedure.topic


def to_flat(procedure: ProcedureRecord) -> dict[str, Any]:
    record: dict[str, Any] = {
        "source_example_id": procedure.source_example_id,
        "topic": _written_topic(procedure),
        "goal": procedure.goal,
        "steps": list(procedure.steps),
        "resources": list(procedure.resources),
    }
    if procedure.source_url:  # `url` is the name How2Bench's readers use; `source_url` kept beside it
        record["url"] = procedure.source_url
        record["source_url"] = procedure.source_url
    if procedure.split and procedure.split != "none":
        record["split"] = procedure.split
    return record


def to_example(procedure: ProcedureRecord) -> dict[str, Any]:
    """A ``how2bench.example.v1`` record, with any fields the imported record had beyond
    the example's (``record_extra``) written back."""
    record: dict[str, Any] = {
        "schema_version": EXAMPLE_SCHEMA_VERSION,
        "source_example_id": procedure.source_example_id,
        "url": procedure.source_url,
        "source_text": procedure.provenance.get("source_text") or "",
        "topic": _written_topic(procedure),
        "goal": procedure.goal,
        "resources": list(procedure.resources),
        "steps": list(procedure.steps),
    }
    if procedure.split and procedure.split != "none":
        record["split"] = procedure.split
    for key, value in (procedure.provenance.get("record_extra") or {}).items():
        record.setdefault(key, value)
    return record


def _stages(procedure: ProcedureRecord) -> tuple[dict[str, Any], dict[str, Any]]:
    """(processed_example, mining_stages): a procedure mined here stores its stages'
    answers under our stage names; they go to ``mining_stages``, never under how2mine.v1's
    ``processed_example``, which keeps what an imported record had there."""
    from mining.stages import PIPELINE  # pure; imported here to keep this module's imports light

    processed = dict(procedure.provenance.get("processed_example") or {})
    ours = dict(procedure.provenance.get(MINING_STAGES_KEY) or {})
    for key in [k for k in processed if k in PIPELINE]:
        ours[key] = processed.pop(key)
    return processed, ours


def to_how2mine(procedure: ProcedureRecord) -> dict[str, Any]:
    source: dict[str, Any] = {"id": procedure.source_example_id}
    if procedure.provenance.get("source_text"):
        source["text"] = procedure.provenance["source_text"]
    source["url"] = procedure.source_url
    source["topic"] = _written_topic(procedure)
    processed, ours = _stages(procedure)
    record: dict[str, Any] = {
        "schema_version": HOW2MINE_SCHEMA_VERSION,
        "source_example": source,
        "processed_example": processed,
        "final_procedure": {
            "goal": procedure.goal,
            "steps": list(procedure.steps),
            "resources": list(procedure.resources),
        },
    }
    if ours:
        record[MINING_STAGES_KEY] = ours
    for key in ("mining_run", "prompt_hashes"):
        if key in procedure.provenance:
            record[key] = procedure.provenance[key]
    if procedure.split and procedure.split != "none":
        record["split"] = procedure.split
    return record
