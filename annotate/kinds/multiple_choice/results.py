"""Results of multiple-choice studies as in Zhang et al. 2020 Table 2. No Django.

Per task: how many items 0, 1, ..., k annotators answered with the label; the yield (the
share of fully annotated items that all k annotators answered with the label, the paper's
test-set rule, §3.4); the gold tier (all k agree with the label) and the harder tier
(exactly k-1 of k, the paper's "2 of 3" sub-benchmark, Table 3); nominal Krippendorff's alpha
over the answers (the options, "none" and "neutral" included), with its n (items with two or
more answers) and the 95 % bootstrap interval the critical-failure alpha has
(``nominal_alpha_estimate``); and human accuracy (answers equal to the label / answers). The
yield and the human accuracy also come as shares with their n and 95 % Wilson interval
(``yield_estimate``, ``human_accuracy_estimate``). Denominators, stated: the 0..k table, the
yield and the tiers count items with exactly k answers; alpha and accuracy use every answer
given."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from annotate.stats.alpha import nominal_alpha_estimate
from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP, seed_sequence
from core.intervals import share_estimate


@dataclass(frozen=True)
class ChoiceItem:
    item_id: str
    task: str
    topic: str
    label: int
    answers: tuple[Hashable, ...]  # one per annotator, in submission order


def task_results(
    items: Sequence[ChoiceItem], k: int, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0
) -> dict[str, Any]:
    """Table 2 for the items of one task. Alpha's interval resamples the items with two or
    more answers ``bootstrap`` times (0: no interval), seeded as the agreement report's alpha
    (``seed_sequence(seed, "alpha")``), so one task's alpha and the round's agree."""
    distribution = [0] * (k + 1)
    gold: list[str] = []
    harder: list[str] = []
    complete = 0
    answers = correct = 0
    for item in items:
        answers += len(item.answers)
        right = sum(answer == item.label for answer in item.answers)
        correct += right
        if len(item.answers) != k:
            continue
        complete += 1
        distribution[right] += 1
        if right == k:
            gold.append(item.item_id)
        elif right == k - 1 and k > 1:
            harder.append(item.item_id)
    width = max((len(item.answers) for item in items), default=0)
    matrix = [list(item.answers) + [None] * (width - len(item.answers)) for item in items]
    return {
        "items": len(items),
        "complete_items": complete,
        "k": k,
        "by_correct": {str(n): distribution[n] for n in range(k + 1)},
        "yield": len(gold) / complete if complete else None,
        "gold": gold,
        "harder": harder,
        "yield_estimate": share_estimate(len(gold), complete),
        **nominal_alpha_estimate(matrix, bootstrap=bootstrap, seed=seed_sequence(seed, "alpha")),
        "answers": answers,
        "human_accuracy": correct / answers if answers else None,
        "human_accuracy_estimate": share_estimate(correct, answers),
    }


def study_results(
    items: Iterable[ChoiceItem], k: int, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """``task_results`` per task, tasks in name order."""
    by_task: dict[str, list[ChoiceItem]] = defaultdict(list)
    for item in items:
        by_task[item.task].append(item)
    return {task: task_results(rows, k, bootstrap=bootstrap, seed=seed) for task, rows in sorted(by_task.items())}
