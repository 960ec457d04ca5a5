"""`export_procedures`: both shapes, JSONL (plain and compressed) and Parquet; export ->
import -> export gives back exactly the same file."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from mining.export_services import procedure_export
from mining.models import Procedure
from mining.procedure_services import procedure_import
from tests.files import write_records
from tests.test_procedure_import import FLAT, HOW2MINE

pytestmark = pytest.mark.django_db


def _load_fixture(tmp_path):
    procedure_import(path=write_records(tmp_path, "flat", FLAT, "jsonl"), split="bench")
    procedure_import(path=write_records(tmp_path, "mined", HOW2MINE, "jsonl"), split="train")


def _wipe():
    Procedure.objects.all().delete()


@pytest.mark.parametrize("shape", ["flat", "how2mine.v1"])
@pytest.mark.parametrize(
    "name,fmt",
    [
        ("out.jsonl", "jsonl"),
        ("out.jsonl.gz", "jsonl"),
        ("out.jsonl.zst", "jsonl"),
        ("out.parquet", "parquet"),
    ],
)
def test_export_then_import_round_trips_exactly(tmp_path, shape, name, fmt):
    _load_fixture(tmp_path)
    first = tmp_path / f"first-{name}"
    second = tmp_path / f"second-{name}"
    call_command("export_procedures", "--output", str(first), "--shape", shape, "--format", fmt)
    before = _snapshot(shape)
    _wipe()
    call_command("import_procedures", str(first))
    assert _snapshot(shape) == before
    call_command("export_procedures", "--output", str(second), "--shape", shape, "--format", fmt)
    if fmt == "parquet":
        assert pq.read_table(first).to_pylist() == pq.read_table(second).to_pylist()
    else:
        assert first.read_bytes() == second.read_bytes() or name.endswith(".gz")  # gzip stamps mtime
        from core.record_reader import iter_records

        assert [r for _, r in iter_records(first)] == [r for _, r in iter_records(second)]


def _snapshot(shape):
    """What the shape must carry: the flat shape has no stage outputs, how2mine.v1 has them."""
    fields = ["source_example_id", "topic__name", "goal", "steps", "resources", "source_url", "split"]
    if shape == "how2mine.v1":
        fields.append("provenance")
    return list(Procedure.objects.order_by("source_example_id").values(*fields))


def test_flat_export_is_the_public_flat_shape(tmp_path):
    _load_fixture(tmp_path)
    out = tmp_path / "bench.jsonl"
    count = procedure_export(output=out, split="bench")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert count == len(lines) == 2
    assert lines[0] == {**FLAT[0], "split": "bench"}


def test_how2mine_export_carries_stage_outputs_and_source(tmp_path):
    _load_fixture(tmp_path)
    out = tmp_path / "train.jsonl"
    procedure_export(output=out, split="train", shape="how2mine.v1")
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    expected = dict(HOW2MINE[0], split="train")
    assert record == expected


def test_export_filters_by_topic(tmp_path):
    _load_fixture(tmp_path)
    out = tmp_path / "health.jsonl"
    assert procedure_export(output=out, topic="health") == 1


def test_failed_export_leaves_no_partial_file(tmp_path, monkeypatch):
    _load_fixture(tmp_path)
    out = tmp_path / "out.jsonl"
    out.write_text("previous export\n")
    import mining.export_services as services

    def explode(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(services, "_write_jsonl", explode)
    with pytest.raises(RuntimeError):
        procedure_export(output=out)
    assert out.read_text() == "previous export\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_a_constrained_export_round_trips_with_its_split(tmp_path):
    """Procedures of the constrained slice (CoScript) leave and come back as constrained,
    and ``--split constrained`` exports them alone."""
    _load_fixture(tmp_path)
    call_command(
        "import_procedures",
        str(
            write_records(
                tmp_path,
                "constrained",
                [
                    {
                        "source_example_id": "coscript:1:1",
                        "topic": FLAT[0]["topic"],
                        "goal": "Make a sugar-free cake for a diabetic",
                        "steps": ["Mix flour with a sweetener.", "Bake for 30 minutes."],
                        "resources": [],
                    },
                ],
                "jsonl",
            )
        ),
        "--split",
        "constrained",
    )
    out = tmp_path / "constrained.jsonl"
    call_command("export_procedures", "--output", str(out), "--split", "constrained")
    from core.record_reader import iter_records

    records = [r for _, r in iter_records(out)]
    assert [(r["source_example_id"], r["split"], r["resources"]) for r in records] == [
        ("coscript:1:1", "constrained", [])
    ]
    _wipe()
    call_command("import_procedures", str(out))
    assert list(Procedure.objects.values_list("source_example_id", "split")) == [("coscript:1:1", "constrained")]
