"""Agreement with the adjudicated gold label, beside agreement with the human majority. Pure
Python, no Django.

Both are shares of items on which a rater (an annotator or a judge) matched the reference,
over the items with a gold label the rater labelled, each with its n and its 95 % Wilson
interval (core/intervals.py, ``share_estimate``), so the two columns compare like with like:

* **gold**: the rater's answer matched the item's gold label (a match is the kind's known-answer
  check, ``StudyKind.answer_correct``, with the gold label as the known answer);
* **majority**: on the same items, the rater's has_failure label matched the human majority,
  for an annotator the majority of the *other* counted annotations of the item (leave-one-out,
  so an annotator is never compared with a majority they are part of), for a judge the majority
  of every counted annotation. An item without a majority (a tie, fewer other annotations than
  the study's minimum) is left out of that column and counted in ``n_no_majority``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from annotate.stats.majority import majority_label
from core.intervals import share_estimate


def leave_one_out_majority(labels: Mapping[str, bool], annotator: str, *, min_annotations: int) -> bool | None:
    """The strict majority of the other annotators' has_failure labels of one item (None: a
    tie, or fewer than ``min_annotations`` others)."""
    others = [label for name, label in labels.items() if name != annotator]
    if len(others) < min_annotations:
        return None
    return majority_label(others)


def reference_agreement(
    gold_matches: Mapping[str, Mapping[str, bool]],
    majority_matches: Mapping[str, Mapping[str, bool | None]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per rater, agreement with gold and (where given) with the majority on the same items.

    ``gold_matches``: rater -> item -> whether the rater matched the gold label;
    ``majority_matches``: rater -> item -> whether the rater matched the majority (None: the
    item has no majority to compare with). Items in ``majority_matches`` but not in
    ``gold_matches`` are ignored (only items with a gold label are compared)."""
    out: dict[str, dict[str, Any]] = {}
    for rater in sorted(gold_matches):
        items = gold_matches[rater]
        gold = share_estimate(sum(1 for v in items.values() if v), len(items))
        entry: dict[str, Any] = {"gold": gold, "majority": None, "n_no_majority": None}
        if majority_matches is not None:
            by_item = majority_matches.get(rater, {})
            decided = [by_item[item] for item in items if by_item.get(item) is not None]
            entry["majority"] = share_estimate(sum(1 for v in decided if v), len(decided))
            entry["n_no_majority"] = len(items) - len(decided)
        out[rater] = entry
    return out
