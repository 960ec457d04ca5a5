"""The automatic signals of the metric-agreement report (docs/metric-agreement.md): what each
one claims (``SIGNAL_SPECS``, the direction it is read in, fixed before looking at any data)
and its value on one annotated item. Pure Python, no Django.

Every signal compares the generated steps (L2, the candidate) with the reference steps (L1),
except How2Score, which comes from the judges' stored verdicts (``judge_signals``). Values
are floats; a yes/no signal is 1.0 or 0.0; a signal that cannot be computed for an item is
absent (never a made-up number).

| key | what | from |
| --- | --- | --- |
| ``score`` | SCORE, 0-2.5 (Thoth/SciRecipe Eq. (6)) | judging/score_metric.py |
| ``score_r_scale`` | its step-scale factor r_scale, 0-1 (Eq. (3)) | idem |
| ``score_order`` | its order term, strict order 0 or 1 (Eq. (13)) | idem |
| ``score_semantics`` | its semantic term, 0-1.5 (Eq. (5)) | idem |
| ``rouge_l`` | ROUGE-L F-measure, 0-1 | rouge-score's tokenizer, LCS below |
| ``bleu`` | sentence BLEU, 0-100 | sacrebleu |
| ``length_ratio`` | o200k_base tokens of L2 / of L1 (How2Everything App. D.5) | judging/tokens.py |
| ``step_count_mismatch`` | 1 when L2 has a different number of steps than L1 (App. D.3) | judging/metrics.py |
| ``duplicate_step`` | 1 when some L2 step occurs twice verbatim (App. D.3) | idem |
| ``dup_ngram_rate`` | duplicate n-gram rate of L2, mean over n = 1..4 (App. D.3) | idem |

**ROUGE-L** is the F-measure of the longest common subsequence of the two token lists,
exactly as ``rouge_score.rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)`` scores the
steps joined by newlines: the package's own tokenizer (lowercase, runs of ``a-z0-9``, Porter
stemming of words longer than 3 characters; no NLTK data is needed) and its F-measure. Only
the LCS length is computed here, with the bit-parallel algorithm of Hyyrö (2004) instead of
the package's pure-Python dynamic-programming table: the same number (tests compare the two),
about 50 times faster, which a study of 3,000 items needs. Text outside ``a-z0-9`` (accented
letters, other scripts) is dropped by that tokenizer, as in ROUGE-1.5.5.

**BLEU** is ``sacrebleu``'s sentence BLEU (13a tokenizer, exponential smoothing, effective
order) of the generated steps joined by spaces against the reference joined by spaces."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from rouge_score import scoring
from rouge_score import tokenize as rouge_tokenize

from annotate.stats.records import HAS_FAILURE, NO_FAILURE, JudgmentRow
from judging.components import StepComponents, rule_based_steps
from judging.metrics import dup_ngram_rate, has_duplicate_step, length_ratio, step_count_mismatch
from judging.score_metric import score_steps
from judging.tokens import procedure_tokens

SCORE_SIGNALS = ("score", "score_r_scale", "score_order", "score_semantics")
TEXT_SIGNALS = ("rouge_l", "bleu", "length_ratio", "step_count_mismatch", "duplicate_step", "dup_ngram_rate")
ITEM_SIGNALS = SCORE_SIGNALS + TEXT_SIGNALS

JUDGE_PREFIX = "judge:"

Direction = Literal["has_failure", "no_failure"]

# Distinct (reference, candidate) pairs kept per process: a page rendered twice, or two
# studies sharing generations, compute each pair once.
_CACHE_SIZE = 65_536


class _MemoStemmer:
    """The Porter stemmer rouge-score uses (NLTK's default mode), remembering each word."""

    def __init__(self) -> None:
        # NLTK's package imports SciPy and scikit-learn: loaded with the first text signal,
        # not with every process that imports the URLs (issue 29: 1.1 s of each start).
        from nltk.stem import porter

        self.stem = lru_cache(maxsize=_CACHE_SIZE)(porter.PorterStemmer().stem)


@lru_cache(maxsize=1)
def _stemmer() -> _MemoStemmer:
    return _MemoStemmer()


@lru_cache(maxsize=1)
def _bleu() -> Any:  # sacrebleu.metrics.BLEU, imported on first use
    from sacrebleu.metrics import BLEU

    return BLEU(effective_order=True)


def rouge_tokens(text: str) -> list[str]:
    """rouge-score's tokens of ``text`` with Porter stemming (its ``use_stemmer=True``)."""
    # rouge_score has no type information: its tokenize gives a list of strings.
    tokens: list[str] = rouge_tokenize.tokenize(text, _stemmer())
    return tokens


def lcs_length(first: Sequence[str], second: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists, bit-parallel
    (Hyyrö 2004): one bit per position of ``first``; for each token of ``second``,
    V <- (V + (V & M)) | (V & ~M), where M marks the positions holding that token; the LCS
    length is the number of zero bits left in V."""
    if not first or not second:
        return 0
    masks: dict[str, int] = {}
    for position, token in enumerate(first):
        masks[token] = masks.get(token, 0) | (1 << position)
    full = (1 << len(first)) - 1
    v = full
    for token in second:
        match = masks.get(token, 0)
        u = v & match
        v = ((v + u) | (v - u)) & full
    return len(first) - v.bit_count()


def rouge_l(reference_steps: Sequence[str], candidate_steps: Sequence[str]) -> float:
    """ROUGE-L F-measure of the candidate against the reference (see the module text);
    0 when either side has no token, as in rouge-score."""
    target = rouge_tokens("\n".join(reference_steps))
    prediction = rouge_tokens("\n".join(candidate_steps))
    if not target or not prediction:
        return 0.0
    lcs = lcs_length(target, prediction)
    return float(scoring.fmeasure(lcs / len(prediction), lcs / len(target)))


def bleu(reference_steps: Sequence[str], candidate_steps: Sequence[str]) -> float:
    """sacrebleu's sentence BLEU (0-100) of the candidate against the reference."""
    return float(_bleu().sentence_score(" ".join(candidate_steps), [" ".join(reference_steps)]).score)


@lru_cache(maxsize=_CACHE_SIZE)
def _text_signals(reference: tuple[str, ...], candidate: tuple[str, ...]) -> Mapping[str, float]:
    values: dict[str, float] = {
        "rouge_l": rouge_l(reference, candidate),
        "bleu": bleu(reference, candidate),
        "step_count_mismatch": float(step_count_mismatch(candidate, reference)),
        "duplicate_step": float(has_duplicate_step(candidate)),
        "dup_ngram_rate": float(dup_ngram_rate(candidate)),
    }
    reference_tokens = procedure_tokens(reference)
    if reference_tokens > 0:
        values["length_ratio"] = length_ratio(procedure_tokens(candidate), reference_tokens)
    return MappingProxyType(values)


def text_signals(reference_steps: Sequence[str], candidate_steps: Sequence[str]) -> dict[str, float]:
    """ROUGE-L, BLEU, the length ratio and the formatting proxies of one item. Empty when
    the reference has no steps; ``length_ratio`` is absent when the reference has no token."""
    if not reference_steps:
        return {}
    return dict(_text_signals(tuple(reference_steps), tuple(candidate_steps)))


@lru_cache(maxsize=_CACHE_SIZE)
def rule_components(steps: tuple[str, ...]) -> tuple[StepComponents, ...] | None:
    """The rule-based components of a step list (judging/components.py), remembered: a
    reference generated by several models is read once."""
    return rule_based_steps(steps)


@lru_cache(maxsize=_CACHE_SIZE)
def _score_signals(gold: tuple[StepComponents, ...], pred: tuple[StepComponents, ...]) -> Mapping[str, float]:
    result = score_steps(pred, gold)
    values = {"score": result.score}
    for key, value in (
        ("score_r_scale", result.r_scale),
        ("score_order", result.order_strict),
        ("score_semantics", result.semantic),
    ):
        if value is not None:
            values[key] = float(value)
    return MappingProxyType(values)


def score_signals(gold: Sequence[StepComponents] | None, pred: Sequence[StepComponents] | None) -> dict[str, float]:
    """SCORE and its three parts (r_scale, strict order, semantics) of predicted triples
    against gold triples, as SCORE reads them (no Sketch-and-Fill text: both gates count as
    passed). Empty when either side has no components or the gold has no step."""
    if not gold or pred is None:
        return {}
    return dict(_score_signals(tuple(gold), tuple(pred)))


def item_signals(
    reference_steps: Sequence[str],
    candidate_steps: Sequence[str],
    *,
    gold: Sequence[StepComponents] | None = None,
    pred: Sequence[StepComponents] | None = None,
) -> tuple[dict[str, float], bool]:
    """Every reference-based signal of one item, and whether SCORE used the rule-based
    components. ``gold`` and ``pred`` are stored components (both or neither); without them
    both sides are read by the rule (judging/components.py)."""
    rule = gold is None or pred is None
    if rule:
        gold = rule_components(tuple(reference_steps))
        pred = rule_components(tuple(candidate_steps))
    return {**text_signals(reference_steps, candidate_steps), **score_signals(gold, pred)}, rule


# --------------------------------------------------------------------------- what each signal claims


@dataclass(frozen=True)
class SignalSpec:
    """One automatic signal and the a-priori direction it is read in: ``higher_means`` is
    the human label a higher value is taken to predict."""

    key: str
    label: str
    family: str
    higher_means: Direction
    why: str

    def as_dict(self) -> dict[str, str]:
        return {
            "key": self.key,
            "label": self.label,
            "family": self.family,
            "higher_means": self.higher_means,
            "why": self.why,
        }


# The orientation of every signal, fixed from what the signal claims to measure or from the
# papers, never from the data this report is computed on.
SIGNAL_SPECS: dict[str, SignalSpec] = {
    spec.key: spec
    for spec in (
        SignalSpec(
            "score",
            "SCORE",
            "SCORE",
            NO_FAILURE,
            "a structured reward: higher is closer to the reference; protocols with critical errors score "
            "lower (Thoth/SciRecipe App. I.5)",
        ),
        SignalSpec(
            "score_r_scale",
            "SCORE r_scale (step scale)",
            "SCORE",
            NO_FAILURE,
            "1 when the step count and verbosity match the reference, lower otherwise (Eq. (3))",
        ),
        SignalSpec(
            "score_order",
            "SCORE order (strict)",
            "SCORE",
            NO_FAILURE,
            "1 when the actions keep the reference's order (Eq. (13))",
        ),
        SignalSpec(
            "score_semantics",
            "SCORE semantics",
            "SCORE",
            NO_FAILURE,
            "object and parameter overlap of aligned steps (Eq. (5))",
        ),
        SignalSpec(
            "rouge_l",
            "ROUGE-L",
            "overlap",
            NO_FAILURE,
            "the conventional reading of an overlap metric: closer to the reference is better (the claim "
            "How2Everything §4 disputes)",
        ),
        SignalSpec(
            "bleu",
            "BLEU",
            "overlap",
            NO_FAILURE,
            "the conventional reading of an overlap metric: closer to the reference is better",
        ),
        SignalSpec(
            "length_ratio",
            "Length ratio (L2/L1 tokens)",
            "length",
            NO_FAILURE,
            "How2Everything App. D, Table 10: the odds of no_failure rise with the gen/ref token ratio for all "
            "seven models (OR 1.012-1.018 per +1 percentage point)",
        ),
        SignalSpec(
            "step_count_mismatch",
            "Step-count mismatch",
            "format",
            HAS_FAILURE,
            "a formatting failure: the prompt asks for exactly the reference's number of steps "
            "(How2Everything §5, App. D.3)",
        ),
        SignalSpec(
            "duplicate_step",
            "Duplicate step",
            "format",
            HAS_FAILURE,
            "a degenerate output: a step repeated verbatim (App. D.3)",
        ),
        SignalSpec(
            "dup_ngram_rate",
            "Duplicate n-gram rate",
            "format",
            HAS_FAILURE,
            "repetition within the output (App. D.3): more repetition, more likely broken",
        ),
    )
}


def judge_signal(judge: str) -> SignalSpec:
    """A judge's How2Score verdict as a signal: 1 for has_failure, 0 for no_failure."""
    return SignalSpec(
        f"{JUDGE_PREFIX}{judge}",
        f"How2Score · {judge}",
        "judge",
        HAS_FAILURE,
        "the judge's own verdict: has_failure (1) predicts a critical failure",
    )


def signal_spec(key: str) -> SignalSpec:
    """The spec of a signal key: a fixed signal or ``judge:<name>``."""
    if key.startswith(JUDGE_PREFIX):
        return judge_signal(key[len(JUDGE_PREFIX) :])
    try:
        return SIGNAL_SPECS[key]
    except KeyError:
        raise ValueError(f"unknown signal {key!r}; expected judge:<name> or one of {', '.join(SIGNAL_SPECS)}") from None


def judge_signals(judgments: Iterable[JudgmentRow]) -> dict[str, dict[str, float]]:
    """``judge:<name>`` -> item_id -> 1.0 (has_failure) or 0.0. Raises ``ValueError`` when a
    judge labels an item twice."""
    signals: dict[str, dict[str, float]] = {}
    for row in judgments:
        values = signals.setdefault(f"{JUDGE_PREFIX}{row.judge}", {})
        if row.item_id in values:
            raise ValueError(f"two judgments of item {row.item_id!r} by judge {row.judge!r}")
        values[row.item_id] = 1.0 if row.has_failure else 0.0
    return signals


# --------------------------------------------------------------------------- statistics


def failure_scores(values: Sequence[float] | npt.NDArray[np.float64], spec: SignalSpec) -> npt.NDArray[np.float64]:
    """The values turned so that higher means more likely has_failure (negated for a signal
    whose higher values mean no_failure)."""
    array = np.asarray(values, dtype=np.float64)
    return array if spec.higher_means == HAS_FAILURE else -array
