"""The `score_metric` command: one JSON line per input with exactly the documented keys,
Sketch-and-Fill or triples as input, and bad lines refused by file, line and field before
anything is printed."""

from __future__ import annotations

import gzip
import io
import json
import math
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from judging.constants import SCORE_MAX

KEYS = [
    "format_ok",
    "consistency_ok",
    "r_scale",
    "order_strict",
    "order_lcs",
    "semantic",
    "score",
    "step_m",
    "order_lcs_eval",
    "order_tau",
]

GOLD = [
    {"action": "harvest", "objects": ["cells"], "parameters": []},
    {"action": "lyse", "objects": ["cells"], "parameters": ["ripa buffer"]},
    {"action": "centrifuge", "objects": ["lysate"], "parameters": ["12000xg", "10 min"]},
    {"action": "quantify", "objects": ["protein"], "parameters": []},
]

ANSWER = (
    "<think>Harvest, lyse, spin, measure.</think>\n<key>\n"
    + "\n".join(f"Step {n}: {json.dumps(s)}" for n, s in enumerate(GOLD, start=1))
    + "\n</key>\n<orc>\n"
    "Step 1: Harvest the cells.\n"
    "Step 2: Lyse the cells in RIPA buffer.\n"
    "Step 3: Centrifuge the lysate at 12000 xg for 10 min.\n"
    "Step 4: Quantify the protein.\n"
    "</orc>\n<note>Keep samples on ice.</note>"
)


def write_lines(path: Path, lines: list[object]) -> str:
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return str(path)


def run(path: str) -> list[dict]:
    out = io.StringIO()
    call_command("score_metric", "--input", path, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_one_json_line_per_input_with_exactly_the_documented_keys(tmp_path):
    path = write_lines(
        tmp_path / "in.jsonl",
        [
            {"gold": GOLD, "completion": ANSWER},
            "",
            {"gold": GOLD, "pred": GOLD[:1] + GOLD[2:]},
        ],
    )
    rows = run(path)
    assert len(rows) == 2
    assert all(list(row) == KEYS for row in rows)


def test_a_faithful_sketch_fill_answer_equal_to_gold_scores_the_maximum(tmp_path):
    [row] = run(write_lines(tmp_path / "in.jsonl", [{"gold": GOLD, "completion": ANSWER}]))
    assert row["format_ok"] is True and row["consistency_ok"] is True
    assert row["score"] == pytest.approx(SCORE_MAX)
    assert (row["order_strict"], row["step_m"], row["order_lcs"], row["order_tau"]) == (1, 1, 1.0, 1.0)


def test_triples_skip_the_gates_and_score_by_hand(tmp_path):
    # pred drops "lyse": strict order 1, LCS/m 3/4, 2L/(n+m) 6/7; N 3 vs 4 -> M 2, d 1,
    # r_scale cos(pi/4). Anchors (1,1), (2,3), (3,4) with decay 1, 0.875, 0.875 and full
    # object and parameter agreement: semantic (1.5 + 2 * 0.875 * 1.5) / 3.
    [row] = run(write_lines(tmp_path / "in.jsonl", [{"gold": GOLD, "pred": GOLD[:1] + GOLD[2:]}]))
    semantic = (1.5 + 2 * 0.875 * 1.5) / 3
    assert row["format_ok"] is None and row["consistency_ok"] is None
    assert row["order_strict"] == 1 and row["step_m"] == 0
    assert row["order_lcs"] == pytest.approx(0.75)
    assert row["order_lcs_eval"] == pytest.approx(6 / 7)
    assert row["semantic"] == pytest.approx(semantic)
    assert row["r_scale"] == pytest.approx(math.cos(math.pi / 4))
    assert row["score"] == pytest.approx(math.cos(math.pi / 4) * (1 + semantic))


def test_a_broken_answer_is_a_gate_failure_not_a_bad_line(tmp_path):
    broken = ANSWER.replace("<note>Keep samples on ice.</note>", "")
    unfaithful = ANSWER.replace("Step 3: Centrifuge the lysate at 12000 xg for 10 min.", "Step 3: Spin it.")
    rows = run(
        write_lines(
            tmp_path / "in.jsonl", [{"gold": GOLD, "completion": broken}, {"gold": GOLD, "completion": unfaithful}]
        )
    )
    assert rows[0]["format_ok"] is False and rows[0]["score"] == 0.0 and rows[0]["r_scale"] is None
    assert rows[1]["format_ok"] is True and rows[1]["consistency_ok"] is False and rows[1]["score"] == 0.0
    assert rows[1]["r_scale"] == 1.0


def test_compressed_input_is_read(tmp_path):
    path = tmp_path / "in.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(json.dumps({"gold": GOLD, "pred": GOLD}) + "\n")
    [row] = run(str(path))
    assert row["score"] == pytest.approx(SCORE_MAX)


@pytest.mark.parametrize(
    "record, field, problem",
    [
        ({"pred": GOLD}, "gold", "missing"),
        ({"gold": [], "pred": GOLD}, "gold", "expected at least one step"),
        ({"gold": GOLD}, "pred", "missing: give pred"),
        ({"gold": GOLD, "pred": GOLD, "completion": ANSWER}, "pred", "give pred or completion, not both"),
        ({"gold": GOLD, "completion": 7}, "completion", "expected a string, got int"),
        ({"gold": GOLD, "pred": [{"action": "mix", "objects": ["a"]}]}, "pred[0].parameters", "missing"),
        (
            {"gold": [{"action": "mix", "objects": "a", "parameters": []}], "pred": []},
            "gold[0].objects",
            "expected a list of strings",
        ),
    ],
)
def test_a_bad_line_is_refused_by_file_line_and_field_before_any_output(tmp_path, record, field, problem):
    path = write_lines(tmp_path / "in.jsonl", [{"gold": GOLD, "pred": GOLD}, "", record])
    out = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("score_metric", "--input", path, stdout=out)
    assert str(caught.value).startswith(f"{path}, line 3, field '{field}': {problem}")
    # The good first line was not printed: output is all or nothing.
    assert out.getvalue() == ""


def test_bad_json_and_missing_files_are_refused(tmp_path):
    path = write_lines(tmp_path / "in.jsonl", [{"gold": GOLD, "pred": GOLD}, "{not json"])
    with pytest.raises(CommandError, match=r"in\.jsonl, line 2"):
        run(path)
    with pytest.raises(CommandError, match="no such file"):
        run(str(tmp_path / "absent.jsonl"))
