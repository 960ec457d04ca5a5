"""A judgment record whose ``has_failure`` contradicts its own failures is refused with
file, line and field by both readers of judgment files (``bench_aggregate`` and
``bench_transfer import-judgments``), and nothing of the file is stored: the paper defines
has_failure as "at least one critical failure is identified" (How2Everything §4.2). The one
documented exception is the reference CLI's own ``parse_failed`` record (``has_failure:
true`` with no failures), which both take by the reference's rule: left out of the score."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.record_files import RecordError
from judging.how2score import judgment_record
from judging.models import Judgment

STEPS = ["Rinse the rice, twice.", "Boil 2 cups of water.", "Add the rice and cover.", "Simmer 15 minutes."]
FAILURE = {"failure": "The pot is never covered.", "L1_steps": [3], "L2_steps": [3]}
ANSWER_WITH_FAILURE = json.dumps({"reasoning": "r", "critical_failures": [FAILURE]})
ANSWER_WITHOUT_FAILURE = json.dumps({"reasoning": "r", "critical_failures": []})

# (the contradictory part of a record, the field named, words the message must hold)
CONTRADICTIONS = [
    pytest.param(
        {"has_failure": True, "critical_failures": [], "n_failures": 0},
        "has_failure",
        "critical_failures is empty",
        id="failure-with-an-empty-list",
    ),
    pytest.param(
        {"has_failure": False, "critical_failures": [FAILURE], "n_failures": 1},
        "has_failure",
        "1 critical failure",
        id="success-with-a-failure-listed",
    ),
    pytest.param(
        {"has_failure": True, "n_failures": 0},
        "has_failure",
        "n_failures is 0",
        id="failure-with-a-zero-count",
    ),
    pytest.param(
        {"has_failure": False, "n_failures": 2},
        "has_failure",
        "n_failures is 2",
        id="success-with-a-count",
    ),
    pytest.param(
        {"has_failure": True, "critical_failures": [FAILURE], "n_failures": 3},
        "n_failures",
        "critical_failures lists 1",
        id="count-differs-from-the-list",
    ),
    pytest.param(
        {"has_failure": False, "judge_completion": ANSWER_WITH_FAILURE},
        "has_failure",
        "judge_completion lists 1",
        id="success-with-a-judge-answer-that-lists-one",
    ),
    pytest.param(
        {"has_failure": True, "judge_completion": ANSWER_WITHOUT_FAILURE},
        "has_failure",
        "judge_completion lists none",
        id="failure-with-a-judge-answer-that-lists-none",
    ),
]

# The reference CLI's record of a judge answer it could not read (how2everything
# bench/judge.py): has_failure true, no failures, parse_failed true.
REFERENCE_PARSE_FAILED = {"has_failure": True, "critical_failures": [], "n_failures": 0, "parse_failed": True}


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------
# bench_aggregate
# ---------------------------------------------------------------------------------------


def _aggregate(path: Path) -> dict:
    out = io.StringIO()
    call_command("bench_aggregate", "--judgments", str(path), stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


@pytest.mark.parametrize(("contradiction", "field", "words"), CONTRADICTIONS)
def test_bench_aggregate_refuses_a_record_whose_has_failure_contradicts_its_failures(
    tmp_path, contradiction, field, words
):
    good = {"source_example_id": "a", "topic": "Health", "has_failure": False, "critical_failures": []}
    path = _write(tmp_path / "judgments.jsonl", [good, {"source_example_id": "b", "topic": "Health", **contradiction}])
    with pytest.raises(CommandError) as caught:
        _aggregate(path)
    message = str(caught.value)
    assert message.startswith(f"{path}, line 2, field '{field}':")
    assert words in message and ("§4.2" in message or field == "n_failures")


@pytest.mark.parametrize(("contradiction", "field", "words"), CONTRADICTIONS)
def test_judgment_record_names_the_contradicting_field(contradiction, field, words):
    with pytest.raises(RecordError) as caught:
        judgment_record({"source_example_id": "b", "topic": "Health", **contradiction})
    assert caught.value.field == field and words in caught.value.message


def test_bench_aggregate_takes_the_reference_parse_failed_record_by_its_rule(tmp_path):
    records = [
        {"source_example_id": "a", "topic": "Health", "has_failure": True, "critical_failures": [FAILURE]},
        {"source_example_id": "b", "topic": "Health", "has_failure": False, "critical_failures": []},
        {"source_example_id": "c", "topic": "Health", **REFERENCE_PARSE_FAILED},
    ]
    result = _aggregate(_write(tmp_path / "judgments.jsonl", records))
    assert (result["n_scored"], result["n_parse_failed"], result["how2score_percent"]) == (2, 1, 50.0)


def test_a_label_without_a_failure_list_or_count_is_still_a_verdict():
    # Nothing to contradict: a plain label file (source_example_id, topic, has_failure).
    assert judgment_record({"source_example_id": "a", "has_failure": True}).has_failure is True
    assert judgment_record({"source_example_id": "a", "has_failure": False}).has_failure is False


# ---------------------------------------------------------------------------------------
# bench_transfer import-judgments
# ---------------------------------------------------------------------------------------


def _judgment(source: str, **fields) -> dict:
    record = {
        "schema_version": "how2bench.judgment.v1",
        "source_example_id": source,
        "topic": "Food & Dining",
        "goal": "Cook plain rice on a stove.",
        "steps": STEPS,
        "predicted_steps": STEPS,
        "judge": {"backend": "deluge", "provider": "openai", "model": "gpt-4.1-judge"},
        "reasoning": "r",
        "critical_failures": [FAILURE],
        "has_failure": True,
        "n_failures": 1,
        "parse_failed": False,
    }
    return record | fields


@pytest.fixture
def two_generations(tmp_path):
    examples = [
        {
            "schema_version": "how2bench.example.v1",
            "source_example_id": source,
            "topic": "Food & Dining",
            "goal": "Cook plain rice on a stove.",
            "resources": ["pot"],
            "steps": STEPS,
        }
        for source in ("rice-1", "rice-2")
    ]
    call_command("import_procedures", str(_write(tmp_path / "examples.jsonl", examples)), stdout=io.StringIO())
    generations = [
        {
            "schema_version": "how2bench.generation.v1",
            "source_example_id": source,
            "topic": "Food & Dining",
            "goal": "Cook plain rice on a stove.",
            "steps": STEPS,
            "resources": ["pot"],
            "model_completion": "\n".join(f"{i}. {s}" for i, s in enumerate(STEPS, 1)),
            "predicted_steps": STEPS,
            "generator": {"backend": "vllm", "provider": "", "model": "qwen-x"},
        }
        for source in ("rice-1", "rice-2")
    ]
    call_command(
        "bench_transfer",
        "import-generations",
        str(_write(tmp_path / "g.jsonl", generations)),
        "--run",
        "qwen-run",
        stdout=io.StringIO(),
    )


@pytest.mark.django_db
@pytest.mark.parametrize(("contradiction", "field", "words"), CONTRADICTIONS)
def test_import_refuses_a_record_whose_has_failure_contradicts_its_failures_and_stores_nothing(
    tmp_path, two_generations, contradiction, field, words
):
    bad = {k: v for k, v in _judgment("rice-2").items() if k not in ("critical_failures", "n_failures")}
    bad |= contradiction
    path = _write(tmp_path / "judgments.jsonl", [_judgment("rice-1"), bad])
    with pytest.raises(CommandError) as caught:
        call_command("bench_transfer", "import-judgments", str(path), stdout=io.StringIO())
    message = str(caught.value)
    assert message.startswith(f"{path}, line 2, field '{field}':")
    assert words in message and ("§4.2" in message or field == "n_failures")
    assert "Nothing was stored." in message
    assert not Judgment.objects.exists()  # line 1 was good, and is not half-imported


@pytest.mark.django_db
def test_import_takes_the_reference_parse_failed_record_as_unusable(tmp_path, two_generations):
    path = _write(
        tmp_path / "judgments.jsonl",
        [_judgment("rice-1"), _judgment("rice-2", reasoning="", **REFERENCE_PARSE_FAILED)],
    )
    call_command("bench_transfer", "import-judgments", str(path), stdout=io.StringIO())
    failed = Judgment.objects.get(generation__procedure__source_example_id="rice-2")
    assert (failed.outcome, failed.has_failure, failed.critical_failures) == ("parse_failed", None, [])
    judged = Judgment.objects.get(generation__procedure__source_example_id="rice-1")
    assert (judged.outcome, judged.has_failure) == ("ok", True)


@pytest.mark.parametrize(("contradiction", "field", "words"), CONTRADICTIONS)
def test_the_agreement_reports_judgment_reader_refuses_the_same_contradictions(tmp_path, contradiction, field, words):
    """agreement_report's judgment files (item_id, judge, has_failure) hold the same fields."""
    from annotate.stats.records import parse_judgment_record, read_judgments

    with pytest.raises(RecordError) as caught:
        parse_judgment_record({"item_id": "i2", "judge": "how2judge", **contradiction})
    assert caught.value.field == field and words in caught.value.message
    good = {"item_id": "i1", "judge": "how2judge", "has_failure": True, "critical_failures": [FAILURE]}
    path = _write(tmp_path / "judgments.jsonl", [good, {"item_id": "i2", "judge": "how2judge", **contradiction}])
    with pytest.raises(RecordError) as caught:
        read_judgments(path)
    assert str(caught.value).startswith(f"{path}, line 2, field '{field}':"), str(caught.value)
    rows = read_judgments(_write(tmp_path / "good.jsonl", [good]))
    assert [(r.item_id, r.has_failure) for r in rows] == [("i1", True)]
