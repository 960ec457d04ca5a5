"""Where a participant meets attention checks, and in which order. Pure Python: no Django.

A study with attention-check rate r mixes one check into every stretch of about 1/r items a
participant is served (main items and checks together, counted from 0). Check number j goes
somewhere in its own stretch ``ceil(j/r) .. ceil((j+1)/r) - 1``, at a position drawn from the
participant's seed, so the rate holds for everyone while nobody can predict which item is a
check (before issue 18 every annotator met the same checks at every 1/r-th item). The order of
the check items is a seeded shuffle as well.

Both are functions of the seed alone (stored on the participation), so a participant's plan
can be recomputed and exported at any time."""

from __future__ import annotations

import math
import random
import secrets
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

# 1/r computed in floating point can land a hair above an integer (1 / 0.1 = 10.000000000000002).
_EPSILON = 1e-9


def new_seed() -> int:
    """A seed for a new participant (fits a signed 64-bit column)."""
    return secrets.randbits(62)


def stretch(rate: float, j: int) -> tuple[int, int]:
    """The first and last position (0-based) where check number ``j`` may appear."""
    if not 0 < rate < 1:
        raise ValueError(f"an attention-check rate must lie strictly between 0 and 1, got {rate!r}")
    first = math.ceil(j / rate - _EPSILON)
    last = math.ceil((j + 1) / rate - _EPSILON) - 1
    return first, max(first, last)


def check_position(seed: int, rate: float, j: int) -> int:
    """The position (0-based, among the items served to the participant) of check number ``j``."""
    first, last = stretch(rate, j)
    return random.Random(f"{seed}:attention-position:{j}").randint(first, last)


def check_positions(seed: int, rate: float, count: int) -> list[int]:
    """The positions of the first ``count`` checks."""
    return [check_position(seed, rate, j) for j in range(count)]


def check_order(seed: int, items: Sequence[T]) -> list[T]:
    """The check items in the order this participant meets them (``items`` in study order)."""
    order = list(items)
    random.Random(f"{seed}:attention-order").shuffle(order)
    return order


def check_due(seed: int, rate: float, *, served: int, checks_served: int) -> bool:
    """Whether the next item (position ``served``) should be a check, given how many checks
    the participant has been served already."""
    if rate <= 0:
        return False
    return served >= check_position(seed, rate, checks_served)


def checks_met(seed: int, rate: float, *, main_items: int, check_items: int, limit: int | None = None) -> int:
    """How many checks a participant meets when every one of ``main_items`` main items comes to
    them, with ``check_items`` check items in the study and at most ``limit`` items in all.

    Check number ``c`` is served once the participant has been served ``check_position(c)``
    items, main and checks together (``check_due``), as long as there are check items left and
    the limit is not reached; after the last main item a check that is due is still served."""
    if rate <= 0 or check_items <= 0:
        return 0
    met = 0
    while met < check_items:
        position = check_position(seed, rate, met)
        if position > main_items + met or (limit is not None and position >= limit):
            break
        met += 1
    return met


def checks_most(rate: float, *, main_items: int, check_items: int, limit: int | None = None) -> int:
    """The most checks any participant can meet (``checks_met`` over every seed): each check at
    the first position of its stretch, the earliest a seed can put it. A study's terms (time and
    pay) are stated on this, so they are the same for every participant and for Prolific."""
    if rate <= 0 or check_items <= 0:
        return 0
    met = 0
    while met < check_items:
        position = stretch(rate, met)[0]
        if position > main_items + met or (limit is not None and position >= limit):
            break
        met += 1
    return met
