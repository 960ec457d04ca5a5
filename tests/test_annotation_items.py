"""Item sources: JSONL files for create_study (bad lines named, nothing created) and judged
generations sampled stratified by topic and judge label; export_annotations."""

from __future__ import annotations

import gzip
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotate.models import GuidelineVersion, Study, StudyItem
from annotate.studies.item_files import items_read
from annotate.studies.item_sources import items_from_judgments
from annotate.studies.sampling import stratified_sample
from annotate.testing import annotate_next, annotator_start, study_make
from core.record_files import RecordError

pytestmark = pytest.mark.django_db


def _item(n, **extra):
    return {
        "item_id": f"i{n}",
        "topic": "Health",
        "goal": f"Goal {n}",
        "reference_steps": ["a", "b"],
        "candidate_steps": ["c", "d", "e"],
        **extra,
    }


def _write(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


GOOD = [
    _item(1),
    _item(2),
    _item(3),
    _item(4, attention_check={"has_failure": True}),
    _item(5, qualification={"has_failure": False, "explanation": "Fine."}),
]


def test_create_study_reads_the_file_and_prints_the_prolific_entry_url(tmp_path):
    path = _write(tmp_path / "items.jsonl", GOOD)
    out = StringIO()
    call_command(
        "create_study",
        "--name",
        "Pilot A",
        "--items",
        str(path),
        "--annotators-per-item",
        "2",
        "--min-seconds",
        "60",
        "--lease-minutes",
        "10",
        "--completion-code",
        "C0DE1",
        "--base-url",
        "https://studio.example.org",
        stdout=out,
    )
    text = out.getvalue()
    study = Study.objects.get()
    assert (
        "https://studio.example.org/a/pilot-a/?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
        in text
    )
    assert "3 items, 1 attention checks, 1 qualification items" in text
    assert (study.annotators_per_item, study.min_seconds, study.lease_minutes, study.completion_code) == (
        2,
        60,
        10,
        "C0DE1",
    )
    assert study.training_enabled and study.qualification_enabled and study.qualification_pass == 1
    roles = dict(StudyItem.objects.values_list("item_id", "role"))
    assert roles == {"i1": "main", "i2": "main", "i3": "main", "i4": "attention", "i5": "qualification"}
    assert StudyItem.objects.get(item_id="i5").explanation == "Fine."


def test_create_study_reads_compressed_files_and_honours_the_switches(tmp_path):
    path = tmp_path / "items.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(json.dumps(r) for r in GOOD[:3]) + "\n")
    call_command(
        "create_study",
        "--name",
        "Quick",
        "--items",
        str(path),
        "--no-training",
        "--no-qualification",
        stdout=StringIO(),
    )
    study = Study.objects.get()
    assert not study.training_enabled and not study.qualification_enabled and study.min_seconds == 90
    assert study.annotators_per_item == 3 and study.lease_minutes == 30


@pytest.mark.parametrize(
    "bad, expected",
    [
        ("{not json", "line 2: invalid JSON"),
        (json.dumps(_item(9, goal="")), "line 2, field 'goal': must not be empty"),
        (
            json.dumps({k: v for k, v in _item(9).items() if k != "candidate_steps"}),
            "line 2, field 'candidate_steps': is required",
        ),
        (
            json.dumps(_item(9, reference_steps=["ok", 3])),
            "line 2, field 'reference_steps[1]': must be a non-empty string",
        ),
        (json.dumps(_item(9, reference_steps=[])), "line 2, field 'reference_steps': must be a non-empty list"),
        (json.dumps(_item(1)), "line 2, field 'item_id': 'i1' already appears on line 1"),
        (json.dumps(_item(9, attention_check={"has_failure": "yes"})), "line 2, field 'attention_check.has_failure'"),
        (
            json.dumps(_item(9, qualification={"has_failure": True})),
            "line 2, field 'qualification.explanation': is required",
        ),
        (
            json.dumps(
                _item(9, qualification={"has_failure": True, "explanation": "x"}, attention_check={"has_failure": True})
            ),
            "not both",
        ),
        ("[1, 2]", "line 2: a record must be a JSON object"),
    ],
)
def test_a_bad_line_is_reported_with_its_number_and_nothing_is_created(tmp_path, bad, expected):
    path = _write(tmp_path / "bad.jsonl", [_item(1), bad, _item(3)])
    with pytest.raises(CommandError) as info:
        call_command("create_study", "--name", "Bad", "--items", str(path), "--no-qualification", stdout=StringIO())
    assert expected in str(info.value) and "bad.jsonl" in str(info.value)
    assert "Nothing was created." in str(info.value)
    assert not Study.objects.exists() and not StudyItem.objects.exists() and not GuidelineVersion.objects.exists()


def test_all_bad_lines_are_reported_together(tmp_path):
    path = _write(tmp_path / "bad.jsonl", ["{", _item(2), json.dumps(_item(3, goal=7)), "", "nope"])
    with pytest.raises(RecordError) as info:
        items_read(path, kind="critical_failure")
    assert [p.line for p in info.value.problems] == [1, 3, 5]


def test_a_study_that_cannot_work_is_refused_before_anything_is_created(tmp_path):
    only_checks = _write(tmp_path / "checks.jsonl", [_item(1, attention_check={"has_failure": True})])
    with pytest.raises(CommandError, match="no main-pool items"):
        call_command(
            "create_study", "--name", "X", "--items", str(only_checks), "--no-qualification", stdout=StringIO()
        )
    no_checks = _write(tmp_path / "main.jsonl", [_item(1)])
    with pytest.raises(CommandError, match="no item is an attention check"):
        call_command(
            "create_study", "--name", "X", "--items", str(no_checks), "--attention-rate", "0.1", stdout=StringIO()
        )
    with pytest.raises(CommandError, match="no such file"):
        call_command("create_study", "--name", "X", "--items", str(tmp_path / "missing.jsonl"), stdout=StringIO())
    assert not Study.objects.exists()


def test_stratified_sample_takes_every_stratum_in_turn_and_is_reproducible():
    rows = [("a", i) for i in range(10)] + [("b", i) for i in range(2)] + [("c", i) for i in range(5)]
    sample = stratified_sample(rows, key=lambda r: r[0], n=9, seed=7)
    counts = {k: sum(1 for r in sample if r[0] == k) for k in "abc"}
    assert counts == {"a": 4, "b": 2, "c": 3}
    assert sample == stratified_sample(rows, key=lambda r: r[0], n=9, seed=7)
    assert len(stratified_sample(rows, key=lambda r: r[0], n=100)) == 17


def test_items_from_judged_generations_are_stratified_by_topic_and_judge_label(demo):
    items = items_from_judgments(judge="How2Judge", n=6, seed=1)
    assert len(items) == 6
    strata = {(i.topic, i.source["judge_label"]) for i in items}
    assert len(strata) == 6  # six different (topic, label) strata before any repeats
    first = items[0]
    assert first.item_id.startswith("gen-") and first.reference_steps and first.candidate_steps
    assert {"generation_id", "judgment_id", "judge", "model", "procedure_id"} <= set(first.source)
    out = StringIO()
    call_command(
        "create_study",
        "--name",
        "From judge",
        "--from-judge",
        "How2Judge",
        "--sample",
        "4",
        "--no-qualification",
        stdout=out,
    )
    assert "4 items" in out.getvalue()


def test_export_annotations_writes_one_line_per_annotation_in_the_agreement_format(tmp_path):
    study = study_make(n_items=2, annotators_per_item=2)
    for pid in ("e1", "e2"):
        p = annotator_start(study, pid)
        annotate_next(p, label=True)
        annotate_next(p, label=False)
    out = tmp_path / "export.jsonl"
    call_command("export_annotations", "--study", study.slug, "--output", str(out), stdout=StringIO())
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4
    required = {
        "item_id",
        "annotator",
        "has_failure",
        "failures",
        "comments",
        "study",
        "round",
        "guideline_version",
        "submitted_at",
        "wall_seconds",
        "active_seconds",
        "excluded",
        "exclusion_reason",
    }
    provenance = {"source", "l1_hash", "l2_hash", "interface_version", "first_served_at", "click_log", "surplus"}
    assert all(required | provenance <= set(r) for r in rows)
    flagged = [r for r in rows if r["has_failure"]]
    assert flagged[0]["failures"] == [{"description": "Step order breaks it.", "L1_steps": [1], "L2_steps": [2]}]
    assert {r["annotator"] for r in rows} == {"e1", "e2"} and rows[0]["study"] == study.slug and rows[0]["round"] == 1

    from annotate.stats.records import read_annotations

    parsed = read_annotations(out)
    assert len(parsed) == 4

    with pytest.raises(CommandError, match="no study 'nope'"):
        call_command("export_annotations", "--study", "nope", "--output", str(out), stdout=StringIO())
