"""Human accuracy of validated task sets, shown beside model accuracy on the leaderboard.

The app that holds human answers (annotate) registers a provider; goalstep never imports
it. A provider takes a task name and returns ``{"accuracy", "n_answers", "n_items",
"source"}`` (the share of human answers equal to the label) or None when it has no answers
for that task."""

from __future__ import annotations

from collections.abc import Callable

Provider = Callable[[str], "dict | None"]
_PROVIDERS: list[Provider] = []


def human_accuracy_provider_register(provider: Provider) -> None:
    if provider not in _PROVIDERS:
        _PROVIDERS.append(provider)


def human_accuracy(task: str) -> dict | None:
    for provider in _PROVIDERS:
        result = provider(task)
        if result is not None:
            return result
    return None
