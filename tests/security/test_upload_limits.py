"""Bounded work for any upload: record files and study item files are read within limits
that are checked while reading (line length, record count, decompressed size, JSON nesting),
compressed columnar files are checked for their signature before they are decompressed, YAML
run configurations refuse aliases, and a corpus import never stays ``running``.

The bombs are scaled down and the limits set low; memory is measured with tracemalloc."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import json
import lzma
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from annotate.studies.item_files import DEFAULT_LIMITS as STUDY_ITEM_DEFAULTS
from annotate.studies.item_files import items_read
from annotate.studies.item_sources import items_from_file
from config.settings.uploads import LIMIT_DEFAULTS, RUN_CONFIG_MAX_BYTES_DEFAULT, upload_settings
from core.record_files import ReadLimits, RecordError
from core.record_reader import iter_records
from core.run_configs import RUN_CONFIG_MAX_BYTES_DEFAULT as RUN_CONFIG_PURE_DEFAULT
from core.run_configs import RunConfigError, config_parse, config_read
from mining.corpus_services import corpus_import, corpus_import_run, corpus_upload_create
from mining.models import Corpus, CorpusImport, Document
from mining.procedure_services import procedure_import

MIB = 1 << 20
COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".zst": lambda data: zstandard.ZstdCompressor(level=19).compress(data),
}
SMALL = ReadLimits(max_line_bytes=64 * 1024, max_records=1000, max_decompressed_bytes=1 * MIB, max_json_depth=16)


def _read_all(path: Path, limits: ReadLimits = SMALL) -> list:
    return list(iter_records(path, limits))


def _peak_bytes(function) -> int:
    tracemalloc.start()
    try:
        function()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def _item(n: int, **extra) -> dict:
    return {
        "item_id": f"i{n}",
        "topic": "Food & Dining",
        "goal": "Bake bread",
        "reference_steps": ["Mix", "Bake"],
        "candidate_steps": ["Mix", "Bake"],
        **extra,
    }


# --- the defaults ---------------------------------------------------------------------


def test_the_pure_readers_defaults_are_the_settings_defaults():
    record = LIMIT_DEFAULTS["RECORD"]
    assert ReadLimits() == ReadLimits(
        max_line_bytes=record["MAX_LINE_BYTES"],
        max_records=record["MAX_RECORDS"],
        max_decompressed_bytes=record["MAX_DECOMPRESSED_BYTES"],
        max_json_depth=record["MAX_JSON_DEPTH"],
    )
    items = LIMIT_DEFAULTS["STUDY_ITEMS"]
    assert STUDY_ITEM_DEFAULTS == ReadLimits(
        max_line_bytes=items["MAX_LINE_BYTES"],
        max_records=items["MAX_RECORDS"],
        max_decompressed_bytes=items["MAX_DECOMPRESSED_BYTES"],
        max_json_depth=items["MAX_JSON_DEPTH"],
        scope="STUDY_ITEMS",
    )
    assert RUN_CONFIG_PURE_DEFAULT == RUN_CONFIG_MAX_BYTES_DEFAULT


def test_limits_come_from_the_environment_and_must_be_positive(monkeypatch):
    monkeypatch.setenv("RECORD_MAX_LINE_BYTES", "1234")
    assert upload_settings()["RECORD_MAX_LINE_BYTES"] == 1234
    monkeypatch.setenv("RECORD_MAX_LINE_BYTES", "0")
    with pytest.raises(RuntimeError, match="RECORD_MAX_LINE_BYTES=0"):
        upload_settings()


# --- line length ----------------------------------------------------------------------


def test_a_gzip_holding_one_huge_line_fails_after_one_lines_worth_with_bounded_memory(tmp_path):
    # 64 MiB of one line, compressed to ~64 KiB: the reader stops after 64 KiB + 1 byte.
    path = tmp_path / "docs.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as handle:
        handle.write(b'{"id": "x", "text": "')
        for _ in range(64):
            handle.write(b"a" * MIB)
    assert path.stat().st_size < 2 * MIB
    errors = []

    def read():
        try:
            _read_all(path)
        except RecordError as exc:
            errors.append(exc)

    started = time.monotonic()
    peak = _peak_bytes(read)
    assert time.monotonic() - started < 5
    assert errors and errors[0].position == "line 1"
    assert "RECORD_MAX_LINE_BYTES" in str(errors[0]) and "64 KiB" in str(errors[0])
    assert peak < 4 * MIB, f"peak {peak} bytes"


def test_a_line_exactly_at_the_limit_is_read(tmp_path):
    record = json.dumps({"id": "x", "text": "a"}).encode()
    padded = record[:-1] + b" " * (SMALL.max_line_bytes - len(record)) + b"}"
    assert len(padded) == SMALL.max_line_bytes
    path = tmp_path / "docs.jsonl"
    path.write_bytes(padded + b"\n" + padded)
    assert [p for p, _ in _read_all(path)] == ["line 1", "line 2"]


def test_a_csv_record_spanning_many_lines_is_bounded_as_a_whole(tmp_path):
    path = tmp_path / "docs.csv"
    cell = "line\n" * 20_000  # 100 KB in one quoted cell, every physical line short
    path.write_text(f'id,text\nd1,"{cell}"\n', encoding="utf-8")
    with pytest.raises(RecordError, match="record longer than 64 KiB .RECORD_MAX_LINE_BYTES."):
        _read_all(path)
    small = tmp_path / "ok.csv"
    small.write_text('id,text\nd1,"two\nlines"\nd2,plain\n', encoding="utf-8")
    assert [r["id"] for _, r in _read_all(small)] == ["d1", "d2"]


# --- decompressed size ----------------------------------------------------------------


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_decompression_bomb_of_short_lines_stops_at_the_decompressed_limit(tmp_path, suffix):
    line = json.dumps({"id": "x", "text": "filler"}).encode() + b"\n"
    data = line * (3 * MIB // len(line))  # 3 MiB of valid short lines, limit 1 MiB
    path = tmp_path / f"docs.jsonl{suffix}"
    path.write_bytes(COMPRESS[suffix](data))
    limits = ReadLimits(max_line_bytes=SMALL.max_line_bytes, max_records=10**9, max_decompressed_bytes=MIB)
    with pytest.raises(RecordError, match=r"decompresses to more than 1 MiB \(RECORD_MAX_DECOMPRESSED_BYTES\)"):
        _read_all(path, limits)


def test_a_zstd_bomb_never_expands_in_one_piece(tmp_path):
    # zstd packs 256 MiB of zeros into a few KiB; reading it must not hold it in memory.
    path = tmp_path / "docs.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"x" * (256 * MIB)))
    assert path.stat().st_size < MIB
    errors = []

    def read():
        try:
            _read_all(
                path,
                ReadLimits(max_line_bytes=512 * MIB, max_decompressed_bytes=8 * MIB, max_compression_ratio=1 << 20),
            )
        except RecordError as exc:
            errors.append(exc)

    peak = _peak_bytes(read)
    assert errors and "RECORD_MAX_DECOMPRESSED_BYTES" in str(errors[0])
    assert peak < 64 * MIB, f"peak {peak} bytes"


def test_a_gzipped_parquet_that_is_not_parquet_is_refused_before_it_is_decompressed(tmp_path, monkeypatch):
    path = tmp_path / "docs.parquet.gz"
    path.write_bytes(gzip.compress(b"\0" * (64 * MIB), compresslevel=1))
    copied = []
    monkeypatch.setattr("core.record_columnar._copy_keeping_disk_reserve", lambda *a, **k: copied.append(1))
    with pytest.raises(RecordError, match="not a Parquet file"):
        _read_all(path)
    assert copied == []  # refused on its first bytes


def test_a_gzipped_parquet_bomb_is_decompressed_only_up_to_the_limit(tmp_path):
    path = tmp_path / "docs.parquet.gz"
    path.write_bytes(gzip.compress(b"PAR1" + b"\0" * (64 * MIB), compresslevel=1))
    with pytest.raises(RecordError, match=r"more than 1 MiB \(RECORD_MAX_DECOMPRESSED_BYTES\)"):
        _read_all(path)


def test_a_gzipped_parquet_stops_before_the_disk_reserve_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    import shutil as real_shutil
    import tempfile

    from core import record_columnar

    path = tmp_path / "docs.parquet.gz"
    path.write_bytes(gzip.compress(b"PAR1" + b"\0" * (200 * MIB), compresslevel=1))
    usage = real_shutil.disk_usage(tmp_path)
    written: list[int] = []

    def disk_usage(where):  # free space shrinks by what the temporary file holds
        size = sum(p.stat().st_size for p in Path(where).glob("*.columnar"))
        written.append(size)
        return usage._replace(free=record_columnar.TEMP_DISK_RESERVE_BYTES + 100 * MIB - size)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr("core.record_columnar.shutil.disk_usage", disk_usage)
    with pytest.raises(RecordError, match="more temporary disk space than is free") as refused:
        _read_all(path, dataclasses.replace(SMALL, max_decompressed_bytes=1 << 30))
    assert str(refused.value).startswith(str(path))  # the error names the file
    assert max(written) < 65 * MIB  # stopped at the second check: 64 MiB in, 36 MiB short of the reserve
    assert not list(tmp_path.glob("*.columnar"))


def test_a_compressed_arrow_file_is_checked_for_its_signature_too(tmp_path):
    path = tmp_path / "docs.arrow.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"PAR1" + b"x" * 100))
    with pytest.raises(RecordError, match="not an Arrow file"):
        _read_all(path)


def test_a_parquet_file_whose_columns_decode_past_the_limit_is_refused_from_its_metadata(tmp_path):
    path = tmp_path / "docs.parquet"
    table = pa.table({"id": ["a", "b"], "text": ["x" * (2 * MIB), "y"]})
    pq.write_table(table, path, compression="zstd")
    assert path.stat().st_size < MIB  # small on disk, 2 MiB decoded
    with pytest.raises(RecordError, match="RECORD_MAX_DECOMPRESSED_BYTES"):
        _read_all(path)


# --- record count ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_file_with_more_records_than_allowed_is_refused(tmp_path, fmt):
    records = [{"id": f"d{i}", "text": "t"} for i in range(11)]
    path = tmp_path / f"docs.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    elif fmt == "csv":
        path.write_text("id,text\n" + "".join(f"{r['id']},{r['text']}\n" for r in records))
    else:
        pq.write_table(pa.Table.from_pylist(records), path)
    limits = ReadLimits(max_records=10)
    with pytest.raises(RecordError, match="more than 10 records .RECORD_MAX_RECORDS."):
        _read_all(path, limits)
    assert len(_read_all(path, ReadLimits(max_records=11))) == 11


# --- JSON values ----------------------------------------------------------------------


@pytest.mark.parametrize("depth", [17, 100_000])
def test_deeply_nested_json_is_a_line_error_not_a_recursion_error(tmp_path, depth):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "ok", "text": "t"}\n{"id": "x", "text": "t", "meta": ' + "[" * depth + "]" * depth + "}\n")
    with pytest.raises(RecordError) as caught:
        _read_all(path, ReadLimits(max_json_depth=16))
    assert caught.value.position == "line 2"
    assert "nested more than 16 levels deep (RECORD_MAX_JSON_DEPTH)" in str(caught.value)


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": "x", "text": "[" * 1000}) + "\n")
    assert _read_all(path)[0][1]["text"] == "[" * 1000


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400", "1" * 40])
def test_nan_infinity_and_absurd_numbers_are_refused_in_json_lines(tmp_path, value):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "x", "text": "t", "score": ' + value + "}\n")
    with pytest.raises(RecordError) as caught:
        _read_all(path)
    assert caught.value.position == "line 1"


def test_a_json_cell_in_a_csv_is_bounded_too(db, tmp_path):
    path = tmp_path / "procs.csv"
    steps = "[" * 5000 + "]" * 5000
    path.write_text(f'topic,goal,steps\nFood & Dining,Bake,"{steps}"\n')
    with pytest.raises(RecordError) as caught:
        procedure_import(path=path)
    assert caught.value.field == "steps" and "nested more than" in caught.value.message


# --- study item files -----------------------------------------------------------------


def test_a_study_item_file_with_a_huge_line_stops_at_the_line_limit(tmp_path):
    path = tmp_path / "items.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as handle:
        handle.write((json.dumps(_item(1)) + "\n").encode())
        handle.write(b'{"item_id": "' + b"a" * (32 * MIB))
    limits = ReadLimits(
        max_line_bytes=64 * 1024,
        max_records=100,
        max_decompressed_bytes=64 * MIB,
        max_json_depth=8,
        scope="STUDY_ITEMS",
    )
    errors = []

    def read():
        try:
            items_read(path, kind="critical_failure", limits=limits)
        except RecordError as exc:
            errors.append(exc)

    peak = _peak_bytes(read)
    assert errors and errors[0].problems[0].line == 2
    assert "STUDY_ITEMS_MAX_LINE_BYTES" in errors[0].problems[0].message
    assert peak < 4 * MIB, f"peak {peak} bytes"


@override_settings(STUDY_ITEMS_MAX_RECORDS=3, STUDY_ITEMS_MAX_JSON_DEPTH=4)
def test_study_item_files_follow_the_study_items_settings(db, tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(_item(n)) + "\n" for n in range(5)))
    with pytest.raises(RecordError) as caught:
        items_from_file(path=path, kind="critical_failure")
    assert caught.value.problems[0].line == 4
    assert "more than 3 records (STUDY_ITEMS_MAX_RECORDS)" in caught.value.problems[0].message
    deep = tmp_path / "deep.jsonl"
    deep.write_text(json.dumps(_item(1, source={"a": [[[[["x"]]]]]})) + "\n")
    with pytest.raises(
        RecordError, match=r"line 1: JSON nested more than 4 levels deep \(STUDY_ITEMS_MAX_JSON_DEPTH\)"
    ):
        items_from_file(path=deep, kind="critical_failure")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e999"])
def test_nan_in_a_study_item_file_is_a_line_error(tmp_path, value):
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(_item(1)) + "\n" + json.dumps(_item(2))[:-1] + ', "weight": ' + value + "}\n")
    with pytest.raises(RecordError) as caught:
        items_read(path, kind="critical_failure")
    assert [p.line for p in caught.value.problems] == [2]


# --- corpus imports end done or failed ------------------------------------------------


@pytest.mark.django_db
def test_a_corpus_upload_with_deep_nesting_ends_failed_with_a_line_error():
    body = b'{"id": "a", "text": "t"}\n{"id": "b", "text": "t", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\n"
    job = corpus_upload_create(name="web", upload=SimpleUploadedFile("docs.jsonl", body))
    assert job.status == "failed"
    assert job.error.startswith("docs.jsonl, line 2: JSON nested more than 64 levels deep (RECORD_MAX_JSON_DEPTH)")
    assert not Corpus.objects.exists() and not Document.objects.exists()


@pytest.mark.django_db
def test_a_corpus_import_that_fails_unexpectedly_ends_failed_never_running(monkeypatch):
    def explode(**kwargs):
        raise RuntimeError("something nobody foresaw")

    monkeypatch.setattr("mining.corpus_services.corpus_import", explode)
    job = corpus_upload_create(name="web", upload=SimpleUploadedFile("docs.jsonl", b'{"id": "a", "text": "t"}\n'))
    assert job.status == "failed" and job.finished_at is not None
    assert "unexpected error (RuntimeError)" in job.error and "nobody foresaw" not in job.error
    assert CorpusImport.objects.get().status == "failed"


@pytest.mark.django_db
@override_settings(RECORD_MAX_DECOMPRESSED_BYTES=MIB)
def test_a_corpus_upload_bomb_ends_failed_naming_the_setting():
    data = gzip.compress(b'{"id": "a", "text": "' + b"a" * (4 * MIB) + b'"}\n', compresslevel=1)
    with override_settings(RECORD_MAX_LINE_BYTES=8 * MIB):
        job = corpus_upload_create(name="web", upload=SimpleUploadedFile("docs.jsonl.gz", data))
    assert job.status == "failed" and "RECORD_MAX_DECOMPRESSED_BYTES" in job.error
    assert job.error.startswith("docs.jsonl.gz, line 1:")


@pytest.mark.django_db
@override_settings(RECORD_MAX_RECORDS=2)
def test_the_corpus_importer_uses_the_configured_record_limit(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": "t"}) + "\n" for i in range(3)))
    with pytest.raises(RecordError, match="RECORD_MAX_RECORDS"):
        corpus_import(name="web", path=path)
    assert not Document.objects.exists()


@pytest.mark.django_db
def test_a_queued_corpus_import_that_fails_unexpectedly_ends_failed(monkeypatch, settings):
    settings.UPLOAD_BACKGROUND_MIN_BYTES = 1
    monkeypatch.setattr("mining.tasks.corpus_import_run_task.delay", lambda pk: None)
    job = corpus_upload_create(name="web", upload=SimpleUploadedFile("docs.jsonl", b'{"id": "a", "text": "t"}\n'))
    assert job.status == "queued"
    monkeypatch.setattr("mining.corpus_services.corpus_import", lambda **kwargs: (_ for _ in ()).throw(MemoryError()))
    assert corpus_import_run(corpus_import_id=job.pk).status == "failed"


# --- YAML run configurations ----------------------------------------------------------

BILLION_LAUGHS = """\
name: laughs
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""
KEYS = {"name", "a", "b", "c", "d", "e", "f", "g", "h", "i", "budget_usd", "stages"}


def test_a_billion_laughs_config_is_refused_quickly_naming_source_and_line():
    started = time.monotonic()
    with pytest.raises(RunConfigError) as caught:
        config_parse(BILLION_LAUGHS, source="run.yaml", allowed=KEYS, required={"name"})
    assert time.monotonic() - started < 1
    assert str(caught.value).startswith("run.yaml, line 3: YAML aliases (*name) are not allowed")


def test_a_merge_key_alias_is_refused_too():
    text = "base: &base {model: m}\nstages:\n  <<: *base\nname: x\n"
    with pytest.raises(RunConfigError, match="line 3: YAML aliases"):
        config_parse(text, source="run.yaml", allowed=KEYS | {"base"}, required={"name"})


def test_deep_yaml_nesting_is_refused_without_recursion():
    with pytest.raises(RunConfigError, match="run.yaml, line 1: nested more than"):
        config_parse("stages: " + "[" * 50_000, source="run.yaml", allowed=KEYS, required=set())


def test_a_config_above_the_size_limit_is_refused_before_parsing(tmp_path, settings):
    settings.RUN_CONFIG_MAX_BYTES = 100
    text = "name: x\n" + "# padding\n" * 20
    with pytest.raises(RunConfigError, match=r"run.yaml: larger than 100 bytes \(RUN_CONFIG_MAX_BYTES\)"):
        config_parse(text, source="run.yaml", allowed=KEYS, required={"name"})
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(RunConfigError, match="larger than 100 bytes"):
        config_read(path)


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: x\nbudget_usd: .inf\n", "budget_usd must be a finite number"),
        ("name: x\nbudget_usd: .nan\n", "budget_usd must be a finite number"),
        ('name: "a\\0b"\n', "name must not contain a NUL character"),
        ("name: x\nstages: " + "9" * 30 + "\n", "is too large"),
    ],
)
def test_config_values_must_be_storable(text, message):
    with pytest.raises(RunConfigError, match=message):
        config_parse(text, source="run.yaml", allowed=KEYS, required={"name"})


def test_an_ordinary_config_still_parses():
    data = config_parse(
        "name: x\nbudget_usd: 2.5\nstages: {extract: {max_tokens: 10}}\n",
        source="run.yaml",
        allowed=KEYS,
        required={"name"},
    )
    assert data["stages"] == {"extract": {"max_tokens": 10}} and str(data["budget_usd"]) == "2.5"


def test_a_plain_file_above_the_decompressed_limit_is_refused(tmp_path):
    path = tmp_path / "docs.jsonl"
    line = (json.dumps({"id": "x", "text": "t" * 100}) + "\n").encode()
    with open(path, "wb") as handle:
        handle.write(line * ((2 * MIB) // len(line)))
    with pytest.raises(RecordError, match="RECORD_MAX_DECOMPRESSED_BYTES"):
        _read_all(path, ReadLimits(max_decompressed_bytes=MIB))


# --- large study uploads run on a worker ----------------------------------------------

STUDY_FORM = {
    "name": "Big study",
    "kind": "critical_failure",
    "annotators_per_item": 3,
    "min_seconds": 90,
    "lease_minutes": 30,
    "training_enabled": "on",
    "attention_max_failures": 1,
    "seed": 0,
    "min_annotations_for_majority": 2,
}


def _items_bytes(n: int, bad_line: int | None = None) -> bytes:
    lines = []
    for i in range(1, n + 1):
        record = (
            _item(i)
            if i != bad_line
            else {
                "item_id": f"i{i}",
                "topic": "T" * 101,
                "goal": "g",
                "reference_steps": ["a"],
                "candidate_steps": ["b"],
            }
        )
        lines.append(json.dumps(record) + "\n")
    return "".join(lines).encode()


@pytest.fixture
def queued(monkeypatch):
    sent: list[int] = []
    monkeypatch.setattr("annotate.tasks.study_import_run_task.delay", lambda pk: sent.append(pk))
    return sent


@pytest.mark.django_db
def test_a_large_items_upload_is_created_by_a_worker_and_its_page_follows_it(
    researcher_client, settings, queued, django_capture_on_commit_callbacks
):
    from django.urls import reverse

    from annotate.models import Study, StudyImport
    from annotate.studies.imports import study_upload_storage
    from annotate.tasks import study_import_run_task

    settings.UPLOAD_BACKGROUND_MIN_BYTES = 1000
    data = _items_bytes(20)
    assert len(data) > 1000
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            reverse("annotate:study_new"), {**STUDY_FORM, "items_file": SimpleUploadedFile("items.jsonl", data)}
        )
    job = StudyImport.objects.get()
    assert response.status_code == 302 and response.url == reverse("annotate:study_import", args=[job.pk])
    assert job.status == "queued" and queued == [job.pk] and not Study.objects.exists()
    page = researcher_client.get(response.url)
    assert page.status_code == 200 and 'http-equiv="refresh"' in page.content.decode()
    assert study_import_run_task.run(job.pk) == "done"
    job.refresh_from_db()
    assert job.study is not None and job.study.items.count() == 20 and job.study.name == "Big study"
    assert not study_upload_storage().exists(job.file_name)  # the items are in the database now
    folder = Path(study_upload_storage().path(job.file_name)).parent
    assert not folder.exists()  # nor is the upload's own folder left behind, empty
    page = researcher_client.get(reverse("annotate:study_import", args=[job.pk])).content.decode()
    assert 'id="import-done"' in page and "20 items" in page and 'http-equiv="refresh"' not in page
    assert study_import_run_task.run(job.pk) == "already done"  # a redelivered task does nothing


@pytest.mark.django_db
def test_a_small_gzip_that_decompresses_past_the_threshold_goes_to_the_worker(researcher_client, settings, queued):
    from django.urls import reverse

    from annotate.models import StudyImport

    settings.UPLOAD_BACKGROUND_MIN_BYTES = 2000
    data = gzip.compress(_items_bytes(200))
    assert len(data) < 2000
    response = researcher_client.post(
        reverse("annotate:study_new"), {**STUDY_FORM, "items_file": SimpleUploadedFile("items.jsonl.gz", data)}
    )
    assert response.status_code == 302 and StudyImport.objects.get().status == "queued"


@pytest.mark.django_db
def test_a_small_items_upload_is_still_created_in_the_request_and_leaves_no_file(researcher_client, settings):
    from django.urls import reverse

    from annotate.models import Study, StudyImport
    from annotate.studies.imports import study_upload_storage

    root = Path(study_upload_storage().location)

    def stored() -> set[Path]:
        return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()

    before = stored()
    response = researcher_client.post(
        reverse("annotate:study_new"), {**STUDY_FORM, "items_file": SimpleUploadedFile("items.jsonl", _items_bytes(3))}
    )
    assert response.status_code == 302 and Study.objects.get().items.count() == 3
    assert not StudyImport.objects.exists()
    assert stored() == before


@pytest.mark.django_db
def test_a_large_upload_with_bad_lines_ends_failed_and_its_page_lists_file_line_field(
    researcher_client, settings, queued
):
    from django.urls import reverse

    from annotate.models import Study, StudyImport
    from annotate.tasks import study_import_run_task

    settings.UPLOAD_BACKGROUND_MIN_BYTES = 1000
    researcher_client.post(
        reverse("annotate:study_new"),
        {**STUDY_FORM, "items_file": SimpleUploadedFile("items.jsonl", _items_bytes(20, bad_line=7))},
    )
    job = StudyImport.objects.get()
    assert study_import_run_task.run(job.pk) == "failed"
    job.refresh_from_db()
    assert job.problems == ["items.jsonl, line 7, field 'topic': must be at most 100 characters"]
    assert not Study.objects.exists()
    page = researcher_client.get(reverse("annotate:study_import", args=[job.pk])).content.decode()
    assert "line 7, field &#x27;topic&#x27;" in page and "nothing was created" in page


@pytest.mark.django_db
def test_a_study_import_that_fails_unexpectedly_ends_failed_never_running(
    researcher_client, settings, queued, monkeypatch
):
    from django.urls import reverse

    from annotate.models import StudyImport
    from annotate.studies.imports import study_import_run

    settings.UPLOAD_BACKGROUND_MIN_BYTES = 1000
    researcher_client.post(
        reverse("annotate:study_new"), {**STUDY_FORM, "items_file": SimpleUploadedFile("items.jsonl", _items_bytes(20))}
    )
    monkeypatch.setattr("annotate.studies.imports.study_create", lambda **kw: (_ for _ in ()).throw(RuntimeError("x")))
    job = study_import_run(study_import_id=StudyImport.objects.get().pk)
    assert job.status == "failed" and "unexpected error (RuntimeError)" in job.error and job.finished_at


@pytest.mark.django_db
def test_the_study_import_task_returns_early_when_the_row_is_gone():
    from annotate.tasks import study_import_run_task

    assert study_import_run_task.run(987654) == "gone"


@pytest.mark.django_db
def test_a_study_imports_settings_survive_the_trip_through_the_worker(researcher_client, settings, queued):
    from django.urls import reverse

    from annotate.models import StudyImport
    from annotate.tasks import study_import_run_task

    settings.UPLOAD_BACKGROUND_MIN_BYTES = 1000
    researcher_client.post(
        reverse("annotate:study_new"),
        {
            **STUDY_FORM,
            "payment_per_item": "0.35",
            "lease_minutes": 45,
            "slug": "big-one",
            "items_file": SimpleUploadedFile("items.jsonl", _items_bytes(20)),
        },
    )
    job = StudyImport.objects.get()
    study_import_run_task.run(job.pk)
    job.refresh_from_db()
    study = job.study
    assert study is not None
    assert (study.slug, str(study.payment_per_item), study.lease_minutes) == ("big-one", "0.35", 45)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "line, field",
    [
        ("workers: 40000", "workers"),
        ("concurrency: 3000000000", "concurrency"),
        ("budget_usd: 1000000000000", "budget_usd"),
        ("name: " + "r" * 201, "name"),
    ],
)
def test_a_mining_run_config_value_beyond_its_column_is_refused_naming_the_key(line, field):
    from mining.run_services import mining_run_create

    text = "name: run\ncandidates_per_topic: 10\n" + line + "\n"
    with pytest.raises(RunConfigError) as caught:
        mining_run_create(config_text=text, source="run.yaml", corpus_name="web", start=False)
    assert str(caught.value).startswith(f"run.yaml: {field} ")


@pytest.mark.django_db
def test_an_upload_over_upload_max_bytes_is_a_400_naming_it_and_stores_nothing(researcher_client, settings):
    from django.urls import reverse

    from annotate.models import Study, StudyImport

    settings.UPLOAD_MAX_BYTES = 2000
    data = _items_bytes(20)
    assert len(data) > 2000
    response = researcher_client.post(
        reverse("annotate:study_new"), {**STUDY_FORM, "items_file": SimpleUploadedFile("items.jsonl", data)}
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert "<strong>upload</strong>" in page and "larger than the limit of 2,000 bytes (UPLOAD_MAX_BYTES)" in page
    assert not Study.objects.exists() and not StudyImport.objects.exists()
    settings.UPLOAD_MAX_BYTES = 1 << 20  # the same upload under the cap is taken
    response = researcher_client.post(
        reverse("annotate:study_new"), {**STUDY_FORM, "items_file": SimpleUploadedFile("items.jsonl", data)}
    )
    assert response.status_code == 302 and Study.objects.get().items.count() == 20
