"""Construction of the goal-step tasks (Zhang, Lyu, Callison-Burch 2020, §3, App. C-D).

No Django. Input: a pool of procedures (id, topic, goal, steps) and an embedding function
(texts -> L2-normalised float32 rows). Output: items ``{"id", "task", "prompt",
"candidates", "label", "topic", "source_procedure_ids"}`` and a report of what every stage
removed.

* **Step inference** (§3.1): every step is a positive candidate; its 3 negatives are the
  most similar steps (cosine of the embeddings) from procedures of *other topics*, chosen
  so that the 4 candidates come from 4 different topics and no text repeats. Then **label
  reassignment**: one of the 4 candidates, drawn at random, becomes the positive and the
  prompt is the goal of *its* procedure. Because all 4 topics differ, every negative is from
  another topic than the prompt's procedure whichever candidate is drawn, and a model that
  sees only the candidates cannot tell which one was the original positive.
* **Goal inference** (§3.2): the same with goals as candidates; after reassignment, one item
  per step of the new positive's procedure, with that step as the prompt.
* **Step ordering** (§3.3): the goal and two adjacent steps of its procedure, shown in random
  order (each first with probability 1/2); the label is the one that comes first. Mined
  procedures passed the "sequential" question of the final validation, so every procedure
  counts as ordered (the paper needed a classifier for this).
* **Filters** (App. D), each configurable (``None`` disables it) and counted: length (too
  short prompt or candidate), lexical overlap (prompt and a candidate share content words),
  similarity ceiling (a negative too close to a step of the prompt's procedure). Always on:
  ``ambiguous`` (a negative's text is literally correct), ``leakage`` (a prompt or candidate
  is one of the reserved texts, e.g. any text of a benchmark procedure when a training set
  is built) and ``duplicate`` (the same item twice).

Randomness comes from one ``random.Random`` per positive, seeded by (seed, task, positive),
so an item does not depend on the batch size or on ``limit``."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.app_errors import InvalidInput
from core.intervals import wilson_interval
from goalstep.constants import (
    BUILD_BATCH,
    GOAL_INFERENCE,
    MAX_SHARED_WORDS,
    MIN_GOAL_WORDS,
    MIN_STEP_WORDS,
    N_CANDIDATES,
    N_NEGATIVES,
    NEIGHBOURS_EXAMINED,
    ORDERING_FIRST_PROBABILITY,
    SEARCH_BLOCK_FLOATS,
    SIMILARITY_CEILING,
    STEP_INFERENCE,
    STEP_ORDERING,
    TASKS,
)
from mining.embeddings import Embed
from mining.split_dedup import top_neighbours
from mining.words import content_words, normalise_text, words

# Reasons an item is removed: a repeat of an item already built first, then the filters in this order.
REASON_LENGTH = "length"
REASON_LEXICAL_OVERLAP = "lexical_overlap"
REASON_SIMILARITY = "similarity"
REASON_AMBIGUOUS = "ambiguous"
REASON_LEAKAGE = "leakage"
REASON_DUPLICATE = "duplicate"
REASONS = (REASON_LENGTH, REASON_LEXICAL_OVERLAP, REASON_SIMILARITY, REASON_AMBIGUOUS, REASON_LEAKAGE, REASON_DUPLICATE)
# Filters that apply to each task (App. D describes them for the two inference tasks; step
# ordering compares two steps of the same procedure, so only the length filter applies).
TASK_FILTERS = {
    STEP_INFERENCE: (REASON_LENGTH, REASON_LEXICAL_OVERLAP, REASON_SIMILARITY),
    GOAL_INFERENCE: (REASON_LENGTH, REASON_LEXICAL_OVERLAP, REASON_SIMILARITY),
    STEP_ORDERING: (REASON_LENGTH,),
}


@dataclass(frozen=True)
class PoolProcedure:
    """A procedure of the pool: ``id`` is its database id, ``topic`` its topic's name."""

    id: int
    topic: str
    goal: str
    steps: tuple[str, ...]


@dataclass(frozen=True)
class FilterSettings:
    """App. D filters; ``None`` turns a filter off."""

    min_step_words: int | None = MIN_STEP_WORDS
    min_goal_words: int | None = MIN_GOAL_WORDS
    max_shared_words: int | None = MAX_SHARED_WORDS
    similarity_ceiling: float | None = SIMILARITY_CEILING

    def as_dict(self) -> dict[str, Any]:
        return {
            "min_step_words": self.min_step_words,
            "min_goal_words": self.min_goal_words,
            "max_shared_words": self.max_shared_words,
            "similarity_ceiling": self.similarity_ceiling,
        }


@dataclass
class Item:
    """One multiple-choice item. ``source_procedure_ids`` holds the procedure of each
    candidate in candidate order (so ``source_procedure_ids[label]`` is the prompt's
    procedure); for step ordering, the one procedure both steps come from."""

    id: str
    task: str
    prompt: str
    candidates: list[str]
    label: int
    topic: str
    source_procedure_ids: list[int]

    def as_record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "prompt": self.prompt,
            "candidates": list(self.candidates),
            "label": self.label,
            "topic": self.topic,
            "source_procedure_ids": list(self.source_procedure_ids),
        }


@dataclass
class BuildResult:
    items: list[Item]
    report: dict[str, Any]


@dataclass
class _Draft:
    """An item before filtering, with what the filters and the baselines need."""

    item: Item
    original_label: int | None  # index of the positive before reassignment (inference tasks)
    candidate_rows: list[int] = field(default_factory=list)  # embedding rows of the candidates


# ----------------------------------------------------------------------------- text helpers


def item_id(task: str, prompt: str, candidates: Sequence[str]) -> str:
    payload = "\x1f".join([task, prompt, *candidates]).encode("utf-8")
    return f"{task}-{hashlib.sha256(payload).hexdigest()[:16]}"


# ----------------------------------------------------------------------------- the pool


class _Pool:
    """Flattened steps and goals of the pool with their embeddings and topic numbers."""

    def __init__(self, procedures: Sequence[PoolProcedure], embed: Embed, *, need_goals: bool, need_steps: bool):
        self.procedures = list(procedures)
        topics = sorted({p.topic for p in self.procedures})
        self.topic_number = {topic: n for n, topic in enumerate(topics)}
        self.proc_topic = np.array([self.topic_number[p.topic] for p in self.procedures], dtype=np.int64)
        self.step_proc: list[int] = []
        self.step_texts: list[str] = []
        self.proc_step_rows: list[list[int]] = []
        for index, procedure in enumerate(self.procedures):
            rows = []
            for step in procedure.steps:
                rows.append(len(self.step_texts))
                self.step_texts.append(step)
                self.step_proc.append(index)
            self.proc_step_rows.append(rows)
        self.step_topic = (
            self.proc_topic[np.asarray(self.step_proc, dtype=np.int64)] if self.step_proc else np.zeros(0, np.int64)
        )
        self.step_vectors = _embed(embed, self.step_texts) if need_steps else None
        self.goal_vectors = _embed(embed, [p.goal for p in self.procedures]) if need_goals else None
        self.step_norm = [normalise_text(t) for t in self.step_texts]
        self.goal_norm = [normalise_text(p.goal) for p in self.procedures]

    def steps_embedded(self) -> np.ndarray:
        """The step embeddings (made when the pool was built for a task that needs them)."""
        if self.step_vectors is None:
            raise ValueError("this pool was built without step embeddings")
        return self.step_vectors

    def goals_embedded(self) -> np.ndarray:
        """The goal embeddings (made when the pool was built for a task that needs them)."""
        if self.goal_vectors is None:
            raise ValueError("this pool was built without goal embeddings")
        return self.goal_vectors


def _embed(embed: Embed, texts: list[str]) -> np.ndarray:
    vectors = np.asarray(embed(texts), dtype=np.float32) if texts else np.zeros((0, 1), dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise ValueError(f"the embedding function returned shape {vectors.shape} for {len(texts)} texts")
    return vectors


def _block_rows(n_corpus: int) -> int:
    return max(1, min(1024, SEARCH_BLOCK_FLOATS // max(n_corpus, 1)))


def _choose_negatives(
    neighbours: Iterable[int],
    *,
    positive_topic: int,
    positive_text: str,
    topic_of: np.ndarray,
    norm_of: Sequence[str],
    forbidden_texts: set[str],
) -> list[int]:
    """The first 3 neighbours (most similar first) from 3 further topics with new texts."""
    used_topics = {positive_topic}
    used_texts = {positive_text} | forbidden_texts
    chosen: list[int] = []
    for row in neighbours:
        if row < 0:
            break
        topic = int(topic_of[row])
        if topic in used_topics or norm_of[row] in used_texts:
            continue
        chosen.append(row)
        used_topics.add(topic)
        used_texts.add(norm_of[row])
        if len(chosen) == N_NEGATIVES:
            break
    return chosen


# ----------------------------------------------------------------------------- construction


def build_items(
    *,
    task: str,
    procedures: Sequence[PoolProcedure],
    embed: Embed,
    seed: int = 0,
    limit: int | None = None,
    filters: FilterSettings = FilterSettings(),
    reserved_texts: Iterable[str] = (),
) -> BuildResult:
    """Build the items of ``task`` from the pool (see the module notes)."""
    if task not in TASKS:
        raise InvalidInput(fields={"task": f"unknown task {task!r}; one of {', '.join(TASKS)}"})
    if limit is not None and limit < 1:
        raise InvalidInput(fields={"limit": "must be at least 1"})
    reserved = {normalise_text(text) for text in reserved_texts}
    pool = _Pool(procedures, embed, need_steps=task != STEP_ORDERING, need_goals=task == GOAL_INFERENCE)
    units = _units(task, pool)
    random.Random(f"goalstep:{task}:{seed}").shuffle(units)
    counts: Counter[str] = Counter()
    kept: list[_Draft] = []
    seen: set[str] = set()
    examined = 0
    for start in range(0, len(units), BUILD_BATCH):
        batch = units[start : start + BUILD_BATCH]
        examined += len(batch)
        for draft in _drafts(task, pool, batch, seed=seed, counts=counts):
            counts["built"] += 1
            seen_before = draft.item.id in seen
            seen.add(draft.item.id)
            reason = REASON_DUPLICATE if seen_before else _rejection(task, pool, draft, filters, reserved)
            if reason is not None:
                counts[reason] += 1
                continue
            kept.append(draft)
            if limit is not None and len(kept) >= limit:
                break
        if limit is not None and len(kept) >= limit:
            break
    report = {
        "task": task,
        "seed": seed,
        "limit": limit,
        "filters": filters.as_dict(),
        "filters_applied": list(TASK_FILTERS[task]),
        "pool": {"procedures": len(pool.procedures), "steps": len(pool.step_texts), "topics": len(pool.topic_number)},
        "positives": len(units),
        "positives_examined": examined,
        "without_negatives": counts["without_negatives"],
        "built": counts["built"],
        "removed": {reason: counts[reason] for reason in REASONS},
        "kept": len(kept),
        "baselines": candidates_only_baselines(task, pool, kept),
    }
    return BuildResult(items=[draft.item for draft in kept], report=report)


def _units(task: str, pool: _Pool) -> list[tuple[int, int]]:
    """The positives: (procedure, step) for step inference, (procedure, -1) for goal
    inference, (procedure, i) for the adjacent pair i, i+1 of step ordering."""
    if task == STEP_INFERENCE:
        return [(pool.step_proc[row], row) for row in range(len(pool.step_texts))]
    if task == GOAL_INFERENCE:
        return [(index, -1) for index in range(len(pool.procedures))]
    return [(index, i) for index, p in enumerate(pool.procedures) for i in range(len(p.steps) - 1)]


def _unit_rng(task: str, seed: int, pool: _Pool, unit: tuple[int, int]) -> random.Random:
    procedure, position = unit
    return random.Random(f"{seed}:{task}:{pool.procedures[procedure].id}:{position}")


def _drafts(
    task: str, pool: _Pool, batch: list[tuple[int, int]], *, seed: int, counts: Counter[str]
) -> Iterator[_Draft]:
    if task == STEP_ORDERING:
        for unit in batch:
            yield _ordering_draft(pool, unit, _unit_rng(task, seed, pool, unit))
        return
    if task == STEP_INFERENCE:
        corpus, corpus_topic, norm_of = pool.steps_embedded(), pool.step_topic, pool.step_norm
        rows = np.array([row for _, row in batch], dtype=np.int64)
    else:
        corpus, corpus_topic, norm_of = pool.goals_embedded(), pool.proc_topic, pool.goal_norm
        rows = np.array([procedure for procedure, _ in batch], dtype=np.int64)
    neighbours, _ = top_neighbours(
        corpus[rows],
        corpus,
        k=NEIGHBOURS_EXAMINED,
        query_groups=corpus_topic[rows],
        corpus_groups=corpus_topic,
        block_rows=_block_rows(len(corpus)),
    )
    for unit, row, found in zip(batch, rows.tolist(), neighbours.tolist()):
        procedure = unit[0]
        forbidden = {pool.step_norm[r] for r in pool.proc_step_rows[procedure]} if task == STEP_INFERENCE else set()
        negatives = _choose_negatives(
            found,
            positive_topic=int(corpus_topic[row]),
            positive_text=norm_of[row],
            topic_of=corpus_topic,
            norm_of=norm_of,
            forbidden_texts=forbidden,
        )
        if len(negatives) < N_NEGATIVES:
            counts["without_negatives"] += 1
            continue
        yield from _inference_drafts(task, pool, row, negatives, _unit_rng(task, seed, pool, unit))


def _inference_drafts(
    task: str, pool: _Pool, positive: int, negatives: list[int], rng: random.Random
) -> Iterator[_Draft]:
    """Shuffle the 4 candidates, reassign the label (§3.1) and take the prompt from the new
    positive's procedure."""
    rows = [positive, *negatives]
    rng.shuffle(rows)
    original_label = rows.index(positive)
    label = rng.randrange(len(rows))
    if task == STEP_INFERENCE:
        procs = [pool.step_proc[r] for r in rows]
        candidates = [pool.step_texts[r] for r in rows]
        prompt_proc = procs[label]
        prompts = [pool.procedures[prompt_proc].goal]
    else:
        procs = list(rows)
        candidates = [pool.procedures[r].goal for r in rows]
        prompt_proc = procs[label]
        prompts = list(pool.procedures[prompt_proc].steps)
    procedure_ids = [pool.procedures[p].id for p in procs]
    for prompt in prompts:
        item = Item(
            id=item_id(task, prompt, candidates),
            task=task,
            prompt=prompt,
            candidates=list(candidates),
            label=label,
            topic=pool.procedures[prompt_proc].topic,
            source_procedure_ids=procedure_ids,
        )
        yield _Draft(item=item, original_label=original_label, candidate_rows=list(rows))


def _ordering_draft(pool: _Pool, unit: tuple[int, int], rng: random.Random) -> _Draft:
    procedure_index, i = unit
    procedure = pool.procedures[procedure_index]
    first, second = procedure.steps[i], procedure.steps[i + 1]
    if rng.random() < ORDERING_FIRST_PROBABILITY:
        candidates, label = [first, second], 0
    else:
        candidates, label = [second, first], 1
    item = Item(
        id=item_id(STEP_ORDERING, procedure.goal, candidates),
        task=STEP_ORDERING,
        prompt=procedure.goal,
        candidates=candidates,
        label=label,
        topic=procedure.topic,
        source_procedure_ids=[procedure.id],
    )
    return _Draft(item=item, original_label=None)


# ----------------------------------------------------------------------------- filters


def _rejection(task: str, pool: _Pool, draft: _Draft, filters: FilterSettings, reserved: set[str]) -> str | None:
    """The first reason the item is removed, or None."""
    item = draft.item
    prompt_is_goal = task != GOAL_INFERENCE
    if _too_short(item.prompt, filters.min_goal_words if prompt_is_goal else filters.min_step_words) or any(
        _too_short(c, filters.min_step_words if prompt_is_goal else filters.min_goal_words) for c in item.candidates
    ):
        return REASON_LENGTH
    if task == STEP_ORDERING:
        if normalise_text(item.candidates[0]) == normalise_text(item.candidates[1]):
            return REASON_AMBIGUOUS
    else:
        if filters.max_shared_words is not None:
            prompt_words = content_words(item.prompt)
            if any(len(prompt_words & content_words(c)) > filters.max_shared_words for c in item.candidates):
                return REASON_LEXICAL_OVERLAP
        if filters.similarity_ceiling is not None and _too_similar(task, pool, draft, filters.similarity_ceiling):
            return REASON_SIMILARITY
        if _ambiguous(task, pool, draft):
            return REASON_AMBIGUOUS
    if reserved and (
        normalise_text(item.prompt) in reserved or any(normalise_text(c) in reserved for c in item.candidates)
    ):
        return REASON_LEAKAGE
    return None


def _too_short(text: str, minimum: int | None) -> bool:
    return minimum is not None and len(words(text)) < minimum


def _negative_rows(draft: _Draft) -> list[int]:
    return [row for index, row in enumerate(draft.candidate_rows) if index != draft.item.label]


def _too_similar(task: str, pool: _Pool, draft: _Draft, ceiling: float) -> bool:
    """Step inference: some negative step is closer than the ceiling to a step of the
    prompt's procedure. Goal inference: the prompt step is closer than the ceiling to a step
    of some negative goal's procedure (App. D, Similarity filter)."""
    prompt_proc = (
        draft.candidate_rows[draft.item.label]
        if task == GOAL_INFERENCE
        else pool.step_proc[draft.candidate_rows[draft.item.label]]
    )
    step_vectors = pool.steps_embedded()
    if task == STEP_INFERENCE:
        steps = step_vectors[pool.proc_step_rows[prompt_proc]]
        negatives = step_vectors[_negative_rows(draft)]
        return bool(steps.size and float((negatives @ steps.T).max()) > ceiling)
    prompt_row = pool.proc_step_rows[prompt_proc][pool.procedures[prompt_proc].steps.index(draft.item.prompt)]
    prompt_vector = step_vectors[prompt_row]
    for negative in _negative_rows(draft):
        rows = pool.proc_step_rows[negative]
        if rows and float((step_vectors[rows] @ prompt_vector).max()) > ceiling:
            return True
    return False


def _ambiguous(task: str, pool: _Pool, draft: _Draft) -> bool:
    """A negative that is literally right: its text is a step of the prompt's procedure
    (step inference), or the prompt step is one of the negative goal's steps (goal inference)."""
    label_row = draft.candidate_rows[draft.item.label]
    if task == STEP_INFERENCE:
        prompt_steps = {pool.step_norm[r] for r in pool.proc_step_rows[pool.step_proc[label_row]]}
        return any(pool.step_norm[r] in prompt_steps for r in _negative_rows(draft))
    prompt = normalise_text(draft.item.prompt)
    return any(prompt in {pool.step_norm[r] for r in pool.proc_step_rows[n]} for n in _negative_rows(draft))


# ----------------------------------------------------------------------------- baselines


def hub_choice(vectors: np.ndarray) -> int:
    """The candidate most similar on average to the other candidates. Without label
    reassignment this finds the positive: the negatives were chosen as its nearest
    neighbours, so it sits in the middle of them."""
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, 0.0)
    return int(np.argmax(sims.sum(axis=1)))


def longest_choice(candidates: Sequence[str]) -> int:
    lengths = [len(c) for c in candidates]
    return lengths.index(max(lengths))


def _accuracy(correct: int, n: int, chance: float) -> dict[str, Any]:
    interval = wilson_interval(correct, n)
    return {
        "correct": correct,
        "n": n,
        "accuracy": correct / n if n else None,
        "ci95": list(interval) if interval else None,
        "chance_in_ci95": bool(interval and interval[0] <= chance <= interval[1]),
    }


def candidates_only_baselines(task: str, pool: _Pool, drafts: Sequence[_Draft]) -> dict[str, Any]:
    """Accuracy of models that see only the candidates, never the prompt (§3.1: with label
    reassignment they score at chance). ``hub`` also reports the accuracy it would have had
    against the labels before reassignment, the artefact that reassignment removes."""
    chance = 1.0 / N_CANDIDATES[task]
    n = len(drafts)
    result: dict[str, Any] = {"chance": chance, "n": n}
    longest = sum(longest_choice(d.item.candidates) == d.item.label for d in drafts)
    result["longest"] = _accuracy(longest, n, chance)
    if task == STEP_ORDERING:
        result["first_position"] = _accuracy(sum(d.item.label == 0 for d in drafts), n, chance)
        return result
    vectors = pool.steps_embedded() if task == STEP_INFERENCE else pool.goals_embedded()
    hub_correct = hub_before = 0
    for draft in drafts:
        choice = hub_choice(vectors[draft.candidate_rows])
        hub_correct += choice == draft.item.label
        hub_before += choice == draft.original_label
    result["hub"] = _accuracy(hub_correct, n, chance)
    result["hub"]["accuracy_before_reassignment"] = hub_before / n if n else None
    return result


def report_lines(report: dict[str, Any]) -> list[str]:
    """The build report as text lines (for the command and the task-set page)."""
    lines = [
        f"{report['task']}: {report['pool']['procedures']} procedures ({report['pool']['steps']} steps, "
        f"{report['pool']['topics']} topics), {report['positives_examined']} of {report['positives']} positives examined",
        f"  without 3 negatives from other topics: {report['without_negatives']}",
        f"  built {report['built']}, kept {report['kept']}",
    ]
    applied = set(report["filters_applied"])
    shown = {name: "off" if value is None else value for name, value in report["filters"].items()}
    for reason, n in report["removed"].items():
        setting = {
            REASON_LENGTH: f"min words: step {shown['min_step_words']}, goal {shown['min_goal_words']}",
            REASON_LEXICAL_OVERLAP: f"max shared content words {shown['max_shared_words']}",
            REASON_SIMILARITY: f"ceiling {shown['similarity_ceiling']}",
        }.get(reason, "always on")
        if reason in (REASON_LENGTH, REASON_LEXICAL_OVERLAP, REASON_SIMILARITY) and reason not in applied:
            setting = "not used for this task"
        lines.append(f"  removed by {reason} ({setting}): {n}")
    baselines = report["baselines"]
    lines.append(f"  candidates-only baselines (chance {baselines['chance']:.3f}, n {baselines['n']}):")
    for name in ("hub", "longest", "first_position"):
        if name not in baselines or baselines[name]["accuracy"] is None:
            continue
        row = baselines[name]
        low, high = row["ci95"]
        text = f"    {name}: {row['accuracy']:.3f} (95% CI {low:.3f}-{high:.3f}; chance inside: {'yes' if row['chance_in_ci95'] else 'NO'})"
        if row.get("accuracy_before_reassignment") is not None:
            text += f"; against the labels before reassignment {row['accuracy_before_reassignment']:.3f}"
        lines.append(text)
    return lines
