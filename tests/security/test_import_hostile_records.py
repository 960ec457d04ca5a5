"""Importers answer records the database would refuse, or that would turn into script, with a
file-line-field error before anything is written: values longer than their column (a topic
name over 100 characters), NUL characters (refused by PostgreSQL in text and jsonb), lone
surrogates, non-finite numbers, and page addresses that are not http(s). Checked on SQLite,
which would otherwise store most of them silently, so the behaviour is the same on both."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from annotate.studies.item_sources import items_from_file
from core.app_errors import InvalidInput
from core.record_files import RecordError
from core.stored_values import StrictJSONError, check_stored_values
from judging.judgment_import import judgments_import
from judging.models import Generation, GenerationRun, Judgment
from judging.transfer import generations_import
from mining.corpus_services import CorpusImportFailed, corpus_import
from mining.models import Corpus, Document, Procedure, Topic
from mining.procedure_services import procedure_import, topics_ensure

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]  # SQLite would store most of these silently

NUL = "\x00"
GOOD = {
    "source_example_id": "s1",
    "topic": "Food & Dining",
    "goal": "Bake bread",
    "steps": ["Mix.", "Bake."],
    "source_url": "https://example.org/bread",
}


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _how2mine(**source) -> dict:
    return {
        "schema_version": "how2mine.v1",
        "source_example": {
            "id": "h1",
            "text": "page",
            "url": "https://example.org/p",
            "topic": "Food & Dining",
            **source,
        },
        "processed_example": {},
        "final_procedure": {"goal": "Bake", "steps": ["Mix.", "Bake."], "resources": []},
    }


@pytest.fixture(autouse=True)
def _topics():
    topics_ensure()


def _import_error(path: Path, **kwargs) -> RecordError:
    with pytest.raises(RecordError) as caught:
        procedure_import(path=path, **kwargs)
    assert not Procedure.objects.exists()
    return caught.value


# --- the shared check -----------------------------------------------------------------


def test_the_shared_check_reads_limits_from_the_model_fields():
    with pytest.raises(StrictJSONError) as caught:
        check_stored_values(Topic, {"name": "x" * 101}, labels={"name": "category"})
    assert caught.value.field == "category" and "at most 100 characters" in caught.value.message
    check_stored_values(Topic, {"name": "x" * 100})
    with pytest.raises(StrictJSONError, match="NUL"):
        check_stored_values(Procedure, {"goal": f"a{NUL}b"})
    with pytest.raises(StrictJSONError) as caught:
        check_stored_values(Procedure, {"steps": ["ok", f"bad{NUL}"]})
    assert caught.value.field == "steps[1]"
    with pytest.raises(StrictJSONError, match="finite"):
        check_stored_values(Procedure, {"provenance": {"score": float("nan")}})


def test_integer_columns_are_checked_against_the_postgresql_range_on_every_database():
    from goalstep.models import TaskPrediction

    check_stored_values(TaskPrediction, {"choice": 3})
    with pytest.raises(StrictJSONError, match="between -32768 and 32767"):
        check_stored_values(TaskPrediction, {"choice": 2**40})


# --- procedure import -----------------------------------------------------------------


def test_a_new_topic_name_over_100_characters_is_a_file_line_field_error(tmp_path):
    long_topic = "T" * 101
    path = _jsonl(tmp_path / "procs.jsonl", [GOOD, dict(GOOD, source_example_id="s2", topic=long_topic)])
    error = _import_error(path, create_topics=True)
    assert (error.position, error.field) == ("line 2", "topic")
    assert "at most 100 characters" in error.message
    assert not Topic.objects.filter(name=long_topic).exists()


def test_a_topic_name_of_100_characters_is_created_with_a_bounded_slug(tmp_path):
    name = "word " * 19 + "final"  # 100 characters
    assert len(name) == 100
    path = _jsonl(tmp_path / "procs.jsonl", [dict(GOOD, topic=name)])
    procedure_import(path=path, create_topics=True)
    topic = Topic.objects.get(name=name)
    assert len(topic.slug) <= 100
    path2 = _jsonl(tmp_path / "more.jsonl", [dict(GOOD, source_example_id="s9", topic=name.upper())])
    procedure_import(path=path2, create_topics=True)
    assert Topic.objects.filter(name__iexact=name).count() == 1


def test_a_topic_field_named_otherwise_is_named_in_the_error(tmp_path):
    record = {k: v for k, v in GOOD.items() if k != "topic"} | {"category": "C" * 150}
    error = _import_error(_jsonl(tmp_path / "procs.jsonl", [record]), topic_field="category", create_topics=True)
    assert error.field == "category"


@pytest.mark.parametrize(
    "field, value, where",
    [
        ("goal", f"Bake{NUL}bread", "goal"),
        ("steps", ["Mix.", f"Ba{NUL}ke."], "steps[1]"),
        ("resources", [f"flour{NUL}"], "resources[0]"),
        ("source_example_id", f"s{NUL}1", "source_example_id"),
        ("source_example_id", "x" * 513, "source_example_id"),
        ("goal", "Bake \ud800 bread", "goal"),
    ],
)
def test_values_the_database_refuses_are_file_line_field_errors(tmp_path, field, value, where):
    path = _jsonl(tmp_path / "procs.jsonl", [dict(GOOD, **{field: value})])
    error = _import_error(path)
    assert (error.position, error.field) == ("line 1", where)


def test_a_nul_byte_in_a_csv_cell_is_a_file_line_field_error(tmp_path):
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["topic", "goal", "steps"])
    writer.writerow(["Food & Dining", "Bake bread", json.dumps(["Mix."])])
    writer.writerow(["Food & Dining", f"Bake{NUL}", json.dumps(["Mix."])])
    path = tmp_path / "procs.csv"
    path.write_text(buffer.getvalue(), encoding="utf-8")
    error = _import_error(path)
    assert (error.position, error.field) == ("line 3", "goal") and "NUL" in error.message


def test_a_nul_in_a_topic_that_is_only_looked_up_is_refused_before_the_lookup(tmp_path):
    error = _import_error(_jsonl(tmp_path / "procs.jsonl", [dict(GOOD, topic=f"Food{NUL}")]))
    assert error.field == "topic" and "NUL" in error.message


def test_a_how2mine_record_names_its_nested_fields(tmp_path):
    error = _import_error(_jsonl(tmp_path / "procs.jsonl", [_how2mine(text=f"page{NUL}")]))
    assert error.field == "source_example.text"
    error = _import_error(_jsonl(tmp_path / "procs.jsonl", [_how2mine(id="i" * 600)]))
    assert error.field == "source_example.id"


def test_non_finite_numbers_in_a_parquet_provenance_are_refused(tmp_path):
    record = {
        "schema_version": "how2mine.v1",
        "source_example": {"id": "p1", "url": "", "topic": "Food & Dining"},
        "processed_example": {"score": float("nan")},
        "final_procedure": {"goal": "Bake", "steps": ["Mix."], "resources": []},
    }
    path = tmp_path / "procs.parquet"
    pq.write_table(pa.Table.from_pylist([record]), path)
    error = _import_error(path)
    assert (error.position, error.field) == ("row 1", "processed_example.score")


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)//",
        "JavaScript:alert(1)",
        " java\tscript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:x",
        "//evil.example/",
        "example.org/page",
    ],
)
def test_a_source_url_that_is_not_http_is_refused(tmp_path, url):
    error = _import_error(_jsonl(tmp_path / "procs.jsonl", [dict(GOOD, source_url=url)]))
    assert (error.position, error.field) == ("line 1", "source_url")
    assert "http:// or https://" in error.message


def test_a_how2mine_url_and_a_flat_url_field_are_checked_under_their_own_names(tmp_path):
    error = _import_error(_jsonl(tmp_path / "a.jsonl", [_how2mine(url="javascript:alert(1)//")]))
    assert error.field == "source_example.url"
    flat = {k: v for k, v in GOOD.items() if k != "source_url"} | {"url": "javascript:alert(1)"}
    error = _import_error(_jsonl(tmp_path / "b.jsonl", [flat]))
    assert error.field == "url"


def test_http_https_and_empty_urls_are_imported(tmp_path):
    records = [
        dict(GOOD, source_example_id="a", source_url="http://example.org/a"),
        dict(GOOD, source_example_id="b", source_url="HTTPS://example.org/b"),
        dict(GOOD, source_example_id="c", source_url=""),
    ]
    procedure_import(path=_jsonl(tmp_path / "procs.jsonl", records))
    assert sorted(Procedure.objects.values_list("source_url", flat=True)) == [
        "",
        "HTTPS://example.org/b",
        "http://example.org/a",
    ]


# --- corpus import --------------------------------------------------------------------


@pytest.mark.parametrize(
    "row, field",
    [
        ({"id": "d2", "text": "t", "url": "javascript:alert(1)//"}, "url"),
        ({"id": "d2", "text": f"t{NUL}"}, "text"),
        ({"id": f"d{NUL}2", "text": "t"}, "id"),
        ({"id": "d" * 513, "text": "t"}, "id"),
        ({"id": "d2", "text": "t", "topic": f"Food{NUL}"}, "topic"),
    ],
)
def test_a_corpus_row_the_database_would_refuse_is_a_bad_row_naming_its_field(tmp_path, row, field):
    path = _jsonl(tmp_path / "docs.jsonl", [{"id": "d1", "text": "fine", "url": "https://example.org/"}, row])
    with pytest.raises(CorpusImportFailed) as caught:
        corpus_import(name="web", path=path)
    assert caught.value.report.bad == 1
    assert caught.value.report.bad_rows[0].startswith(f"{path}, line 2, field '{field}': ")
    assert not Document.objects.exists() and not Corpus.objects.exists()


def test_skip_bad_imports_the_good_rows_and_leaves_out_the_hostile_ones(tmp_path):
    path = _jsonl(
        tmp_path / "docs.jsonl",
        [
            {"id": "d1", "text": "fine"},
            {"id": "d2", "text": "t", "url": "javascript:alert(1)"},
            {"id": "d3", "text": "also fine", "url": "https://example.org/3"},
        ],
    )
    report = corpus_import(name="web", path=path, skip_bad=True)
    assert (report.created, report.bad) == (2, 1)
    assert sorted(Document.objects.values_list("doc_id", flat=True)) == ["d1", "d3"]


def test_a_new_document_topic_over_100_characters_is_a_bad_row(tmp_path):
    path = _jsonl(tmp_path / "docs.jsonl", [{"id": "d1", "text": "t", "topic": "Z" * 101}])
    with pytest.raises(CorpusImportFailed) as caught:
        corpus_import(name="web", path=path, create_topics=True)
    assert "field 'topic': must be at most 100 characters" in caught.value.report.bad_rows[0]
    assert not Topic.objects.filter(name="Z" * 101).exists()


def test_a_non_finite_numeric_id_in_a_parquet_corpus_is_a_bad_row(tmp_path):
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": [1.0, float("nan")], "text": ["a", "b"]}), path)
    with pytest.raises(CorpusImportFailed) as caught:
        corpus_import(name="web", path=path)
    assert caught.value.report.bad_rows[0].startswith(f"{path}, row 2, field 'id'")


def test_a_corpus_name_longer_than_its_column_is_refused_naming_the_field(tmp_path):
    path = _jsonl(tmp_path / "docs.jsonl", [{"id": "d1", "text": "t"}])
    with pytest.raises(ValueError, match="name: must be at most 200 characters"):
        corpus_import(name="c" * 201, path=path)


# --- study item files -----------------------------------------------------------------


def _item(n: int, **extra) -> dict:
    return {
        "item_id": f"i{n}",
        "topic": "Food & Dining",
        "goal": "Bake bread",
        "reference_steps": ["Mix", "Bake"],
        "candidate_steps": ["Mix", "Bake"],
        **extra,
    }


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"topic": "T" * 101}, "topic"),
        ({"goal": f"Bake{NUL}"}, "goal"),
        ({"reference_steps": ["Mix", f"Ba{NUL}ke"]}, "reference_steps[1]"),
        ({"source": {f"k{NUL}": "v"}}, "source"),
        ({"qualification": {"has_failure": True, "explanation": f"because{NUL}"}}, "qualification.explanation"),
    ],
)
def test_a_study_item_the_database_would_refuse_is_a_line_field_error(tmp_path, extra, field):
    path = _jsonl(tmp_path / "items.jsonl", [_item(1), _item(2, **extra)])
    with pytest.raises(RecordError) as caught:
        items_from_file(path=path, kind="critical_failure")
    problem = caught.value.problems[0]
    assert problem.line == 2 and problem.field is not None and problem.field.startswith(field)


def test_a_multiple_choice_item_names_the_fields_of_its_own_format(tmp_path):
    record = {
        "id": "m1",
        "task": "goal_inference",
        "prompt": f"Which goal?{NUL}",
        "candidates": ["a", "b", "c", "d"],
        "label": 0,
    }
    path = _jsonl(tmp_path / "items.jsonl", [record])
    with pytest.raises(RecordError) as caught:
        items_from_file(path=path, kind="multiple_choice")
    assert caught.value.problems[0].field == "prompt"


# --- generations and judgments --------------------------------------------------------


@pytest.fixture
def procedure(tmp_path):
    procedure_import(path=_jsonl(tmp_path / "procs.jsonl", [GOOD]))
    return Procedure.objects.get()


def _generation(**extra) -> dict:
    return {"source_example_id": "s1", "model": "m", "predicted_steps": ["Mix.", "Bake."], **extra}


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"model": "m" * 201}, "model"),
        ({"predicted_steps": ["Mix.", f"Bake{NUL}"]}, "predicted_steps[1]"),
        ({"model_completion": f"1. Mix{NUL}"}, "model_completion"),
        ({"source_example_id": f"s{NUL}1"}, "source_example_id"),
        ({"goal": f"Bake{NUL}"}, "goal"),
    ],
)
def test_an_imported_generation_the_database_would_refuse_is_a_file_line_field_error(tmp_path, procedure, extra, field):
    path = _jsonl(tmp_path / "gens.jsonl", [_generation(), _generation(**extra)])
    with pytest.raises(RecordError) as caught:
        generations_import(path=path, run_name="imported")
    assert (caught.value.position, caught.value.field) == ("line 2", field)
    assert not GenerationRun.objects.exists() and not Generation.objects.exists()


def test_a_generation_run_name_longer_than_its_column_is_refused(tmp_path, procedure):
    with pytest.raises(InvalidInput, match="run_name: must be at most 200 characters") as refused:
        generations_import(path=_jsonl(tmp_path / "gens.jsonl", [_generation()]), run_name="r" * 201)
    assert refused.value.fields == {"run_name": ["must be at most 200 characters"]}


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"judge": "j" * 201}, "judge"),
        ({"model": f"m{NUL}"}, "model"),
        (
            {"has_failure": True, "critical_failures": [{"failure": f"bad{NUL}", "L1_steps": [1], "L2_steps": [1]}]},
            "critical_failures",
        ),
        ({"judge_completion": "[" * 100 + "]" * 100}, "judge_completion"),
    ],
)
def test_an_imported_judgment_the_database_would_refuse_is_a_file_line_field_error(tmp_path, procedure, extra, field):
    generations_import(path=_jsonl(tmp_path / "gens.jsonl", [_generation()]), run_name="imported")
    record = {"source_example_id": "s1", "model": "m", "judge": "j", "has_failure": False, **extra}
    if "judge_completion" in extra:
        record.pop("has_failure")
    with pytest.raises(RecordError) as caught:
        judgments_import(path=_jsonl(tmp_path / "labels.jsonl", [record]))
    assert caught.value.position == "line 1" and (caught.value.field or "").startswith(field)
    assert not Judgment.objects.exists()
