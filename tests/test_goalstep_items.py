"""Construction of the goal-step tasks (Zhang et al. 2020 §3, App. C-D) on small pools made
here: negatives from other topics, candidate counts, labels, label reassignment and its
candidates-only check, each App. D filter with its count, the leakage guard, determinism.

The many small pools are embedded with ``_word_embed`` (a bag-of-words vector: texts that
share words are similar), or with ``_random_embed`` (one random unit vector per text) where
the geometry matters; tests/test_goalstep_build.py uses the real model."""

from __future__ import annotations

import hashlib
import zlib
from collections import Counter

import numpy as np
import pytest

from core.intervals import wilson_interval
from goalstep.baselines import hub_choice
from goalstep.item_pool import PoolProcedure
from goalstep.items import (
    REASON_AMBIGUOUS,
    REASON_LEAKAGE,
    REASON_LENGTH,
    REASON_LEXICAL_OVERLAP,
    REASON_SIMILARITY,
    FilterSettings,
    build_items,
    report_lines,
)
from mining.neighbour_search import top_neighbours
from mining.split_dedup import l2_normalise
from mining.words import content_words, normalise_text

NO_FILTERS = FilterSettings(min_step_words=None, min_goal_words=None, max_shared_words=None, similarity_ceiling=None)
TOPICS = ["Food", "Garden", "Cars", "Pets", "Crafts", "Travel"]


def _word_embed(texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), 128), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in text.lower().replace(".", " ").split():
            out[row, zlib.crc32(word.encode()) % 128] += 1.0
    return l2_normalise(out)


def _random_embed(texts: list[str], dim: int = 8) -> np.ndarray:
    """One random unit vector per text; a low dimension makes nearest neighbours close."""
    rows = [
        np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")).normal(size=dim)
        for t in texts
    ]
    return l2_normalise(np.array(rows))


def _pool(n_topics: int = 6, per_topic: int = 4, n_steps: int = 5) -> list[PoolProcedure]:
    """Procedures whose steps share verbs across topics (so negatives are related) and whose
    objects belong to their topic."""
    verbs = ["clean", "measure", "attach", "check", "prepare", "arrange", "trim"]
    pool, pk = [], 1
    for topic in TOPICS[:n_topics]:
        for j in range(per_topic):
            steps = tuple(f"{verbs[(j + s) % len(verbs)]} the {topic.lower()}{j}x{s} carefully" for s in range(n_steps))
            pool.append(PoolProcedure(id=pk, topic=topic, goal=f"Finish {topic} project {j}", steps=steps))
            pk += 1
    return pool


def _by_id(pool):
    return {p.id: p for p in pool}


@pytest.mark.parametrize("task", ["step_inference", "goal_inference"])
def test_every_negative_comes_from_another_topic_than_the_prompt(task):
    pool = _pool()
    procedures = _by_id(pool)
    result = build_items(task=task, procedures=pool, embed=_word_embed, filters=NO_FILTERS)
    assert len(result.items) > 20
    for item in result.items:
        topics = [procedures[pk].topic for pk in item.source_procedure_ids]
        assert item.topic == topics[item.label]
        assert all(topic != item.topic for i, topic in enumerate(topics) if i != item.label)
        assert len(set(topics)) == 4  # so whichever candidate is reassigned, the others are other topics


@pytest.mark.parametrize("task, n", [("step_inference", 4), ("goal_inference", 4), ("step_ordering", 2)])
def test_items_have_exactly_the_tasks_number_of_candidates_and_a_label_in_range(task, n):
    result = build_items(task=task, procedures=_pool(), embed=_word_embed, filters=NO_FILTERS)
    assert result.items
    for item in result.items:
        assert len(item.candidates) == n
        assert len({normalise_text(c) for c in item.candidates}) == n  # no candidate repeats
        assert isinstance(item.label, int) and 0 <= item.label < n
        assert set(item.as_record()) == {"id", "task", "prompt", "candidates", "label", "topic", "source_procedure_ids"}


def test_step_inference_prompt_is_the_goal_of_the_reassigned_positives_procedure():
    pool = _pool()
    procedures = _by_id(pool)
    for item in build_items(task="step_inference", procedures=pool, embed=_word_embed, filters=NO_FILTERS).items:
        owners = [procedures[pk] for pk in item.source_procedure_ids]
        assert all(candidate in owner.steps for candidate, owner in zip(item.candidates, owners))
        assert item.prompt == owners[item.label].goal


def test_goal_inference_prompt_is_a_step_of_the_reassigned_positive_goal():
    pool = _pool()
    procedures = _by_id(pool)
    items = build_items(task="goal_inference", procedures=pool, embed=_word_embed, filters=NO_FILTERS).items
    for item in items:
        owners = [procedures[pk] for pk in item.source_procedure_ids]
        assert [owner.goal for owner in owners] == item.candidates
        assert item.prompt in owners[item.label].steps
    # §3.2: each step of the positive goal's procedure makes one item with the same candidates.
    per_positive = Counter((tuple(item.candidates), item.label) for item in items)
    assert set(per_positive.values()) == {5}


def test_label_reassignment_puts_a_candidates_only_model_at_chance():
    """Without reassignment the positive is the hub of its nearest-neighbour negatives, so a
    model that sees only the candidates finds it; after reassignment it is at chance."""
    pool = _pool(n_topics=6, per_topic=12, n_steps=6)
    result = build_items(task="step_inference", procedures=pool, embed=_random_embed, filters=NO_FILTERS)
    hub = result.report["baselines"]["hub"]
    assert hub["n"] > 300
    assert hub["accuracy_before_reassignment"] > 0.5
    assert hub["chance_in_ci95"] and abs(hub["accuracy"] - 0.25) < 0.07
    labels = Counter(item.label for item in result.items)
    assert set(labels) == {0, 1, 2, 3} and min(labels.values()) > 0.18 * len(result.items)


def test_hub_choice_is_the_candidate_closest_to_the_others():
    vectors = l2_normalise(np.array([[1, 0, 0], [1, 0.2, 0], [1, 0, 0.2], [1, -0.2, 0]], dtype=float))
    assert hub_choice(vectors) == 0


def test_step_ordering_label_points_at_the_earlier_step_and_both_orders_occur():
    pool = _pool(per_topic=6)
    procedures = _by_id(pool)
    result = build_items(task="step_ordering", procedures=pool, embed=_word_embed, filters=NO_FILTERS)
    assert len(result.items) == sum(len(p.steps) - 1 for p in pool)
    for item in result.items:
        steps = procedures[item.source_procedure_ids[0]].steps
        first, other = item.candidates[item.label], item.candidates[1 - item.label]
        assert item.prompt == procedures[item.source_procedure_ids[0]].goal
        assert steps.index(other) == steps.index(first) + 1
    firsts = Counter(item.label for item in result.items)
    assert 0.35 < firsts[0] / len(result.items) < 0.65
    assert result.report["baselines"]["first_position"]["chance_in_ci95"]


def test_length_filter_removes_items_with_a_too_short_step_and_counts_them():
    pool = _pool()
    short = PoolProcedure(
        id=99,
        topic="Food",
        goal="Finish Food project short",
        steps=("clean the food99", "Serve!", "measure the food99x2 bowl"),
    )
    pool.append(short)
    loose = build_items(task="step_ordering", procedures=pool, embed=_word_embed, filters=NO_FILTERS)
    strict = build_items(
        task="step_ordering",
        procedures=pool,
        embed=_word_embed,
        filters=FilterSettings(min_step_words=3, min_goal_words=None, max_shared_words=None, similarity_ceiling=None),
    )
    assert any("Serve!" in item.candidates for item in loose.items)
    assert not any("Serve!" in item.candidates for item in strict.items)
    assert strict.report["removed"][REASON_LENGTH] == 2 == len(loose.items) - len(strict.items)
    assert any(f"removed by {REASON_LENGTH}" in line and ": 2" in line for line in report_lines(strict.report))


def test_lexical_overlap_filter_removes_items_whose_prompt_shares_a_content_word_with_a_candidate():
    pool = _pool()
    # Goals that repeat a word of their own steps ("cleaning" ~ "clean"): the overlap filter's target.
    pool = [PoolProcedure(p.id, p.topic, f"Cleaning for {p.topic} job {p.id}", p.steps) for p in pool]
    loose = build_items(task="step_inference", procedures=pool, embed=_word_embed, filters=NO_FILTERS)
    strict = build_items(
        task="step_inference",
        procedures=pool,
        embed=_word_embed,
        filters=FilterSettings(min_step_words=None, min_goal_words=None, max_shared_words=0, similarity_ceiling=None),
    )
    removed = strict.report["removed"][REASON_LEXICAL_OVERLAP]
    assert removed > 0 and removed == loose.report["kept"] - strict.report["kept"]
    for item in strict.items:
        assert all(not content_words(item.prompt) & content_words(c) for c in item.candidates)


def test_content_words_drop_stopwords_and_match_inflections():
    assert content_words("Washing the dishes") == content_words("wash a dish")
    assert content_words("the and of") == set()


@pytest.mark.parametrize("task", ["step_inference", "goal_inference"])
def test_similarity_ceiling_removes_items_with_a_negative_close_to_the_prompts_procedure(task):
    pool = _pool(n_topics=6, per_topic=12, n_steps=6)
    procedures = _by_id(pool)
    ceiling = 0.6

    def embed(texts):
        return _random_embed(texts, dim=16)

    loose = build_items(task=task, procedures=pool, embed=embed, filters=NO_FILTERS)
    strict = build_items(
        task=task,
        procedures=pool,
        embed=embed,
        filters=FilterSettings(
            min_step_words=None, min_goal_words=None, max_shared_words=None, similarity_ceiling=ceiling
        ),
    )
    removed = strict.report["removed"][REASON_SIMILARITY]
    assert removed > 0 and removed == len(loose.items) - len(strict.items) and strict.items
    for item in strict.items:
        prompt_proc = procedures[item.source_procedure_ids[item.label]]
        for i, pk in enumerate(item.source_procedure_ids):
            if i == item.label:
                continue
            if task == "step_inference":
                sims = embed([item.candidates[i]]) @ embed(list(prompt_proc.steps)).T
            else:
                sims = embed([item.prompt]) @ embed(list(procedures[pk].steps)).T
            assert sims.max() <= ceiling + 1e-6


def test_a_negative_goal_whose_procedure_has_the_prompt_step_is_removed_as_ambiguous():
    pool = _pool()
    # The same step in one procedure of every topic: drawn as the prompt, it also serves the
    # negative goals whose procedures contain it.
    shared = "check the spare tyre pressure carefully"
    for i in range(0, len(pool), 4):
        pool[i] = PoolProcedure(pool[i].id, pool[i].topic, pool[i].goal, pool[i].steps[:4] + (shared,))
    procedures = _by_id(pool)
    result = build_items(task="goal_inference", procedures=pool, embed=_word_embed, filters=NO_FILTERS)
    assert result.report["removed"][REASON_AMBIGUOUS] > 0
    for item in result.items:
        for i, pk in enumerate(item.source_procedure_ids):
            if i != item.label:
                assert item.prompt not in procedures[pk].steps


def test_leakage_guard_keeps_reserved_texts_out_of_every_prompt_and_candidate():
    pool = _pool()
    reserved = [pool[0].goal, pool[1].steps[2], pool[7].goal]
    for task in ("step_inference", "goal_inference", "step_ordering"):
        free = build_items(task=task, procedures=pool, embed=_word_embed, filters=NO_FILTERS)
        guarded = build_items(
            task=task,
            procedures=pool,
            embed=_word_embed,
            filters=NO_FILTERS,
            reserved_texts=[t.upper() + " " for t in reserved],
        )  # compared normalised
        texts = {normalise_text(t) for t in reserved}
        for item in guarded.items:
            assert normalise_text(item.prompt) not in texts
            assert not {normalise_text(c) for c in item.candidates} & texts
        assert guarded.report["removed"][REASON_LEAKAGE] == len(free.items) - len(guarded.items) > 0


@pytest.mark.parametrize("task", ["step_inference", "goal_inference", "step_ordering"])
def test_the_same_seed_gives_the_same_items_and_another_seed_others(task):
    pool = _pool()
    first = build_items(task=task, procedures=pool, embed=_word_embed, seed=3, filters=NO_FILTERS)
    again = build_items(task=task, procedures=list(pool), embed=_word_embed, seed=3, filters=NO_FILTERS)
    other = build_items(task=task, procedures=pool, embed=_word_embed, seed=4, filters=NO_FILTERS)
    records = [item.as_record() for item in first.items]
    assert records == [item.as_record() for item in again.items]
    assert records != [item.as_record() for item in other.items]
    assert first.report == again.report


def test_limit_takes_the_first_items_of_the_full_build():
    pool = _pool()
    full = build_items(task="step_inference", procedures=pool, embed=_word_embed, seed=1, filters=NO_FILTERS)
    limited = build_items(
        task="step_inference", procedures=pool, embed=_word_embed, seed=1, limit=7, filters=NO_FILTERS
    )
    assert [i.as_record() for i in limited.items] == [i.as_record() for i in full.items[:7]]
    assert limited.report["kept"] == 7


def test_a_pool_with_fewer_than_four_topics_gives_no_inference_items_and_says_why():
    pool = _pool(n_topics=3)
    result = build_items(task="step_inference", procedures=pool, embed=_word_embed, filters=NO_FILTERS)
    assert result.items == []
    assert result.report["without_negatives"] == result.report["positives"] == sum(len(p.steps) for p in pool)


def test_unknown_task_and_bad_limit_are_refused():
    with pytest.raises(ValueError, match="unknown task"):
        build_items(task="step_guessing", procedures=_pool(), embed=_word_embed)
    with pytest.raises(ValueError, match="limit"):
        build_items(task="step_ordering", procedures=_pool(), embed=_word_embed, limit=0)


def test_top_neighbours_equals_brute_force_without_the_querys_own_group():
    rng = np.random.default_rng(2)
    corpus = l2_normalise(rng.normal(size=(41, 12)))
    groups = np.arange(41) % 5
    full = corpus[:9] @ corpus.T
    full[groups[:9, None] == groups[None, :]] = -np.inf
    # Blocks of query rows and of corpus rows (memory bounded at any corpus size) change nothing.
    for block_rows in (1, 4, 100):
        for block_columns in (1, 5, 7, 100):
            index, sims = top_neighbours(
                corpus[:9],
                corpus,
                k=6,
                query_groups=groups[:9],
                corpus_groups=groups,
                block_rows=block_rows,
                block_columns=block_columns,
            )
            assert index.tolist() == np.argsort(-full, axis=1, kind="stable")[:, :6].tolist(), block_columns
            assert np.allclose(sims, np.sort(full, axis=1)[:, ::-1][:, :6])


def test_top_neighbours_skips_the_excluded_row_in_any_block_and_pads_a_short_corpus():
    angles = np.array([0.0, 0.1, 0.2, 0.35, 0.5, 0.8, 1.2, 1.5])  # distinct similarities, no ties
    corpus = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    queries = corpus[[0, 6]]
    for block_columns in (1, 3, 8):
        index, sims = top_neighbours(queries, corpus, k=3, exclude=np.array([1, 6]), block_columns=block_columns)
        assert index.tolist() == [[0, 2, 3], [7, 5, 4]], block_columns
        assert np.allclose(sims, [[1.0, np.cos(0.2), np.cos(0.35)], [np.cos(0.3), np.cos(0.4), np.cos(0.7)]])
    index, sims = top_neighbours(queries[:1], corpus[:2], k=5, exclude=np.array([0]))
    assert index.tolist() == [[1, -1, -1, -1, -1]] and np.isneginf(sims[0, 1:]).all()


def test_wilson_interval_contains_the_proportion():
    interval = wilson_interval(25, 100)
    assert interval is not None
    low, high = interval
    assert low < 0.25 < high and high - low < 0.2
    assert wilson_interval(0, 0) is None
