"""Calibrated How2Score on the leaderboard: where human labels exist for a judge, its score
corrected with its measured true-positive and true-negative rates.

The app that holds human labels (annotate) registers a provider; judging never imports it.
A provider takes the judge's name and the per-generation labels behind a leaderboard row
(True = no_failure) and returns ``{"corrected_score", "ci95", "tpr", "tnr", "n_labelled",
"source"}`` (scores on the 0-100 How2Score scale) or None when it has no labels for the judge."""

from __future__ import annotations

from collections.abc import Callable

Provider = Callable[[str, list[bool]], "dict | None"]
_PROVIDERS: list[Provider] = []


def calibration_provider_register(provider: Provider) -> None:
    if provider not in _PROVIDERS:
        _PROVIDERS.append(provider)


def judge_calibration(judge: str, successes: list[bool]) -> dict | None:
    for provider in _PROVIDERS:
        result = provider(judge, successes)
        if result is not None:
            return result
    return None
