"""`manage.py mine_prefilter`: every record written back with its `prefilter` verdict,
plain and compressed files, the step bounds as options, a summary by reason, and bad
lines reported by file, line and field with no output left behind."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.record_reader import iter_records
from tests.files import COMPRESSORS, jsonl_bytes
from tests.services import BASE_DIR

KEPT = {
    "id": "kept",
    "goal": "Varnish a board.",
    "topic": "Home & Hobbies",
    "steps": ["Sand the board.", "Wipe off the dust.", "Stir the varnish.", "Brush on one coat.", "Let it dry."],
}
SHORT = {"id": "short", "steps": ["Boil water.", "Add pasta.", "Drain."]}
LONG = {"id": "long", "steps": [f"Do task{i} now." for i in range(16)]}
# bigrams: (stir soup) x3, (add salt), (serve hot) -> rate_2 = 2/5 = 0.40 -> rejected
REPETITIVE = {"id": "repetitive", "steps": ["Stir soup.", "Stir soup.", "Stir soup.", "Add salt.", "Serve hot."]}
RECORDS = [KEPT, SHORT, LONG, REPETITIVE]


def write(path: Path, records: list[dict] | bytes) -> Path:
    data = records if isinstance(records, bytes) else jsonl_bytes(records)
    suffix = "".join(s for s in path.suffixes if s in COMPRESSORS)
    path.write_bytes(COMPRESSORS[suffix](data))
    return path


def read(path: Path) -> list[dict]:
    return [record for _, record in iter_records(path)]


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("mine_prefilter", *args, stdout=out)
    return out.getvalue()


def test_every_record_comes_back_with_its_verdict_in_order(tmp_path):
    source = write(tmp_path / "in.jsonl", RECORDS)
    target = tmp_path / "out.jsonl"
    run("--input", str(source), "--output", str(target))
    out = read(target)
    assert [r["id"] for r in out] == ["kept", "short", "long", "repetitive"]
    for before, after in zip(RECORDS, out):
        assert {k: v for k, v in after.items() if k != "prefilter"} == before
        assert set(after["prefilter"]) == {"passed", "reason", "repetition"}
        assert set(after["prefilter"]["repetition"]) == {"2", "3", "4"}
        assert all(isinstance(v, float) for v in after["prefilter"]["repetition"].values())
    assert out[0]["prefilter"] == {"passed": True, "reason": "", "repetition": {"2": 0.0, "3": 0.0, "4": 0.0}}
    assert out[1]["prefilter"]["reason"] == "too_few_steps: 3 < 5"
    assert out[2]["prefilter"]["reason"] == "too_many_steps: 16 > 15"
    assert out[3]["prefilter"] == {
        "passed": False,
        "reason": "repetition_2gram: 0.4000 >= 0.40",
        "repetition": {"2": 0.4, "3": 0.0, "4": 0.0},
    }


def test_the_summary_counts_records_passed_and_rejections_by_reason(tmp_path):
    source = write(tmp_path / "in.jsonl", RECORDS + [SHORT, SHORT])
    printed = run("--input", str(source), "--output", str(tmp_path / "out.jsonl"))
    assert "6 records, 1 passed, 5 rejected" in printed
    assert "rejected too_few_steps: 3" in printed
    assert "rejected too_many_steps: 1" in printed
    assert "rejected repetition_2gram: 1" in printed
    assert "repetition_3gram" not in printed


def test_step_bounds_come_from_the_options(tmp_path):
    source = write(tmp_path / "in.jsonl", [SHORT, LONG])
    target = tmp_path / "out.jsonl"
    run("--input", str(source), "--output", str(target), "--min-steps", "3", "--max-steps", "16")
    assert [r["prefilter"]["passed"] for r in read(target)] == [True, True]
    run("--input", str(source), "--output", str(target), "--min-steps", "4")
    assert read(target)[0]["prefilter"]["reason"] == "too_few_steps: 3 < 4"


def test_a_previous_verdict_in_the_input_is_replaced(tmp_path):
    stale = dict(SHORT, prefilter={"passed": True, "reason": "", "repetition": {}})
    source = write(tmp_path / "in.jsonl", [stale])
    target = tmp_path / "out.jsonl"
    run("--input", str(source), "--output", str(target))
    assert read(target)[0]["prefilter"]["reason"] == "too_few_steps: 3 < 5"


def test_blank_lines_are_skipped_and_non_ascii_text_survives(tmp_path):
    record = dict(KEPT, goal="Préparer un café ☕")
    source = write(tmp_path / "in.jsonl", b"\n" + jsonl_bytes([record]) + b"\n\n")
    target = tmp_path / "out.jsonl"
    run("--input", str(source), "--output", str(target))
    assert [r["goal"] for r in read(target)] == ["Préparer un café ☕"]
    assert "☕" in target.read_text(encoding="utf-8")


@pytest.mark.parametrize("compression", ["", ".gz", ".zst", ".bz2", ".xz"])
def test_compressed_input_and_output(tmp_path, compression):
    source = write(tmp_path / f"in.jsonl{compression}", RECORDS)
    target = tmp_path / f"out.jsonl{compression}"
    run("--input", str(source), "--output", str(target))
    assert [r["prefilter"]["passed"] for r in read(target)] == [True, False, False, False]
    if compression:  # really compressed, not plain text under a compressed name
        assert not target.read_bytes().startswith(b"{")


def test_plain_input_can_be_written_compressed(tmp_path):
    source = write(tmp_path / "in.jsonl", RECORDS)
    target = tmp_path / "out.jsonl.zst"
    run("--input", str(source), "--output", str(target))
    assert len(read(target)) == 4


BAD_LINES = [
    (b'{"steps": ["a"]}\n{"steps": ["a"]}\n{"steps": [\n', "line 3: invalid JSON"),
    (b'{"steps": ["a"]}\n{"goal": "no steps"}\n', "line 2, field 'steps': missing; expected a list of strings"),
    (b'{"steps": "Stir. Serve."}\n', "line 1, field 'steps': expected a list of strings, got str"),
    (b'{"steps": null}\n', "line 1, field 'steps': expected a list of strings, got null"),
    (b'{"steps": ["a"]}\n\n{"steps": ["Stir.", 2]}\n', "line 3, field 'steps[2]': expected a string, got int"),
    (b'{"steps": ["a"]}\n["a", "b"]\n', "line 2: expected a JSON object, got list"),
]


@pytest.mark.parametrize("data, where", BAD_LINES)
def test_a_bad_line_is_named_and_no_output_is_left(tmp_path, data, where):
    source = write(tmp_path / "in.jsonl", data)
    target = tmp_path / "out.jsonl"
    with pytest.raises(CommandError) as caught:
        run("--input", str(source), "--output", str(target))
    assert f"{source}, {where}" in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_a_bad_line_leaves_an_existing_output_untouched(tmp_path):
    source = write(tmp_path / "in.jsonl.gz", [KEPT, {"steps": 5}])
    target = tmp_path / "out.jsonl"
    target.write_text("previous results\n")
    with pytest.raises(CommandError, match=r"line 2, field 'steps'"):
        run("--input", str(source), "--output", str(target))
    assert target.read_text() == "previous results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl.gz", "out.jsonl"]


def test_a_truncated_compressed_input_is_an_error_not_a_short_output(tmp_path):
    whole = COMPRESSORS[".gz"](jsonl_bytes(RECORDS * 50))
    source = tmp_path / "in.jsonl.gz"
    source.write_bytes(whole[: len(whole) // 2])
    target = tmp_path / "out.jsonl"
    with pytest.raises(CommandError, match="cannot decompress"):
        run("--input", str(source), "--output", str(target))
    assert not target.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--min-steps", "6", "--max-steps", "5"], "max_steps must be a whole number >= min_steps (6)"),
        (["--min-steps", "-1"], "min_steps must be a whole number >= 0"),
    ],
)
def test_inconsistent_step_bounds_are_refused(tmp_path, args, message):
    source = write(tmp_path / "in.jsonl", RECORDS)
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run("--input", str(source), "--output", str(tmp_path / "out.jsonl"), *args)
    assert not (tmp_path / "out.jsonl").exists()


def test_missing_input_and_non_jsonl_files_are_refused(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        run("--input", str(tmp_path / "absent.jsonl"), "--output", str(tmp_path / "out.jsonl"))
    source = write(tmp_path / "in.jsonl", RECORDS)
    with pytest.raises(CommandError, match="expected a JSONL file"):
        run("--input", str(source), "--output", str(tmp_path / "out.csv"))
    with pytest.raises(CommandError, match="the folder .* does not exist"):
        run("--input", str(source), "--output", str(tmp_path / "nowhere" / "out.jsonl"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def manage(*args: str) -> subprocess.CompletedProcess:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")
    }
    env["DJANGO_SETTINGS_MODULE"] = "config.django.test"
    return subprocess.run(
        [sys.executable, "manage.py", "mine_prefilter", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_manage_py_exits_zero_on_success_and_non_zero_on_a_bad_line(tmp_path):
    source = write(tmp_path / "in.jsonl", RECORDS)
    target = tmp_path / "out.jsonl"
    done = manage("--input", str(source), "--output", str(target))
    assert done.returncode == 0, done.stderr
    assert "4 records, 1 passed, 3 rejected" in done.stdout
    assert len(read(target)) == 4

    bad = write(tmp_path / "bad.jsonl", [KEPT, {"steps": ["ok", None]}])
    bad_target = tmp_path / "bad-out.jsonl"
    done = manage("--input", str(bad), "--output", str(bad_target))
    assert done.returncode != 0
    assert f"{bad}, line 2, field 'steps[2]': expected a string, got null" in done.stderr
    assert not bad_target.exists()
