"""How a study spends its annotators: which item gets the next one, and when it has enough.
Pure Python, no Django (the reservations read the database and call these; the simulation in
bench/annotation_allocation.py calls the same functions on planted data).

**Policies** (``Study.allocation_policy``):

* ``fixed``: every main item gets ``annotators_per_item`` annotations (k), in study order.
* ``dynamic``: an item gets ``annotators_per_item`` annotations, then another one only while
  it is *undecided* (``item_undecided``), up to the study's ``max_annotators_per_item``.
* ``active``: dynamic k, and the next new item is drawn from the topic where one more human
  label narrows the study's prediction-powered interval the most per annotation it is expected
  to cost (``strata_order``). For studies that calibrate a judge's How2Score.

**Undecided** (``item_undecided``): an item is decided when a strict majority of its counted
has_failure labels holds at least two votes, or three when it contradicts the judge's label
(two people overruling the judge are asked for a third opinion). Until the minimum is reached
an item is always undecided; at the maximum it is always decided (a tie there has no
majority, as everywhere in the reports). With a minimum of 2 and a maximum of 3: two who agree
with the judge stop the item at 2; two who disagree with each other, or who agree with each
other against the judge, bring a third.

**Active selection** (Neyman allocation with costs; Cochran 1977, *Sampling Techniques*,
§5.5): the study's How2Score is the stratified PPI++ estimate (annotate/stats/calibration.py,
``ppi_score``, strata = topics, as the agreement report computes it), in which a topic h of
weight W_h = N_h / N (its share of the study's items) with n_h human labels adds
``W_h^2 sigma_h^2 / n_h`` to the variance, sigma_h^2 the variance of the human label left after
the judge's label has explained what it can (``Var(Y - lambda f)``, with ppi_score's own
lambda and its Agresti-Coull floor on ``Var(Y)``: ``residual_variance``). One more label there
takes ``W_h^2 sigma_h^2 / (n_h (n_h + 1))`` off; divided by the annotations an item of the
topic is expected to cost (dynamic k spends more where the judge is often wrong), that is the
topic's gain. The judge's label enters through sigma_h: a topic where the judge predicts people
well needs few labels. Topics with fewer than ``PILOT_LABELS`` labels come first (ppi_score
merges smaller strata, and a merged stratum would mix sampling rates); within a topic items are
taken in a seeded random order, so the labelled items stay a random sample of their topic,
which is what the interval assumes. (Strata of topic x judge label were tried first: their
interval, each stratum with its own Agresti-Coull floor, was wider at equal labels than
PPI++ over topics, and allocating over them needed more annotations than dynamic k alone;
docs/benchmarks.md.)

The interval (``calibration_interval``) is ppi_score over topics, the same for every policy;
its width is what a study's target interval width is compared with, once every topic has its
pilot labels (``interval_unsettled``)."""

from __future__ import annotations

import hashlib
from collections import Counter
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
# Labels every topic gets before the gains decide: ppi_score merges strata with fewer
# (annotate/stats/calibration.PPI_MIN_LABELLED, equal by test; not imported here so that the
# models, which name the policies, load without NumPy).
PILOT_LABELS = 10
# Pseudo-items behind a stratum's expected cost per item, so one costly item does not decide it.
PRIOR_ITEMS = 2
# Pseudo-labels behind a topic's residual variance (shrunk towards all topics' together).
PRIOR_LABELS = 20
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


def stratum_key(topic: str) -> str:
    """The name of a calibration stratum: the item's topic (ppi_score's strata)."""
    return topic or "(no topic)"


@dataclass(frozen=True)
class StratumState:
    """Where one topic stands. ``pool``: its items in the study (N_h), ``pool_judge_no_failure``
    those the judge calls no_failure; ``decided``: items with a human majority, of which
    ``no_failure`` the majority calls no_failure, ``judge_no_failure`` the judge does, and
    ``both_no_failure`` both do; ``annotations``: the counted annotations the decided items
    took; ``started``: items with annotations or live reservations that are not decided yet;
    ``open``: items nobody has started."""

    key: Hashable
    pool: int
    pool_judge_no_failure: int = 0
    decided: int = 0
    no_failure: int = 0
    judge_no_failure: int = 0
    both_no_failure: int = 0
    annotations: int = 0
    started: int = 0
    open: int = 0


def residual_variance(state: StratumState) -> float:
    """``Var(Y - lambda f)`` of the topic's labelled items as ppi_score computes it (Y the
    human no_failure, f the judge's, lambda = Cov(Y, f) / ((1 + n / N) Var(f)) clipped to
    [0, 1], ``Var(Y)`` at least the Agresti-Coull share's ``p (1 - p)``); 1/4 with fewer than
    two labels."""
    n = state.decided
    if n < 2:
        return 0.25
    y, f, yf = state.no_failure / n, state.judge_no_failure / n, state.both_no_failure / n
    unbiased = n / (n - 1)
    share = (state.no_failure + 2.0) / (n + 4.0)
    var_y = max(unbiased * y * (1 - y), share * (1 - share))
    var_f = unbiased * f * (1 - f)
    cov = unbiased * (yf - y * f)
    total = n + state.pool
    f_all = (state.judge_no_failure + state.pool_judge_no_failure) / total if total else 0.0
    var_f_all = f_all * (1 - f_all) * total / (total - 1) if total > 1 else 0.0
    big_n = max(state.pool, 1)
    lam = 0.0 if var_f_all <= 0 else min(1.0, max(0.0, cov / ((1 + n / big_n) * var_f_all)))
    return max(0.0, var_y - 2 * lam * cov + lam * lam * var_f)


def stratum_cost(state: StratumState, prior_cost: float) -> float:
    """Annotations an item of the stratum is expected to cost: its decided items' mean, shrunk
    towards ``prior_cost`` by ``PRIOR_ITEMS`` pseudo-items."""
    return (state.annotations + prior_cost * PRIOR_ITEMS) / (state.decided + PRIOR_ITEMS)


def stratum_gain(state: StratumState, *, total_pool: int, prior_cost: float, prior_variance: float = 0.25) -> float:
    """The reduction of the interval's variance one more item of the topic is expected to
    bring, per annotation it is expected to cost (module docstring); items in progress count as
    labels to come. The topic's residual variance is shrunk towards ``prior_variance`` (all
    topics' together) by ``PRIOR_LABELS`` pseudo-labels, so that a topic whose first labels
    happen to agree with the judge is not starved of the labels that would show otherwise."""
    if total_pool <= 0 or state.open <= 0:
        return 0.0
    weight = state.pool / total_pool
    n = max(state.decided + state.started, 1)
    variance = (state.decided * residual_variance(state) + PRIOR_LABELS * prior_variance) / (
        state.decided + PRIOR_LABELS
    )
    return weight * weight * variance / (n * (n + 1)) / stratum_cost(state, prior_cost)


def strata_order(states: Sequence[StratumState], *, prior_cost: float, pilot: int = PILOT_LABELS) -> list[Hashable]:
    """The topics with items nobody has started, best first: topics short of their pilot labels
    (``pilot``, or the whole topic when it is smaller) with the fewest first, then by
    ``stratum_gain`` (weights over every topic given, open or not; the prior variance from all
    topics' labels together); ties by key, so the order is the same on every call."""
    total = sum(s.pool for s in states)
    together = StratumState(
        key="all",
        pool=total,
        pool_judge_no_failure=sum(s.pool_judge_no_failure for s in states),
        decided=sum(s.decided for s in states),
        no_failure=sum(s.no_failure for s in states),
        judge_no_failure=sum(s.judge_no_failure for s in states),
        both_no_failure=sum(s.both_no_failure for s in states),
    )
    prior_variance = residual_variance(together)

    def rank(s: StratumState) -> tuple[int, float, str]:
        n = s.decided + s.started
        if n < min(pilot, s.pool):
            return (0, float(n), repr(s.key))
        gain = stratum_gain(s, total_pool=total, prior_cost=prior_cost, prior_variance=prior_variance)
        return (1, -gain, repr(s.key))

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
    judge_has_failure)`` per item of the study; ppi_score with strata topics, as the agreement
    report's calibration computes it."""
    from annotate.stats.calibration import ppi_score

    return ppi_score(
        [(stratum_key(topic), judge, human) for topic, judge, human in labelled],
        [(stratum_key(topic), judge) for topic, judge in unlabelled],
    )


def interval_width(result: dict[str, Any]) -> float | None:
    """The width of a ppi_score interval (0-1), None when it is not estimable."""
    ci = result.get("ci95")
    return None if ci is None else float(ci[1] - ci[0])


def interval_unsettled(
    result: dict[str, Any], labelled: Sequence[tuple[str, bool, bool]], unlabelled: Sequence[tuple[str, bool]]
) -> str | None:
    """Why a ``calibration_interval`` result cannot stop a study yet, None when it can: every
    topic needs ``PILOT_LABELS`` labels of its own, or all its items when it has fewer. On
    fewer, ppi_score merges topics (which under active selection mixes sampling rates), and at a
    handful of labels on which people agreed with the judge the merged interval can be narrow
    by chance (ten labels gave a width of 0.05 on planted data where 200 give 0.10)."""
    if result.get("ci95") is None:
        return result.get("not_estimable") or "no interval yet"
    pool = Counter(stratum_key(topic) for topic, _judge in unlabelled)
    have = Counter(stratum_key(topic) for topic, _judge, _human in labelled)
    for name in sorted(pool):
        needed = min(PILOT_LABELS, pool[name])
        if have[name] < needed:
            return f"topic {name} has {have[name]} of the {needed} labels each topic needs before the interval can stop the study"
    return None


def target_reached(width: float | None, target: float | None, *, unsettled: str | None = None) -> bool:
    """Whether a study with this target width has reached it: an interval no wider than the
    target that nothing keeps from stopping the study (``interval_unsettled``); never without a
    target or an interval."""
    return target is not None and width is not None and unsettled is None and width <= target
