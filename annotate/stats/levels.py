"""Krippendorff's alpha at a question's level of measurement, for kinds whose questions are
data (rubrics): ``nominal`` (yes/no, multiple choice, a set of linked steps taken as one
value) and ``ordinal`` (a Likert scale, with Krippendorff's ordinal distance), both with the
krippendorff package and the interval every kind's alpha has (``alpha_estimate``).
Pure: no Django."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any, Literal

from annotate.stats.alpha import alpha_estimate
from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP, SeedLike

Level = Literal["nominal", "ordinal"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal")


def _pairable_units(matrix: Sequence[Sequence[Hashable | None]]) -> tuple[list[list[Hashable]], int]:
    units = [[value for value in row if value is not None] for row in matrix]
    return [unit for unit in units if len(unit) >= 2], sum(1 for unit in units if len(unit) == 1)


def ordinal_distance(values: Sequence[int]) -> Any:
    """Krippendorff's ordinal distance over the pairable values: for ranks c <= k,
    (sum of n_g for g from c to k - (n_c + n_k) / 2) squared, n_g the number of pairable
    values equal to g (Krippendorff 2011, "Computing Krippendorff's alpha-reliability")."""
    counts = Counter(values)
    ranks = sorted(counts)

    def distance(a: int, b: int) -> float:
        low, high = (a, b) if a <= b else (b, a)
        between = sum(counts[g] for g in ranks if low <= g <= high)
        return float((between - (counts[low] + counts[high]) / 2) ** 2)

    return distance


def level_alpha(
    matrix: Sequence[Sequence[Hashable | None]], level: Level, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: SeedLike = 0
) -> dict[str, Any]:
    """Alpha of an items x annotators matrix (``None`` = missing cell) at ``level``, in the
    keys every kind's alpha is shown with (``alpha_estimate``: the alpha, its 95 % BCa
    bootstrap interval over the pairable items, ``alpha_n``, why it is undefined or its
    interval not estimable), with the level and the items with one value (``n_single``)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}")
    pairable, n_single = _pairable_units(matrix)
    distance = None
    if level == "ordinal":
        values = [int(value) for unit in pairable for value in unit]  # type: ignore[call-overload]
        distance = ordinal_distance(values)
    return {
        "level": level,
        **alpha_estimate(matrix, distance=distance, bootstrap=bootstrap, seed=seed),
        "n_single": n_single,
    }
