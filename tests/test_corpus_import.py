"""`import_corpus`: every format and compression, folders with --include, duplicate ids,
bad rows with and without --skip-bad (all or nothing), topics, and the upload service."""

from __future__ import annotations

import gzip

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from core.record_files import RecordError
from mining.corpus_services import CorpusImportFailed, corpus_import, corpus_upload_create, corpus_upload_storage
from mining.document_records import DocumentFields
from mining.models import Corpus, CorpusImport, Document, Topic
from mining.tasks import corpus_import_run_task
from tests.files import jsonl_bytes, write_records

pytestmark = pytest.mark.django_db

DOCS = [
    {
        "id": "doc-1",
        "text": "Preheat the oven to 200 C. Mix flour, yeast and water.",
        "url": "https://example.org/bread",
        "topic": "Food & Dining",
    },
    {
        "id": "doc-2",
        "text": "Warm up for ten minutes before running.",
        "url": "https://example.org/run",
        "topic": "sports-fitness",
    },
    {"id": "doc-3", "text": "Sand the board, then apply two coats of varnish.", "url": "", "topic": "home & hobbies"},
]

FORMATS = ["jsonl", "csv", "parquet", "arrow"]
COMPRESSIONS = ["", ".gz", ".zst", ".bz2", ".xz"]


def _topic_name(document: Document) -> str:
    assert document.topic is not None
    return document.topic.name


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_documents_import_from_every_format_and_compression(tmp_path, fmt, compression):
    path = write_records(tmp_path, "docs", DOCS, fmt, compression)
    report = corpus_import(name="web", path=path)
    assert (report.rows, report.created, report.duplicates, report.bad) == (3, 3, 0, 0)
    corpus = Corpus.objects.get(name="web")
    assert corpus.n_documents == 3
    bread = Document.objects.get(corpus=corpus, doc_id="doc-1")
    assert bread.text == DOCS[0]["text"]
    assert bread.url == "https://example.org/bread"
    assert _topic_name(bread) == "Food & Dining"
    assert _topic_name(Document.objects.get(doc_id="doc-2")) == "Sports & Fitness"  # matched by slug
    assert _topic_name(Document.objects.get(doc_id="doc-3")) == "Home & Hobbies"  # matched by name in any case


def test_text_hash_is_the_same_for_identical_texts(tmp_path):
    records = [{"id": "a", "text": "same words"}, {"id": "b", "text": "same words"}, {"id": "c", "text": "other"}]
    corpus_import(name="web", path=write_records(tmp_path, "docs", records, "jsonl"))
    hashes = dict(Document.objects.values_list("doc_id", "text_hash"))
    assert hashes["a"] == hashes["b"] != hashes["c"]
    assert Document.objects.get(doc_id="a").topic is None


def test_custom_field_names(tmp_path):
    records = [{"uid": 17, "body": "Step one, then step two.", "link": "https://x.org/1", "category": "Health"}]
    path = write_records(tmp_path, "docs", records, "parquet")
    call_command(
        "import_corpus",
        "web",
        str(path),
        "--id-field",
        "uid",
        "--text-field",
        "body",
        "--url-field",
        "link",
        "--topic-field",
        "category",
    )
    doc = Document.objects.get()
    assert (doc.doc_id, doc.url, _topic_name(doc)) == ("17", "https://x.org/1", "Health")


def test_a_folder_is_imported_recursively_with_include(tmp_path):
    (tmp_path / "part1").mkdir()
    (tmp_path / "part1" / "deep").mkdir()
    write_records(tmp_path / "part1", "a", DOCS[:1], "jsonl", ".zst")
    write_records(tmp_path / "part1" / "deep", "b", DOCS[1:2], "jsonl", ".zst")
    write_records(tmp_path, "c", DOCS[2:], "jsonl")  # not matched by the glob
    (tmp_path / "README.md").write_text("not a record file")
    report = corpus_import(name="web", path=tmp_path, include="*.jsonl.zst")
    assert len(report.files) == 2
    assert sorted(Document.objects.values_list("doc_id", flat=True)) == ["doc-1", "doc-2"]


def test_a_folder_without_include_takes_every_record_file_and_ignores_others(tmp_path):
    write_records(tmp_path, "a", DOCS[:1], "jsonl")
    write_records(tmp_path, "b", DOCS[1:], "csv", ".gz")
    (tmp_path / "notes.txt").write_text("ignored")
    call_command("import_corpus", "web", str(tmp_path))
    assert Document.objects.count() == 3


def test_include_that_matches_nothing_is_an_error(tmp_path):
    write_records(tmp_path, "a", DOCS, "jsonl")
    with pytest.raises(CommandError, match="no record files matching"):
        call_command("import_corpus", "web", str(tmp_path), "--include", "*.parquet")
    assert not Corpus.objects.exists()


def test_duplicate_ids_are_reported_and_skipped(tmp_path, capsys):
    records = DOCS + [{"id": "doc-1", "text": "A second text under the same id."}, {"id": "doc-2", "text": "again"}]
    path = write_records(tmp_path, "docs", records, "jsonl")
    call_command("import_corpus", "web", str(path))
    out = capsys.readouterr().out
    assert "3 documents created, 2 duplicate ids skipped" in out
    assert f"{path}, line 4: id 'doc-1' (earlier in this import)" in out
    assert Document.objects.get(doc_id="doc-1").text == DOCS[0]["text"]  # the first one wins


def test_reimporting_into_a_corpus_skips_the_ids_it_already_has(tmp_path):
    corpus_import(name="web", path=write_records(tmp_path, "one", DOCS[:2], "jsonl"))
    report = corpus_import(name="web", path=write_records(tmp_path, "two", DOCS, "jsonl"))
    assert (report.created, report.duplicates) == (1, 2)
    assert "(already in the corpus)" in report.duplicate_examples[0]
    assert Corpus.objects.get(name="web").n_documents == 3
    # the same ids in another corpus are not duplicates
    assert corpus_import(name="other", path=tmp_path / "two.jsonl").created == 3


def test_duplicates_across_batches_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr("mining.corpus_services.CORPUS_IMPORT_BATCH_SIZE", 2)
    records = [{"id": f"d{i % 5}", "text": f"text {i}"} for i in range(12)]
    report = corpus_import(name="web", path=write_records(tmp_path, "docs", records, "jsonl"))
    assert (report.created, report.duplicates) == (5, 7)
    assert Document.objects.count() == 5


BAD = [
    DOCS[0],
    {"id": "doc-x", "text": ""},  # line 2: empty text
    {"id": "", "text": "no id"},  # line 3: empty id
    {"text": "id missing altogether"},  # line 4: missing id
    {"id": "doc-y", "text": "topic?", "topic": "Gardening"},  # line 5: unknown topic
    {"id": "doc-z"},  # line 6: missing text
    DOCS[1],
]


def test_bad_rows_without_skip_bad_import_nothing_and_list_every_row(tmp_path):
    Corpus.objects.create(name="web")
    path = write_records(tmp_path, "docs", BAD, "jsonl")
    with pytest.raises(CommandError) as caught:
        call_command("import_corpus", "web", str(path))
    message = str(caught.value)
    assert f"{path}, line 2, field 'text': empty text" in message
    assert f"{path}, line 3, field 'id': missing or empty id" in message
    assert f"{path}, line 4, field 'id': missing or empty id" in message
    assert f"{path}, line 5, field 'topic': unknown topic 'Gardening'" in message
    assert f"{path}, line 6, field 'text': missing text" in message
    assert "5 bad rows" in message and "Nothing was imported" in message and "--skip-bad" in message
    assert Document.objects.count() == 0
    assert Corpus.objects.get(name="web").n_documents == 0


def test_a_new_corpus_is_not_created_when_the_import_fails(tmp_path):
    path = write_records(tmp_path, "docs", BAD, "csv")
    with pytest.raises(CorpusImportFailed) as caught:
        corpus_import(name="fresh", path=path)
    assert caught.value.report.bad == 5 and caught.value.report.created == 0
    assert not Corpus.objects.filter(name="fresh").exists()
    assert not Topic.objects.filter(name="Gardening").exists()


def test_skip_bad_imports_the_good_rows_and_lists_the_bad(tmp_path, capsys):
    path = write_records(tmp_path, "docs", BAD, "jsonl", ".gz")
    call_command("import_corpus", "web", str(path), "--skip-bad")
    out = capsys.readouterr().out
    assert "2 documents created" in out and "5 bad rows skipped" in out
    assert f"{path}, line 5, field 'topic': unknown topic 'Gardening'" in out
    assert sorted(Document.objects.values_list("doc_id", flat=True)) == ["doc-1", "doc-2"]
    assert Corpus.objects.get(name="web").n_documents == 2


def test_skip_bad_counts_all_bad_rows_but_lists_the_first_ones(tmp_path, monkeypatch):
    monkeypatch.setattr("mining.corpus_services.CORPUS_REPORT_MAX_BAD_ROWS", 3)
    records = [{"id": f"d{i}", "text": ""} for i in range(10)] + [{"id": "ok", "text": "fine"}]
    report = corpus_import(name="web", path=write_records(tmp_path, "docs", records, "jsonl"), skip_bad=True)
    assert report.bad == 10 and len(report.bad_rows) == 3 and report.created == 1
    assert "bad rows (first 3 of 10):" in report.lines()


def test_bad_rows_in_parquet_name_the_row(tmp_path):
    records: list[dict[str, str | None]] = [{"id": "a", "text": "fine"}, {"id": "b", "text": None}]
    path = write_records(tmp_path, "docs", records, "parquet")
    with pytest.raises(CorpusImportFailed) as caught:
        corpus_import(name="web", path=path)
    assert caught.value.report.bad_rows == [f"{path}, row 2, field 'text': missing text"]


def test_unknown_topics_are_created_on_request(tmp_path):
    path = write_records(tmp_path, "docs", BAD[4:5], "jsonl")
    call_command("import_corpus", "web", str(path), "--create-topics")
    assert _topic_name(Document.objects.get()) == "Gardening"


def test_an_unreadable_file_stops_the_import_even_with_skip_bad(tmp_path):
    good = write_records(tmp_path, "a", DOCS, "jsonl")
    broken = tmp_path / "b.jsonl"
    broken.write_text('{"id": "x", "text": "fine"}\n{"id": "y", "text": \n')
    with pytest.raises(CommandError, match=r"b\.jsonl, line 2: invalid JSON"):
        call_command("import_corpus", "web", str(tmp_path), "--skip-bad")
    assert Document.objects.count() == 0 and good.exists()


def test_a_truncated_compressed_file_is_an_error(tmp_path):
    data = gzip.compress(jsonl_bytes(DOCS * 50))
    path = tmp_path / "docs.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RecordError, match="cannot decompress"):
        corpus_import(name="web", path=path, skip_bad=True)
    assert Document.objects.count() == 0


def test_a_missing_path_is_reported(tmp_path):
    with pytest.raises(CommandError, match="no such file or folder"):
        call_command("import_corpus", "web", str(tmp_path / "nope.jsonl"))


def test_a_small_upload_is_imported_at_once_and_the_file_removed():
    upload = SimpleUploadedFile("docs.jsonl", jsonl_bytes(DOCS))
    job = corpus_upload_create(name="web", upload=upload, user="ada")
    assert job.status == "done" and job.corpus is not None and job.corpus.name == "web" and job.report["created"] == 3
    assert job.report["files"] == ["docs.jsonl"]
    assert not corpus_upload_storage().exists(job.file_name)
    assert Document.objects.count() == 3


def test_a_successful_upload_leaves_no_empty_folder_behind(settings):
    """The upload's own folder (uploads/corpora/<random>/) goes with its file; a failed
    import keeps both, for a new upload."""
    from pathlib import Path

    root = Path(corpus_upload_storage().location)
    job = corpus_upload_create(name="web", upload=SimpleUploadedFile("docs.jsonl", jsonl_bytes(DOCS)))
    assert job.status == "done"
    folder = root / Path(job.file_name).parent
    assert folder != root and not folder.exists()
    settings.UPLOAD_BACKGROUND_MIN_BYTES = 10  # queued, then run as the worker runs it
    queued = corpus_upload_create(name="web2", upload=SimpleUploadedFile("docs.jsonl", jsonl_bytes(DOCS)))
    assert (root / queued.file_name).is_file()
    assert corpus_import_run_task.run(queued.pk) == "done"
    assert not (root / Path(queued.file_name).parent).exists()
    failed = corpus_upload_create(name="web3", upload=SimpleUploadedFile("docs.jsonl", jsonl_bytes(BAD)))
    assert corpus_import_run_task.run(failed.pk) == "failed" and (root / failed.file_name).is_file()


def test_a_failed_upload_keeps_its_report_with_the_original_file_name():
    upload = SimpleUploadedFile("docs.jsonl", jsonl_bytes(BAD))
    job = corpus_upload_create(name="web", upload=upload, fields=DocumentFields())
    assert job.status == "failed"
    assert job.report["bad"] == 5
    assert job.report["bad_rows"][0] == "docs.jsonl, line 2, field 'text': empty text"
    assert not Corpus.objects.exists()


def test_a_large_upload_is_queued_for_the_worker(monkeypatch, settings, django_capture_on_commit_callbacks):
    settings.UPLOAD_BACKGROUND_MIN_BYTES = 10
    sent = []
    monkeypatch.setattr(corpus_import_run_task, "delay", lambda pk: sent.append(pk))
    with django_capture_on_commit_callbacks(execute=True):
        job = corpus_upload_create(
            name="web", upload=SimpleUploadedFile("docs.jsonl.gz", gzip.compress(jsonl_bytes(DOCS)))
        )
    assert job.status == "queued" and sent == [job.pk]
    assert Document.objects.count() == 0
    assert corpus_import_run_task.run(job.pk) == "done"
    assert Document.objects.count() == 3
    assert corpus_import_run_task.run(job.pk) == "already done"  # a redelivered task does nothing


def test_the_task_returns_early_when_the_upload_is_gone():
    assert corpus_import_run_task.run(987654) == "gone"


def test_an_upload_of_an_unknown_file_type_is_refused():
    with pytest.raises(RecordError, match="unknown file type"):
        corpus_upload_create(name="web", upload=SimpleUploadedFile("docs.txt", b"hello"))
    assert not CorpusImport.objects.exists()
