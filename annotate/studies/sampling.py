"""Stratified sampling of items (pure Python, no Django).

Strata are keys such as (topic, judge label). Rows are shuffled inside each stratum with a
seeded generator, then taken round-robin over the strata in sorted key order until ``n`` rows
are chosen: every stratum is represented as evenly as its size allows, and the same input and
seed always give the same sample."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")


def stratified_sample(rows: Sequence[T], *, key: Callable[[T], Hashable], n: int, seed: int = 0) -> list[T]:
    if n < 0:
        raise ValueError("n must be >= 0")
    strata: dict[Hashable, list[T]] = defaultdict(list)
    for row in rows:
        strata[key(row)].append(row)
    rng = random.Random(seed)
    queues = []
    for stratum_key in sorted(strata, key=repr):
        members = list(strata[stratum_key])
        rng.shuffle(members)
        queues.append(members)
    chosen: list[T] = []
    depth = 0
    while len(chosen) < n and any(depth < len(q) for q in queues):
        for queue in queues:
            if depth < len(queue) and len(chosen) < n:
                chosen.append(queue[depth])
        depth += 1
    return chosen
