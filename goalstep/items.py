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
so an item does not depend on the batch size or on ``limit``. The pool, the negatives and
the items' types are in goalstep/item_pool.py, the candidates-only baselines of the report in
goalstep/baselines.py."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.app_errors import InvalidInput
from goalstep.baselines import candidates_only_baselines
from goalstep.constants import (
    BUILD_BATCH,
    GOAL_INFERENCE,
    MAX_SHARED_WORDS,
    MIN_GOAL_WORDS,
    MIN_STEP_WORDS,
    N_NEGATIVES,
    NEIGHBOURS_EXAMINED,
    ORDERING_FIRST_PROBABILITY,
    SIMILARITY_CEILING,
    STEP_INFERENCE,
    STEP_ORDERING,
    TASKS,
)
from goalstep.item_pool import Draft, Item, PoolProcedure, ProcedurePool, choose_negatives, item_id, search_block_rows
from mining.embeddings import Embed
from mining.neighbour_search import top_neighbours
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
class BuildResult:
    items: list[Item]
    report: dict[str, Any]


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
    pool = ProcedurePool(procedures, embed, need_steps=task != STEP_ORDERING, need_goals=task == GOAL_INFERENCE)
    units = _units(task, pool)
    random.Random(f"goalstep:{task}:{seed}").shuffle(units)
    counts: Counter[str] = Counter()
    kept: list[Draft] = []
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


def _units(task: str, pool: ProcedurePool) -> list[tuple[int, int]]:
    """The positives: (procedure, step) for step inference, (procedure, -1) for goal
    inference, (procedure, i) for the adjacent pair i, i+1 of step ordering."""
    if task == STEP_INFERENCE:
        return [(pool.step_proc[row], row) for row in range(len(pool.step_texts))]
    if task == GOAL_INFERENCE:
        return [(index, -1) for index in range(len(pool.procedures))]
    return [(index, i) for index, p in enumerate(pool.procedures) for i in range(len(p.steps) - 1)]


def _unit_rng(task: str, seed: int, pool: ProcedurePool, unit: tuple[int, int]) -> random.Random:
    procedure, position = unit
    return random.Random(f"{seed}:{task}:{pool.procedures[procedure].id}:{position}")


def _drafts(
    task: str, pool: ProcedurePool, batch: list[tuple[int, int]], *, seed: int, counts: Counter[str]
) -> Iterator[Draft]:
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
        block_rows=search_block_rows(len(corpus)),
    )
    for unit, row, found in zip(batch, rows.tolist(), neighbours.tolist()):
        procedure = unit[0]
        forbidden = {pool.step_norm[r] for r in pool.proc_step_rows[procedure]} if task == STEP_INFERENCE else set()
        negatives = choose_negatives(
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
    task: str, pool: ProcedurePool, positive: int, negatives: list[int], rng: random.Random
) -> Iterator[Draft]:
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
        yield Draft(item=item, original_label=original_label, candidate_rows=list(rows))


def _ordering_draft(pool: ProcedurePool, unit: tuple[int, int], rng: random.Random) -> Draft:
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
    return Draft(item=item, original_label=None)


# ----------------------------------------------------------------------------- filters


def _rejection(task: str, pool: ProcedurePool, draft: Draft, filters: FilterSettings, reserved: set[str]) -> str | None:
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


def _negative_rows(draft: Draft) -> list[int]:
    return [row for index, row in enumerate(draft.candidate_rows) if index != draft.item.label]


def _too_similar(task: str, pool: ProcedurePool, draft: Draft, ceiling: float) -> bool:
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


def _ambiguous(task: str, pool: ProcedurePool, draft: Draft) -> bool:
    """A negative that is literally right: its text is a step of the prompt's procedure
    (step inference), or the prompt step is one of the negative goal's steps (goal inference)."""
    label_row = draft.candidate_rows[draft.item.label]
    if task == STEP_INFERENCE:
        prompt_steps = {pool.step_norm[r] for r in pool.proc_step_rows[pool.step_proc[label_row]]}
        return any(pool.step_norm[r] in prompt_steps for r in _negative_rows(draft))
    prompt = normalise_text(draft.item.prompt)
    return any(prompt in {pool.step_norm[r] for r in pool.proc_step_rows[n]} for n in _negative_rows(draft))


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
