"""How2Score from judgments: reading judge answers, the score overall and per topic,
unreadable answers counted and never scored, and the `bench_aggregate` command's errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from core.record_files import RecordError
from judging.how2score import (
    How2ScoreTally,
    JudgeAnswerError,
    has_failure,
    how2score,
    how2score_aggregate,
    judgment_record,
    parse_judge_answer,
    validate_judge_answer,
)

ROOT = Path(__file__).resolve().parent.parent

NO_FAILURE = json.dumps({"reasoning": "L2 keeps every essential action of L1.", "critical_failures": []})
ONE_FAILURE = json.dumps(
    {
        "reasoning": "L2 never waits the 30 days that L1 step 4 requires.",
        "critical_failures": [
            {"failure": "Missing the required 30-day waiting period.", "L1_steps": [4], "L2_steps": []}
        ],
    }
)


# ---------------------------------------------------------------------------------------
# Reading a judge's answer
# ---------------------------------------------------------------------------------------


def test_a_plain_json_answer_is_read():
    answer = parse_judge_answer(ONE_FAILURE)
    assert answer["critical_failures"] == [
        {"failure": "Missing the required 30-day waiting period.", "L1_steps": [4], "L2_steps": []}
    ]
    assert has_failure(answer) is True
    assert has_failure(parse_judge_answer(NO_FAILURE)) is False


def test_reasoning_traces_fences_and_prose_around_the_json_are_tolerated():
    text = (
        "<think>L1 step 4 requires a wait {not JSON}.</think>\n"
        "Here is my verdict:\n```json\n" + ONE_FAILURE + "\n```\nThanks."
    )
    assert has_failure(parse_judge_answer(text)) is True


def test_unknown_fields_are_dropped():
    answer = validate_judge_answer(
        {
            "reasoning": "r",
            "confidence": 0.9,
            "critical_failures": [{"failure": "f", "L1_steps": [1], "L2_steps": [2], "category": "omission"}],
        }
    )
    assert answer == {"reasoning": "r", "critical_failures": [{"failure": "f", "L1_steps": [1], "L2_steps": [2]}]}


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"critical_failures": []}, "reasoning"),
        ({"reasoning": 3, "critical_failures": []}, "reasoning"),
        ({"reasoning": "r"}, "critical_failures"),
        ({"reasoning": "r", "critical_failures": "none"}, "critical_failures"),
        ({"reasoning": "r", "critical_failures": ["missing step"]}, "critical_failures[0]"),
        ({"reasoning": "r", "critical_failures": [{"L1_steps": [], "L2_steps": []}]}, "critical_failures[0].failure"),
        (
            {"reasoning": "r", "critical_failures": [{"failure": "", "L1_steps": [], "L2_steps": []}]},
            "critical_failures[0].failure",
        ),
        ({"reasoning": "r", "critical_failures": [{"failure": "f", "L2_steps": []}]}, "critical_failures[0].L1_steps"),
        (
            {"reasoning": "r", "critical_failures": [{"failure": "f", "L1_steps": 2, "L2_steps": []}]},
            "critical_failures[0].L1_steps",
        ),
        (
            {
                "reasoning": "r",
                "critical_failures": [
                    {"failure": "f", "L1_steps": [1], "L2_steps": []},
                    {"failure": "g", "L1_steps": [], "L2_steps": [1, "two"]},
                ],
            },
            "critical_failures[1].L2_steps[1]",
        ),
        (
            {"reasoning": "r", "critical_failures": [{"failure": "f", "L1_steps": [True], "L2_steps": []}]},
            "critical_failures[0].L1_steps[0]",
        ),
        (
            {"reasoning": "r", "critical_failures": [{"failure": "f", "L1_steps": [0], "L2_steps": []}]},
            "critical_failures[0].L1_steps[0]",
        ),
    ],
)
def test_a_wrong_shape_names_the_field(value, field):
    with pytest.raises(JudgeAnswerError) as caught:
        validate_judge_answer(value)
    assert caught.value.field == field
    assert f"field '{field}'" in str(caught.value)


@pytest.mark.parametrize(
    "text", ["", "   ", "I think L2 is fine.", "[1, 2]", '{"reasoning": "cut off', "<think>only thinking"]
)
def test_unreadable_answers_raise(text):
    with pytest.raises(JudgeAnswerError):
        parse_judge_answer(text)


# ---------------------------------------------------------------------------------------
# The score
# ---------------------------------------------------------------------------------------


def test_how2score_is_the_share_without_failure():
    # 3 no_failure out of 4 judged -> 3 / 4 = 0.75 (75 %; how2score is on 0-1 as in the reference)
    assert how2score([False, True, False, False]) == pytest.approx(0.75)
    assert how2score([True, True]) == 0.0
    assert how2score([]) is None


def test_parse_failures_are_counted_but_never_scored():
    result = how2score_aggregate(
        [
            ("Health", False),
            ("Health", None),
            ("Health", True),
            ("Religion", None),
        ]
    )
    # Health: 1 no_failure of 2 scored -> 0.5 (50 %); the None is neither a pass nor a fail.
    # 1 of 2: the 95 % Wilson interval is [9.45, 90.55] %.
    ci = [pytest.approx(0.094531, abs=1e-6), pytest.approx(0.905469, abs=1e-6)]
    ci_percent = [pytest.approx(9.4531, abs=1e-4), pytest.approx(90.5469, abs=1e-4)]
    assert result == {
        "how2score": pytest.approx(0.5),
        "how2score_percent": pytest.approx(50.0),
        "ci95": ci,
        "ci95_percent": ci_percent,
        "interval": "wilson",
        "n_judged": 2,
        "n_unusable": 2,
        "n_items": 4,
        "n_items_judged": 2,
        "coverage": pytest.approx(0.5),
        "n": 4,
        "n_scored": 2,
        "n_parse_failed": 2,
        "by_topic": {
            "Health": {
                "how2score": pytest.approx(0.5),
                "how2score_percent": pytest.approx(50.0),
                "ci95": ci,
                "ci95_percent": ci_percent,
                "n_judged": 2,
                "n_scored": 2,
                "n_unusable": 1,
            },
            "Religion": {
                "how2score": None,
                "how2score_percent": None,
                "ci95": None,
                "ci95_percent": None,
                "n_judged": 0,
                "n_scored": 0,
                "n_unusable": 1,
            },
        },
    }


def test_an_empty_tally_has_no_score():
    assert How2ScoreTally().result() == {
        "how2score": None,
        "how2score_percent": None,
        "ci95": None,
        "ci95_percent": None,
        "interval": "wilson",
        "n_judged": 0,
        "n_unusable": 0,
        "n_items": 0,
        "n_items_judged": 0,
        "coverage": None,
        "n": 0,
        "n_scored": 0,
        "n_parse_failed": 0,
        "by_topic": {},
    }


def test_judgment_records_read_has_failure_or_the_judges_text():
    base: dict[str, Any] = {"source_example_id": "x", "topic": "Health"}
    assert judgment_record({**base, "has_failure": True}).has_failure is True
    assert judgment_record({**base, "judge_completion": NO_FAILURE}).has_failure is False
    unreadable = judgment_record({**base, "judge_completion": "no idea"})
    assert unreadable.has_failure is None
    assert "no JSON object" in (unreadable.parse_error or "")
    # A label given with the text must agree with it (§4.2; contradictions are refused, see
    # tests/test_contradictory_judgment_records.py).
    assert judgment_record({**base, "has_failure": True, "judge_completion": ONE_FAILURE}).has_failure is True
    for record, field in [
        ({**base, "has_failure": "yes"}, "has_failure"),
        ({**base, "has_failure": 1}, "has_failure"),
        (base, "has_failure"),
        ({**base, "judge_completion": {"reasoning": "r"}}, "judge_completion"),
        ({"source_example_id": "x", "topic": 3, "has_failure": True}, "topic"),
        ({"topic": "Health", "has_failure": True}, "source_example_id"),
        ({**base, "has_failure": True, "parse_failed": "yes"}, "parse_failed"),
        ({**base, "has_failure": True, "n_failures": -1}, "n_failures"),
    ]:
        with pytest.raises(RecordError) as caught:
            judgment_record(record)
        assert caught.value.field == field


# ---------------------------------------------------------------------------------------
# The bench_aggregate command
# ---------------------------------------------------------------------------------------


def write_jsonl(path: Path, records: list) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_aggregate(path: Path, stderr: io.StringIO | None = None) -> dict:
    out = io.StringIO()
    call_command("bench_aggregate", "--judgments", str(path), stdout=out, stderr=stderr or io.StringIO())
    return json.loads(out.getvalue())


def test_bench_aggregate_overall_and_per_topic(tmp_path):
    records = [
        {"source_example_id": "1", "topic": "Health", "has_failure": False},
        {"source_example_id": "2", "topic": "Health", "has_failure": True},
        {"source_example_id": "3", "topic": "Health", "judge_completion": NO_FAILURE},
        {"source_example_id": "4", "topic": "Crime & Law", "judge_completion": "<think>hmm</think>\n" + ONE_FAILURE},
        {"source_example_id": "5", "topic": "Crime & Law", "judge_completion": "L2 looks fine to me."},
        {"source_example_id": "6", "topic": "Crime & Law", "has_failure": False},
        {"source_example_id": "7", "topic": "Religion", "judge_completion": ""},
    ]
    stderr = io.StringIO()
    result = run_aggregate(write_jsonl(tmp_path / "judgments.jsonl", records), stderr)
    assert list(result) == [
        "how2score",
        "how2score_percent",
        "n_examples",
        "n_with_failures",
        "failure_rate",
        "avg_failures_per_example",
        "ci95",
        "ci95_percent",
        "interval",
        "n_judged",
        "n_unusable",
        "n_items",
        "n_items_judged",
        "coverage",
        "n",
        "n_scored",
        "n_parse_failed",
        "by_topic",
    ]
    # Scored: 1 F, 2 T, 3 F, 4 T, 6 F -> 3 no_failure of 5 -> 0.6 (60 %). Lines 5 and 7 unreadable.
    assert result["how2score"] == pytest.approx(0.6) and result["how2score_percent"] == pytest.approx(60.0)
    assert (result["n"], result["n_scored"], result["n_parse_failed"]) == (7, 5, 2)
    assert {
        topic: {"how2score": s["how2score_percent"], "n_scored": s["n_scored"]}
        for topic, s in result["by_topic"].items()
    } == {
        "Crime & Law": {"how2score": pytest.approx(50.0), "n_scored": 2},  # 6 passes, 4 fails
        "Health": {"how2score": pytest.approx(200 / 3), "n_scored": 3},  # 1 and 3 pass of 3
        "Religion": {"how2score": None, "n_scored": 0},
    }
    notes = stderr.getvalue()
    assert "judgments.jsonl, line 5, field 'judge_completion': not scored" in notes
    assert "line 7" in notes


def test_bench_aggregate_on_the_papers_labels(tmp_path):
    # Tables 1 and 17-19: 10 judged generations, 6 without failure.
    data = ROOT / "demo" / "data"
    topics = {
        json.loads(line)["source_example_id"]: json.loads(line)["topic"]
        for line in (data / "procedures.jsonl").read_text(encoding="utf-8").splitlines()
    }
    records = []
    for line in (data / "generations.jsonl").read_text(encoding="utf-8").splitlines():
        generation = json.loads(line)
        records.append(
            {
                "source_example_id": generation["source_example_id"],
                "topic": topics[generation["source_example_id"]],
                "has_failure": generation["has_failure"],
            }
        )
    result = run_aggregate(write_jsonl(tmp_path / "paper.jsonl", records))
    assert result["how2score_percent"] == pytest.approx(60.0)
    assert {
        topic: {"how2score": s["how2score_percent"], "n_scored": s["n_scored"]}
        for topic, s in result["by_topic"].items()
    } == {
        "Art & Design": {"how2score": pytest.approx(100.0), "n_scored": 3},  # Table 19: all pass
        "Crime & Law": {"how2score": pytest.approx(200 / 3), "n_scored": 3},  # Table 17: Gemini fails
        "Food & Dining": {"how2score": pytest.approx(0.0), "n_scored": 1},  # Table 1: Qwen3-8B fails
        "Science, Math & Technology": {"how2score": pytest.approx(100 / 3), "n_scored": 3},  # Table 18
    }


def test_many_unreadable_answers_are_summarised_on_stderr(tmp_path):
    records = [{"source_example_id": str(i), "topic": "Health", "judge_completion": "?"} for i in range(15)]
    stderr = io.StringIO()
    result = run_aggregate(write_jsonl(tmp_path / "j.jsonl", records), stderr)
    assert result["n_parse_failed"] == 15 and result["how2score"] is None
    assert stderr.getvalue().count("not scored") == 10
    assert "5 more unreadable judge answers" in stderr.getvalue()


@pytest.mark.parametrize(
    ("bad_line", "field"),
    [
        ({"source_example_id": "b", "topic": "Health", "has_failure": "false"}, "has_failure"),
        ({"source_example_id": "b", "topic": "Health"}, "has_failure"),
        ({"source_example_id": "b", "topic": "Health", "judge_completion": 0}, "judge_completion"),
        ({"source_example_id": "b", "topic": ["Health"], "has_failure": True}, "topic"),
        ({"topic": "Health", "has_failure": True}, "source_example_id"),
    ],
)
def test_a_malformed_line_names_file_line_and_field(tmp_path, bad_line, field):
    good = {"source_example_id": "a", "topic": "Health", "has_failure": False}
    path = write_jsonl(tmp_path / "judgments.jsonl", [good, good, bad_line])
    with pytest.raises(CommandError) as caught:
        run_aggregate(path)
    assert str(caught.value).startswith(f"{path}, line 3, field '{field}':")


def test_a_line_that_is_not_an_object_is_reported(tmp_path):
    path = write_jsonl(
        tmp_path / "judgments.jsonl", ['{"source_example_id": "a", "topic": "H", "has_failure": true}', "[1, 2]"]
    )
    with pytest.raises(CommandError, match=r"line 2: expected a JSON object"):
        run_aggregate(path)


def test_a_file_of_another_type_is_refused(tmp_path):
    path = tmp_path / "judgments.csv"
    path.write_text("source_example_id,topic,has_failure\na,Health,true\n", encoding="utf-8")
    with pytest.raises(CommandError, match="expected a JSONL file"):
        run_aggregate(path)


def test_the_command_line_exits_non_zero_with_the_message(tmp_path):
    path = write_jsonl(
        tmp_path / "judgments.jsonl", [{"source_example_id": "a", "topic": "Health", "has_failure": "no"}]
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.django.test"}
    done = subprocess.run(
        [sys.executable, "manage.py", "bench_aggregate", "--judgments", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert f"{path}, line 1, field 'has_failure'" in done.stderr
    assert done.stdout == ""
