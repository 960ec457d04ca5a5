"""`manage.py agreement_report`: the report as JSON on stdout or written atomically to a file,
errors that name file and line with a non-zero exit, and the --study seam."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.services import BASE_DIR

REQUIRED_KEYS = {
    "n_items",
    "n_annotators",
    "n_annotations",
    "alpha",
    "human_majority",
    "leave_one_out",
    "judges",
    "judge_pairs",
}


def annotation(item: str, annotator: str, has_failure: bool, l2: int | None = None, **extra) -> dict:
    failures = [{"description": "step order breaks the goal", "L1_steps": [2], "L2_steps": [l2] if l2 else []}]
    return {
        "item_id": item,
        "annotator": annotator,
        "has_failure": has_failure,
        "failures": failures if has_failure else [],
        **extra,
    }


ANNOTATIONS = [
    annotation("i1", "ann-a", True, 3),
    annotation("i1", "ann-b", True, 3),
    annotation("i1", "ann-c", False),
    annotation("i2", "ann-a", False),
    annotation("i2", "ann-b", False),
    annotation("i2", "ann-c", False),
    annotation("i3", "ann-a", True, 1),
    annotation("i3", "ann-b", False),
    annotation("i3", "ann-c", True, 2, excluded=True),
]
JUDGMENTS = [
    # has_failure true with one failure listed (an empty list would contradict it: refused).
    {
        "item_id": "i1",
        "judge": "how2judge",
        "has_failure": True,
        "critical_failures": [{"failure": "never drained", "L1_steps": [1], "L2_steps": [1]}],
    },
    {"item_id": "i2", "judge": "how2judge", "has_failure": True},
    {"item_id": "i1", "judge": "gpt-5", "has_failure": True},
    {"item_id": "i2", "judge": "gpt-5", "has_failure": False},
]


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return write_jsonl(tmp_path / "annotations.jsonl", ANNOTATIONS), write_jsonl(
        tmp_path / "judgments.jsonl", JUDGMENTS
    )


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("agreement_report", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_prints_the_report_as_json_with_the_required_keys(files):
    annotations, judgments = files
    out, _ = run("--annotations", str(annotations), "--judgments", str(judgments), "--bootstrap", "100")
    report = json.loads(out)
    assert REQUIRED_KEYS <= set(report)
    assert (report["n_items"], report["n_annotators"], report["n_annotations"], report["n_excluded"]) == (3, 3, 8, 1)
    # i1: T T F -> has_failure; i2: F F F -> no_failure; i3: T F (c excluded) -> tie.
    assert report["human_majority"] == {
        "min_annotations": 2,
        "n_items": 3,
        "n_with_majority": 2,
        "n_ties": 1,
        "has_failure": 1,
        "no_failure": 1,
        "n_too_few": 0,
    }
    assert list(report["judge_pairs"]) == ["gpt-5|how2judge"]
    pair = report["judge_pairs"]["gpt-5|how2judge"]
    assert {k: v for k, v in pair.items() if k not in ("ci95", "interval", "interval_name", "approximate")} == {
        "raters": ["gpt-5", "how2judge"],
        "agreement": 0.5,
        "cohen_kappa": 0.0,
        "n": 2,
    }
    assert len(pair["ci95"]) == 2
    assert report["judges"]["gpt-5"]["agreement"] == 1.0
    assert report["judges"]["how2judge"]["agreement_no_failure"] == 0.0
    assert len(report["judges"]["gpt-5"]["ci95"]) == 2
    assert report["bootstrap"]["resamples"] == 100


def test_without_judgments_the_judge_sections_are_empty(files):
    annotations, _ = files
    report = json.loads(run("--annotations", str(annotations), "--bootstrap", "0")[0])
    assert report["judges"] == {} and report["judge_pairs"] == {}
    assert report["alpha"]["binary"] is not None


def test_the_same_seed_gives_the_same_report_and_the_seed_is_used(files):
    annotations, judgments = files
    args = ("--annotations", str(annotations), "--judgments", str(judgments), "--bootstrap", "200")
    assert run(*args, "--seed", "3")[0] == run(*args, "--seed", "3")[0]
    assert json.loads(run(*args, "--seed", "4")[0])["bootstrap"]["seed"] == 4


def test_output_is_written_to_the_file_and_not_to_stdout(files, tmp_path: Path):
    annotations, judgments = files
    output = tmp_path / "report.json"
    out, err = run(
        "--annotations", str(annotations), "--judgments", str(judgments), "--output", str(output), "--bootstrap", "0"
    )
    assert out == ""
    assert str(output) in err
    assert REQUIRED_KEYS <= set(json.loads(output.read_text()))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["annotations.jsonl", "judgments.jsonl", "report.json"]


def test_malformed_input_names_file_and_line_and_leaves_an_existing_output_alone(tmp_path: Path):
    bad = write_jsonl(
        tmp_path / "annotations.jsonl", [ANNOTATIONS[0], ANNOTATIONS[1], '{"item_id": "i9", "annotator": ']
    )
    output = tmp_path / "report.json"
    output.write_text("previous report\n")
    with pytest.raises(CommandError, match=rf"{bad}, line 3: invalid JSON"):
        run("--annotations", str(bad), "--output", str(output))
    assert output.read_text() == "previous report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["annotations.jsonl", "report.json"]


def test_a_mistyped_judgment_field_names_file_line_and_field(files, tmp_path: Path):
    annotations, _ = files
    judgments = write_jsonl(
        tmp_path / "j.jsonl", [JUDGMENTS[0], {"item_id": "i2", "judge": "gpt-5", "has_failure": "no"}]
    )
    with pytest.raises(CommandError, match=rf"{judgments}, line 2, field 'has_failure': expected true or false"):
        run("--annotations", str(annotations), "--judgments", str(judgments))


def test_a_missing_file_is_an_error(tmp_path: Path):
    with pytest.raises(CommandError, match="absent.jsonl: no such file"):
        run("--annotations", str(tmp_path / "absent.jsonl"))


def test_an_output_in_a_missing_directory_is_an_error(files, tmp_path: Path):
    annotations, _ = files
    with pytest.raises(CommandError, match="does not exist"):
        run("--annotations", str(annotations), "--output", str(tmp_path / "no" / "report.json"))


@pytest.mark.django_db
def test_unknown_study_is_a_clear_error():
    with pytest.raises(CommandError, match="no study with slug 'pilot-1'"):
        run("--study", "pilot-1")


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["multiple_choice", "constraint_faithfulness"])
def test_a_study_of_another_kind_has_no_critical_failure_report(kind):
    from annotate.testing import study_make

    study = study_make(n_items=2)
    study.kind = kind
    study.save(update_fields=["kind"])
    with pytest.raises(CommandError, match=f"is a {kind} study: its answers carry no has_failure"):
        run("--study", study.slug)


def test_study_rows_come_from_the_single_seam(monkeypatch, files):
    from annotate.management.commands import agreement_report
    from annotate.stats.records import read_annotations, read_judgments

    annotations, judgments = files
    monkeypatch.setattr(
        agreement_report,
        "study_agreement_rows",
        lambda slug, include_test=False: (read_annotations(annotations), read_judgments(judgments), 2),
    )
    from_study = json.loads(run("--study", "final", "--bootstrap", "50")[0])
    from_files = json.loads(
        run("--annotations", str(annotations), "--judgments", str(judgments), "--bootstrap", "50")[0]
    )
    assert from_study == from_files


@pytest.mark.parametrize(
    "args",
    [
        (),  # neither source
        ("--study", "s", "--annotations", "a.jsonl"),  # both sources
        ("--annotations", "a.jsonl", "--bootstrap", "-1"),
        ("--annotations", "a.jsonl", "--seed", "x"),
    ],
)
def test_invalid_arguments_are_refused(args):
    with pytest.raises(CommandError):
        run(*args)


def manage(*args: str) -> subprocess.CompletedProcess:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")
    }
    env["DJANGO_SETTINGS_MODULE"] = "config.django.test"
    return subprocess.run(
        [sys.executable, "manage.py", "agreement_report", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_manage_py_prints_json_and_exits_zero_then_exits_non_zero_on_a_bad_line(files, tmp_path: Path):
    annotations, judgments = files
    result = manage("--annotations", str(annotations), "--judgments", str(judgments), "--bootstrap", "50")
    assert result.returncode == 0, result.stderr
    assert REQUIRED_KEYS <= set(json.loads(result.stdout))

    bad = write_jsonl(
        tmp_path / "bad.jsonl", [ANNOTATIONS[0], {"item_id": "i1", "annotator": "x", "has_failure": True}]
    )
    result = manage("--annotations", str(bad))
    assert result.returncode == 1
    assert f"{bad}, line 2, field 'failures': missing" in result.stderr
    assert result.stdout == ""

    result = manage("--annotations", str(annotations), "--study", "final")
    assert result.returncode == 2
    assert "not allowed with argument" in result.stderr
