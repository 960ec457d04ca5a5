"""How long a mining run still needs and what it will cost, with the n each estimate
rests on and a 95 % interval. Pure Python and SciPy, no Django.

* ``eta_estimate``: ``k`` documents finished in the last ``window_minutes`` give the rate
  k / window; the ETA is the documents left at that rate. Its interval comes from the exact
  (Garwood) 95 % Poisson interval of k: the slowest plausible rate gives the late end, the
  fastest the early end. With k = 0 there is no rate and no ETA.
* ``cost_projection``: the run's spending extrapolated to the documents it can sample:
  what is spent, plus the mean cost of a finished document for every planned document not
  yet finished, minus what the documents in flight have already cost (so they are not paid
  for twice); a normal 95 % interval on that mean from the spread of the finished
  documents' own costs (needs two of them), from their sums (``CostSums``). Never below
  what is already spent."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from core.intervals import Z_95

POISSON_ALPHA = 0.05


def poisson_interval(k: int) -> tuple[float, float]:
    """Exact (Garwood) 95 % interval of a Poisson count ``k``."""
    from scipy.stats import chi2  # heavy: imported when an interval is computed, not with the URLs

    low = 0.0 if k == 0 else chi2.ppf(POISSON_ALPHA / 2, 2 * k) / 2
    high = chi2.ppf(1 - POISSON_ALPHA / 2, 2 * k + 2) / 2
    return float(low), float(high)


def eta_estimate(*, remaining: int, finished_in_window: int, window_minutes: float) -> dict[str, Any]:
    """``{"minutes", "ci95", "n"}``: minutes until ``remaining`` documents are finished
    (None without a rate or without work left), its 95 % interval ([low, None] when the
    slowest plausible rate is zero) and n, the documents the rate was measured on."""
    k = finished_in_window
    if remaining <= 0 or k <= 0 or window_minutes <= 0:
        return {"minutes": None, "ci95": None, "n": k}
    low_count, high_count = poisson_interval(k)
    return {
        "minutes": round(remaining * window_minutes / k, 1),
        "ci95": [
            round(remaining * window_minutes / high_count, 1),
            round(remaining * window_minutes / low_count, 1) if low_count > 0 else None,
        ],
        "n": k,
    }


@dataclass(frozen=True)
class CostSums:
    """What ``n`` documents cost: the sum of their costs and the sum of their squares (enough
    for the mean and the spread, kept as a run goes: mining/run_counters.py)."""

    n: int
    total: Decimal = Decimal(0)
    squares: Decimal = Decimal(0)

    @classmethod
    def of(cls, costs: Sequence[Decimal]) -> CostSums:
        return cls(len(costs), sum(costs, Decimal(0)), sum((c * c for c in costs), Decimal(0)))


def cost_projection(
    *, spent: Decimal, planned: int, finished: CostSums, in_flight_paid: Decimal = Decimal(0)
) -> dict[str, Any]:
    """``{"usd", "ci95", "n"}``: the projected total for ``planned`` documents.

    ``finished`` holds what the finished documents cost (n of them, mean m);
    ``in_flight_paid`` what the documents still in flight have cost so far, which ``spent``
    already holds. The total is spent + (planned - n) x m - in_flight_paid (never below
    spent), with a normal 95 % interval on m from the spread of the finished documents'
    costs (their sample standard deviation; needs two). None when no document has finished."""
    n = finished.n
    if n == 0:
        return {"usd": None, "ci95": None, "n": 0}
    left = max(planned - n, 0)
    mean = float(finished.total / n)
    base = float(spent) - float(in_flight_paid)

    def total(per_document: float) -> float:
        return max(float(spent), base + left * per_document)

    interval = None
    if n >= 2:
        variance = max((finished.squares - finished.total * finished.total / n) / (n - 1), Decimal(0))
        half = Z_95 * math.sqrt(variance) / math.sqrt(n)
        interval = [total(mean - half), total(mean + half)]
    return {"usd": total(mean), "ci95": interval, "n": n}
