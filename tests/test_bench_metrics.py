"""Formatting proxies, lengths and RL rewards on hand-computed cases, and the
`bench_metrics` command: its keys, its per-record file, and its errors.

Token counts used below (o200k_base, checked in tests/test_tokens.py):
"Boil water." = 4, "Add tea." = 3, "Stir." = 3, "Serve hot." = 3, "Mix the flour and sugar." = 6."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from core.record_files import RecordError
from judging.constants import (
    LENGTH_REWARD_ALPHA,
    LENGTH_REWARD_DECAY_SPAN,
    LENGTH_REWARD_TOLERANCE,
    PAPER_AVG_REFERENCE_TOKENS,
)
from judging.metrics import (
    MetricsSummary,
    dup_ngram_rate,
    generation_record,
    has_duplicate_step,
    length_ratio,
    length_reward,
    length_reward_from_ratio,
    ngram_repetition_rate,
    record_metrics,
    step_count_mismatch,
    step_format_reward,
    steps_format_reward,
    summarize,
)

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------
# Constants are the paper's
# ---------------------------------------------------------------------------------------


def test_length_reward_constants_are_the_papers():
    # App. E.4: tau = 0.2, alpha = 5, denominator 1 - tau = 0.8.
    assert (LENGTH_REWARD_TOLERANCE, LENGTH_REWARD_ALPHA) == (0.2, 5.0)
    assert LENGTH_REWARD_DECAY_SPAN == pytest.approx(0.8)
    # §5 / Table 12: average How2Bench reference length.
    assert PAPER_AVG_REFERENCE_TOKENS == 97.44


# ---------------------------------------------------------------------------------------
# Formatting proxies (App. D.3)
# ---------------------------------------------------------------------------------------


def test_step_count_mismatch_compares_counts_only():
    assert step_count_mismatch(["a", "b"], ["x", "y", "z"]) is True
    assert step_count_mismatch(["a", "b", "c"], ["x", "y", "z"]) is False
    assert step_count_mismatch([], ["x"]) is True


def test_duplicate_step_means_a_verbatim_repeat():
    assert has_duplicate_step(["Stir.", "Bake.", "Stir."]) is True
    # Case and trailing punctuation make different strings: not verbatim duplicates.
    assert has_duplicate_step(["Stir.", "stir.", "Stir"]) is False
    assert has_duplicate_step([]) is False


def test_ngram_repetition_by_hand():
    steps = ["a b a", "b"]  # joined: "a b a b" -> words a, b, a, b
    # n=1: grams a,b,a,b; counts a:2, b:2 -> (2-1)+(2-1) = 2 repeats over 4 grams = 0.5
    assert ngram_repetition_rate(steps, 1) == pytest.approx(0.5)
    # n=2: (a b), (b a), (a b); (a b) twice -> 1 repeat over 3 grams = 1/3
    assert ngram_repetition_rate(steps, 2) == pytest.approx(1 / 3)
    # n=3: (a b a), (b a b): no repeat over 2 grams = 0
    assert ngram_repetition_rate(steps, 3) == 0.0
    # n=4: (a b a b) alone: 0 over 1 = 0
    assert ngram_repetition_rate(steps, 4) == 0.0
    # mean over n = 1..4: (0.5 + 1/3 + 0 + 0) / 4 = (5/6) / 4 = 5/24
    assert dup_ngram_rate(steps) == pytest.approx(5 / 24)


def test_ngrams_cross_step_boundaries_because_steps_are_joined():
    # "x y" + "x y" -> words x, y, x, y: the bigram (x y) repeats across the two steps.
    assert ngram_repetition_rate(["x y", "x y"], 2) == pytest.approx(1 / 3)


def test_ngram_rate_is_zero_when_there_are_no_ngrams():
    assert ngram_repetition_rate([], 1) == 0.0
    # Two words: one bigram, no trigram or 4-gram -> those orders count 0, not "undefined".
    assert ngram_repetition_rate(["one two"], 3) == 0.0
    assert dup_ngram_rate(["one two"]) == 0.0
    # "go go": n=1 -> 1 repeat / 2 = 0.5; n=2 -> 0/1; n=3, n=4 -> no grams -> 0. Mean 0.125.
    assert dup_ngram_rate(["go go"]) == pytest.approx(0.125)


def test_whitespace_splitting_ignores_runs_of_spaces_and_newlines():
    # "a  a\n" + "a" -> words a, a, a: n=1 -> counts a:3 -> 2 repeats / 3 grams.
    assert ngram_repetition_rate(["a  a\n", "a"], 1) == pytest.approx(2 / 3)


# ---------------------------------------------------------------------------------------
# Step-format verifier (App. E.4)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "expected_steps", "reward"),
    [
        ("1. Boil water.\n2. Add tea.", 2, 1),
        ("1. Boil water.\n2. Add tea.", None, 1),
        ("1. Boil water.\n2. Add tea.", 3, 0),  # wrong count
        ("2. Boil water.\n3. Add tea.", None, 0),  # does not start at 1
        ("1. Boil water.\n3. Add tea.", None, 0),  # gap
        ("1. Boil water.\n1. Add tea.", None, 0),  # repeat
        ("1. A.\n2. B.\n1. C.\n2. D.", 4, 0),  # two lists: numbering restarts
        ("Here are the steps:\n\n1) Boil water.\n\n2) Add tea.\n\nEnjoy!", 2, 1),  # text around and between
        ("<think>1. draft\n3. broken</think>\n1. Boil water.\n2. Add tea.", 2, 1),  # reasoning removed
        ("<think>1. Boil water.\n2. Add tea.</think>\nBoil water, then add tea.", 2, 0),  # list only in reasoning
        ("<answer>\n1: Boil water.\n2: Add tea.\n</answer>", 2, 1),
        ("Sorry, I can’t help with that.", 1, 0),  # a refusal has no numbered list
        ("Boil water.\nAdd tea.", 2, 0),  # lines, but not numbered
        ("", None, 0),
    ],
)
def test_step_format_verifier(completion, expected_steps, reward):
    assert step_format_reward(completion, expected_steps) == reward


def test_format_verifier_for_already_parsed_steps_checks_the_count():
    assert steps_format_reward(["a", "b"], 2) == 1
    assert steps_format_reward(["a", "b"], 3) == 0
    assert steps_format_reward(["a"], None) == 1
    assert steps_format_reward([], None) == 0


# ---------------------------------------------------------------------------------------
# Reference-calibrated length reward (App. E.4)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ratio", "reward"),
    [
        (1.0, 1.0),
        (1.2, 1.0),  # |r-1| = 0.2 is inside the band
        (0.8, 1.0),
        # |r-1| = 0.6: exp(-5 * (0.6 - 0.2) / 0.8) = exp(-2.5) = 0.0820850
        (1.6, math.exp(-2.5)),
        (0.4, math.exp(-2.5)),
        # |r-1| = 1.0: exp(-5 * 0.8 / 0.8) = exp(-5) = 0.0067379
        (2.0, math.exp(-5)),
        (0.0, math.exp(-5)),
        # |r-1| = 0.3: exp(-5 * 0.1 / 0.8) = exp(-0.625) = 0.5352614
        (1.3, math.exp(-0.625)),
        # |r-1| = 3.0: exp(-5 * 2.8 / 0.8) = exp(-17.5)
        (4.0, math.exp(-17.5)),
    ],
)
def test_length_reward_by_hand(ratio, reward):
    assert length_reward_from_ratio(ratio) == pytest.approx(reward, rel=1e-9)


def test_length_reward_from_token_counts():
    assert length_ratio(6, 5) == pytest.approx(1.2)
    assert length_reward(6, 5) == 1.0  # r = 1.2, the edge of the band
    assert length_reward(4, 5) == 1.0  # r = 0.8
    # r = 13/9 = 1.4444; (0.4444 - 0.2) / 0.8 = 0.30556; exp(-5 * 0.30556) = exp(-1.52778) = 0.217017
    assert length_reward(13, 9) == pytest.approx(0.217017, abs=1e-6)


def test_length_reward_needs_a_reference_with_tokens():
    with pytest.raises(ValueError):
        length_reward(10, 0)
    with pytest.raises(ValueError):
        length_reward_from_ratio(-0.5)


# ---------------------------------------------------------------------------------------
# One example, and the means
# ---------------------------------------------------------------------------------------


def test_record_metrics_from_a_completion_by_hand():
    metrics = record_metrics(
        reference_steps=["Mix the flour and sugar.", "Serve hot."],  # 6 + 3 = 9 tokens
        completion="<think>Plan.</think>\n1. Stir.\n2. Stir.\n3. Serve hot.\n4. Boil water.",
    )
    assert metrics.predicted_steps == ("Stir.", "Stir.", "Serve hot.", "Boil water.")
    assert (metrics.n_pred, metrics.n_ref) == (4, 2)
    assert metrics.step_count_mismatch is True
    assert metrics.gen_tokens == 3 + 3 + 3 + 4  # 13
    assert metrics.ref_tokens == 9
    assert metrics.dup_step is True
    # words: Stir. Stir. Serve hot. Boil water. -> n=1: 1 repeat / 6; n=2..4: no repeats.
    # mean: (1/6) / 4 = 1/24
    assert metrics.dup_ngram_rate == pytest.approx(1 / 24)
    assert metrics.format_reward == 0  # numbered 1..4 but 2 steps were asked for
    assert metrics.length_reward == pytest.approx(math.exp(-5 * ((13 / 9 - 1) - 0.2) / 0.8))


def test_predicted_steps_win_over_the_completion_for_steps_but_the_completion_is_verified():
    metrics = record_metrics(
        reference_steps=["Boil water.", "Add tea."],
        predicted_steps=["Boil water.", "Add tea."],
        completion="Sorry, I can’t help with that.",
    )
    assert metrics.predicted_steps == ("Boil water.", "Add tea.")
    assert metrics.step_count_mismatch is False
    assert metrics.format_reward == 0  # the raw answer had no numbered list


def test_summary_means_and_ratio_of_averages():
    a = record_metrics(reference_steps=["Boil water.", "Add tea."], predicted_steps=["Boil water.", "Add tea."])
    b = record_metrics(
        reference_steps=["Mix the flour and sugar.", "Serve hot."],
        predicted_steps=["Stir.", "Stir.", "Serve hot.", "Boil water."],
    )
    result = summarize([a, b])
    assert result["n"] == 2
    assert result["avg_gen_tokens"] == pytest.approx((7 + 13) / 2)  # 10
    assert result["avg_ref_tokens"] == pytest.approx((7 + 9) / 2)  # 8
    # ratio of the averages, 10 / 8 = 1.25, not the mean of 7/7 and 13/9 (= 1.2222)
    assert result["gen_ref_ratio"] == pytest.approx(1.25)


def test_summary_of_nothing_is_null_not_zero():
    result = MetricsSummary().result()
    assert result["n"] == 0
    assert all(value is None for key, value in result.items() if key != "n")


def test_generation_record_fields_are_checked_by_name():
    good = {"source_example_id": "x", "topic": "Health", "steps": ["Boil water."], "predicted_steps": ["Boil water."]}
    assert generation_record(good).predicted_steps == ("Boil water.",)
    cases: list[tuple[dict[str, Any], str]] = [
        ({k: v for k, v in good.items() if k != "steps"}, "steps"),
        ({**good, "steps": []}, "steps"),
        ({**good, "steps": ["Boil water.", "  "]}, "steps[1]"),
        ({**good, "steps": "Boil water."}, "steps"),
        ({**good, "predicted_steps": ["ok", 3]}, "predicted_steps[1]"),
        ({**good, "predicted_steps": None}, "predicted_steps"),
        ({**good, "predicted_steps": None, "model_completion": ["1. a"]}, "model_completion"),
        ({**good, "topic": 7}, "topic"),  # an absent or empty topic is "none"
        ({**good, "source_example_id": None}, "source_example_id"),
    ]
    for record, field in cases:
        with pytest.raises(RecordError) as caught:
            generation_record(record)
        assert caught.value.field == field, record


# ---------------------------------------------------------------------------------------
# The bench_metrics command
# ---------------------------------------------------------------------------------------

SUMMARY_KEYS = [
    "n",
    "step_count_mismatch",
    "dup_step_rate",
    "dup_ngram_rate",
    "avg_gen_tokens",
    "avg_ref_tokens",
    "gen_ref_ratio",
    "format_reward",
    "length_reward",
]
PER_RECORD_KEYS = [
    "source_example_id",
    "predicted_steps",
    "n_pred",
    "n_ref",
    "gen_tokens",
    "ref_tokens",
    "dup_step",
    "dup_ngram_rate",
    "format_reward",
    "length_reward",
]

GENERATIONS = [
    {
        # A reasoning model's completion, parsed: 2 steps, 4 + 3 = 7 tokens against 7.
        "source_example_id": "tea-1",
        "topic": "Food & Dining",
        "steps": ["Boil water.", "Add tea."],
        "model_completion": "<think>Two steps: boil, then tea.</think>\n<answer>\n1. Boil water.\n2. Add tea.\n</answer>",
    },
    {
        # Already-parsed steps: 4 steps (2 asked), one repeated; 13 tokens against 6 + 3 = 9.
        "source_example_id": "mix-2",
        "topic": "Food & Dining",
        "steps": ["Mix the flour and sugar.", "Serve hot."],
        "predicted_steps": ["Stir.", "Stir.", "Serve hot.", "Boil water."],
    },
]


def write_jsonl(path: Path, records: list, blank_lines: bool = False) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    separator = "\n\n" if blank_lines else "\n"
    path.write_text(separator.join(lines) + "\n", encoding="utf-8")
    return path


def run_metrics(*args: str) -> dict:
    out = io.StringIO()
    call_command("bench_metrics", *args, stdout=out)
    return json.loads(out.getvalue())


def test_bench_metrics_prints_every_key_with_hand_computed_values(tmp_path):
    path = write_jsonl(tmp_path / "gens.jsonl", GENERATIONS)
    result = run_metrics("--generations", str(path))
    assert list(result) == SUMMARY_KEYS
    assert result["n"] == 2
    assert result["step_count_mismatch"] == pytest.approx(0.5)  # only mix-2 (4 != 2)
    assert result["dup_step_rate"] == pytest.approx(0.5)  # only mix-2 ("Stir." twice)
    # tea-1: 0 (all n-grams distinct); mix-2: 1/24 (see test_record_metrics_from_a_completion_by_hand)
    assert result["dup_ngram_rate"] == pytest.approx((0 + 1 / 24) / 2)
    assert result["avg_gen_tokens"] == pytest.approx(10.0)  # (7 + 13) / 2
    assert result["avg_ref_tokens"] == pytest.approx(8.0)  # (7 + 9) / 2
    assert result["gen_ref_ratio"] == pytest.approx(1.25)  # 10 / 8
    # tea-1: numbered 1..2 as asked -> 1; mix-2: 4 parsed steps, 2 asked -> 0
    assert result["format_reward"] == pytest.approx(0.5)
    # tea-1: r = 1 -> 1; mix-2: r = 13/9 -> exp(-5 * (0.4444 - 0.2) / 0.8) = 0.217017
    assert result["length_reward"] == pytest.approx((1 + math.exp(-5 * ((13 / 9 - 1) - 0.2) / 0.8)) / 2)


def test_bench_metrics_writes_one_record_per_example(tmp_path):
    path = write_jsonl(tmp_path / "gens.jsonl", GENERATIONS)
    out = tmp_path / "per-record.jsonl"
    run_metrics("--generations", str(path), "--per-record", str(out))
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [list(row) for row in rows] == [PER_RECORD_KEYS, PER_RECORD_KEYS]
    tea, mix = rows
    assert tea == {
        "source_example_id": "tea-1",
        "predicted_steps": ["Boil water.", "Add tea."],
        "n_pred": 2,
        "n_ref": 2,
        "gen_tokens": 7,
        "ref_tokens": 7,
        "dup_step": False,
        "dup_ngram_rate": 0.0,
        "format_reward": 1,
        "length_reward": 1.0,
    }
    assert mix["predicted_steps"] == ["Stir.", "Stir.", "Serve hot.", "Boil water."]
    assert (mix["n_pred"], mix["n_ref"], mix["gen_tokens"], mix["ref_tokens"]) == (4, 2, 13, 9)
    assert mix["dup_step"] is True
    assert mix["dup_ngram_rate"] == pytest.approx(1 / 24)
    assert mix["format_reward"] == 0
    assert mix["length_reward"] == pytest.approx(0.217017, abs=1e-6)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_bench_metrics_on_the_papers_generations(tmp_path):
    # The paper's real outputs (Tables 1, 17-19) against their references.
    data = ROOT / "demo" / "data"
    references = {}
    for line in (data / "procedures.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        references[record["source_example_id"]] = record
    rows = []
    for line in (data / "generations.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        reference = references[record["source_example_id"]]
        rows.append(
            {
                "source_example_id": record["source_example_id"],
                "topic": reference["topic"],
                "steps": reference["steps"],
                "predicted_steps": record["predicted_steps"],
            }
        )
    path = write_jsonl(tmp_path / "paper.jsonl", rows)
    out = tmp_path / "paper-per-record.jsonl"
    result = run_metrics("--generations", str(path), "--per-record", str(out))
    per_record = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert result["n"] == len(rows) == len(per_record) == 10
    mismatched = sum(1 for row in rows if len(row["predicted_steps"]) != len(row["steps"]))
    assert result["step_count_mismatch"] == pytest.approx(mismatched / 10)
    assert result["format_reward"] == pytest.approx(1 - mismatched / 10)
    assert result["avg_gen_tokens"] == pytest.approx(sum(r["gen_tokens"] for r in per_record) / 10)
    assert result["gen_ref_ratio"] == pytest.approx(
        sum(r["gen_tokens"] for r in per_record) / sum(r["ref_tokens"] for r in per_record)
    )


def test_an_empty_file_gives_n_zero_and_null_means(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n", encoding="utf-8")
    result = run_metrics("--generations", str(path))
    assert result == {key: (0 if key == "n" else None) for key in SUMMARY_KEYS}


@pytest.mark.parametrize(
    ("bad_line", "field"),
    [
        ({"source_example_id": "b", "topic": "Health", "predicted_steps": ["x"]}, "steps"),
        ({"source_example_id": "b", "topic": "Health", "steps": ["x"], "predicted_steps": "1. x"}, "predicted_steps"),
        ({"source_example_id": "b", "topic": "Health", "steps": ["x"]}, "predicted_steps"),
        ({"source_example_id": "b", "topic": "Health", "steps": ["x", 7], "predicted_steps": ["x"]}, "steps[1]"),
        ({"source_example_id": "b", "topic": {"name": "x"}, "steps": ["x"], "predicted_steps": ["x"]}, "topic"),
    ],
)
def test_a_malformed_line_names_file_line_and_field(tmp_path, bad_line, field):
    # Line 1 is good, line 2 blank, line 3 bad: the physical line number is reported.
    path = write_jsonl(tmp_path / "gens.jsonl", [GENERATIONS[0], bad_line], blank_lines=True)
    with pytest.raises(CommandError) as caught:
        run_metrics("--generations", str(path))
    assert str(caught.value).startswith(f"{path}, line 3, field '{field}':")


def test_invalid_json_names_the_line(tmp_path):
    path = write_jsonl(tmp_path / "gens.jsonl", [GENERATIONS[0], '{"source_example_id": "b",'])
    with pytest.raises(CommandError, match=r"gens\.jsonl, line 2: invalid JSON"):
        run_metrics("--generations", str(path))


def test_a_failed_run_leaves_the_per_record_file_as_it_was(tmp_path):
    out = tmp_path / "per-record.jsonl"
    out.write_text("previous results\n", encoding="utf-8")
    path = write_jsonl(tmp_path / "gens.jsonl", [GENERATIONS[0], GENERATIONS[1], {"source_example_id": "c"}])
    with pytest.raises(CommandError, match="line 3"):
        run_metrics("--generations", str(path), "--per-record", str(out))
    assert out.read_text(encoding="utf-8") == "previous results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gens.jsonl", "per-record.jsonl"]


def test_a_missing_input_file_is_reported(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        run_metrics("--generations", str(tmp_path / "nope.jsonl"))


def test_a_per_record_file_in_a_missing_folder_is_reported_before_any_work(tmp_path):
    path = write_jsonl(tmp_path / "gens.jsonl", GENERATIONS)
    with pytest.raises(CommandError, match="does not exist"):
        run_metrics("--generations", str(path), "--per-record", str(tmp_path / "no" / "out.jsonl"))


def test_the_command_line_exits_non_zero_with_the_message(tmp_path):
    path = write_jsonl(tmp_path / "gens.jsonl", [{"source_example_id": "a", "topic": "Health", "steps": []}])
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.django.test"}
    done = subprocess.run(
        [sys.executable, "manage.py", "bench_metrics", "--generations", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert f"{path}, line 1, field 'steps'" in done.stderr
    assert done.stdout == ""
