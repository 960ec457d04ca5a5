"""`import_procedures`: every shape and format, idempotent re-import, all-or-nothing on bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from core.record_files import RecordError
from mining.models import Procedure, Topic
from mining.procedure_services import procedure_import
from tests.files import write_records

pytestmark = pytest.mark.django_db

FLAT = [
    {
        "source_example_id": "doc-1",
        "topic": "Food & Dining",
        "goal": "Prepare fricasé Boliviano, a spicy pork stew.",
        "steps": ["Heat oil in a large pot.", "Fry pork pieces in the oil until golden.", "Simmer for about 2 hours."],
        "resources": ["oil", "large pot", "pork pieces"],
    },
    {
        "source_example_id": "doc-2",
        "topic": "Health",
        "goal": "Prevent venous ulcers with a daily routine.",
        "steps": ["Wear compression stockings every day.", "Apply lotion to your legs every day."],
        "resources": [],
    },
]

HOW2MINE: list[dict[str, Any]] = [
    {
        "schema_version": "how2mine.v1",
        "source_example": {
            "id": "doc-9",
            "text": "Full page text ...",
            "url": "https://example.org/knurl",
            "topic": "Home & Hobbies",
        },
        "processed_example": {
            "procedures": {"stage_passed": True, "goal": "knurl", "steps": ["a", "b"]},
            "final_filter": {"stage_passed": True, "correctness": {"answer": "yes", "reason": "fine"}},
        },
        "final_procedure": {
            "goal": "Create a knurled band on the face of a prop driver.",
            "steps": ["Reduce the stock to the final diameter.", "Counter-bore to a depth of about 0.016 inches."],
            "resources": ["lathe", "knurl holder"],
        },
    }
]

FORMATS = ["jsonl", "csv", "parquet", "arrow"]
COMPRESSIONS = ["", ".gz", ".zst", ".bz2", ".xz"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_flat_records_import_from_every_format_and_compression(tmp_path, fmt, compression):
    path = write_records(tmp_path, "procedures", FLAT, fmt, compression)
    result = procedure_import(path=path)
    assert (result.created, result.existing) == (2, 0)
    stew = Procedure.objects.get(source_example_id="doc-1")
    assert stew.topic.name == "Food & Dining"
    assert stew.goal == FLAT[0]["goal"]
    assert stew.steps == FLAT[0]["steps"]
    assert stew.resources == FLAT[0]["resources"]
    assert stew.split == "none"


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_how2mine_record_keeps_stage_outputs_as_provenance(tmp_path, fmt):
    path = write_records(tmp_path, "mined", HOW2MINE, fmt)
    procedure_import(path=path, split="train")
    procedure = Procedure.objects.get()
    assert procedure.topic.name == "Home & Hobbies"
    assert procedure.source_url == "https://example.org/knurl"
    assert procedure.split == "train"
    assert procedure.steps == HOW2MINE[0]["final_procedure"]["steps"]
    assert procedure.provenance["processed_example"]["final_filter"]["correctness"]["answer"] == "yes"
    assert procedure.provenance["source_text"] == "Full page text ..."


def test_reimporting_the_same_file_creates_no_duplicates(tmp_path):
    path = write_records(tmp_path, "procedures", FLAT, "jsonl")
    procedure_import(path=path)
    again = procedure_import(path=path)
    assert (again.created, again.existing) == (0, 2)
    assert Procedure.objects.count() == 2


def test_same_source_with_another_goal_is_a_new_procedure(tmp_path):
    procedure_import(path=write_records(tmp_path, "a", FLAT[:1], "jsonl"))
    changed = [dict(FLAT[0], goal="A different goal from the same page.")]
    result = procedure_import(path=write_records(tmp_path, "b", changed, "jsonl"))
    assert result.created == 1
    assert Procedure.objects.filter(source_example_id="doc-1").count() == 2


def test_duplicate_records_within_one_file_are_stored_once(tmp_path):
    result = procedure_import(path=write_records(tmp_path, "dups", FLAT + FLAT, "jsonl"))
    assert (result.created, result.existing) == (2, 2)


def test_topic_may_be_given_by_slug_and_in_another_field(tmp_path):
    records = [{k: v for k, v in FLAT[0].items() if k != "topic"} | {"category": "food-dining"}]
    procedure_import(path=write_records(tmp_path, "slugs", records, "jsonl"), topic_field="category")
    assert Procedure.objects.get().topic.name == "Food & Dining"


def test_command_prints_created_and_existing_counts(tmp_path, capsys):
    path = write_records(tmp_path, "procedures", FLAT, "jsonl")
    call_command("import_procedures", str(path), "--split", "bench")
    call_command("import_procedures", str(path))
    out = capsys.readouterr().out
    assert "2 procedures created, 0 already existed" in out
    assert "0 procedures created, 2 already existed" in out
    assert set(Procedure.objects.values_list("split", flat=True)) == {"bench"}


# --- bad input: a clear message naming file, line and field; the database unchanged ---

BAD_CASES = {
    "invalid_json": ("line 3", None, "invalid JSON"),
    "missing_goal": ("line 3", "goal", "missing or empty"),
    "missing_steps": ("line 3", "steps", "missing"),
    "steps_not_a_list": ("line 3", "steps", "expected a list"),
    "empty_step": ("line 3", "steps[2]", "non-empty string"),
    "step_not_a_string": ("line 3", "steps[1]", "non-empty string"),
    "unknown_topic": ("line 3", "topic", "unknown topic 'Astrology'"),
}


def _bad_file(tmp_path, case: str):
    good = [dict(FLAT[0], source_example_id=f"ok-{i}") for i in range(2)]
    bad: dict[str, Any] = dict(FLAT[1])
    if case == "missing_goal":
        del bad["goal"]
    elif case == "missing_steps":
        del bad["steps"]
    elif case == "steps_not_a_list":
        bad["steps"] = "Wear stockings. Apply lotion."
    elif case == "empty_step":
        bad["steps"] = ["Wear stockings.", "   "]
    elif case == "step_not_a_string":
        bad["steps"] = [3, "Apply lotion."]
    elif case == "unknown_topic":
        bad["topic"] = "Astrology"
    path = tmp_path / f"{case}.jsonl"
    lines = [json.dumps(r) for r in good]
    lines.append("{not json" if case == "invalid_json" else json.dumps(bad))
    lines.append(json.dumps(dict(FLAT[0], source_example_id="after-the-bad-line")))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_record_is_reported_with_file_line_and_field_and_nothing_is_stored(tmp_path, case):
    procedure_import(path=write_records(tmp_path, "existing", FLAT[1:], "jsonl"))
    before = list(Procedure.objects.values_list("identity", flat=True))
    n_topics = Topic.objects.count()
    path = _bad_file(tmp_path, case)
    position, field, text = BAD_CASES[case]
    with pytest.raises(CommandError) as excinfo:
        call_command("import_procedures", str(path))
    message = str(excinfo.value)
    assert str(path) in message
    assert position in message
    assert text in message
    if field:
        assert f"field '{field}'" in message
    assert "Nothing was imported" in message
    assert list(Procedure.objects.values_list("identity", flat=True)) == before
    assert Topic.objects.count() == n_topics


def test_unknown_topic_is_created_only_when_asked(tmp_path):
    records = [dict(FLAT[0], topic="Astrology")]
    path = write_records(tmp_path, "astro", records, "jsonl")
    with pytest.raises(RecordError):
        procedure_import(path=path)
    assert not Topic.objects.filter(name="Astrology").exists()
    procedure_import(path=path, create_topics=True)
    assert Procedure.objects.get().topic.name == "Astrology"


def test_bad_row_in_a_parquet_file_is_reported_by_row(tmp_path):
    records = [FLAT[0], dict(FLAT[1], goal="")]
    path = write_records(tmp_path, "bad", records, "parquet")
    with pytest.raises(RecordError) as excinfo:
        procedure_import(path=path)
    assert "row 2" in str(excinfo.value) and "field 'goal'" in str(excinfo.value)
    assert Procedure.objects.count() == 0


def test_bad_csv_cell_is_reported_by_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(
        "source_example_id,topic,goal,steps,resources\n"
        'a,Health,Goal A,"[""Step one.""]",[]\n'
        'b,Health,Goal B,"[""Step one."", ""unterminated]",[]\n'
    )
    with pytest.raises(RecordError) as excinfo:
        procedure_import(path=path)
    assert "line 3" in str(excinfo.value) and "field 'steps'" in str(excinfo.value)
    assert Procedure.objects.count() == 0


def test_unsupported_schema_version_is_rejected(tmp_path):
    record = dict(HOW2MINE[0], schema_version="how2mine.v0")
    with pytest.raises(RecordError) as excinfo:
        procedure_import(path=write_records(tmp_path, "v0", [record], "jsonl"))
    assert "field 'schema_version'" in str(excinfo.value)


def test_unknown_file_type_is_rejected_before_reading(tmp_path):
    path = tmp_path / "procedures.txt"
    path.write_text("hello\n")
    with pytest.raises(CommandError, match="unknown file type"):
        call_command("import_procedures", str(path))


@pytest.mark.parametrize("compression", [".gz", ".zst", ".bz2", ".xz"])
def test_truncated_compressed_file_is_an_error_not_a_partial_import(tmp_path, compression):
    records = [dict(FLAT[0], source_example_id=f"doc-{i}") for i in range(300)]
    path = write_records(tmp_path, "procedures", records, "jsonl", compression)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RecordError):
        procedure_import(path=path)
    assert Procedure.objects.count() == 0
