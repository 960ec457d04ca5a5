"""How a study spends its annotators: which item gets the next one, and when it has enough.
Pure Python, no Django (the reservations read the database and call these; the simulation in
bench/annotation_allocation.py calls the same functions on planted data).

**Policies** (``Study.allocation_policy``):

* ``fixed``: every main item gets ``annotators_per_item`` annotations (k), in study order.
* ``dynamic``: an item gets ``annotators_per_item`` annotations, then another one only while
  it is *undecided* (``item_undecided``), up to the study's ``max_annotators_per_item``.
* ``active``: dynamic k, and the next new item is drawn from the stratum (topic x the judge's
  label) where one more human label narrows the study's prediction-powered interval the most
  per annotation it is expected to cost (``strata_order``). For studies that calibrate a judge's
  How2Score.

**Undecided** (``item_undecided``): an item is decided when a strict majority of its counted
has_failure labels holds at least two votes, or three when it contradicts the judge's label
(two people overruling the judge are asked for a third opinion). Until the minimum is reached
an item is always undecided; at the maximum it is always decided (a tie there has no
majority, as everywhere in the reports). With a minimum of 2 and a maximum of 3: two who agree
with the judge stop the item at 2; two who disagree with each other, or who agree with each
other against the judge, bring a third.

**Active selection** (Neyman allocation with costs; Cochran 1977, *Sampling Techniques*,
§5.5): the study's How2Score is estimated by stratified PPI++ (annotate/stats/calibration.py)
with strata topic x judge label, so a stratum h of weight W_h = N_h / N (its share of the
study's items) with n_h human labels adds about ``W_h^2 S_h^2 / n_h`` to the variance, S_h^2 the
variance of the human label inside it (estimated with the Agresti-Coull share, as ppi_score
does, so a stratum whose labels all agree still has some). One more label there takes
``W_h^2 S_h^2 / (n_h (n_h + 1))`` off; divided by the annotations an item of the stratum is
expected to cost (dynamic k spends more where the judge is often wrong), that is the stratum's
gain. Strata with fewer than ``PILOT_LABELS`` labels come first (ppi_score merges smaller
strata, and a merged stratum would mix sampling rates); within a stratum items are taken in a
seeded random order, so the labelled items stay a random sample of their stratum, which is
what the interval assumes.

The interval (``calibration_interval``) is ppi_score with strata topic x judge label that are
never merged for being uniform (``pool_uniform=False``: the strata are sampled at different
rates on purpose). Its width is what a study's target interval width is compared with."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from annotate.stats.records import HAS_FAILURE, NO_FAILURE

POLICY_FIXED = "fixed"
POLICY_DYNAMIC = "dynamic"
POLICY_ACTIVE = "active"
POLICY_LABELS = {
    POLICY_FIXED: "Fixed k",
    POLICY_DYNAMIC: "Dynamic k",
    POLICY_ACTIVE: "Active selection for calibration (dynamic k)",
}
POLICIES = tuple(POLICY_LABELS)
# Labels every stratum gets before the gains decide: ppi_score merges strata with fewer
# (annotate/stats/calibration.PPI_MIN_LABELLED, equal by test; not imported here so that the
# models, which name the policies, load without NumPy).
PILOT_LABELS = 10
# Pseudo-items behind a stratum's expected cost per item, so one costly item does not decide it.
PRIOR_ITEMS = 2
# Votes a majority needs to decide an item: with the judge, and against it.
VOTES_WITH_JUDGE = 2
VOTES_AGAINST_JUDGE = 3


def is_dynamic(policy: str) -> bool:
    """Whether the policy gives items a varying number of annotators (dynamic and active)."""
    return policy in (POLICY_DYNAMIC, POLICY_ACTIVE)


def item_undecided(votes: Sequence[bool], *, judge_has_failure: bool | None, min_k: int, max_k: int) -> bool:
    """Whether an item with these counted has_failure labels gets another annotator (module
    docstring). ``min_k``: annotations every item gets; ``max_k``: the most any item gets;
    ``judge_has_failure``: the judge's label, None when the item has none (the majority then
    needs ``VOTES_WITH_JUDGE`` votes)."""
    n = len(votes)
    if n < min_k:
        return True
    if n >= max_k:
        return False
    n_has = sum(1 for vote in votes if vote)
    n_no = n - n_has
    if n_has == n_no:
        return True
    label = n_has > n_no
    against = judge_has_failure is not None and label != judge_has_failure
    return max(n_has, n_no) < (VOTES_AGAINST_JUDGE if against else VOTES_WITH_JUDGE)


def expected_annotations(min_k: int, max_k: int) -> float:
    """The annotations an item is expected to cost before any is seen: the minimum and, for
    about half the items, one more (the prior of a stratum's cost)."""
    return min(float(max_k), min_k + 0.5)


def judge_has_failure_of(source: Any) -> bool | None:
    """The judge's label an item's ``source`` records (``judge_label``: "has_failure" or
    "no_failure", as items made from judged generations have it), None when it has none."""
    label = source.get("judge_label") if isinstance(source, dict) else None
    return True if label == HAS_FAILURE else False if label == NO_FAILURE else None


def stratum_key(topic: str, judge_has_failure: bool) -> str:
    """The name of a calibration stratum: the topic and the judge's label."""
    return f"{topic or '(no topic)'} / {HAS_FAILURE if judge_has_failure else NO_FAILURE}"


@dataclass(frozen=True)
class StratumState:
    """Where one stratum stands. ``pool``: its items in the study (N_h); ``decided``: those with
    a human majority; ``no_failure``: of which the majority says no_failure; ``annotations``:
    the counted annotations the decided items took; ``started``: items with annotations or live
    reservations that are not decided yet; ``open``: items nobody has started."""

    key: Hashable
    pool: int
    decided: int = 0
    no_failure: int = 0
    annotations: int = 0
    started: int = 0
    open: int = 0


def stratum_variance(state: StratumState) -> float:
    """The variance of the human no_failure label in the stratum, from the Agresti-Coull share
    ``(s + 2) / (n + 4)`` (never 0, as in ppi_score)."""
    share = (state.no_failure + 2.0) / (state.decided + 4.0)
    return share * (1.0 - share)


def stratum_cost(state: StratumState, prior_cost: float) -> float:
    """Annotations an item of the stratum is expected to cost: its decided items' mean, shrunk
    towards ``prior_cost`` by ``PRIOR_ITEMS`` pseudo-items."""
    return (state.annotations + prior_cost * PRIOR_ITEMS) / (state.decided + PRIOR_ITEMS)


def stratum_gain(state: StratumState, *, total_pool: int, prior_cost: float) -> float:
    """The reduction of the interval's variance one more item of the stratum is expected to
    bring, per annotation it is expected to cost (module docstring)."""
    if total_pool <= 0 or state.open <= 0:
        return 0.0
    weight = state.pool / total_pool
    n = state.decided + state.started
    reduction = weight * weight * stratum_variance(state) / (max(n, 1) * (n + 1))
    return reduction / stratum_cost(state, prior_cost)


def strata_order(states: Sequence[StratumState], *, prior_cost: float, pilot: int = PILOT_LABELS) -> list[Hashable]:
    """The strata with items nobody has started, best first: strata short of their pilot labels
    (``pilot``, or the whole stratum when it is smaller) with the fewest first, then by
    ``stratum_gain`` (weights over every stratum given, open or not); ties by key, so the order
    is the same on every call."""
    total = sum(s.pool for s in states)

    def rank(s: StratumState) -> tuple[int, float, str]:
        n = s.decided + s.started
        if n < min(pilot, s.pool):
            return (0, float(n), repr(s.key))
        return (1, -stratum_gain(s, total_pool=total, prior_cost=prior_cost), repr(s.key))

    return [s.key for s in sorted((s for s in states if s.open > 0), key=rank)]


def shuffle_key(seed: str | int, item: str | int) -> str:
    """A seeded random order of items that does not change as items are added or labelled: the
    order of a stratum's items under active selection (a random sample of the stratum)."""
    return hashlib.sha256(f"{seed}:{item}".encode()).hexdigest()


def calibration_interval(
    labelled: Sequence[tuple[str, bool, bool]], unlabelled: Sequence[tuple[str, bool]]
) -> dict[str, Any]:
    """The study's prediction-powered How2Score: ``labelled`` as ``(topic, judge_has_failure,
    human_has_failure)`` per item with a human majority, ``unlabelled`` as ``(topic,
    judge_has_failure)`` per item of the study; ppi_score with strata topic x judge label,
    never merged for uniform labels (module docstring)."""
    from annotate.stats.calibration import ppi_score

    return ppi_score(
        [(stratum_key(topic, judge), judge, human) for topic, judge, human in labelled],
        [(stratum_key(topic, judge), judge) for topic, judge in unlabelled],
        pool_uniform=False,
    )


def interval_width(result: dict[str, Any]) -> float | None:
    """The width of a ppi_score interval (0-1), None when it is not estimable."""
    ci = result.get("ci95")
    return None if ci is None else float(ci[1] - ci[0])


def target_reached(width: float | None, target: float | None) -> bool:
    """Whether a study with this target width has reached it (never without a target or an
    interval)."""
    return target is not None and width is not None and width <= target
