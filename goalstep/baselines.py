"""Baselines that see only the candidates of a goal-step item, never its prompt (§3.1):
with label reassignment they score at chance, which a build's report shows with each
accuracy's 95 % Wilson interval. No Django."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from core.intervals import wilson_interval
from goalstep.constants import N_CANDIDATES, STEP_INFERENCE, STEP_ORDERING
from goalstep.item_pool import Draft, ProcedurePool


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


def candidates_only_baselines(task: str, pool: ProcedurePool, drafts: Sequence[Draft]) -> dict[str, Any]:
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
