"""Reading a model's answer to a multiple-choice item, and accuracy tallies. No Django.

The prompt lists the candidates as ``A. ...``, ``B. ...`` and asks for the letter. An
answer counts only when it names exactly one candidate; anything else is *unparseable*:
counted, never guessed."""

from __future__ import annotations

import re
import string
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.intervals import share_estimate
from goalstep.items import normalise_text

LETTERS = string.ascii_uppercase


def candidate_list(candidates: Sequence[str]) -> str:
    """``A. first`` lines, one per candidate (the prompt's ``{candidates}``)."""
    return "\n".join(f"{LETTERS[i]}. {text}" for i, text in enumerate(candidates))


def letter_list(n: int) -> str:
    """``A, B, C or D`` (the prompt's ``{letters}``)."""
    letters = list(LETTERS[:n])
    return letters[0] if n == 1 else ", ".join(letters[:-1]) + " or " + letters[-1]


def parse_choice(text: str, candidates: Sequence[str]) -> int | None:
    """The 0-based candidate the completion chose, or None when it does not name exactly one.

    Accepted, in this order: the whole answer is a letter (``B``, ``(B)``, ``B.``); an
    ``Answer: B`` / ``answer is B`` statement (the last one counts); an answer that starts
    with ``B.`` or ``B)`` followed by text; an answer that is exactly one candidate's text."""
    if not isinstance(text, str):
        return None
    valid = LETTERS[: len(candidates)]
    cleaned = text.strip().strip("*`_ ").strip()
    whole = re.fullmatch(r"\(?([A-Za-z])\)?[.):]?", cleaned)
    if whole:
        letter = whole.group(1).upper()
        return valid.index(letter) if letter in valid else None
    stated = re.findall(r"\banswer\b\s*(?:is|:)?\s*[:\-]?\s*\**\(?([A-Z])\)?(?![A-Za-z])", cleaned, flags=re.IGNORECASE)
    stated = [letter.upper() for letter in stated if letter.upper() in valid]
    if stated:
        return valid.index(stated[-1])
    leading = re.match(r"\(?([A-Z])[.):]\s+\S", cleaned)
    if leading and leading.group(1) in valid:
        return valid.index(leading.group(1))
    target = normalise_text(cleaned)
    matches = [i for i, candidate in enumerate(candidates) if normalise_text(candidate) == target]
    return matches[0] if len(matches) == 1 else None


@dataclass
class AccuracyTally:
    """Accuracy overall and per topic. Denominators, stated: ``accuracy`` = correct / answered
    (answered = every item the model returned a usable completion for, unparseable ones
    included, which count as not correct), with its 95 % Wilson interval (n = answered);
    ``accuracy_parsed`` = correct / parsed. Calls without a usable completion (truncated,
    refused, parse_failed, ...) are no answer: left out of both and counted in
    ``n_unusable`` by outcome (``add_unusable``)."""

    correct: int = 0
    answered: int = 0
    unparseable: int = 0
    by_topic: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    unusable: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, topic: str, correct: bool | None) -> None:
        """``correct`` None: the answer was unparseable."""
        self.answered += 1
        self.by_topic[topic][1] += 1
        if correct is None:
            self.unparseable += 1
        elif correct:
            self.correct += 1
            self.by_topic[topic][0] += 1

    def add_unusable(self, outcome: str) -> None:
        """A call that returned no usable completion: left out of accuracy, counted."""
        self.unusable[outcome] += 1

    def result(self) -> dict[str, Any]:
        parsed = self.answered - self.unparseable
        overall = share_estimate(self.correct, self.answered)
        return {
            "correct": self.correct,
            "answered": self.answered,
            "unparseable": self.unparseable,
            "accuracy": overall["share"],
            "ci95": overall["ci95"],
            "interval": overall["interval"],
            "accuracy_parsed": self.correct / parsed if parsed else None,
            "n_unusable": sum(self.unusable.values()),
            "unusable": dict(sorted(self.unusable.items())),
            "by_topic": {
                topic: {
                    "correct": c,
                    "answered": n,
                    "accuracy": c / n if n else None,
                    "ci95": share_estimate(c, n)["ci95"],
                }
                for topic, (c, n) in sorted(self.by_topic.items())
            },
        }
