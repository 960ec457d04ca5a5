"""The How2Mine heuristics stage (How2Everything §3.2(2) and App. B.3), without an LLM.

Two checks run in sequence on the extracted steps of a procedure:

1. **Step count.** Between ``min_steps`` and ``max_steps`` steps, both inclusive
   (defaults 5 and 15, ``mining.constants``). Every item of the list counts as a step,
   including an empty one.
2. **N-gram repetition.** Each step is normalised on its own and split into words; the
   2-, 3- and 4-grams are taken *within* each step (an n-gram never spans two steps)
   and pooled over all steps. For each n::

       rate_n = (total n-grams - distinct n-grams) / total n-grams    (0.0 when total is 0)

   i.e. the share of n-gram occurrences that repeat an n-gram already seen earlier in
   the procedure. The procedure is rejected when rate_2 >= 0.40, rate_3 >= 0.35 or
   rate_4 >= 0.30 (``REPETITION_THRESHOLDS``); "at the threshold" is a rejection.

Normalisation of one step (``normalisation``, default ``"reference"``, the rule the
released How2Mine data was filtered with):

* ``"reference"``: ``str.lower()``; every character that is neither a word character
  (``str.isalnum()`` or ``_``, i.e. Python's ``re`` word class on str) nor whitespace is
  replaced by a space ("salt/pepper" -> "salt pepper", "it's" -> "it s", "180°C" ->
  "180 c", "make_install" stays one word, a zero-width space or a combining accent
  splits a word); the result is split on whitespace. A list of fewer than two steps has
  no repetition (all rates 0.0).
* ``"nfkc_casefold"`` (the earlier rule, kept as an option): Unicode NFKC (full-width
  letters and ligatures become plain), ``str.casefold()`` ("Straße" equals "STRASSE"),
  every punctuation character (Unicode category P*, including ``_``) replaced by a space,
  symbols (category S: ``$ + = ° ©``) kept; split on whitespace.

An empty or punctuation-only step has no words and a one-word step has no n-grams.

The outcome is a :class:`PrefilterResult`. ``reason`` is ``""`` when the procedure
passed, otherwise ``"<check>: <detail>"`` naming the *first* check that failed, in the
order step count, 2-gram, 3-gram, 4-gram:

* ``too_few_steps: 3 < 5``
* ``too_many_steps: 16 > 15``
* ``repetition_2gram: 0.4000 >= 0.40`` (the rate with 4 decimals, the threshold with 2,
  or more decimals when a custom threshold needs them); likewise ``repetition_3gram``
  and ``repetition_4gram``.

The part before the colon is the stable *reason code* (:func:`reason_code`), used to
count rejections. The repetition rates are computed for every procedure, including
ones rejected for their step count, so they can be inspected when tuning.

Pure Python with no Django imports: usable from a pipeline stage, a Celery task or the
``mine_prefilter`` command alike (:func:`prefilter_file` streams a JSONL file)."""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.record_files import RecordError, file_kind
from core.record_output import atomic_output
from core.record_reader import iter_records
from mining.constants import (
    HEURISTICS_NORMALISATION,
    HEURISTICS_NORMALISATIONS,
    MAX_STEPS,
    MIN_STEPS,
    REPETITION_THRESHOLDS,
)

NGRAM_SIZES: tuple[int, ...] = (2, 3, 4)

TOO_FEW_STEPS = "too_few_steps"
TOO_MANY_STEPS = "too_many_steps"
REASON_CODES: tuple[str, ...] = (TOO_FEW_STEPS, TOO_MANY_STEPS) + tuple(f"repetition_{n}gram" for n in NGRAM_SIZES)

_WRITE_BUFFER_BYTES = 1 << 16


class _PunctuationToSpace(dict[int, int]):
    """A ``str.translate`` table mapping every Unicode punctuation character (general
    category P*) to a space and every other character to itself, filled in lazily as
    characters are met so that no table of all 1.1M code points has to be built."""

    def __missing__(self, codepoint: int) -> int:
        value = 0x20 if unicodedata.category(chr(codepoint)).startswith("P") else codepoint
        self[codepoint] = value
        return value


_PUNCTUATION_TO_SPACE = _PunctuationToSpace()


# Neither a word character nor whitespace (``re`` on str is Unicode-aware).
_NOT_WORD = re.compile(r"[^\w\s]+")


def _check_normalisation(normalisation: str) -> None:
    if normalisation not in HEURISTICS_NORMALISATIONS:
        raise ValueError(f"normalisation must be one of {', '.join(HEURISTICS_NORMALISATIONS)}, got {normalisation!r}")


def normalise_step(step: str, *, normalisation: str = HEURISTICS_NORMALISATION) -> list[str]:
    """The words of one step under ``normalisation`` (see the module docstring)."""
    if normalisation == "reference":
        return _NOT_WORD.sub(" ", step.lower()).split()
    _check_normalisation(normalisation)
    text = unicodedata.normalize("NFKC", step).casefold()
    return text.translate(_PUNCTUATION_TO_SPACE).split()


def repetition_rate(steps_words: Sequence[Sequence[str]], n: int) -> float:
    """rate_n over already-normalised steps: n-grams are taken within each step and pooled.

    Returns (occurrences beyond the first of each distinct n-gram) / (all occurrences),
    which equals (total - distinct) / total, or 0.0 when there is no n-gram at all."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return _rates(steps_words, (n,))[0]


def _rates(steps_words: Sequence[Sequence[str]], sizes: Sequence[int]) -> list[float]:
    # For speed the steps are joined into one sequence with a *different* integer between
    # every two steps (a word is a str, so it never equals a separator). An n-gram that
    # spans a boundary contains that boundary's separator at its own offset, so it is
    # unique and is simply subtracted from the distinct count: one zip and one set per n
    # instead of one per step.
    sequence: list[str | int] = []
    for index, words in enumerate(steps_words):
        if index:
            sequence.append(index)
        sequence.extend(words)
    rates = []
    for n in sizes:
        total = sum(len(words) - n + 1 for words in steps_words if len(words) >= n)
        if total == 0:
            rates.append(0.0)
            continue
        ngrams = len(sequence) - n + 1
        distinct = len(set(zip(*(sequence[i:] for i in range(n))))) - (ngrams - total)
        rates.append((total - distinct) / total)
    return rates


def repetition_rates(steps: Sequence[str], *, normalisation: str = HEURISTICS_NORMALISATION) -> dict[str, float]:
    """``{"2": rate_2, "3": rate_3, "4": rate_4}`` of raw (not yet normalised) steps.
    Under the reference normalisation a list of fewer than two steps has rates 0.0."""
    if normalisation == "reference" and len(steps) < 2:
        return {str(n): 0.0 for n in NGRAM_SIZES}
    words = [normalise_step(step, normalisation=normalisation) for step in steps]
    return dict(zip(map(str, NGRAM_SIZES), _rates(words, NGRAM_SIZES)))


def reason_code(reason: str) -> str:
    """The check named by a reason (``"repetition_3gram: ..."`` -> ``"repetition_3gram"``);
    ``""`` for a pass."""
    return reason.split(":", 1)[0]


def _threshold_text(value: float) -> str:
    text = f"{value:.2f}"
    return text if float(text) == value else f"{value:g}"


@dataclass(frozen=True)
class PrefilterResult:
    """The verdict of the heuristics stage on one procedure."""

    passed: bool
    reason: str
    repetition: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The ``prefilter`` object written by ``mine_prefilter``."""
        return {"passed": self.passed, "reason": self.reason, "repetition": dict(self.repetition)}


class HeuristicsFilter:
    """The heuristics stage as one object: configure once, then ``filter`` each record.

    ``filter(record)`` follows the pipeline-step convention ``(kept, reason)``;
    ``check(steps)`` returns the full :class:`PrefilterResult` with the rates."""

    name = "heuristics"

    def __init__(
        self,
        *,
        min_steps: int = MIN_STEPS,
        max_steps: int = MAX_STEPS,
        thresholds: Mapping[int, float] = REPETITION_THRESHOLDS,
        normalisation: str = HEURISTICS_NORMALISATION,
    ):
        _check_normalisation(normalisation)
        if isinstance(min_steps, bool) or not isinstance(min_steps, int) or min_steps < 0:
            raise ValueError(f"min_steps must be a whole number >= 0, got {min_steps!r}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < min_steps:
            raise ValueError(f"max_steps must be a whole number >= min_steps ({min_steps}), got {max_steps!r}")
        if set(thresholds) != set(NGRAM_SIZES):
            raise ValueError(f"thresholds must be given for n = {', '.join(map(str, NGRAM_SIZES))}")
        for n, value in thresholds.items():
            if not 0 < value <= 1:
                raise ValueError(f"the {n}-gram threshold must be in (0, 1], got {value!r}")
        self.min_steps = min_steps
        self.max_steps = max_steps
        self.thresholds = {n: float(thresholds[n]) for n in NGRAM_SIZES}
        self.normalisation = normalisation

    def check(self, steps: Sequence[str]) -> PrefilterResult:
        repetition = repetition_rates(steps, normalisation=self.normalisation)
        count = len(steps)
        if count < self.min_steps:
            return PrefilterResult(False, f"{TOO_FEW_STEPS}: {count} < {self.min_steps}", repetition)
        if count > self.max_steps:
            return PrefilterResult(False, f"{TOO_MANY_STEPS}: {count} > {self.max_steps}", repetition)
        for n in NGRAM_SIZES:
            rate, threshold = repetition[str(n)], self.thresholds[n]
            # Both sides are correctly rounded doubles, so a rate that is exactly the
            # threshold as a fraction (e.g. 6/15 and 0.40) compares equal and is rejected.
            if rate >= threshold:
                return PrefilterResult(
                    False, f"repetition_{n}gram: {rate:.4f} >= {_threshold_text(threshold)}", repetition
                )
        return PrefilterResult(True, "", repetition)

    def filter(self, record: Mapping[str, Any]) -> tuple[bool, str]:
        """``(True, "")`` to keep the record, ``(False, reason)`` to drop it."""
        result = self.check(record["steps"])
        return result.passed, result.reason


def prefilter(steps: Sequence[str], *, min_steps: int = MIN_STEPS, max_steps: int = MAX_STEPS) -> PrefilterResult:
    """Run the heuristics stage on one list of steps with the paper's thresholds."""
    return HeuristicsFilter(min_steps=min_steps, max_steps=max_steps).check(steps)


# --- Streaming a JSONL file (the ``mine_prefilter`` command) -------------------------


@dataclass
class PrefilterSummary:
    """Counts from one :func:`prefilter_file` pass; ``rejected`` is keyed by reason code."""

    records: int = 0
    passed: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    def rejected_in_order(self) -> list[tuple[str, int]]:
        """Non-zero rejection counts, in the order the checks run."""
        return [(code, self.rejected[code]) for code in REASON_CODES if self.rejected[code]]


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _steps_of(record: Mapping[str, Any], path: str | Path, position: str) -> list[str]:
    if "steps" not in record:
        raise RecordError(path, position, "steps", "missing; expected a list of strings")
    steps = record["steps"]
    if not isinstance(steps, list):
        raise RecordError(path, position, "steps", f"expected a list of strings, got {_kind(steps)}")
    for index, step in enumerate(steps, start=1):
        if not isinstance(step, str):
            raise RecordError(path, position, f"steps[{index}]", f"expected a string, got {_kind(step)}")
    return steps


def _require_jsonl(path: str | Path) -> None:
    if file_kind(path).format != "jsonl":
        raise RecordError(
            path, None, None, "expected a JSONL file (.jsonl, .ndjson or .json, optionally .gz/.zst/.bz2/.xz)"
        )


def prefilter_file(
    input_path: str | Path,
    output_path: str | Path,
    *,
    min_steps: int = MIN_STEPS,
    max_steps: int = MAX_STEPS,
    normalisation: str = HEURISTICS_NORMALISATION,
) -> PrefilterSummary:
    """Stream ``input_path`` (JSONL, plain or compressed) to ``output_path``, adding
    ``"prefilter": {"passed", "reason", "repetition"}`` to every record.

    Records are read and written one at a time, so memory does not grow with the file.
    A ``prefilter`` key already in a record is replaced. The output appears only when
    every record was processed: on a bad record a :class:`RecordError` naming the
    file, line and field is raised and ``output_path`` is left as it was."""
    stage = HeuristicsFilter(min_steps=min_steps, max_steps=max_steps, normalisation=normalisation)
    _require_jsonl(input_path)
    _require_jsonl(output_path)
    if not Path(input_path).is_file():
        raise RecordError(input_path, None, None, "no such file")
    summary = PrefilterSummary()
    with atomic_output(output_path) as handle:
        pending: list[str] = []
        pending_size = 0
        for position, record in iter_records(input_path):
            result = stage.check(_steps_of(record, input_path, position))
            summary.records += 1
            if result.passed:
                summary.passed += 1
            else:
                summary.rejected[reason_code(result.reason)] += 1
            record.pop("prefilter", None)
            record["prefilter"] = result.as_dict()
            line = json.dumps(record, ensure_ascii=False) + "\n"
            pending.append(line)
            pending_size += len(line)
            if pending_size >= _WRITE_BUFFER_BYTES:
                handle.write("".join(pending).encode("utf-8"))
                pending.clear()
                pending_size = 0
        if pending:
            handle.write("".join(pending).encode("utf-8"))
    return summary
