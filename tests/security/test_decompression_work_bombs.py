"""Every reader counts work, not just bytes (issue 28, F-09 and F-10).

F-09: a 49 KB .jsonl.zst of 1.5 GiB of newlines held a worker for 17 minutes, because blank
lines were read one by one in Python before any limit counted them. Now runs of blank lines
are skipped at C speed, every decoded byte counts, and a compressed file may decode to at
most ``MAX_COMPRESSION_RATIO`` times its size (beyond its first MiB, each record counted as
``RECORD_CHARGE_BYTES`` more): a bomb of any compression is refused in well under a second
of CPU, naming the file and the setting.

F-10: whether an upload is imported in the request or by a worker is decided by the size it
decodes to and its records, measured (Parquet and Arrow from their metadata and batch
sizes), not by the compressed size; a columnar file is checked before its rows become
Python objects (a group of rows whose metadata says it is over ``MAX_LINE_BYTES`` per row
is never decoded; a huge cell is a record over the limit; a dictionary repeated a million
times counts what it expands to).

Bombs are built small on disk by repeating one compressed frame (every format here reads
concatenated frames), so building them is fast too. CPU time is measured with
``time.process_time`` (what the process itself spent, not what a loaded machine's other
processes take from it); memory with tracemalloc (Python objects)."""

from __future__ import annotations

import bz2
import functools
import gzip
import json
import lzma
import random
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
import zstandard
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotate.studies.item_files import DEFAULT_LIMITS as STUDY_ITEM_DEFAULTS
from annotate.studies.item_files import items_read
from config.settings.uploads import LIMIT_DEFAULTS, upload_settings
from core.record_files import LimitReached, ReadLimits, RecordError
from core.record_reader import decodes_beyond, iter_records
from mining.corpus_services import corpus_import, corpus_import_run, corpus_upload_create
from mining.models import Corpus, CorpusImport, Document

MIB = 1 << 20
FRAME_BYTES = MIB
COMPRESS = {
    ".gz": lambda data: gzip.compress(data, compresslevel=9),
    ".bz2": bz2.compress,
    ".xz": lambda data: lzma.compress(data, preset=1),
    ".zst": lambda data: zstandard.ZstdCompressor(level=19).compress(data),
}
# What the reader may spend on a bomb, in CPU seconds. Measured on a 2-core machine: the
# 1.5 GiB zstd newline bomb through the importer 0.04-0.05 s, each 256 MiB blank-line bomb
# below at most 0.21 s (gzip, whose ratio tops out near 1,000; zstd and bz2 0.02 s, xz 0.05 s),
# a columnar bomb through the importer 0.01 s. The budgets are more than twice the slowest,
# rounded up to whole seconds, so that a loaded machine does not fail them.
DEFAULT_BOMB_CPU_SECONDS = 2.0
BOMB_CPU_SECONDS = 1.0


@functools.cache
def _frame(suffix: str, unit: bytes, mib: int = 1) -> bytes:
    """One compressed frame of ``mib`` MiB of ``unit`` repeated."""
    return COMPRESS[suffix](unit * (mib * FRAME_BYTES // len(unit)))


def _bomb(path: Path, unit: bytes, frames: int, head: bytes = b"") -> Path:
    """A compressed file of ``head`` then ``frames`` MiB of ``unit``, small on disk."""
    suffix = path.suffix
    path.write_bytes((COMPRESS[suffix](head) if head else b"") + _frame(suffix, unit) * frames)
    return path


def _cpu(function) -> tuple[float, object]:
    started = time.process_time()
    try:
        outcome: object = function()
    except RecordError as exc:
        outcome = exc
    return time.process_time() - started, outcome


def _peak_python_bytes(function) -> tuple[int, object]:
    tracemalloc.start()
    try:
        outcome: object = function()
    except RecordError as exc:
        outcome = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, outcome


def _read_all(path: Path, limits: ReadLimits | None = None) -> list:
    return list(iter_records(path, limits))


def _item(n: int) -> dict:
    return {
        "item_id": f"i{n}",
        "topic": "Food & Dining",
        "goal": f"Bake bread {n}",
        "reference_steps": ["Mix", "Bake"],
        "candidate_steps": ["Mix", "Bake"],
    }


# --- the settings ---------------------------------------------------------------------


def test_the_compression_ratio_limit_is_a_setting_of_both_scopes_and_the_pure_default():
    assert LIMIT_DEFAULTS["RECORD"]["MAX_COMPRESSION_RATIO"] == ReadLimits().max_compression_ratio == 100
    assert LIMIT_DEFAULTS["STUDY_ITEMS"]["MAX_COMPRESSION_RATIO"] == STUDY_ITEM_DEFAULTS.max_compression_ratio
    settings = upload_settings()
    assert settings["RECORD_MAX_COMPRESSION_RATIO"] == 100 and settings["UPLOAD_BACKGROUND_MIN_RECORDS"] == 5000


def test_the_ratio_and_the_background_records_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("RECORD_MAX_COMPRESSION_RATIO", "1000")
    monkeypatch.setenv("UPLOAD_BACKGROUND_MIN_RECORDS", "20")
    settings = upload_settings()
    assert settings["RECORD_MAX_COMPRESSION_RATIO"] == 1000 and settings["UPLOAD_BACKGROUND_MIN_RECORDS"] == 20
    monkeypatch.setenv("STUDY_ITEMS_MAX_COMPRESSION_RATIO", "0")
    with pytest.raises(RuntimeError, match="STUDY_ITEMS_MAX_COMPRESSION_RATIO=0"):
        upload_settings()


# --- F-09: blank lines and whitespace -------------------------------------------------


@pytest.mark.django_db
def test_the_49_kb_zstd_of_1_5_gib_of_newlines_is_refused_in_seconds_at_the_default_limits(monkeypatch):
    # The attack as reported: 1.5 GiB of newlines in ~50 KB, uploaded as a corpus, at the
    # default limits (RECORD_MAX_DECOMPRESSED_BYTES is 20 GiB, so it alone never stopped it).
    data = _frame(".zst", b"\n", 16) * 96
    assert len(data) < 60_000
    monkeypatch.setattr("mining.tasks.corpus_import_run_task.delay", lambda pk: None)
    job = corpus_upload_create(name="web", upload=SimpleUploadedFile("nl.jsonl.zst", data))
    assert job.status == "queued"  # 1.5 GiB decoded: a worker's job, never the request's
    seconds, _ = _cpu(lambda: corpus_import_run(corpus_import_id=job.pk))
    job.refresh_from_db()
    assert seconds < DEFAULT_BOMB_CPU_SECONDS, f"{seconds:.2f} s of CPU"
    assert job.status == "failed" and job.finished_at is not None
    assert job.error.startswith("nl.jsonl.zst, line ")
    assert "(RECORD_MAX_COMPRESSION_RATIO)" in job.error
    assert not Corpus.objects.exists() and not Document.objects.exists()


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("unit", [b"\n", b"\r\n", b" \t  \n"], ids=["newlines", "crlf", "whitespace"])
def test_a_blank_line_bomb_of_any_compression_is_refused_in_a_second_naming_file_and_setting(
    tmp_path, suffix, fmt, unit
):
    # 256 MiB of blank lines (in a CSV too: a line of spaces where a record starts is blank).
    head = b"id,text\n" if fmt == "csv" else b'{"id": "a", "text": "t"}\n'
    path = _bomb(tmp_path / f"blank.{fmt}{suffix}", unit, frames=256, head=head)
    assert path.stat().st_size < 2 * MIB
    seconds, error = _cpu(lambda: _read_all(path))
    assert isinstance(error, RecordError), error
    assert seconds < BOMB_CPU_SECONDS, f"{seconds:.2f} s of CPU"
    assert str(error).startswith(f"{path}, line ")
    assert str(error).endswith("(RECORD_MAX_COMPRESSION_RATIO)")


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_blank_lines_count_against_the_decompressed_limit_too(tmp_path, suffix):
    path = _bomb(tmp_path / f"blank.jsonl{suffix}", b"\n", frames=16)
    limits = ReadLimits(max_decompressed_bytes=8 * MIB, max_compression_ratio=1 << 30)
    with pytest.raises(LimitReached, match=r"decompresses to more than 8 MiB \(RECORD_MAX_DECOMPRESSED_BYTES\)"):
        _read_all(path, limits)
    plain = tmp_path / "blank.csv"
    plain.write_bytes(b"id,text\n" + b"\n" * (9 * MIB))
    with pytest.raises(LimitReached, match="RECORD_MAX_DECOMPRESSED_BYTES"):
        _read_all(plain, limits)


def test_a_plain_file_of_blank_lines_costs_what_its_bytes_cost(tmp_path):
    # Uncompressed, 64 MiB of newlines within every limit: read through, no record, quickly.
    path = tmp_path / "blank.jsonl"
    path.write_bytes(b'{"id": "a", "text": "t"}\n' + b"\n" * (64 * MIB) + b'{"id": "b", "text": "t"}\n')
    seconds, records = _cpu(lambda: _read_all(path))
    assert isinstance(records, list), records
    assert [position for position, _ in records] == ["line 1", f"line {64 * MIB + 2}"]
    assert seconds < BOMB_CPU_SECONDS, f"{seconds:.2f} s of CPU"


def test_line_numbers_survive_skipped_blank_runs(tmp_path):
    jsonl = tmp_path / "docs.jsonl.gz"
    body = b'{"id": "a", "text": "t"}\n' + b"\n \n\t\n" * 30_000 + b'{"id": "b", "text": "t"}\n\n{"id": "c"\n'
    jsonl.write_bytes(gzip.compress(body))
    with pytest.raises(RecordError) as caught:
        _read_all(jsonl)
    assert caught.value.position == "line 90004"  # the bad line, after 90,001 blank ones
    csv_path = tmp_path / "docs.csv"
    csv_path.write_bytes(b'id,text\n\n\na,one\r\n\r\n\r\nb,"two\n\nlines"\n\n' + b"\n" * 5000 + b"c,three\n")
    rows = _read_all(csv_path)
    assert [(position, row["id"]) for position, row in rows] == [("line 4", "a"), ("line 7", "b"), ("line 5011", "c")]
    assert rows[1][1]["text"] == "two\n\nlines"  # empty lines inside a quoted cell are data


def test_a_line_of_unicode_spaces_is_blank_but_counts_as_a_line_read(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "a", "text": "t"}\n' + "\u00a0\u2003\n" * 20 + '{"id": "b", "text": "t"}\n')
    assert len(_read_all(path)) == 2
    with pytest.raises(RecordError, match=r"line 11: more than 10 records \(RECORD_MAX_RECORDS\)"):
        _read_all(path, ReadLimits(max_records=10))


def test_a_million_empty_records_in_a_small_file_are_refused_as_a_bomb(tmp_path):
    # "{}" is a record: its two bytes cost an importer far more than two bytes' worth.
    path = tmp_path / "empty.jsonl.zst"
    path.write_bytes(COMPRESS[".zst"](b"{}\n" * 1_000_000))
    seconds, error = _cpu(lambda: _read_all(path))
    assert isinstance(error, LimitReached) and "(RECORD_MAX_COMPRESSION_RATIO)" in str(error)
    assert seconds < BOMB_CPU_SECONDS, f"{seconds:.2f} s of CPU"


def test_an_ordinary_compressed_corpus_is_not_mistaken_for_a_bomb(tmp_path):
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    lines = [json.dumps({"id": f"d{n}", "text": " ".join(rng.choices(words, k=200))}) for n in range(1500)]
    data = ("\n".join(lines) + "\n").encode()
    assert len(data) > 1 * MIB  # past the first MiB, where the ratio starts to count
    ordinary: dict[str, Callable[[bytes], bytes]] = {
        ".gz": gzip.compress,
        ".bz2": bz2.compress,
        ".xz": lzma.compress,
        ".zst": zstandard.compress,
    }
    for suffix, compress in ordinary.items():
        path = tmp_path / f"docs.jsonl{suffix}"
        path.write_bytes(compress(data))
        assert len(data) / path.stat().st_size < 100
        assert len(_read_all(path)) == 1500


# --- study item files -----------------------------------------------------------------


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_newline_bomb_of_study_items_is_refused_quickly_naming_the_study_items_setting(tmp_path, suffix):
    head = (json.dumps(_item(1)) + "\n").encode()
    path = _bomb(tmp_path / f"items.jsonl{suffix}", b"\n", frames=256, head=head)
    seconds, error = _cpu(lambda: items_read(path, kind="critical_failure"))
    assert isinstance(error, RecordError), error
    assert seconds < BOMB_CPU_SECONDS, f"{seconds:.2f} s of CPU"
    assert str(error).startswith(f"{path}, line ") and "(STUDY_ITEMS_MAX_COMPRESSION_RATIO)" in str(error)


def test_bad_study_item_lines_cannot_go_on_for_ever(tmp_path):
    # Bad lines are reported (the first 20) and counted, but reading them is work too: they
    # count against STUDY_ITEMS_MAX_RECORDS like good ones.
    path = tmp_path / "items.jsonl"
    path.write_bytes(b"x\n" * 5000)
    limits = ReadLimits(max_records=1000, max_line_bytes=MIB, max_decompressed_bytes=MIB, scope="STUDY_ITEMS")
    with pytest.raises(RecordError) as caught:
        items_read(path, kind="critical_failure", limits=limits)
    last = caught.value.problems[-1]  # listed after the first 20 bad lines, however many came between
    assert last.line == 1001 and "more than 1,000 records (STUDY_ITEMS_MAX_RECORDS)" in last.message
    assert len(caught.value.problems) == 21 and caught.value.more == 1000 - 20


# --- F-10: columnar files -------------------------------------------------------------


def _huge_cell_table(cell_bytes: int, rows: int = 1, at: int = 0) -> pa.Table:
    texts = ["short"] * rows
    texts[at] = "x" * cell_bytes
    return pa.table({"id": [f"d{n}" for n in range(rows)], "text": texts})


def _write(table: pa.Table, path: Path, **options) -> Path:
    if path.name.endswith((".parquet", ".parquet.gz", ".parquet.zst", ".parquet.bz2", ".parquet.xz")):
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd", **options)
    else:
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, table.schema, options=ipc.IpcWriteOptions(compression="zstd")) as writer:
            writer.write_table(table, **options)
    data = sink.getvalue().to_pybytes()
    outer = path.suffix if path.suffix in COMPRESS else None
    path.write_bytes(COMPRESS[outer](data) if outer else data)
    return path


def _never_decoded(monkeypatch) -> list[str]:
    decoded: list[str] = []

    def no_batches(*args, **kwargs) -> Iterator[pa.RecordBatch]:
        decoded.append("parquet")
        return iter(())

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", no_batches)
    monkeypatch.setattr(ipc.RecordBatchFileReader, "get_batch", lambda *a, **k: decoded.append("arrow"))
    return decoded


@pytest.mark.parametrize("name", ["cell.arrow", "cell.parquet", "cell.arrow.gz", "cell.parquet.zst"])
def test_a_columnar_file_with_one_huge_cell_is_refused_from_its_metadata_without_decoding_it(
    tmp_path, monkeypatch, name
):
    # F-10's 29.8 KB Arrow file held one 900 MB cell; here 32 MiB, with RECORD_MAX_LINE_BYTES 1 MiB.
    path = _write(_huge_cell_table(32 * MIB), tmp_path / name)
    assert path.stat().st_size < 64 * 1024
    decoded = _never_decoded(monkeypatch)
    limits = ReadLimits(max_line_bytes=MIB, max_compression_ratio=1 << 30)
    with pytest.raises(RecordError) as caught:
        _read_all(path, limits)
    assert str(caught.value).startswith(f"{path}, row 1: record longer than 1 MiB (RECORD_MAX_LINE_BYTES)")
    assert decoded == []
    # At the default limits the same file is refused for its ratio, just as early.
    with pytest.raises(LimitReached, match=r"^.*cell\.\w+(\.\w+)?: the file decompresses to more than 100 times"):
        _read_all(path)
    assert decoded == []


@pytest.mark.parametrize("name", ["cells.arrow", "cells.parquet", "cells.parquet.xz"])
def test_one_huge_cell_among_small_rows_is_a_record_over_the_limit_before_rows_become_objects(tmp_path, name):
    path = _write(_huge_cell_table(4 * MIB, rows=200, at=136), tmp_path / name)
    limits = ReadLimits(max_line_bytes=MIB, max_compression_ratio=1 << 30)
    peak, error = _peak_python_bytes(lambda: _read_all(path, limits))
    assert isinstance(error, RecordError) and not isinstance(error, LimitReached), error
    assert error.position == "row 137" and "record longer than 1 MiB (RECORD_MAX_LINE_BYTES)" in str(error)
    assert peak < 4 * MIB, f"peak {peak} bytes"  # the 4 MiB cell never became a Python string


def _dictionary_table(value_bytes: int, rows: int) -> pa.Table:
    text = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["v" * value_bytes]))
    return pa.table({"id": [f"d{n}" for n in range(rows)], "text": text})


@pytest.mark.parametrize("name", ["dict.parquet", "dict.arrow", "dict.parquet.bz2", "dict.arrow.zst"])
def test_a_dictionary_repeated_a_thousand_times_counts_what_it_expands_to(tmp_path, monkeypatch, name):
    # One 1 MiB value, 2,000 rows: 2 GiB once expanded, a few KiB on disk.
    monkeypatch.setattr("core.record_columnar.COLUMNAR_DECODE_MAX_BYTES", 32 * MIB)  # batches of 32 rows
    path = _write(_dictionary_table(MIB, 2000), tmp_path / name)
    assert path.stat().st_size < 64 * 1024
    seconds, error = _cpu(lambda: _read_all(path))
    assert isinstance(error, LimitReached) and "(RECORD_MAX_COMPRESSION_RATIO)" in str(error), error
    assert seconds < BOMB_CPU_SECONDS, f"{seconds:.2f} s of CPU"
    limits = ReadLimits(max_compression_ratio=1 << 30, max_decompressed_bytes=512 * MIB)
    with pytest.raises(LimitReached, match=r"more than 512 MiB \(RECORD_MAX_DECOMPRESSED_BYTES\)"):
        _read_all(path, limits)


def test_a_dictionary_inside_lists_counts_what_it_expands_to(tmp_path):
    # A list<string> column ("steps") whose one 1 MiB dictionary value is repeated 2,000 times.
    value = pa.DictionaryArray.from_arrays(pa.array([0] * 2000, pa.int32()), pa.array(["s" * MIB]))
    steps = pa.ListArray.from_arrays(pa.array(list(range(0, 2001, 20)), pa.int32()), value)
    table = pa.table({"id": [f"d{n}" for n in range(100)], "steps": steps})
    path = _write(table, tmp_path / "steps.parquet")
    assert path.stat().st_size < 64 * 1024
    with pytest.raises(RecordError, match=r"row 1: record longer than 8 MiB \(RECORD_MAX_LINE_BYTES\)"):
        _read_all(path, ReadLimits(max_compression_ratio=1 << 30))  # 20 MiB a row, none made into objects
    with pytest.raises(LimitReached, match="RECORD_MAX_COMPRESSION_RATIO"):
        _read_all(path)


def test_a_delta_encoded_column_is_read_in_batches_its_chunk_size_allows(tmp_path, monkeypatch):
    # DELTA_BYTE_ARRAY repeats each value's prefix: 200 rows of 256 KiB take 256 KiB stored.
    path = tmp_path / "delta.parquet"
    table = pa.table({"id": [f"d{n}" for n in range(200)], "text": ["x" * (256 * 1024)] * 200})
    pq.write_table(table, path, use_dictionary=False, column_encoding={"text": "DELTA_BYTE_ARRAY"})
    sizes: list[int] = []
    iter_batches = pq.ParquetFile.iter_batches

    def recorded(self, batch_size=65536, **options):
        sizes.append(batch_size)
        return iter_batches(self, batch_size=batch_size, **options)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recorded)
    monkeypatch.setattr("core.record_columnar.COLUMNAR_DECODE_MAX_BYTES", 16 * MIB)
    limits = ReadLimits(max_compression_ratio=1 << 30, max_decompressed_bytes=32 * MIB)
    with pytest.raises(LimitReached, match=r"more than 32 MiB \(RECORD_MAX_DECOMPRESSED_BYTES\)"):
        _read_all(path, limits)
    assert sizes and max(sizes) <= 64  # 16 MiB / 256 KiB, never all 200 rows (50 MiB) at once


def test_expanding_rows_become_python_objects_a_few_mib_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr("core.record_columnar.COLUMNAR_BATCH_BYTES", 4 * MIB)
    path = _write(_dictionary_table(MIB, 64), tmp_path / "dict.parquet")
    limits = ReadLimits(max_compression_ratio=1 << 30)

    def read() -> int:
        return sum(len(record["text"]) for _, record in iter_records(path, limits))

    peak, total = _peak_python_bytes(read)
    assert total == 64 * MIB
    assert peak < 12 * MIB, f"peak {peak} bytes"  # 4 MiB of rows at a time, never 64


@pytest.mark.parametrize("name", ["rows.parquet", "rows.arrow"])
def test_the_row_limit_is_checked_from_the_metadata_before_any_row_is_decoded(tmp_path, monkeypatch, name):
    path = _write(pa.table({"id": pa.array(["same"] * 200_000), "text": pa.array(["t"] * 200_000)}), tmp_path / name)
    decoded = _never_decoded(monkeypatch)
    with pytest.raises(LimitReached, match=r"more than 100,000 records \(RECORD_MAX_RECORDS\)"):
        _read_all(path, ReadLimits(max_records=100_000))
    assert decoded == []


def test_an_ordinary_feather_and_parquet_file_read_as_before(tmp_path):
    table = pa.table(
        {
            "id": [f"d{n}" for n in range(3000)],
            "text": [f"text {n}" for n in range(3000)],
            "steps": [["a", "b"]] * 3000,
            "meta": [{"k": n} for n in range(3000)],
        }
    )
    feather.write_feather(table, tmp_path / "docs.feather")
    pq.write_table(table, tmp_path / "docs.parquet", row_group_size=700)
    with ipc.new_stream(tmp_path / "docs.arrow", table.schema) as writer:
        writer.write_table(table, max_chunksize=500)
    for name in ("docs.feather", "docs.parquet", "docs.arrow"):
        records = _read_all(tmp_path / name)
        assert len(records) == 3000 and records[-1] == ("row 3000", table.slice(2999).to_pylist()[0])


# --- F-10: in the request or on a worker ----------------------------------------------


def test_the_decision_uses_the_decoded_size_and_rows_not_the_stored_size(tmp_path):
    limit = 5 * MIB
    cell = _write(_huge_cell_table(32 * MIB), tmp_path / "cell.arrow")
    rows = _write(
        pa.table({"id": pa.array(["x"] * 2_000_000), "text": pa.array(["t"] * 2_000_000)}), tmp_path / "rows.parquet"
    )
    few = _write(pa.table({"id": ["a", "b"], "text": ["one", "two"]}), tmp_path / "few.parquet")
    blank = _bomb(tmp_path / "blank.jsonl.zst", b"\n", frames=16)
    lines = tmp_path / "tiny.jsonl.gz"
    lines.write_bytes(gzip.compress(b"{}\n" * 6000))
    assert max(path.stat().st_size for path in (cell, rows, few, blank, lines)) < 64 * 1024
    assert decodes_beyond(cell, limit, max_records=5000)  # 32 MiB in one cell
    assert decodes_beyond(rows, limit, max_records=5000)  # 2 M rows
    assert decodes_beyond(blank, limit, max_records=10**9)  # 16 MiB of newlines
    assert decodes_beyond(lines, limit, max_records=5000) and not decodes_beyond(lines, limit, max_records=6000)
    assert not decodes_beyond(few, limit, max_records=5000)


@pytest.fixture
def worker(monkeypatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr("mining.tasks.corpus_import_run_task.delay", lambda pk: sent.append(pk))
    return sent


def _upload_page(client: Client, data: bytes, name: str):
    fields = {"name": "uploaded", "id_field": "id", "text_field": "text", "url_field": "url", "topic_field": "topic"}
    return client.post(reverse("corpus_upload"), {**fields, "file": SimpleUploadedFile(name, data)})


def _page_bomb(tmp_path: Path, name: str) -> bytes:
    if name == "nl.jsonl.zst":
        return _frame(".zst", b"\n", 16) * 96  # F-09: 1.5 GiB of newlines
    if name.startswith("nl."):  # 256 MiB of newlines (a CSV's after its header)
        suffix = Path(name).suffix
        head = COMPRESS[suffix](b"id,text\n") if ".csv" in name else b""
        return head + _frame(suffix, b"\n") * 256
    if name.startswith("cell.arrow"):
        table = _huge_cell_table(64 * MIB)  # F-10: one huge cell
    elif name.startswith("rows.parquet"):
        table = pa.table({"id": pa.array(["x"] * 2_000_000), "text": pa.array(["t"] * 2_000_000)})  # F-10: 2 M rows
    else:
        table = _dictionary_table(MIB, 2000)
    return _write(table, tmp_path / name).read_bytes()


PAGE_BOMBS = [
    "nl.jsonl.zst",
    "nl.jsonl.gz",
    "nl.jsonl.bz2",
    "nl.jsonl.xz",
    "nl.csv.zst",
    "nl.csv.gz",
    "nl.csv.bz2",
    "nl.csv.xz",
    "cell.arrow",
    "cell.arrow.gz",
    "rows.parquet",
    "rows.parquet.xz",
    "dict.parquet",
    "dict.arrow.bz2",
]


@pytest.mark.django_db
@pytest.mark.parametrize("name", PAGE_BOMBS)
def test_a_bomb_uploaded_on_the_corpus_page_goes_to_a_worker_which_refuses_it_in_seconds(
    admin_client_, worker, tmp_path, name, django_capture_on_commit_callbacks
):
    data = _page_bomb(tmp_path, name)
    assert len(data) < 300 * 1024
    with django_capture_on_commit_callbacks(execute=True):
        response = _upload_page(admin_client_, data, name)
    job = CorpusImport.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("corpus_import_detail", args=[job.pk])
    assert job.status == "queued" and worker == [job.pk]  # never imported in the request
    seconds, _ = _cpu(lambda: corpus_import_run(corpus_import_id=job.pk))
    job.refresh_from_db()
    assert seconds < DEFAULT_BOMB_CPU_SECONDS, f"{seconds:.2f} s of CPU"
    assert job.status == "failed" and job.finished_at is not None  # never left running
    assert job.error.startswith(f"{name}") and "(RECORD_MAX_" in job.error
    assert not Document.objects.exists()
    page = admin_client_.get(response["Location"]).content.decode()
    assert "RECORD_MAX_" in page and name in page


@pytest.mark.django_db
def test_the_corpus_importer_refuses_a_bomb_given_by_path_too(tmp_path):
    path = _bomb(tmp_path / "nl.csv.xz", b"\n", frames=256, head=b"id,text\n")
    seconds, error = _cpu(lambda: corpus_import(name="web", path=path))
    assert isinstance(error, LimitReached) and "(RECORD_MAX_COMPRESSION_RATIO)" in str(error)
    assert seconds < BOMB_CPU_SECONDS, f"{seconds:.2f} s of CPU"
    assert not Corpus.objects.exists()


@pytest.mark.django_db
def test_a_small_file_of_many_tiny_records_goes_to_a_worker(
    admin_client_, worker, settings, django_capture_on_commit_callbacks
):
    settings.UPLOAD_BACKGROUND_MIN_RECORDS = 100
    data = b"".join(json.dumps({"id": f"d{n}", "text": "t"}).encode() + b"\n" for n in range(101))
    assert len(data) < settings.UPLOAD_BACKGROUND_MIN_BYTES
    with django_capture_on_commit_callbacks(execute=True):
        _upload_page(admin_client_, data, "docs.jsonl")
    job = CorpusImport.objects.get()
    assert job.status == "queued" and worker == [job.pk]
    assert corpus_import_run(corpus_import_id=job.pk).status == "done"
    assert Corpus.objects.get().n_documents == 101


STUDY_FORM = {
    "name": "Bomb study",
    "kind": "critical_failure",
    "annotators_per_item": 3,
    "min_seconds": 90,
    "lease_minutes": 30,
    "attention_max_failures": 1,
    "seed": 0,
    "min_annotations_for_majority": 2,
}


@pytest.fixture
def study_worker(monkeypatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr("annotate.tasks.study_import_run_task.delay", lambda pk: sent.append(pk))
    return sent


@pytest.fixture
def token_client(researcher) -> Client:
    from core.services import api_token_create

    return Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher, label='script').secret}")


def _items_bomb(suffix: str) -> bytes:
    return COMPRESS[suffix]((json.dumps(_item(1)) + "\n").encode()) + _frame(suffix, b"\n") * 64


@pytest.mark.django_db
@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_study_items_bomb_on_the_api_is_queued_and_refused_in_seconds(
    token_client, study_worker, suffix, django_capture_on_commit_callbacks
):
    from annotate.models import Study, StudyImport
    from annotate.studies.imports import study_import_run

    upload = SimpleUploadedFile(f"items.jsonl{suffix}", _items_bomb(suffix))
    with django_capture_on_commit_callbacks(execute=True):
        response = token_client.post(
            "/api/studies/", {"name": "Bomb", "items_file": upload, "qualification_enabled": "off"}
        )
    assert response.status_code == 202, response.content
    job = StudyImport.objects.get()
    assert study_worker == [job.pk]
    seconds, _ = _cpu(lambda: study_import_run(study_import_id=job.pk))
    job.refresh_from_db()
    assert seconds < BOMB_CPU_SECONDS * 2, f"{seconds:.2f} s of CPU"
    assert job.status == "failed" and job.finished_at is not None
    assert len(job.problems) == 1 and job.problems[0].startswith(f"items.jsonl{suffix}, line ")
    assert job.problems[0].endswith("(STUDY_ITEMS_MAX_COMPRESSION_RATIO)")
    assert not Study.objects.exists()
    status = token_client.get(f"/api/studies/imports/{job.pk}/").json()
    assert status["status"] == "failed"


@pytest.mark.django_db
def test_a_study_items_bomb_on_the_new_study_page_ends_failed_naming_the_setting(
    researcher_client, study_worker, django_capture_on_commit_callbacks
):
    from annotate.models import Study, StudyImport
    from annotate.tasks import study_import_run_task

    upload = SimpleUploadedFile("items.jsonl.zst", _items_bomb(".zst"))
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(reverse("annotate:study_new"), {**STUDY_FORM, "items_file": upload})
    job = StudyImport.objects.get()
    assert study_worker == [job.pk]
    assert response.status_code == 302 and response.url == reverse("annotate:study_import", args=[job.pk])
    assert study_import_run_task.run(job.pk) == "failed"
    page = researcher_client.get(response.url).content.decode()
    assert "STUDY_ITEMS_MAX_COMPRESSION_RATIO" in page and "items.jsonl.zst, line" in page
    assert not Study.objects.exists()


@pytest.mark.django_db
def test_a_study_items_file_of_many_items_goes_to_a_worker_however_small(token_client, study_worker, settings):
    settings.UPLOAD_BACKGROUND_MIN_RECORDS = 10
    data = gzip.compress(b"".join((json.dumps(_item(n)) + "\n").encode() for n in range(1, 12)))
    upload = SimpleUploadedFile("items.jsonl.gz", data)
    response = token_client.post(
        "/api/studies/", {"name": "Many", "items_file": upload, "qualification_enabled": "off"}
    )
    assert response.status_code == 202 and response.json()["status"] == "queued"
