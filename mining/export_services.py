"""Procedures out: ``procedure_export`` writes procedures as JSONL, Parquet or an Arrow IPC file,
in the flat shape, the How2Mine record shape or the example shape, whole or in shards named as
the reference release names them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from core.app_errors import InvalidInput
from core.record_output import atomic_output
from mining.constants import IMPORT_BATCH_SIZE
from mining.models import Document, Procedure
from mining.procedure_records import (
    EXAMPLE_SCHEMA_VERSION,
    HOW2MINE_SCHEMA_VERSION,
    MINING_STAGES_KEY,
    ProcedureRecord,
    to_example,
    to_flat,
    to_how2mine,
)
from mining.selectors import procedures_of_mining_run

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
