"""Metrics beside How2Score: formatting proxies, lengths and the RL rewards. Pure Python.

* Formatting proxies (How2Everything App. D.3): step-count mismatch, duplicate steps,
  duplicate n-gram rate.
* Length (§5, App. D.5, E.4): token length of a procedure, generated vs. reference.
* RL rewards (App. E.4): the step-format verifier and the reference-calibrated length
  reward.

Per-example values come from ``record_metrics``; ``MetricsSummary`` averages them over a
set of examples. docs/metrics.md states every formula and denominator."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.record_files import RecordError
from judging.constants import (
    DUP_NGRAM_ORDERS,
    LENGTH_REWARD_ALPHA,
    LENGTH_REWARD_DECAY_SPAN,
    LENGTH_REWARD_TOLERANCE,
)
from judging.steps import parse_completion
from judging.tokens import procedure_tokens
from mining.procedure_records import NO_TOPIC

# ---------------------------------------------------------------------------------------
# Formatting proxies (App. D.3)
# ---------------------------------------------------------------------------------------


def step_count_mismatch(predicted_steps: Sequence[str], reference_steps: Sequence[str]) -> bool:
    """True when the generation has a different number of steps than the reference."""
    return len(predicted_steps) != len(reference_steps)


def has_duplicate_step(steps: Sequence[str]) -> bool:
    """True when some step string occurs more than once, verbatim: |set(S)| != |S|."""
    return len(set(steps)) != len(steps)


def ngram_repetition_rate(steps: Sequence[str], n: int) -> float:
    """Sum over distinct n-grams g of max(0, c_g - 1), divided by the number of n-grams.

    The steps are joined with spaces and split on whitespace; the n-grams are the
    ``len(words) - n + 1`` windows of n consecutive words. 0.0 when there are none."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    words = " ".join(steps).split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0.0
    repeated = sum(count - 1 for count in Counter(grams).values() if count > 1)
    return repeated / len(grams)


def dup_ngram_rate(steps: Sequence[str], orders: Sequence[int] = DUP_NGRAM_ORDERS) -> float:
    """The unweighted mean of ``ngram_repetition_rate`` over the n-gram orders (1..4)."""
    if not orders:
        raise ValueError("at least one n-gram order is needed")
    return sum(ngram_repetition_rate(steps, n) for n in orders) / len(orders)


# ---------------------------------------------------------------------------------------
# RL rewards (App. E.4)
# ---------------------------------------------------------------------------------------


def numbering_is_valid(numbers: Sequence[int], expected_steps: int | None = None) -> bool:
    """True when ``numbers`` is 1, 2, ..., k with k >= 1 and, if given, k == expected."""
    if not numbers or list(numbers) != list(range(1, len(numbers) + 1)):
        return False
    return expected_steps is None or len(numbers) == expected_steps


def step_format_reward(completion: str, expected_steps: int | None = None) -> int:
    """The step-format verifier: 1 or 0.

    1 when the final answer (reasoning removed, the inside of ``<answer>`` kept, as in
    step parsing) contains a numbered list whose item numbers are 1, 2, 3, ... with no
    gap, repeat or restart and, when ``expected_steps`` is given, exactly that many items.
    Text before, between and after the items is allowed. A completion with no numbered
    item gets 0."""
    parsed = parse_completion(completion)
    return int(numbering_is_valid(parsed.numbers, expected_steps))


def steps_format_reward(steps: Sequence[str], expected_steps: int | None = None) -> int:
    """The verifier for steps that were parsed elsewhere (no raw completion to read).

    The steps are taken as the list numbered 1..k, so this is 1 exactly when there is at
    least one step and, when ``expected_steps`` is given, k == expected_steps."""
    return int(numbering_is_valid(range(1, len(steps) + 1), expected_steps))


def length_ratio(gen_tokens: int, ref_tokens: int) -> float:
    """r = |gen| / |ref| in tokens."""
    if ref_tokens <= 0:
        raise ValueError(f"the reference must have at least one token, got {ref_tokens}")
    if gen_tokens < 0:
        raise ValueError(f"a token count cannot be negative, got {gen_tokens}")
    return gen_tokens / ref_tokens


def length_reward_from_ratio(ratio: float) -> float:
    """1 when |r - 1| <= tau, else exp(-alpha * (|r - 1| - tau) / (1 - tau))."""
    if ratio < 0 or math.isnan(ratio):
        raise ValueError(f"a length ratio must be a non-negative number, got {ratio}")
    distance = abs(ratio - 1.0)
    if distance <= LENGTH_REWARD_TOLERANCE:
        return 1.0
    return math.exp(-LENGTH_REWARD_ALPHA * (distance - LENGTH_REWARD_TOLERANCE) / LENGTH_REWARD_DECAY_SPAN)


def length_reward(gen_tokens: int, ref_tokens: int) -> float:
    """The reference-calibrated length reward for token counts |gen| and |ref|."""
    return length_reward_from_ratio(length_ratio(gen_tokens, ref_tokens))


# ---------------------------------------------------------------------------------------
# Per example and over a set of examples
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordMetrics:
    """Every metric of one example (one generation against its reference)."""

    predicted_steps: tuple[str, ...]
    n_pred: int
    n_ref: int
    gen_tokens: int
    ref_tokens: int
    dup_step: bool
    dup_ngram_rate: float
    format_reward: int
    length_reward: float

    @property
    def step_count_mismatch(self) -> bool:
        return self.n_pred != self.n_ref


def record_metrics(
    *,
    reference_steps: Sequence[str],
    predicted_steps: Sequence[str] | None = None,
    completion: str | None = None,
) -> RecordMetrics:
    """Metrics of one example.

    The generation is ``predicted_steps`` when given, else the steps parsed from
    ``completion``. The format reward reads ``completion`` when there is one (the raw
    answer is what the verifier checks), else ``steps_format_reward`` of the steps; the
    expected count is the reference's step count, which the prompt asks for."""
    if predicted_steps is not None:
        steps = tuple(predicted_steps)
    elif completion is not None:
        steps = tuple(parse_completion(completion).steps)
    else:
        raise ValueError("give predicted_steps or a completion")
    if not reference_steps:
        raise ValueError("the reference has no steps")
    n_ref = len(reference_steps)
    if completion is not None:
        format_reward = step_format_reward(completion, n_ref)
    else:
        format_reward = steps_format_reward(steps, n_ref)
    gen_tokens = procedure_tokens(steps)
    ref_tokens = procedure_tokens(reference_steps)
    return RecordMetrics(
        predicted_steps=steps,
        n_pred=len(steps),
        n_ref=n_ref,
        gen_tokens=gen_tokens,
        ref_tokens=ref_tokens,
        dup_step=has_duplicate_step(steps),
        dup_ngram_rate=dup_ngram_rate(steps),
        format_reward=format_reward,
        length_reward=length_reward(gen_tokens, ref_tokens),
    )


class MetricsSummary:
    """Means over examples, accumulated one example at a time (memory stays flat).

    Rates and rewards are means over examples, as fractions. ``gen_ref_ratio`` is the
    ratio of the two averages (total generated tokens / total reference tokens), as in
    the paper's Table 12, not the mean of per-example ratios."""

    def __init__(self) -> None:
        self.n = 0
        self._mismatch = 0
        self._dup_step = 0
        self._dup_ngram = 0.0
        self._gen_tokens = 0
        self._ref_tokens = 0
        self._format = 0
        self._length = 0.0

    def add(self, metrics: RecordMetrics) -> None:
        self.n += 1
        self._mismatch += int(metrics.step_count_mismatch)
        self._dup_step += int(metrics.dup_step)
        self._dup_ngram += metrics.dup_ngram_rate
        self._gen_tokens += metrics.gen_tokens
        self._ref_tokens += metrics.ref_tokens
        self._format += metrics.format_reward
        self._length += metrics.length_reward

    def result(self) -> dict[str, Any]:
        """The summary object of ``bench_metrics``; every value but ``n`` is None when n = 0."""
        n = self.n
        if n == 0:
            keys = (
                "step_count_mismatch",
                "dup_step_rate",
                "dup_ngram_rate",
                "avg_gen_tokens",
                "avg_ref_tokens",
                "gen_ref_ratio",
                "format_reward",
                "length_reward",
            )
            return {"n": 0, **{key: None for key in keys}}
        return {
            "n": n,
            "step_count_mismatch": self._mismatch / n,
            "dup_step_rate": self._dup_step / n,
            "dup_ngram_rate": self._dup_ngram / n,
            "avg_gen_tokens": self._gen_tokens / n,
            "avg_ref_tokens": self._ref_tokens / n,
            "gen_ref_ratio": self._gen_tokens / self._ref_tokens if self._ref_tokens else None,
            "format_reward": self._format / n,
            "length_reward": self._length / n,
        }


def summarize(records: Sequence[RecordMetrics]) -> dict[str, Any]:
    """``MetricsSummary`` over a list of examples."""
    summary = MetricsSummary()
    for metrics in records:
        summary.add(metrics)
    return summary.result()


# ---------------------------------------------------------------------------------------
# Input records of bench_metrics (and the identity fields bench_aggregate shares)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenerationRecord:
    """One input line of ``bench_metrics``: a generation and its reference."""

    source_example_id: str | int
    topic: str
    reference_steps: tuple[str, ...]
    predicted_steps: tuple[str, ...] | None
    completion: str | None

    def metrics(self) -> RecordMetrics:
        return record_metrics(
            reference_steps=self.reference_steps,
            predicted_steps=self.predicted_steps,
            completion=self.completion,
        )


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def example_identity(record: dict[str, Any]) -> tuple[str | int, str]:
    """``(source_example_id, topic)`` of an input record, checked; an empty or absent
    topic is ``NO_TOPIC`` ("none"), where procedure imports put topic-less records too."""
    if "source_example_id" not in record:
        raise RecordError(None, None, "source_example_id", "missing")
    example_id = record["source_example_id"]
    if isinstance(example_id, bool) or not isinstance(example_id, (str, int)):
        raise RecordError(None, None, "source_example_id", f"expected a string, got {_type_name(example_id)}")
    topic = record.get("topic")
    if topic is None or (isinstance(topic, str) and not topic.strip()):
        return example_id, NO_TOPIC  # a file made without topics (the reference's no-topics mode)
    if not isinstance(topic, str):
        raise RecordError(None, None, "topic", f"expected a string, got {topic!r}")
    return example_id, topic


def _string_list(record: dict[str, Any], field: str, *, non_empty: bool) -> tuple[str, ...]:
    value = record[field]
    if not isinstance(value, list):
        raise RecordError(None, None, field, f"expected a list of strings, got {_type_name(value)}")
    if non_empty and not value:
        raise RecordError(None, None, field, "expected at least one step, got an empty list")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise RecordError(None, None, f"{field}[{index}]", f"expected a string, got {_type_name(item)}")
        if non_empty and not item.strip():
            raise RecordError(None, None, f"{field}[{index}]", "expected a non-empty step")
    return tuple(value)


def generation_record(record: dict[str, Any]) -> GenerationRecord:
    """Check one ``bench_metrics`` input record and return it typed.

    Required: ``source_example_id``, ``topic``, ``steps`` (the reference, a non-empty list
    of non-empty strings) and either ``predicted_steps`` (a list of strings) or
    ``model_completion`` (a string, parsed into steps when ``predicted_steps`` is absent
    or null)."""
    example_id, topic = example_identity(record)
    if "steps" not in record:
        raise RecordError(None, None, "steps", "missing (the reference steps)")
    reference = _string_list(record, "steps", non_empty=True)
    predicted = None
    if record.get("predicted_steps") is not None:
        predicted = _string_list(record, "predicted_steps", non_empty=False)
    completion = record.get("model_completion")
    if completion is not None and not isinstance(completion, str):
        raise RecordError(None, None, "model_completion", f"expected a string, got {_type_name(completion)}")
    if predicted is None and completion is None:
        raise RecordError(None, None, "predicted_steps", "missing: give predicted_steps or model_completion")
    return GenerationRecord(
        source_example_id=example_id,
        topic=topic,
        reference_steps=reference,
        predicted_steps=predicted,
        completion=completion,
    )
