"""A UTF-8 byte order mark at the start of a JSONL or CSV file (Windows tools write one) is
read as what it is, not as data: the record reader (core/record_text.py) drops it, plain or
compressed. A BOM anywhere else is still refused where it would have been."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from core.record_files import RecordError
from core.record_reader import iter_records
from core.record_text import jsonl_records
from tests.files import COMPRESSORS, csv_bytes, jsonl_bytes

BOM = b"\xef\xbb\xbf"
RECORDS = [{"id": "doc-1", "text": "Boil the water."}, {"id": "doc-2", "text": "Pour it over the leaves."}]
ENCODE = {"jsonl": jsonl_bytes, "csv": csv_bytes}


@pytest.mark.parametrize("compression", ["", ".gz", ".zst", ".bz2", ".xz"])
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_bom_at_the_start_of_a_file_is_dropped(tmp_path, fmt, compression):
    path = tmp_path / f"bom.{fmt}{compression}"
    path.write_bytes(COMPRESSORS[compression](BOM + ENCODE[fmt](RECORDS)))
    assert [record for _, record in iter_records(path)] == RECORDS


@pytest.mark.parametrize("compression", ["", ".gz"])
def test_a_bom_later_in_a_jsonl_file_is_still_an_error_naming_its_line(tmp_path, compression):
    lines = jsonl_bytes(RECORDS).splitlines(keepends=True)
    path = tmp_path / f"bom.jsonl{compression}"
    path.write_bytes(COMPRESSORS[compression](BOM + lines[0] + BOM + lines[1]))
    with pytest.raises(RecordError, match="BOM") as caught:
        list(iter_records(path))
    assert caught.value.line == 2


def test_a_second_bom_at_the_start_is_not_dropped(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(BOM + BOM + jsonl_bytes(RECORDS))
    with pytest.raises(RecordError, match="BOM") as caught:
        list(iter_records(path))
    assert caught.value.line == 1


def test_a_bom_before_a_blank_first_line_is_dropped_too(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(BOM + b"\n" + jsonl_bytes(RECORDS))
    assert [record for _, record in iter_records(path)] == RECORDS


def test_lines_already_in_memory_drop_a_leading_bom_as_text_or_bytes():
    text = jsonl_bytes(RECORDS).decode().splitlines()
    assert [r for _, r in jsonl_records(["\ufeff" + text[0], text[1]], "memory")] == RECORDS
    assert [r for _, r in jsonl_records([BOM + text[0].encode(), text[1].encode()], "memory")] == RECORDS


@pytest.mark.django_db
def test_a_corpus_upload_with_a_bom_is_imported():
    from mining.corpus_services import corpus_upload_create
    from mining.models import Document

    job = corpus_upload_create(name="web", upload=SimpleUploadedFile("bom.jsonl", BOM + jsonl_bytes(RECORDS)))
    assert job.status == "done", job.error
    assert sorted(Document.objects.values_list("doc_id", flat=True)) == ["doc-1", "doc-2"]
