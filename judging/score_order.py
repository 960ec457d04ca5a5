"""The order of a procedure's actions in SCORE (Thoth / SciRecipe; judging/score_metric.py):
the reward's order consistency (§3.3.2 a), App. C.2: strict, or graded by the longest common
subsequence) and the order metrics of the evaluation (§4.2: Order-S, Order-LCS, Order-Tau).
An action sequence is the normalised actions of the steps, in order. Pure Python.

Where the paper's text contradicts itself or leaves something open, the choice made is
written beside the code as "Choice:" and collected in docs/score.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

OrderMode = Literal["strict", "lcs"]


def is_subsequence(short: Sequence[str], long: Sequence[str]) -> bool:
    """True when ``short`` can be embedded in ``long`` with its order kept."""
    remaining = iter(long)
    return all(any(item == other for other in remaining) for item in short)


def order_strict(pred_actions: Sequence[str], gold_actions: Sequence[str]) -> int:
    """Eq. (13): 1 when the sequences are equal or either is a subsequence of the other.

    Choice: §3.3.2 says "identical or mutually subsequences"; "mutually" read literally
    (each a subsequence of the other) would mean identical, and App. C.2's Eq. (13) and
    worked example ([harvest, lyse, quantify] scores 1) take either direction."""
    pred, gold = list(pred_actions), list(gold_actions)
    return int(pred == gold or is_subsequence(pred, gold) or is_subsequence(gold, pred))


def lcs_length(first: Sequence[str], second: Sequence[str]) -> int:
    """L(n, m) of Eq. (15), by dynamic programming over prefixes (one row kept)."""
    previous = [0] * (len(second) + 1)
    for item in first:
        current = [0]
        for j, other in enumerate(second, start=1):
            current.append(previous[j - 1] + 1 if item == other else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def order_lcs(pred_actions: Sequence[str], gold_actions: Sequence[str]) -> float:
    """Eq. (14): LCS / m, m = the number of gold actions (the reward's graded mode)."""
    if not gold_actions:
        raise ValueError("the reference has no steps")
    return lcs_length(pred_actions, gold_actions) / len(gold_actions)


def order_consistency(pred_actions: Sequence[str], gold_actions: Sequence[str], mode: OrderMode = "strict") -> float:
    """Order(â, a*) of Eq. (5): strict (the paper's primary mode, App. C.2 and J.1.2) or LCS/m."""
    if mode == "strict":
        return float(order_strict(pred_actions, gold_actions))
    if mode == "lcs":
        return order_lcs(pred_actions, gold_actions)
    raise ValueError(f"unknown order mode {mode!r}; expected 'strict' or 'lcs'")


# The order metrics of the evaluation (§4.2)


def order_s(pred_actions: Sequence[str], gold_actions: Sequence[str]) -> int:
    """Order-S, Eq. (8): 1 only when the action sequences are identical.

    Choice: App. C.2 says "all formal experimental results in this work are reported under
    the strict mode", yet Eq. (8) defines Order-S as exact equality. We keep Eq. (8) for
    Order-S and report the strict mode of Eq. (13) separately (``order_strict``)."""
    return int(list(pred_actions) == list(gold_actions))


def order_lcs_eval(pred_actions: Sequence[str], gold_actions: Sequence[str]) -> float:
    """Order-LCS, Eq. (9): 2L / (n + m). (App. C.2's reward mode is LCS / m instead; both
    are kept, under different names.)"""
    total = len(pred_actions) + len(gold_actions)
    return 2 * lcs_length(pred_actions, gold_actions) / total if total else 0.0


def tau_pairs(pred_actions: Sequence[str], gold_actions: Sequence[str]) -> list[tuple[int, int]]:
    """The (i, j) pairs Order-Tau ranks: each predicted action, in order, takes the earliest
    still-unused gold occurrence of the same action, wherever it is.

    Choice: §4.2 computes Order-Tau over the anchors W of App. C.3, but those are monotone
    by construction, so every pair would be concordant and Order-Tau would be 1 whenever
    two actions match. We pair actions without the monotone constraint, so reordered
    steps give discordant pairs."""
    unused: dict[str, list[int]] = {}
    for j, action in enumerate(gold_actions, start=1):
        unused.setdefault(action, []).append(j)
    pairs = []
    for i, action in enumerate(pred_actions, start=1):
        if unused.get(action):
            pairs.append((i, unused[action].pop(0)))
    return pairs


def order_tau(pred_actions: Sequence[str], gold_actions: Sequence[str]) -> float:
    """Order-Tau, Eq. (10): (C - D') / (C + D') over all pairs of ``tau_pairs``; 0 when
    C + D' = 0 (fewer than two pairs). No ties can occur: i and j are each distinct."""
    pairs = tau_pairs(pred_actions, gold_actions)
    concordant = discordant = 0
    for index, (i, j) in enumerate(pairs):
        for later_i, later_j in pairs[index + 1 :]:
            if (later_i - i) * (later_j - j) > 0:
                concordant += 1
            else:
                discordant += 1
    total = concordant + discordant
    return (concordant - discordant) / total if total else 0.0
