"""Reading a model's answer to a multiple-choice item, and accuracy tallies. No Django.

The prompt lists the candidates as ``A. ...``, ``B. ...`` and asks for the letter. An answer
is read (``ok``) only when it names exactly one candidate; one that names two or more
different candidates is *ambiguous* and one that names none is *unparseable*. Neither is
guessed, neither is scored: both are counted and left out of accuracy."""

from __future__ import annotations

import re
import string
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.intervals import share_estimate
from mining.words import normalise_text

LETTERS = string.ascii_uppercase

# What reading an answer gives (a prediction's outcome when the call returned a completion).
OK = "ok"
AMBIGUOUS = "ambiguous"
UNPARSEABLE = "unparseable"


def candidate_list(candidates: Sequence[str]) -> str:
    """``A. first`` lines, one per candidate (the prompt's ``{candidates}``)."""
    return "\n".join(f"{LETTERS[i]}. {text}" for i, text in enumerate(candidates))


def letter_list(n: int) -> str:
    """``A, B, C or D`` (the prompt's ``{letters}``)."""
    letters = list(LETTERS[:n])
    return letters[0] if n == 1 else ", ".join(letters[:-1]) + " or " + letters[-1]


@dataclass(frozen=True)
class ChoiceReading:
    """``outcome`` ok (``choice`` is the 0-based candidate), ambiguous (``named``: the letters
    it names, two or more) or unparseable (it names none, or only a letter out of range)."""

    outcome: str
    choice: int | None = None
    named: tuple[str, ...] = ()


# A capital letter standing alone: not part of a word, a number or a hyphenated word.
_LETTER = re.compile(r"(?<![A-Za-z0-9'\u2019-])([A-Za-z])(?![A-Za-z0-9'\u2019-])")
# Words that introduce an option by its letter ("option C", "the answer is (D)", "Answer: b").
_NAMING = re.compile(
    r"\b(?:options?|answers?|choices?|candidates?|letters?)\s*(?:is|was|would\s+be|:|=|-)?\s*\(?$", re.IGNORECASE
)
# Before a letter: a word joining options ("A or B", "both A and C", "between B and D").
_JOINED_BEFORE = re.compile(r"(?:\b(?:or|and|nor|either|both|between|not|than|vs\.?|versus)\s+|[/&]\s*)\(?$")
# After a letter: the end, the end of a line, or punctuation ("A.", "B)", "C:", "D,", "A/B", "B (...)").
_PUNCTUATION_AFTER = re.compile(r"^\)?(?:[ \t]*(?:$|\n)|\s*[.):,;!?/\]&(\u2013\u2014]|\s+-\s)")
# After a letter: a word that only follows an option's letter ("A is", "B could", "A or B").
# The article "A" and the pronoun "I" are followed by other words ("A good step", "I think").
_WORD_AFTER = re.compile(
    r"^\)?\s+(?:or|and|nor|is|are|was|were|seems?|looks?|could|would|might|may|should|also|too|vs\.?|versus)\b",
    re.IGNORECASE,
)


def _mask_candidates(text: str, candidates: Sequence[str]) -> str:
    """The answer with each candidate's own text blanked out, so that a capital letter inside
    an option's text ("Take vitamin C") is not read as naming another option."""
    for candidate in sorted(candidates, key=len, reverse=True):
        words = candidate.strip().rstrip(".!?").split()
        if not words:
            continue
        pattern = r"(?<![A-Za-z0-9])" + r"\s+".join(re.escape(w) for w in words) + r"(?![A-Za-z0-9])"
        text = re.sub(pattern, " ", text, flags=re.IGNORECASE)
    return text


def _named_letters(text: str, valid: str) -> list[str]:
    """The letters the text names as options, in order. A capital letter counts when a
    naming word precedes it ("option E", "answer is B"), or, for letters in range, when it
    stands before punctuation or the end of a line, after a joining word, or before a word
    that follows only an option's letter. A lower-case letter counts only after a naming word
    and before punctuation or the end ("answer: b"), never "the answer is a guess"."""
    named = []
    for match in _LETTER.finditer(text):
        letter = match.group(1)
        before, after = text[: match.start()], text[match.end() :]
        naming = bool(_NAMING.search(before))
        if letter.islower():
            if naming and letter.upper() in valid and _PUNCTUATION_AFTER.match(after):
                named.append(letter.upper())
            continue
        if letter not in valid:
            if naming:
                named.append(letter)  # an option out of range, named as one
            continue
        if (
            naming
            or _PUNCTUATION_AFTER.match(after)
            or (letter != "I" and (_JOINED_BEFORE.search(before) or _WORD_AFTER.match(after)))
        ):
            named.append(letter)
    return named


def read_choice(text: str, candidates: Sequence[str]) -> ChoiceReading:
    """Which candidate the completion chose, if it names exactly one.

    Read, in this order: the whole answer is a letter (``B``, ``(B)``, ``B.``, ``**B**``); the
    whole answer is one candidate's text; else every letter the answer names as an option
    (:func:`_named_letters`, with the candidates' own texts blanked out first). One letter in
    range, however often it is restated ("A. A is correct"), is the choice; two or more
    different letters ("A. Buy flour B. Mix", "A or B", "The answer is A, but B could also
    be") are ambiguous; none, or only a letter out of range, is unparseable."""
    if not isinstance(text, str):
        return ChoiceReading(UNPARSEABLE)
    valid = LETTERS[: len(candidates)]
    cleaned = re.sub(r"[*_`]+", "", text).strip()
    whole = re.fullmatch(r"\(?([A-Za-z])\)?[.):]?", cleaned)
    if whole:
        letter = whole.group(1).upper()
        return ChoiceReading(OK, valid.index(letter)) if letter in valid else ChoiceReading(UNPARSEABLE)
    target = normalise_text(cleaned)
    same_text = [i for i, candidate in enumerate(candidates) if target and normalise_text(candidate) == target]
    if len(same_text) == 1:
        return ChoiceReading(OK, same_text[0])
    named = sorted(set(_named_letters(_mask_candidates(cleaned, candidates), valid)))
    if len(named) > 1:
        return ChoiceReading(AMBIGUOUS, named=tuple(named))
    if len(named) == 1 and named[0] in valid:
        return ChoiceReading(OK, valid.index(named[0]))
    return ChoiceReading(UNPARSEABLE)


def parse_choice(text: str, candidates: Sequence[str]) -> int | None:
    """The 0-based candidate the completion chose, or None when it does not name exactly one
    (:func:`read_choice` says whether it named several or none)."""
    return read_choice(text, candidates).choice


@dataclass
class AccuracyTally:
    """Accuracy overall and per topic. Denominators, stated: ``accuracy`` = correct /
    readable (readable = answers naming exactly one candidate), with its 95 % Wilson
    interval (n = readable). ``answered`` = every item the model returned a usable completion
    for: readable + ``ambiguous`` (it names two or more candidates) + ``unparseable`` (it
    names none); the last two are neither right nor wrong, left out of accuracy and counted.
    Calls without a usable completion (truncated, refused, parse_failed, ...) are no answer:
    left out too and counted in ``n_unusable`` by outcome (``add_unusable``)."""

    correct: int = 0
    readable: int = 0
    ambiguous: int = 0
    unparseable: int = 0
    # topic -> [correct, readable, answered]
    by_topic: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0]))
    unusable: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def answered(self) -> int:
        return self.readable + self.ambiguous + self.unparseable

    def add(self, topic: str, outcome: str, correct: bool | None) -> None:
        """One usable answer: ``outcome`` ok (``correct`` says whether it was right),
        ambiguous or unparseable."""
        counts = self.by_topic[topic]
        counts[2] += 1
        if outcome == AMBIGUOUS:
            self.ambiguous += 1
        elif outcome == UNPARSEABLE or correct is None:
            self.unparseable += 1
        else:
            self.readable += 1
            counts[1] += 1
            if correct:
                self.correct += 1
                counts[0] += 1

    def add_unusable(self, outcome: str) -> None:
        """A call that returned no usable completion: left out of accuracy, counted."""
        self.unusable[outcome] += 1

    def result(self) -> dict[str, Any]:
        overall = share_estimate(self.correct, self.readable)
        return {
            "correct": self.correct,
            "readable": self.readable,
            "answered": self.answered,
            "ambiguous": self.ambiguous,
            "unparseable": self.unparseable,
            "accuracy": overall["share"],
            "ci95": overall["ci95"],
            "interval": overall["interval"],
            "n_unusable": sum(self.unusable.values()),
            "unusable": dict(sorted(self.unusable.items())),
            "by_topic": {
                topic: {
                    "correct": c,
                    "readable": n,
                    "answered": answered,
                    "accuracy": c / n if n else None,
                    "ci95": share_estimate(c, n)["ci95"],
                }
                for topic, (c, n, answered) in sorted(self.by_topic.items())
            },
        }
