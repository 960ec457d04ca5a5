"""Annotation that spends people where they matter: fixed k = 3, dynamic k and active selection
on planted data, each run until its prediction-powered interval reaches the same target width.

Each replication plants a study of ``--pool`` judged items (default 2,000) over four topics of
unequal size; every item has a true label (no_failure with a topic's own rate), a judge label
(the judge's true-positive and true-negative rates differ by topic) and a queue of annotators
drawn without replacement from ``--annotators`` people whose accuracies are uniform on
[0.80, 0.95] (each vote is right with its annotator's accuracy, both ways). The truth is the
share of truly no_failure items in the pool (the human How2Score the study calibrates).

Three policies, each with the product's own functions (annotate/participation/allocation.py:
``item_undecided``, ``strata_order``; annotate/stats/calibration.py: ``ppi_score`` through
``calibration_interval``), label items one after another and stop at the first item after which
the interval is no wider than ``--target-width`` and ``interval_unsettled`` lets it stop the
study (every topic has 10 labels), as the product stops:

* **fixed k = 3**: items in a random order, three annotations each, the majority label;
* **dynamic k**: the same order, two annotations, a third only while the item is undecided
  (the two disagree, or agree against the judge), at most ``--max-k``;
* **active**: dynamic k, and each new item taken from the topic with the largest expected
  reduction of the interval's variance per expected annotation (each topic's items in a random
  order).

All three are scored with the same interval (ppi_score over topics, as the product's study page
and agreement report compute it), so the only difference is where the annotations go. The policies of one replication share its items
and its annotators' votes (an item's i-th vote is the same whichever policy asks for it), so
their differences are not noise of the draw. Printed per policy: annotations and items used
(means), annotations per item, mean width at the stop, coverage of the truth (with its Wilson
interval), the share of runs that reached the target, and the saving of annotations against
fixed k (the ratio of means). Widths are checked every ``CHECK_EVERY`` items and the first
qualifying item is then found item by item (the same stop as checking after every item: the
choices of every policy do not depend on the width).

    .venv/bin/python bench/annotation_allocation.py [--replications 500] [--target-width 0.10]
        [--pool 2000] [--max-k 3,5] [--workers 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from annotate.participation.allocation import (  # noqa: E402
    POLICY_ACTIVE,
    POLICY_DYNAMIC,
    POLICY_FIXED,
    StratumState,
    calibration_interval,
    expected_annotations,
    interval_unsettled,
    interval_width,
    item_undecided,
    strata_order,
)
from annotate.stats.majority import majority_label  # noqa: E402
from core.intervals import wilson_interval  # noqa: E402

# The planted world: four topics of unequal size, each with its own rate of truly no_failure
# items and its own judge error rates (true-positive rate on no_failure, true-negative rate on
# has_failure).
TOPICS = ("cooking", "repair", "health", "travel")
TOPIC_SHARES = (0.4, 0.3, 0.2, 0.1)
TRUE_NO_FAILURE = (0.70, 0.50, 0.35, 0.60)
JUDGE_TPR = (0.92, 0.85, 0.80, 0.75)
JUDGE_TNR = (0.85, 0.80, 0.92, 0.70)
ACCURACY_RANGE = (0.80, 0.95)
CHECK_EVERY = 8
FIXED_K = 3
MIN_K = 2


@dataclass
class World:
    topics: npt.NDArray[np.int64]
    truth_has_failure: npt.NDArray[np.bool_]
    judge_has_failure: npt.NDArray[np.bool_]
    votes: npt.NDArray[np.bool_]  # item x vote: the i-th annotator's has_failure label
    order: npt.NDArray[np.int64]  # the random order of fixed and dynamic k
    shuffles: dict[int, list[int]]  # topic -> its items in a random order (active)
    truth: float


def plant(rng: np.random.Generator, pool: int, n_annotators: int, max_votes: int) -> World:
    topics = rng.choice(len(TOPICS), size=pool, p=TOPIC_SHARES)
    no_failure = rng.random(pool) < np.take(TRUE_NO_FAILURE, topics)
    says_no_failure = np.where(
        no_failure, rng.random(pool) < np.take(JUDGE_TPR, topics), rng.random(pool) >= np.take(JUDGE_TNR, topics)
    )
    accuracy = rng.uniform(*ACCURACY_RANGE, size=n_annotators)
    who = np.argsort(rng.random((pool, n_annotators)), axis=1)[:, :max_votes]  # distinct annotators per item
    right = rng.random((pool, max_votes)) < accuracy[who]
    truth_has_failure = ~no_failure
    votes = np.where(right, truth_has_failure[:, None], ~truth_has_failure[:, None])
    judge_has_failure = ~says_no_failure
    shuffles: dict[int, list[int]] = {}
    for item in rng.permutation(pool):
        shuffles.setdefault(int(topics[item]), []).append(int(item))
    return World(
        topics=topics,
        truth_has_failure=truth_has_failure,
        judge_has_failure=judge_has_failure,
        votes=votes,
        order=rng.permutation(pool),
        shuffles=shuffles,
        truth=float(no_failure.mean()),
    )


def annotate_item(world: World, item: int, policy: str, max_k: int) -> tuple[bool | None, int]:
    """The item's human majority label and the annotations it took."""
    row = world.votes[item]
    if policy == POLICY_FIXED:
        votes = [bool(v) for v in row[:FIXED_K]]
    else:
        judge = bool(world.judge_has_failure[item])
        votes = []
        while item_undecided(votes, judge_has_failure=judge, min_k=MIN_K, max_k=max_k):
            votes.append(bool(row[len(votes)]))
    return majority_label(votes), len(votes)


def stratum_of(world: World, item: int) -> int:
    return int(world.topics[item])


def run_policy(world: World, policy: str, target: float, max_k: int) -> dict[str, float | bool]:
    """Label items under ``policy`` until the interval's width is at most ``target``."""
    pool = world.topics.size
    unlabelled = [(TOPICS[int(world.topics[i])], bool(world.judge_has_failure[i])) for i in range(pool)]
    labelled: list[tuple[str, bool, bool]] = []
    spent: list[int] = []  # cumulative annotations after each labelled item
    total = 0
    states: dict[int, dict[str, int]] = {
        s: {
            "pool": len(items),
            "pool_judge_no_failure": sum(1 for i in items if not world.judge_has_failure[i]),
            "decided": 0,
            "no_failure": 0,
            "judge_no_failure": 0,
            "both_no_failure": 0,
            "annotations": 0,
        }
        for s, items in world.shuffles.items()
    }
    queues = {s: list(items) for s, items in world.shuffles.items()}
    order = iter(world.order.tolist())
    prior = expected_annotations(MIN_K, max_k)

    def next_item() -> int | None:
        if policy != POLICY_ACTIVE:
            return next(order, None)
        current = [StratumState(key=s, open=len(queues[s]), **v) for s, v in states.items()]
        best = strata_order(current, prior_cost=prior)
        if not best:
            return None
        topic = best[0]
        assert isinstance(topic, int)  # the bench's topics are numbered
        return queues[topic].pop()

    def width_at(n: int) -> tuple[float | None, list[float] | None]:
        """The interval's width after ``n`` labels, None while it cannot stop the study."""
        result = calibration_interval(labelled[:n], unlabelled)
        if interval_unsettled(result, labelled[:n], unlabelled) is not None:
            return None, result["ci95"]
        return interval_width(result), result["ci95"]

    checked = 0
    while True:
        item = next_item()
        if item is None:
            break
        label, cost = annotate_item(world, item, policy, max_k)
        total += cost
        stratum = states[stratum_of(world, item)]
        stratum["annotations"] += cost
        if label is None:
            continue  # a tie at the maximum: no human majority, not labelled
        judge_no_failure = not world.judge_has_failure[item]
        stratum["decided"] += 1
        stratum["no_failure"] += int(not label)
        stratum["judge_no_failure"] += int(judge_no_failure)
        stratum["both_no_failure"] += int(judge_no_failure and not label)
        labelled.append((TOPICS[int(world.topics[item])], bool(world.judge_has_failure[item]), label))
        spent.append(total)
        if len(labelled) - checked >= CHECK_EVERY:
            width, _ = width_at(len(labelled))
            if width is not None and width <= target:
                for n in range(checked + 1, len(labelled) + 1):
                    width, ci = width_at(n)
                    if width is not None and width <= target:
                        assert ci is not None
                        return {
                            "annotations": spent[n - 1],
                            "items": n,
                            "width": width,
                            "covered": ci[0] <= world.truth <= ci[1],
                            "reached": True,
                        }
            checked = len(labelled)
    width, ci = width_at(len(labelled))
    return {
        "annotations": total,
        "items": len(labelled),
        "width": width if width is not None else 1.0,
        "covered": ci is not None and ci[0] <= world.truth <= ci[1],
        "reached": False,
    }


POLICIES: tuple[tuple[str, str], ...] = (
    (POLICY_FIXED, "fixed k = 3"),
    (POLICY_DYNAMIC, "dynamic k"),
    (POLICY_ACTIVE, "active selection"),
)


def replication(args: tuple[int, int, int, int, int, float]) -> dict[str, dict[str, float | bool]]:
    seed, rep, pool, n_annotators, max_k, target = args
    world = plant(np.random.default_rng([seed, rep]), pool, n_annotators, max(FIXED_K, max_k))
    return {policy: run_policy(world, policy, target, max_k) for policy, _ in POLICIES}


def report(results: list[dict[str, dict[str, float | bool]]], print_: Callable[[str], None]) -> None:
    fixed_mean = float(np.mean([r[POLICY_FIXED]["annotations"] for r in results]))
    header = (
        f"{'policy':<18} {'annotations':>11} {'items':>7} {'per item':>8} {'width':>7} "
        f"{'coverage':>8} {'(95 % Wilson)':>15} {'reached':>7} {'saving':>7}"
    )
    print_(header)
    print_("-" * len(header))
    for policy, name in POLICIES:
        rows = [r[policy] for r in results]
        annotations = float(np.mean([r["annotations"] for r in rows]))
        items = float(np.mean([r["items"] for r in rows]))
        width = float(np.mean([r["width"] for r in rows]))
        covered = sum(1 for r in rows if r["covered"])
        low, high = wilson_interval(covered, len(rows)) or (0.0, 1.0)
        reached = sum(1 for r in rows if r["reached"]) / len(rows)
        saving = 1.0 - annotations / fixed_mean
        print_(
            f"{name:<18} {annotations:>11.1f} {items:>7.1f} {annotations / items:>8.2f} {width:>7.4f} "
            f"{covered / len(rows):>8.3f} {f'[{low:.3f}, {high:.3f}]':>15} {reached:>7.0%} {saving:>7.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replications", type=int, default=500)
    parser.add_argument("--target-width", type=float, default=0.10)
    parser.add_argument("--pool", type=int, default=2000)
    parser.add_argument("--annotators", type=int, default=60)
    parser.add_argument("--max-k", default="3,5", help="dynamic k's maximum; several (3,5) give one table each")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    for max_k in (int(k) for k in args.max_k.split(",")):
        jobs = [
            (args.seed, rep, args.pool, args.annotators, max_k, args.target_width) for rep in range(args.replications)
        ]
        if args.workers > 1:
            with ProcessPoolExecutor(max_workers=args.workers) as pool:
                results = list(pool.map(replication, jobs, chunksize=8))
        else:
            results = [replication(job) for job in jobs]
        print(
            f"\n{args.replications} replications, pool {args.pool} items, {args.annotators} annotators "
            f"(accuracy {ACCURACY_RANGE[0]:.2f}-{ACCURACY_RANGE[1]:.2f}), target width {args.target_width:.3f}, "
            f"dynamic k from {MIN_K} to {max_k}, seed {args.seed}"
        )
        report(results, print)
    print(f"({time.perf_counter() - started:.0f} s on {args.workers} worker{'s' if args.workers != 1 else ''})")


if __name__ == "__main__":
    main()
