"""How2Bench's record schemas in and out with every field kept: example, generation and
judgment records written by hand from their documented field lists; judgments attached to
the generation they are about, never to an arbitrary one; flat exports carry `url`; our
own stage answers never sit under how2mine.v1's processed_example."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from judging.models import Judgment
from mining.models import Procedure
from mining.procedure_records import ProcedureRecord, to_how2mine

pytestmark = pytest.mark.django_db

STEPS = ["Rinse the rice, twice.", "Boil 2 cups of water.", "Add the rice and cover.", "Simmer 15 minutes."]


def _write(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def _read(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


EXAMPLES: list[dict[str, Any]] = [
    {
        "schema_version": "how2bench.example.v1",
        "source_example_id": "rice-1",
        "url": "https://example.org/rice",
        "source_text": "How to cook rice ...",
        "topic": "Food & Dining",
        "goal": "Cook plain rice on a stove.",
        "resources": ["oil, olive or canola", "pot"],
        "steps": STEPS,
        "notes": {"kept": True},
    },
    {
        "schema_version": "how2bench.example.v1",
        "source_example_id": "rice-2",
        "url": "",
        "source_text": "",
        "topic": "",
        "goal": "Cook rice without topics.",
        "resources": [],
        "steps": STEPS,
    },
]


def _generation(model: str, source: str = "rice-1", steps=STEPS) -> dict:
    return {
        "schema_version": "how2bench.generation.v1",
        "generator_id": f"{model}-id",
        "generation_prompt_sha256": "a" * 64,
        "source_example_id": source,
        "topic": "Food & Dining",
        "goal": "Cook plain rice on a stove.",
        "steps": STEPS,
        "resources": ["oil, olive or canola", "pot"],
        "model_completion": "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1)),
        "predicted_steps": steps,
        "prompt": "Goal: Cook plain rice on a stove.\nSteps:",
        "generator": {"backend": "vllm", "provider": "", "model": model},
        "seed_note": 7,
    }


def _judgment(source: str = "rice-1", steps=STEPS, **extra) -> dict:
    record = {
        "schema_version": "how2bench.judgment.v1",
        "judge_id": "j-1",
        "judge_prompt_sha256": "b" * 64,
        "source_example_id": source,
        "topic": "Food & Dining",
        "goal": "Cook plain rice on a stove.",
        "steps": STEPS,
        "resources": ["oil, olive or canola", "pot"],
        "predicted_steps": steps,
        "judge": {"backend": "deluge", "provider": "openai", "model": "gpt-4.1-judge"},
        "reasoning": "Step 3 never covers the pot.",
        "critical_failures": [{"failure": "", "L1_steps": [3], "L2_steps": [0]}],
        "has_failure": True,
        "n_failures": 1,
        "parse_failed": False,
    }
    return record | extra


def _import_examples(tmp_path):
    call_command("import_procedures", str(_write(tmp_path / "examples.jsonl", EXAMPLES)), stdout=io.StringIO())


def test_example_records_import_topic_less_under_none_and_export_with_every_field(tmp_path):
    _import_examples(tmp_path)
    assert Procedure.objects.get(source_example_id="rice-2").topic.name == "none"
    out = tmp_path / "out.jsonl"
    call_command("export_procedures", "--output", str(out), "--shape", "how2bench.example.v1", stdout=io.StringIO())
    assert _read(out) == EXAMPLES


def test_an_empty_resource_string_is_accepted(tmp_path):
    record = dict(EXAMPLES[0], source_example_id="rice-3", resources=["pot", ""])
    call_command("import_procedures", str(_write(tmp_path / "e.jsonl", [record])), stdout=io.StringIO())
    assert Procedure.objects.get(source_example_id="rice-3").resources == ["pot"]


def test_flat_exports_carry_url_and_source_url(tmp_path):
    _import_examples(tmp_path)
    out = tmp_path / "flat.jsonl"
    call_command("export_procedures", "--output", str(out), stdout=io.StringIO())
    first, second = _read(out)
    assert first["url"] == first["source_url"] == "https://example.org/rice"
    assert second["topic"] == "" and "url" not in second


def test_our_stage_answers_never_sit_under_how2mine_processed_example():
    mined = ProcedureRecord(
        source_example_id="d0",
        topic="Health",
        goal="g",
        steps=["a"],
        provenance={
            "processed_example": {"extract_procedure": {"has_procedure": True}, "final_validation": {"ok": True}}
        },
    )
    record = to_how2mine(mined)
    assert record["processed_example"] == {}
    assert set(record["mining_stages"]) == {"extract_procedure", "final_validation"}
    imported = ProcedureRecord(
        source_example_id="d1",
        topic="Health",
        goal="g",
        steps=["a"],
        provenance={
            "processed_example": {"procedures": {"stage_passed": True}, "final_filter": {"stage_passed": True}}
        },
    )
    assert set(to_how2mine(imported)["processed_example"]) == {"procedures", "final_filter"}


def test_generation_and_judgment_records_round_trip_with_every_field(tmp_path):
    _import_examples(tmp_path)
    call_command(
        "bench_transfer",
        "import-generations",
        str(_write(tmp_path / "g.jsonl", [_generation("qwen-x")])),
        "--run",
        "qwen-run",
        stdout=io.StringIO(),
    )
    judgments = [
        _judgment(),
        _judgment(
            source="rice-2",
            topic="",
            goal="Cook rice without topics.",
            resources=[],
            reasoning="",
            critical_failures=[],
            has_failure=True,
            n_failures=0,
            parse_failed=True,
        ),
    ]
    call_command(
        "bench_transfer",
        "import-generations",
        str(
            _write(
                tmp_path / "g2.jsonl",
                [_generation("qwen-x", "rice-2") | {"topic": "", "goal": "Cook rice without topics.", "resources": []}],
            )
        ),
        "--run",
        "qwen-run-2",
        stdout=io.StringIO(),
    )
    call_command(
        "bench_transfer", "import-judgments", str(_write(tmp_path / "j.jsonl", judgments)), stdout=io.StringIO()
    )
    stored = Judgment.objects.get(generation__procedure__source_example_id="rice-1")
    assert stored.judge == "gpt-4.1-judge"  # the judge info's model, never a dict's text
    assert stored.reasoning == "Step 3 never covers the pot." and stored.has_failure is True
    assert stored.critical_failures == [{"failure": "", "L1_steps": [3], "L2_steps": []}]
    failed = Judgment.objects.get(generation__procedure__source_example_id="rice-2")
    assert (failed.outcome, failed.has_failure) == ("parse_failed", None)

    gens, judged = tmp_path / "gens-out.jsonl", tmp_path / "judged-out.jsonl"
    call_command(
        "bench_transfer", "export-generations", "--run", "qwen-run", "--output", str(gens), stdout=io.StringIO()
    )
    call_command(
        "bench_transfer", "export-judgments", "--judge", "gpt-4.1-judge", "--output", str(judged), stdout=io.StringIO()
    )
    (generation,) = _read(gens)
    assert {k: generation[k] for k in _generation("qwen-x")} == _generation("qwen-x")
    exported = _read(judged)
    for original, written in zip(judgments, exported):
        assert {k: written[k] for k in original} == original
        assert written["model"] == "qwen-x"

    # ... and in again: a second judge name, the same fields back out
    Judgment.objects.all().delete()
    call_command("bench_transfer", "import-judgments", str(judged), stdout=io.StringIO())
    again = tmp_path / "again.jsonl"
    call_command(
        "bench_transfer", "export-judgments", "--judge", "gpt-4.1-judge", "--output", str(again), stdout=io.StringIO()
    )
    assert _read(again) == exported


def test_judgments_go_to_the_generation_they_judged_or_are_refused_with_line_and_field(tmp_path):
    _import_examples(tmp_path)
    other_steps = ["Boil water.", "Add rice.", "Wait.", "Serve."]
    call_command(
        "bench_transfer",
        "import-generations",
        str(_write(tmp_path / "a.jsonl", [_generation("model-a")])),
        "--run",
        "run-a",
        stdout=io.StringIO(),
    )
    call_command(
        "bench_transfer",
        "import-generations",
        str(_write(tmp_path / "b.jsonl", [_generation("model-b", steps=other_steps)])),
        "--run",
        "run-b",
        stdout=io.StringIO(),
    )
    # the judged steps say which generation: model-a's, although model-b's was imported last
    call_command(
        "bench_transfer", "import-judgments", str(_write(tmp_path / "j1.jsonl", [_judgment()])), stdout=io.StringIO()
    )
    assert Judgment.objects.get().generation.model == "model-a"
    # an explicit --run picks the other one
    call_command(
        "bench_transfer",
        "import-judgments",
        str(_write(tmp_path / "j2.jsonl", [_judgment(predicted_steps=other_steps)])),
        "--run",
        "run-b",
        "--judge",
        "second",
        stdout=io.StringIO(),
    )
    assert Judgment.objects.get(judge="second").generation.model == "model-b"
    # steps that fit neither generation, and no --run/--model: refused, nothing stored
    path = _write(tmp_path / "j3.jsonl", [_judgment(), _judgment(predicted_steps=["Something else."])])
    with pytest.raises(CommandError) as caught:
        call_command("bench_transfer", "import-judgments", str(path), "--judge", "third")
    assert "line 2, field 'model'" in str(caught.value) and "give --run or --model" in str(caught.value)
    assert not Judgment.objects.filter(judge="third").exists()
    # a link to a step that does not exist is still refused with its field
    bad = _judgment(critical_failures=[{"failure": "x", "L1_steps": [9], "L2_steps": []}])
    with pytest.raises(CommandError, match=r"line 1, field 'critical_failures\[0\]\.L1_steps\[0\]'"):
        call_command(
            "bench_transfer",
            "import-judgments",
            str(_write(tmp_path / "j4.jsonl", [bad])),
            "--model",
            "model-a",
            "--judge",
            "fourth",
        )
