"""Krippendorff's alpha at a question's level of measurement, for kinds whose questions are
data (rubrics): ``nominal`` (yes/no, multiple choice, a set of linked steps taken as one
value) with the krippendorff package (``nominal_alpha``), ``ordinal`` (a Likert scale) from
the coincidence definition of ``coincidence_alpha`` with Krippendorff's ordinal distance.
Pure: no Django."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any, Literal

from annotate.stats.alpha import alpha_undefined_reason, coincidence_alpha, nominal_alpha

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


def level_alpha(matrix: Sequence[Sequence[Hashable | None]], level: Level) -> dict[str, Any]:
    """Alpha of an items x annotators matrix (``None`` = missing cell) at ``level``, with its n
    (``alpha_n``: items with two or more values), the items with one value (``n_single``) and,
    when undefined, why (``alpha_undefined``)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}")
    pairable, n_single = _pairable_units(matrix)
    distinct = {value for unit in pairable for value in unit}
    if level == "nominal":
        alpha = nominal_alpha(matrix)
    else:
        values = [int(value) for unit in pairable for value in unit]  # type: ignore[call-overload]
        alpha = coincidence_alpha(matrix, ordinal_distance(values)) if pairable else None
    details = {"n_units": len(pairable), "n_single": n_single, "n_distinct_values": len(distinct)}
    return {
        "level": level,
        "alpha": alpha,
        "alpha_n": len(pairable),
        "n_single": n_single,
        "alpha_undefined": alpha_undefined_reason(details) if alpha is None else None,
    }
