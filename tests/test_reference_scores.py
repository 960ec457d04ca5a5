"""The same numbers as a How2Bench judgments file's own aggregate: records marked
parse_failed are left out of scoring and counted, per topic and overall, in bench_aggregate
and on the leaderboard after an import; How2Score is given on 0-1 and 0-100; a topic with
nothing scored has no score (None) beside its counts."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from typing import Any

import pytest
from django.core.management import call_command

from judging.leaderboard_selectors import leaderboard_ranking
from judging.models import Judgment

pytestmark = pytest.mark.django_db

TOPICS = ["Food & Dining", "Health", "Sports & Fitness", ""]  # "" : a file made without topics
STEPS = ["Gather the tools.", "Do the main part.", "Check the result.", "Clean up.", "Put things away."]


def _verdict(i: int) -> tuple[bool, bool, int]:
    """(parse_failed, has_failure, n_failures) of record i, spread over the topics; every
    record of topic 3 ("") with i % 8 == 3 fails to parse, and "Sports & Fitness" (i % 4 == 2)
    has only parse failures."""
    topic = i % 4
    if topic == 2 or (i % 7 == 0):
        return True, True, 0  # the reference writes has_failure true with its parse failures
    failed = i % 3 == 0
    return False, failed, (1 + i % 2) if failed else 0


def _records() -> list[dict]:
    records = []
    for i in range(40):
        parse_failed, has_failure, n_failures = _verdict(i)
        failures = [
            {"failure": f"Problem {k} of {i}." if k else "", "L1_steps": [1 + k], "L2_steps": [0] if k else [2]}
            for k in range(n_failures)
        ]
        records.append(
            {
                "schema_version": "how2bench.judgment.v1",
                "judge_id": "judge-abc",
                "judge_prompt_sha256": "f" * 64,
                "source_example_id": f"ex-{i:02d}",
                "topic": TOPICS[i % 4],
                "goal": f"Do task {i}",
                "steps": STEPS,
                "resources": ["a bowl, large", ""][: 1 + i % 2],
                "predicted_steps": STEPS,
                "judge": {"backend": "deluge", "provider": "openai", "model": "gpt-judge"},
                "reasoning": "" if parse_failed else f"Reasoning {i}.",
                "critical_failures": failures,
                "has_failure": has_failure,
                "n_failures": n_failures,
                "parse_failed": parse_failed,
            }
        )
    return records


def _expected() -> tuple[dict, dict]:
    """The reference's documented rule, by hand: parse_failed records are skipped and
    counted; How2Score = share of the rest without a failure."""
    topics: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # judged, with failure, failures, parse failed
    for record in _records():
        row = topics[record["topic"] or "none"]
        if record["parse_failed"]:
            row[3] += 1
            continue
        row[0] += 1
        row[1] += record["has_failure"]
        row[2] += record["n_failures"]
    by_topic: dict[str, dict[str, Any]] = {}
    for topic, (n, failed, failures, parse_failed) in topics.items():
        by_topic[topic] = {
            "n_judged": n,
            "n_with_failures": failed,
            "n_parse_failed": parse_failed,
            "how2score": (n - failed) / n if n else None,
            "avg_failures_per_example": failures / n if n else None,
        }
    n = sum(t["n_judged"] for t in by_topic.values())
    failed = sum(t["n_with_failures"] for t in by_topic.values())
    overall = {
        "n_examples": n,
        "n_with_failures": failed,
        "how2score": (n - failed) / n,
        "n_parse_failed": sum(t["n_parse_failed"] for t in by_topic.values()),
    }
    return overall, by_topic


def _write(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_the_fixture_has_parse_failures_in_every_topic_and_a_topic_with_nothing_scored():
    overall, by_topic = _expected()
    assert overall["n_parse_failed"] >= 10 and overall["n_examples"] + overall["n_parse_failed"] == 40
    assert by_topic["Sports & Fitness"]["n_judged"] == 0
    assert all(t["n_parse_failed"] for t in by_topic.values())


def test_bench_aggregate_gives_the_references_numbers_per_topic_and_overall(tmp_path):
    out = io.StringIO()
    call_command(
        "bench_aggregate",
        "--judgments",
        str(_write(tmp_path / "judgments.jsonl", _records())),
        stdout=out,
        stderr=io.StringIO(),
    )
    result = json.loads(out.getvalue())
    overall, by_topic = _expected()
    assert result["how2score"] == pytest.approx(overall["how2score"])
    assert result["how2score_percent"] == pytest.approx(100 * overall["how2score"])
    assert (result["n_examples"], result["n_with_failures"], result["n_parse_failed"]) == (
        overall["n_examples"],
        overall["n_with_failures"],
        overall["n_parse_failed"],
    )
    assert result["n_judged"] == overall["n_examples"] and result["n_unusable"] == overall["n_parse_failed"]
    assert set(result["by_topic"]) == set(by_topic)
    for topic, expected in by_topic.items():
        got = result["by_topic"][topic]
        assert (got["n_judged"], got["n_with_failures"], got["n_parse_failed"]) == (
            expected["n_judged"],
            expected["n_with_failures"],
            expected["n_parse_failed"],
        ), topic
        if expected["n_judged"]:
            assert got["how2score"] == pytest.approx(expected["how2score"]), topic
            assert got["how2score_percent"] == pytest.approx(100 * expected["how2score"]), topic
            assert got["avg_failures_per_example"] == pytest.approx(expected["avg_failures_per_example"]), topic
        else:  # the one rule: nothing scored, no score (the counts say why)
            assert got["how2score"] is None and got["how2score_percent"] is None, topic


def _world(tmp_path):
    """The 40 procedures (example records, topic "" among them) and one model's
    generations, imported from hand-written How2Bench files."""
    examples = [
        {
            "schema_version": "how2bench.example.v1",
            "source_example_id": r["source_example_id"],
            "url": "",
            "source_text": "",
            "topic": r["topic"],
            "goal": r["goal"],
            "resources": r["resources"],
            "steps": r["steps"],
        }
        for r in _records()
    ]
    call_command(
        "import_procedures", str(_write(tmp_path / "examples.jsonl", examples)), "--create-topics", stdout=io.StringIO()
    )
    generations = [
        {
            "schema_version": "how2bench.generation.v1",
            "generator_id": "gen-1",
            "generation_prompt_sha256": "e" * 64,
            "source_example_id": r["source_example_id"],
            "topic": r["topic"],
            "goal": r["goal"],
            "steps": STEPS,
            "resources": r["resources"],
            "model_completion": "\n".join(f"{k}. {s}" for k, s in enumerate(STEPS, 1)),
            "predicted_steps": STEPS,
            "prompt": f"Write steps for {r['goal']}",
            "generator": {"backend": "vllm", "provider": "", "model": "qwen-x"},
        }
        for r in _records()
    ]
    call_command(
        "bench_transfer",
        "import-generations",
        str(_write(tmp_path / "generations.jsonl", generations)),
        "--run",
        "qwen-ref",
        stdout=io.StringIO(),
    )


def test_imported_parse_failures_are_unusable_on_the_leaderboard_and_it_agrees(tmp_path):
    _world(tmp_path)
    call_command(
        "bench_transfer",
        "import-judgments",
        str(_write(tmp_path / "judgments.jsonl", _records())),
        stdout=io.StringIO(),
    )
    overall, by_topic = _expected()
    assert (
        Judgment.objects.filter(judge="gpt-judge", outcome="parse_failed", has_failure=None).count()
        == overall["n_parse_failed"]
    )
    (row,) = leaderboard_ranking("gpt-judge", basis="all", min_coverage=0.0)["rows"]
    assert row["model"] == "qwen-x"
    assert (row["n_judged"], row["n_unusable"]) == (overall["n_examples"], overall["n_parse_failed"])
    assert row["how2score"] == pytest.approx(overall["how2score"])
    assert row["how2score_percent"] == pytest.approx(100 * overall["how2score"])
    for topic, expected in by_topic.items():
        got = row["by_topic"][topic]
        assert (got["n_scored"], got["n_unusable"]) == (expected["n_judged"], expected["n_parse_failed"]), topic
        assert got["how2score"] == (None if expected["how2score"] is None else pytest.approx(expected["how2score"]))
        assert got["how2score_percent"] == (
            None if expected["how2score"] is None else pytest.approx(100 * expected["how2score"])
        )


def test_an_answer_we_could_not_parse_is_exported_as_the_reference_writes_it(tmp_path):
    _world(tmp_path)
    call_command(
        "bench_transfer",
        "import-judgments",
        str(_write(tmp_path / "judgments.jsonl", _records())),
        stdout=io.StringIO(),
    )
    judgment = Judgment.objects.filter(judge="gpt-judge").first()
    assert judgment is not None
    generation = judgment.generation
    Judgment.objects.create(
        generation=generation,
        judge="ours",
        outcome="parse_failed",
        has_failure=None,
        reasoning="no JSON object in the answer",
    )
    out = tmp_path / "ours.jsonl"
    call_command("bench_transfer", "export-judgments", "--judge", "ours", "--output", str(out), stdout=io.StringIO())
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["parse_failed"] is True and record["has_failure"] is True and record["n_failures"] == 0
    assert record["schema_version"] == "how2bench.judgment.v1" and record["judge"]["model"] == "ours"
