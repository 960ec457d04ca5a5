"""SCORE, the Structured Component-based REward, and its evaluation metrics. Pure Python.

"The paper" is Thoth / SciRecipe (Sun et al.): §3.3.2 (reward design), App. C (consistency
gate, order consistency, action anchors) and §4.2 (evaluation metrics). A step is a
``StepComponents`` triple (action, objects, parameters); a procedure is a sequence of them.
The order of the actions (order consistency, Order-S, Order-LCS, Order-Tau) is measured in
judging/score_order.py.

    SCORE = I_format * I_cons * r_scale * r_semantics                          Eq. (6)

Where the paper's text contradicts itself or leaves something open, the choice made is
written beside the code as "Choice:" and collected in docs/score.md."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from judging.components import ComponentsError, StepComponents, components_list, rule_based_steps
from judging.constants import (
    CONSISTENCY_TAU,
    PARAMETER_OBJECT_IOU_MIN,
    PARAMETER_WEIGHT,
    POSITION_DECAY_EXPONENT,
    SCORE_MAX,
    STEP_SCALE_MIN_THRESHOLD,
    STEP_SCALE_THRESHOLD_RATIO,
    STEP_WORD_LIMIT,
)
from judging.score_order import (
    OrderMode,
    order_consistency,
    order_lcs,
    order_lcs_eval,
    order_strict,
    order_tau,
)
from judging.sketch_fill import SketchFill, parse_sketch_fill
from judging.steps import parse_steps

# ---------------------------------------------------------------------------------------
# Normalisation (App. C.1: "case folding, unit standardization, removal of
# subscript/superscript variants")
# ---------------------------------------------------------------------------------------

_SPACE_AFTER_NUMBER = re.compile(r"(?<=\d)\s+(?=[^\W\d_]|[°%])")
_SPACE_AFTER_DEGREE = re.compile(r"°\s+")
_SUBWORD = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+|[%°]")


def normalize_text(text: str) -> str:
    """The App. C.1 normalisation, used for every comparison of strings in SCORE.

    Choice (the paper names the kinds of normalisation, not the rules): Unicode NFKC (so
    sub/superscripts become plain characters, "℃" becomes "°c", the micro sign becomes
    "μ"), case folding, "μ" written as "u" and "×" as "x", white space collapsed, and no
    space between a number and the unit or "°" after it ("4 °C" and "4°c" are both
    "4°c")."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = text.replace("μ", "u").replace("×", "x")
    text = " ".join(text.split())
    text = _SPACE_AFTER_NUMBER.sub("", text)
    return _SPACE_AFTER_DEGREE.sub("°", text)


def _actions(steps: Sequence[StepComponents]) -> list[str]:
    # Choice: actions are compared "by exact string" (App. C.3) after normalize_text, so
    # "Centrifuge" and "centrifuge" are the same action; the paper's prompt asks for
    # lowercase actions anyway (App. L).
    return [normalize_text(step.action) for step in steps]


# ---------------------------------------------------------------------------------------
# Gates (§3.3.2, App. C.1)
# ---------------------------------------------------------------------------------------


def step_tokens(step: StepComponents) -> list[str]:
    """T_i of Eq. (11): the action, each object and each parameter, normalised.

    Choice: a "token" is a whole element (the paper concatenates the declared action,
    object set and parameter set, then tests each token as a substring of the sentence)."""
    return [normalize_text(token) for token in (step.action, *step.objects, *step.parameters)]


def step_coverage(step: StepComponents, sentence: str) -> float:
    """cov_i of Eq. (11): the fraction of T_i that are substrings of norm(<orc>_i)."""
    tokens = step_tokens(step)
    sentence_norm = normalize_text(sentence)
    return sum(1 for token in tokens if token in sentence_norm) / len(tokens)


@dataclass(frozen=True)
class ConsistencyCheck:
    """The consistency gate's verdict, with the reason when it fails."""

    ok: bool
    coverages: tuple[float, ...]
    problem: str | None


def consistency_check(parsed: SketchFill, tau: float = CONSISTENCY_TAU) -> ConsistencyCheck:
    """The consistency gate I_cons of Eq. (12).

    Choice: Eq. (12) writes "N̂ = N" and calls them the step counts of the generated and
    reference protocols, but a gate requiring the gold count would make the step-scale
    reward f(d) always 1 (d would always be 0) and the text around it says the number of
    steps in <key> must match <orc>. We read N̂ and N as the step counts of <key> and
    <orc>. "Consecutive numbering covering 1 through N" is read as: the <key> steps are
    numbered 1, 2, ..., N in this order, and so are the <orc> steps; <key> step i is
    compared with <orc> step i."""
    key_numbers = [step.number for step in parsed.key_steps]
    orc_numbers = [step.number for step in parsed.orc_steps]
    if not key_numbers:
        return ConsistencyCheck(False, (), "<key> has no readable steps")
    if len(key_numbers) != len(orc_numbers):
        return ConsistencyCheck(False, (), f"<key> has {len(key_numbers)} steps and <orc> has {len(orc_numbers)}")
    for section, numbers in (("key", key_numbers), ("orc", orc_numbers)):
        expected = list(range(1, len(numbers) + 1))
        if numbers != expected:
            return ConsistencyCheck(False, (), f"<{section}> steps are numbered {numbers}, expected {expected}")
    coverages = tuple(step_coverage(key.components, orc.text) for key, orc in zip(parsed.key_steps, parsed.orc_steps))
    worst = min(range(len(coverages)), key=lambda index: coverages[index])
    if coverages[worst] < tau:
        return ConsistencyCheck(False, coverages, f"Step {worst + 1}: coverage {coverages[worst]:.3f} < {tau}")
    return ConsistencyCheck(True, coverages, None)


# ---------------------------------------------------------------------------------------
# Step scale (§3.3.2, Eq. (3))
# ---------------------------------------------------------------------------------------


def step_threshold(n_gold: int) -> int:
    """M = max(1, floor(0.6 * N_gold))."""
    return max(STEP_SCALE_MIN_THRESHOLD, math.floor(STEP_SCALE_THRESHOLD_RATIO * n_gold))


def step_count_factor(n_pred: int, n_gold: int) -> float:
    """f(d) = cos(pi * d / (2M)) if d < M else 0, with d = |N_pred - N_gold|."""
    d = abs(n_pred - n_gold)
    m = step_threshold(n_gold)
    return math.cos(math.pi * d / (2 * m)) if d < m else 0.0


def mean_words_per_step(texts: Sequence[str]) -> float:
    """L̄: the mean number of white-space separated words per step; 0 for no steps.

    Choice: §3.3.2 says "average text length per step" in one sentence and "average word
    length per step" in another; we count words, as L = 30 only makes sense for words. The
    text of a step is its <orc> sentence for a Sketch-and-Fill answer, and the words of
    its triple (``StepComponents.text``) when only triples are given."""
    if not texts:
        return 0.0
    return sum(len(text.split()) for text in texts) / len(texts)


def verbosity_factor(mean_words: float, limit: int = STEP_WORD_LIMIT) -> float:
    """g(L̄) = 1 if L̄ <= L else L̄ / L."""
    return 1.0 if mean_words <= limit else mean_words / limit


def step_scale(n_pred: int, n_gold: int, mean_words: float) -> float:
    """r_scale = f(|N_pred - N_gold|) / g(L̄)."""
    return step_count_factor(n_pred, n_gold) / verbosity_factor(mean_words)


# ---------------------------------------------------------------------------------------
# Action anchors (App. C.3)
# ---------------------------------------------------------------------------------------


def action_anchors(pred_actions: Sequence[str], gold_actions: Sequence[str]) -> list[tuple[int, int]]:
    """W: greedy, monotone, first-come-first-match alignment, as 1-based (i, j) pairs.

    Each predicted action takes the earliest gold index after the previous match with the
    same action; if there is none it stays unmatched and the search point does not move."""
    anchors: list[tuple[int, int]] = []
    after = 0  # gold indices < after are used up (0-based)
    for i, action in enumerate(pred_actions, start=1):
        for j in range(after, len(gold_actions)):
            if gold_actions[j] == action:
                anchors.append((i, j + 1))
                after = j + 1
                break
    return anchors


# ---------------------------------------------------------------------------------------
# Semantic consistency (§3.3.2 b), Eq. (4)-(5))
# ---------------------------------------------------------------------------------------


def _iou(first: set[str], second: set[str]) -> float:
    union = first | second
    # Choice: two empty sets agree (1.0), as Eq. (4) says for parameters; Eq. (4) gives
    # no case for objects, and we use the same rule.
    return len(first & second) / len(union) if union else 1.0


def object_iou(pred_objects: Sequence[str], gold_objects: Sequence[str]) -> float:
    """Obj(i, j) of Eq. (4): IoU of the normalised object sets.

    Choice: §3.3.2 mentions "subword-based similarity used as compensation when objects
    differ", but Eq. (4) is a plain IoU and no compensation formula is given; we use
    Eq. (4) as written."""
    return _iou({normalize_text(o) for o in pred_objects}, {normalize_text(o) for o in gold_objects})


def subwords(strings: Sequence[str]) -> set[str]:
    """K(·) of Eq. (4): the sub-words of the normalised strings.

    Choice: the paper does not define K; a sub-word is a run of digits (with decimal
    point or comma), a run of letters, or one of "%" and "°", so "37°c" gives
    {"37", "°", "c"} and "500xg" gives {"500", "xg"}."""
    found: set[str] = set()
    for text in strings:
        found.update(_SUBWORD.findall(normalize_text(text)))
    return found


def parameter_similarity(pred_parameters: Sequence[str], gold_parameters: Sequence[str], objects_iou: float) -> float:
    """Par(i, j) of Eq. (4), counted only when Obj(i, j) >= 0.5 (else 0): 1 when both
    parameter lists are empty, 0 when exactly one is, else the IoU of their sub-words."""
    if objects_iou < PARAMETER_OBJECT_IOU_MIN:
        return 0.0
    if not pred_parameters and not gold_parameters:
        return 1.0
    if not pred_parameters or not gold_parameters:
        return 0.0
    return _iou(subwords(pred_parameters), subwords(gold_parameters))


def position_decay(i: int, j: int, n_gold: int) -> float:
    """m_ij = max(0, 1 - (|i - j| / D) ** lambda), D = the number of gold steps."""
    if n_gold < 1:
        raise ValueError("the reference has no steps")
    # A float power of a non-negative float is a float (typeshed types float ** float as Any).
    decay: float = (abs(i - j) / n_gold) ** POSITION_DECAY_EXPONENT
    return max(0.0, 1.0 - decay)


def semantic_consistency(
    pred_steps: Sequence[StepComponents],
    gold_steps: Sequence[StepComponents],
    anchors: Sequence[tuple[int, int]] | None = None,
) -> float:
    """(1/|W|) * sum over W of m_ij * (Obj(i, j) + 1/2 * Par(i, j)), in [0, 1.5].

    This is Semantic-A (§4.2: "corresponds to the semantic consistency score described in
    Section 3.3.2"). Choice: with no anchors (|W| = 0) it is 0."""
    if anchors is None:
        anchors = action_anchors(_actions(pred_steps), _actions(gold_steps))
    if not anchors:
        return 0.0
    total = 0.0
    for i, j in anchors:
        pred, gold = pred_steps[i - 1], gold_steps[j - 1]
        objects = object_iou(pred.objects, gold.objects)
        parameters = parameter_similarity(pred.parameters, gold.parameters, objects)
        total += position_decay(i, j, len(gold_steps)) * (objects + PARAMETER_WEIGHT * parameters)
    return total / len(anchors)


def step_semantics(
    pred_steps: Sequence[StepComponents],
    gold_steps: Sequence[StepComponents],
    order_mode: OrderMode = "strict",
) -> float:
    """r_semantics of Eq. (5) = Order(â, a*) + semantic consistency, in [0, 2.5].

    Choice: Eq. (5) adds the two terms (App. J.1.2's chosen "S-S-P": strict order, sum of
    order and semantics, product with the step scale), so SCORE ranges over [0, 2.5]
    although App. J.1.3 (Table 26) labels the default range "[0, 1]"; we keep Eq. (5)."""
    pred_actions, gold_actions = _actions(pred_steps), _actions(gold_steps)
    return order_consistency(pred_actions, gold_actions, order_mode) + semantic_consistency(pred_steps, gold_steps)


# ---------------------------------------------------------------------------------------
# Evaluation metrics (§4.2; the order metrics are in judging/score_order.py)
# ---------------------------------------------------------------------------------------


def step_match(n_pred: int, n_gold: int) -> int:
    """Step-M, Eq. (7): 1 when the step counts are equal."""
    return int(n_pred == n_gold)


# ---------------------------------------------------------------------------------------
# Everything for one example
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreResult:
    """SCORE and its parts for one prediction against its reference.

    ``format_ok`` / ``consistency_ok`` are None when the prediction is given as triples
    (there is no Sketch-and-Fill text to check; the gates count as passed). When the
    format gate fails there are no steps to measure and every part is None; when only the
    consistency gate fails the parts are measured on the <key> steps and ``score`` is 0."""

    format_ok: bool | None
    consistency_ok: bool | None
    r_scale: float | None
    order_strict: int | None
    order_lcs: float | None
    semantic: float | None
    score: float
    step_m: int | None
    order_lcs_eval: float | None
    order_tau: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_steps(
    pred_steps: Sequence[StepComponents],
    gold_steps: Sequence[StepComponents],
    *,
    step_texts: Sequence[str] | None = None,
    format_ok: bool | None = None,
    consistency_ok: bool | None = None,
    order_mode: OrderMode = "strict",
) -> ScoreResult:
    """SCORE (Eq. (6)) and the §4.2 metrics of predicted triples against gold triples.

    ``step_texts`` are the predicted steps' sentences for L̄ (the <orc> sentences); when
    absent, each triple's own words are counted."""
    if not gold_steps:
        raise ValueError("the reference has no steps")
    pred_actions, gold_actions = _actions(pred_steps), _actions(gold_steps)
    texts = step_texts if step_texts is not None else [step.text() for step in pred_steps]
    r_scale = step_scale(len(pred_steps), len(gold_steps), mean_words_per_step(texts))
    semantic = semantic_consistency(pred_steps, gold_steps)
    r_semantics = order_consistency(pred_actions, gold_actions, order_mode) + semantic
    gates = int(format_ok is not False) * int(consistency_ok is not False)
    return ScoreResult(
        format_ok=format_ok,
        consistency_ok=consistency_ok,
        r_scale=r_scale,
        order_strict=order_strict(pred_actions, gold_actions),
        order_lcs=order_lcs(pred_actions, gold_actions),
        semantic=semantic,
        score=gates * r_scale * r_semantics,
        step_m=step_match(len(pred_steps), len(gold_steps)),
        order_lcs_eval=order_lcs_eval(pred_actions, gold_actions),
        order_tau=order_tau(pred_actions, gold_actions),
    )


def score_completion(
    completion: str, gold_steps: Sequence[StepComponents], order_mode: OrderMode = "strict"
) -> ScoreResult:
    """SCORE of a Sketch-and-Fill answer: both gates, then ``score_steps`` on its <key>
    steps with its <orc> sentences for L̄."""
    parsed = parse_sketch_fill(completion)
    if not parsed.format_ok:
        return ScoreResult(False, None, None, None, None, None, 0.0, None, None, None)
    consistency = consistency_check(parsed)
    return score_steps(
        [step.components for step in parsed.key_steps],
        gold_steps,
        step_texts=[step.text for step in parsed.orc_steps],
        format_ok=True,
        consistency_ok=consistency.ok,
        order_mode=order_mode,
    )


def score_reward(reference_steps: Sequence[str], completion: str) -> float | None:
    """SCORE / SCORE_MAX, in [0, 1], of a completion against plain reference steps, offline:
    the reference is read by the rule-based components. A completion with a ``<key>``
    section is read as Sketch-and-Fill (both gates apply); any other completion is parsed
    into steps as How2Bench generations are (judging/steps.py) and read by the rule. None
    when a reference step has no word to read."""
    gold = rule_based_steps(reference_steps)
    if not gold:
        return None
    if "<key>" in completion.lower():
        return score_completion(completion, gold).score / SCORE_MAX
    pred = rule_based_steps(parse_steps(completion))
    return None if pred is None else score_steps(pred, gold).score / SCORE_MAX


# ---------------------------------------------------------------------------------------
# Input records of the score_metric command
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreInput:
    """One input line: the gold triples and either predicted triples or a completion."""

    gold: tuple[StepComponents, ...]
    pred: tuple[StepComponents, ...] | None
    completion: str | None

    def result(self) -> ScoreResult:
        if self.completion is not None:
            return score_completion(self.completion, self.gold)
        return score_steps(self.pred or (), self.gold)


def score_input(record: dict[str, Any]) -> ScoreInput:
    """Check one input record; ``ComponentsError.field`` names the wrong field
    (``gold[2].objects``). ``gold`` is a non-empty list of triples; exactly one of ``pred``
    (a list of triples, possibly empty) and ``completion`` (a string) is given (null
    counts as absent)."""
    if "gold" not in record:
        raise ComponentsError("gold", "missing (the reference steps as action/objects/parameters)")
    gold = components_list(record["gold"], "gold")
    if not gold:
        raise ComponentsError("gold", "expected at least one step, got an empty list")
    pred_value, completion = record.get("pred"), record.get("completion")
    if pred_value is not None and completion is not None:
        raise ComponentsError("pred", "give pred or completion, not both")
    if pred_value is None and completion is None:
        raise ComponentsError(
            "pred", "missing: give pred (steps as action/objects/parameters) or completion (Sketch-and-Fill text)"
        )
    if completion is not None and not isinstance(completion, str):
        raise ComponentsError("completion", f"expected a string, got {type(completion).__name__}")
    pred = components_list(pred_value, "pred") if pred_value is not None else None
    return ScoreInput(gold=gold, pred=pred, completion=completion)
