"""Calibrated How2Score on the leaderboard: where human labels exist for a judge, its score
corrected with its measured true-positive and true-negative rates.

The app that holds human labels (annotate) registers a provider; judging never imports it.
A provider takes the judge's name, the per-generation labels behind a leaderboard row
(True = no_failure) and the same labels as ``(generation_id, topic, success)``, and returns
both estimators of the human How2Score (Rogan-Gladen's ``corrected_score``, ``ci95``, ``tpr``,
``tnr``, ``n_labelled``, ``n_unlabelled``, ``source_studies``; PPI++'s ``ppi_score``,
``ppi_ci95`` and ``ppi``), every score on 0-1 with a ``_percent`` sibling on 0-100, or None
when it has no labels for the judge (annotate/stats/calibration.py, ``calibration_summary``).
The human label is the majority by default, or the adjudicated gold (``HUMAN_SOURCES``)."""

from __future__ import annotations

from typing import Protocol

# Which human label the calibration takes (annotate's review and adjudication: docs/agreement.md).
HUMAN_MAJORITY = "majority"
HUMAN_GOLD = "gold"
HUMAN_GOLD_OR_MAJORITY = "gold_or_majority"
HUMAN_SOURCES = {
    HUMAN_MAJORITY: "the human majority of the counted annotations",
    HUMAN_GOLD: "the adjudicated gold labels only",
    HUMAN_GOLD_OR_MAJORITY: "the gold label where an item has one, else the human majority",
}


class Provider(Protocol):
    def __call__(
        self,
        judge: str,
        successes: list[bool],
        items: list[tuple[int, str, bool]] | None = None,
        *,
        human_source: str = HUMAN_MAJORITY,
    ) -> dict | None: ...


_PROVIDERS: list[Provider] = []


def calibration_provider_register(provider: Provider) -> None:
    if provider not in _PROVIDERS:
        _PROVIDERS.append(provider)


def judge_calibration(
    judge: str,
    successes: list[bool],
    items: list[tuple[int, str, bool]] | None = None,
    *,
    human_source: str = HUMAN_MAJORITY,
) -> dict | None:
    """The first provider's calibration of a leaderboard row, against ``human_source``'s labels."""
    for provider in _PROVIDERS:
        result = provider(judge, successes, items, human_source=human_source)
        if result is not None:
            return result
    return None
