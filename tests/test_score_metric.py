"""SCORE (Thoth/SciRecipe §3.3.2, App. C, §4.2): every definition on hand-computed cases,
the paper's own worked examples, and each reading chosen where the paper contradicts
itself (docs/score.md)."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from scipy.stats import kendalltau

from judging.components import StepComponents
from judging.constants import (
    CONSISTENCY_TAU,
    PARAMETER_OBJECT_IOU_MIN,
    POSITION_DECAY_EXPONENT,
    SCORE_MAX,
    STEP_SCALE_THRESHOLD_RATIO,
    STEP_WORD_LIMIT,
)
from judging.score_metric import (
    action_anchors,
    consistency_check,
    mean_words_per_step,
    normalize_text,
    object_iou,
    parameter_similarity,
    position_decay,
    score_completion,
    score_steps,
    semantic_consistency,
    step_count_factor,
    step_coverage,
    step_match,
    step_scale,
    step_semantics,
    step_threshold,
    subwords,
    verbosity_factor,
)
from judging.score_order import (
    is_subsequence,
    lcs_length,
    order_consistency,
    order_lcs,
    order_lcs_eval,
    order_s,
    order_strict,
    order_tau,
    tau_pairs,
)
from judging.sketch_fill import parse_sketch_fill

GOLD_ACTIONS = ["harvest", "lyse", "centrifuge", "quantify"]


def step(action: str, objects: list[str] | None = None, parameters: list[str] | None = None) -> StepComponents:
    return StepComponents(action, tuple(objects or ()), tuple(parameters or ()))


def sketch_fill(steps: list[tuple[StepComponents, str]], numbers: list[int] | None = None) -> str:
    numbers = numbers or list(range(1, len(steps) + 1))
    key = "\n".join(
        f'Step {n}: {{"action": "{s.action}", "objects": {list(s.objects)}, "parameters": {list(s.parameters)}}}'.replace(
            "'", '"'
        )
        for n, (s, _) in zip(numbers, steps)
    )
    orc = "\n".join(f"Step {n}: {sentence}" for n, (_, sentence) in zip(numbers, steps))
    return f"<think>plan</think>\n<key>\n{key}\n</key>\n<orc>\n{orc}\n</orc>\n<note>careful</note>"


# ---------------------------------------------------------------------------------------
# Constants are the paper's
# ---------------------------------------------------------------------------------------


def test_constants_are_the_papers():
    # App. C.1 tau = 0.95; Eq. (3) M = max(1, floor(0.6 N)); §4.1 L = 30 and lambda = 1.5;
    # Eq. (4) parameters compared when Obj >= 0.5; Eq. (5) bounds SCORE by 1 + 1 + 1/2.
    assert CONSISTENCY_TAU == 0.95
    assert STEP_SCALE_THRESHOLD_RATIO == 0.6
    assert STEP_WORD_LIMIT == 30
    assert POSITION_DECAY_EXPONENT == 1.5
    assert PARAMETER_OBJECT_IOU_MIN == 0.5
    assert SCORE_MAX == 2.5


# ---------------------------------------------------------------------------------------
# The paper's worked examples (App. C.2, C.3)
# ---------------------------------------------------------------------------------------


def test_paper_example_omission_in_order_is_strict_1_and_lcs_three_quarters():
    pred = ["harvest", "lyse", "quantify"]
    assert order_strict(pred, GOLD_ACTIONS) == 1
    assert order_lcs(pred, GOLD_ACTIONS) == 0.75


def test_paper_example_swapped_pair_is_strict_0_and_lcs_three_quarters():
    pred = ["harvest", "centrifuge", "lyse", "quantify"]
    assert order_strict(pred, GOLD_ACTIONS) == 0
    assert order_lcs(pred, GOLD_ACTIONS) == 0.75


def test_paper_example_severe_misorder_is_lcs_one_half():
    assert order_lcs(["lyse", "harvest", "quantify", "centrifuge"], GOLD_ACTIONS) == 0.5


def test_paper_example_anchors():
    pred = ["harvest", "centrifuge", "lyse", "stain", "quantify"]
    assert action_anchors(pred, GOLD_ACTIONS) == [(1, 1), (2, 3), (5, 4)]


# ---------------------------------------------------------------------------------------
# Normalisation and the consistency gate (App. C.1)
# ---------------------------------------------------------------------------------------


def test_normalisation_folds_case_units_and_sub_superscripts():
    assert normalize_text("Incubate at 4 °C") == normalize_text("incubate at 4°c") == "incubate at 4°c"
    assert normalize_text("37 ℃") == "37°c"
    assert normalize_text("500 µl") == normalize_text("500 μL") == "500ul"
    assert normalize_text("5% CO₂") == "5% co2"
    assert normalize_text("1 cm²") == "1cm2"
    assert normalize_text("300 × g") == "300x g"


def test_coverage_counts_whole_elements_as_substrings():
    s = step("incubate", ["spheroids"], ["4% pfa", "10 min", "room temperature"])
    assert step_coverage(s, "Incubate the spheroids in 4% PFA for 10 min at room temperature.") == 1.0
    # "room temperature" is missing: 4 of 5 elements.
    assert step_coverage(s, "Incubate the spheroids in 4% PFA for 10 min.") == pytest.approx(4 / 5)


def test_consistency_gate_passes_a_faithful_answer():
    parsed = parse_sketch_fill(
        sketch_fill(
            [
                (step("wash", ["cells"], ["1x pbs", "twice"]), "Wash the cells with 1x PBS twice."),
                (step("centrifuge", ["cells"], ["367 xg", "10 min"]), "Centrifuge the cells at 367xg for 10 min."),
            ]
        )
    )
    check = consistency_check(parsed)
    assert check.ok and check.problem is None
    assert check.coverages == (1.0, 1.0)


def test_consistency_gate_fails_below_095_coverage_on_any_step():
    parsed = parse_sketch_fill(
        sketch_fill(
            [
                (step("wash", ["cells"]), "Wash the cells."),
                (
                    step("incubate", ["cells"], ["4% pfa", "10 min", "room temperature"]),
                    "Incubate the cells in 4% PFA for 10 min.",
                ),
            ]
        )
    )
    check = consistency_check(parsed)
    assert not check.ok
    assert check.problem == f"Step 2: coverage 0.800 < {CONSISTENCY_TAU}"


def test_consistency_gate_boundary_095_passes():
    # 20 elements, 19 covered: coverage 0.95 exactly meets the threshold (>=).
    params = [f"p{n}x" for n in range(18)]
    s = step("mix", ["bowl"], params)
    sentence = "Mix the bowl " + " ".join(params[:-1])
    parsed = parse_sketch_fill(sketch_fill([(s, sentence)]))
    check = consistency_check(parsed)
    assert check.coverages == (pytest.approx(19 / 20),)
    assert check.ok


def test_consistency_gate_requires_numbering_one_to_n():
    pairs = [(step("mix"), "Mix."), (step("stir"), "Stir.")]
    check = consistency_check(parse_sketch_fill(sketch_fill(pairs, numbers=[1, 3])))
    assert not check.ok
    assert check.problem == "<key> steps are numbered [1, 3], expected [1, 2]"


def test_consistency_gate_requires_as_many_orc_steps_as_key_steps():
    text = sketch_fill([(step("mix"), "Mix."), (step("stir"), "Stir.")]).replace("Step 2: Stir.\n", "")
    check = consistency_check(parse_sketch_fill(text))
    assert not check.ok
    assert check.problem == "<key> has 2 steps and <orc> has 1"


def test_consistency_gate_compares_key_with_orc_not_with_gold():
    # Choice (Eq. (12)): N̂ and N are the <key> and <orc> counts. A 2-step answer against a
    # 4-step reference passes the gate; the step-scale reward handles the count.
    text = sketch_fill(
        [(step("harvest", ["cells"]), "Harvest the cells."), (step("lyse", ["cells"]), "Lyse the cells.")]
    )
    result = score_completion(text, [step(a, ["cells"]) for a in GOLD_ACTIONS])
    assert result.format_ok is True and result.consistency_ok is True
    assert result.step_m == 0


# ---------------------------------------------------------------------------------------
# Step scale (Eq. (3))
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_gold, m", [(0, 1), (1, 1), (2, 1), (4, 2), (5, 3), (10, 6), (13, 7)])
def test_step_threshold_is_max_1_floor_06_n(n_gold, m):
    assert step_threshold(n_gold) == m


def test_step_count_factor_decays_by_cosine_and_drops_to_zero_at_m():
    # N_gold = 5 -> M = 3.
    assert step_count_factor(5, 5) == 1.0
    assert step_count_factor(6, 5) == pytest.approx(math.sqrt(3) / 2)  # cos(pi/6)
    assert step_count_factor(3, 5) == pytest.approx(0.5)  # d = 2: cos(pi/3)
    assert step_count_factor(8, 5) == 0.0  # d = M
    assert step_count_factor(1, 5) == 0.0  # d = 4 > M


def test_verbosity_factor_is_proportional_above_30_words():
    assert verbosity_factor(30) == 1.0
    assert verbosity_factor(12.5) == 1.0
    assert verbosity_factor(45) == 1.5


def test_mean_words_per_step():
    assert mean_words_per_step(["Mix the flour.", "Stir."]) == 2.0
    assert mean_words_per_step([]) == 0.0


def test_step_scale_divides_count_factor_by_verbosity():
    assert step_scale(6, 5, 45) == pytest.approx((math.sqrt(3) / 2) / 1.5)
    assert step_scale(5, 5, 10) == 1.0


# ---------------------------------------------------------------------------------------
# Order (Eq. (8), (9), (13)-(15))
# ---------------------------------------------------------------------------------------


def test_subsequence_keeps_order():
    assert is_subsequence(["a", "c"], ["a", "b", "c"])
    assert not is_subsequence(["c", "a"], ["a", "b", "c"])
    assert is_subsequence([], ["a"])
    assert not is_subsequence(["a", "a"], ["a"])


def test_strict_order_accepts_insertions_in_either_direction():
    # The prediction adds a step (gold is a subsequence of it): still 1.
    assert order_strict(["harvest", "wash", "lyse", "centrifuge", "quantify"], GOLD_ACTIONS) == 1
    assert order_strict(GOLD_ACTIONS, GOLD_ACTIONS) == 1
    # An insertion and an omission together: neither contains the other.
    assert order_strict(["harvest", "wash", "lyse", "quantify"], GOLD_ACTIONS) == 0


def test_lcs_length_by_hand():
    assert lcs_length(list("abcbdab"), list("bdcaba")) == 4
    assert lcs_length([], ["a"]) == 0
    assert lcs_length(["a", "b"], ["b", "a"]) == 1


def test_order_s_is_exact_equality_unlike_strict():
    pred = ["harvest", "lyse", "quantify"]
    assert order_s(pred, GOLD_ACTIONS) == 0
    assert order_strict(pred, GOLD_ACTIONS) == 1
    assert order_s(GOLD_ACTIONS, list(GOLD_ACTIONS)) == 1


def test_order_lcs_eval_is_2l_over_n_plus_m():
    # LCS 3, n = 3, m = 4: 6/7, against 3/4 for the reward's LCS/m.
    assert order_lcs_eval(["harvest", "lyse", "quantify"], GOLD_ACTIONS) == pytest.approx(6 / 7)
    assert order_lcs_eval([], []) == 0.0


def test_order_mode_chooses_strict_or_lcs():
    pred = ["harvest", "centrifuge", "lyse", "quantify"]
    assert order_consistency(pred, GOLD_ACTIONS, "strict") == 0.0
    assert order_consistency(pred, GOLD_ACTIONS, "lcs") == 0.75
    with pytest.raises(ValueError, match="unknown order mode"):
        order_consistency(pred, GOLD_ACTIONS, "loose")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Anchors and Order-Tau
# ---------------------------------------------------------------------------------------


def test_anchors_match_repeated_actions_to_the_next_unused_occurrence():
    assert action_anchors(["wash", "wash", "wash"], ["wash", "add", "wash"]) == [(1, 1), (2, 3)]


def test_an_unmatched_action_does_not_move_the_search_point():
    assert action_anchors(["a", "z", "b"], ["a", "b"]) == [(1, 1), (3, 2)]


def test_order_tau_counts_concordant_and_discordant_pairs():
    # Pairs (1,1), (2,3), (3,2), (4,4): 5 concordant, 1 discordant -> 4/6.
    pred = ["harvest", "centrifuge", "lyse", "quantify"]
    assert tau_pairs(pred, GOLD_ACTIONS) == [(1, 1), (2, 3), (3, 2), (4, 4)]
    assert order_tau(pred, GOLD_ACTIONS) == pytest.approx(4 / 6)
    assert order_tau(list(reversed(GOLD_ACTIONS)), GOLD_ACTIONS) == -1.0


def test_order_tau_is_not_constant_on_reordered_steps():
    # Choice: over the monotone anchors of App. C.3 every pair is concordant, so tau would
    # be 1 for both predictions; pairing without that constraint tells them apart.
    in_order = ["harvest", "lyse", "centrifuge", "quantify"]
    misordered = ["lyse", "harvest", "quantify", "centrifuge"]
    assert order_tau(in_order, GOLD_ACTIONS) == 1.0
    assert order_tau(misordered, GOLD_ACTIONS) == pytest.approx((4 - 2) / 6)


def test_order_tau_defaults_to_zero_with_fewer_than_two_pairs():
    assert order_tau(["harvest"], GOLD_ACTIONS) == 0.0
    assert order_tau(["stain"], GOLD_ACTIONS) == 0.0


def test_order_tau_agrees_with_scipy_on_permutations():
    rng = random.Random(7)
    for _ in range(50):
        gold = [f"a{n}" for n in range(rng.randint(2, 9))]
        pred = rng.sample(gold, len(gold))
        expected = kendalltau([gold.index(a) for a in pred], range(len(pred))).statistic
        assert order_tau(pred, gold) == pytest.approx(expected)


# ---------------------------------------------------------------------------------------
# Semantics (Eq. (4), (5))
# ---------------------------------------------------------------------------------------


def test_object_iou_by_hand():
    assert object_iou(["Cells", "tube"], ["cells", "buffer"]) == pytest.approx(1 / 3)
    assert object_iou([], []) == 1.0  # Choice: two empty sets agree.
    assert object_iou(["cells"], []) == 0.0


def test_subwords_split_numbers_letters_and_unit_symbols():
    assert subwords(["37 °C"]) == {"37", "°", "c"}
    assert subwords(["500xg", "0.5 ml"]) == {"500", "xg", "0.5", "ml"}


def test_parameters_by_hand():
    # K = {10, min, 37, °, c} and {10, min, 4, °, c}: 4 shared of 6.
    assert parameter_similarity(["10 min", "37 °C"], ["10 min", "4°c"], 1.0) == pytest.approx(4 / 6)
    assert parameter_similarity([], [], 1.0) == 1.0
    assert parameter_similarity(["10 min"], [], 1.0) == 0.0
    assert parameter_similarity([], ["10 min"], 0.5) == 0.0


def test_parameters_count_only_when_objects_overlap_at_least_half():
    assert parameter_similarity(["10 min"], ["10 min"], 0.5) == 1.0
    assert parameter_similarity(["10 min"], ["10 min"], 0.49) == 0.0
    assert parameter_similarity([], [], 0.0) == 0.0


def test_position_decay_by_hand():
    assert position_decay(2, 2, 4) == 1.0
    assert position_decay(1, 3, 4) == pytest.approx(1 - 0.5**1.5)
    assert position_decay(2, 3, 4) == pytest.approx(1 - 0.25**1.5)  # 0.875
    assert position_decay(1, 5, 4) == 0.0
    assert position_decay(1, 9, 4) == 0.0


# A worked example computed by hand (docs/score.md repeats it).
GOLD = [
    step("harvest", ["cells"]),
    step("lyse", ["cells"], ["ripa buffer", "30 min"]),
    step("centrifuge", ["lysate"], ["12000xg", "10 min"]),
    step("quantify", ["protein"], ["bca assay"]),
]
PRED = [
    step("harvest", ["cells"]),
    step("centrifuge", ["lysate", "tube"], ["12000 xg", "15 min"]),
    step("quantify", ["protein"], ["bca assay"]),
]
# Anchors (1,1), (2,3), (3,4):
#   (1,1): m = 1;     Obj 1;   Par 1 (both empty)              -> 1 * (1 + 0.5)     = 1.5
#   (2,3): m = 0.875; Obj 1/2; Par |{12000,xg,min}| / |{12000,xg,15,10,min}| = 3/5
#                                                              -> 0.875 * (0.5 + 0.3) = 0.7
#   (3,4): m = 0.875; Obj 1;   Par 1                           -> 0.875 * 1.5       = 1.3125
SEMANTIC = (1.5 + 0.7 + 1.3125) / 3
# Strict order 1 (pred is a subsequence of gold). N_pred 3, N_gold 4: M 2, d 1 -> cos(pi/4);
# triple words 2, 6, 4 -> mean 4 <= 30 -> g = 1.
R_SCALE = math.cos(math.pi / 4)


def test_semantic_consistency_by_hand():
    assert semantic_consistency(PRED, GOLD) == pytest.approx(SEMANTIC)
    assert step_semantics(PRED, GOLD) == pytest.approx(1 + SEMANTIC)


def test_semantic_consistency_with_no_anchor_is_zero():
    assert semantic_consistency([step("stain", ["cells"])], GOLD) == 0.0


def test_score_of_triples_by_hand():
    result = score_steps(PRED, GOLD)
    assert result.format_ok is None and result.consistency_ok is None
    assert result.r_scale == pytest.approx(R_SCALE)
    assert result.order_strict == 1
    assert result.order_lcs == 0.75
    assert result.semantic == pytest.approx(SEMANTIC)
    assert result.score == pytest.approx(R_SCALE * (1 + SEMANTIC))
    assert result.step_m == 0
    assert result.order_lcs_eval == pytest.approx(6 / 7)
    assert result.order_tau == 1.0


def test_score_with_lcs_order_mode_uses_lcs_over_m():
    assert score_steps(PRED, GOLD, order_mode="lcs").score == pytest.approx(R_SCALE * (0.75 + SEMANTIC))


def test_perfect_prediction_scores_the_maximum():
    assert score_steps(GOLD, GOLD).score == pytest.approx(SCORE_MAX)


def test_actions_are_compared_after_case_folding():
    upper = [StepComponents(s.action.upper(), s.objects, s.parameters) for s in GOLD]
    assert score_steps(upper, GOLD).score == pytest.approx(SCORE_MAX)


def test_score_is_never_above_the_bound_on_random_cases():
    rng = random.Random(3)
    verbs, nouns = ["add", "mix", "stir", "heat"], ["a", "b", "c"]
    for _ in range(200):

        def random_steps(n: int) -> list[StepComponents]:
            return [
                step(
                    rng.choice(verbs),
                    rng.sample(nouns, rng.randint(0, 2)),
                    rng.sample(["1 min", "2 ml", "hot"], rng.randint(0, 2)),
                )
                for _ in range(n)
            ]

        result = score_steps(random_steps(rng.randint(0, 6)), random_steps(rng.randint(1, 6)))
        assert 0.0 <= result.score <= SCORE_MAX
        assert result.semantic is not None and result.order_tau is not None  # triples: every part is measured
        assert 0.0 <= result.semantic <= 1.5
        assert -1.0 <= result.order_tau <= 1.0


def test_empty_reference_is_refused():
    with pytest.raises(ValueError, match="no steps"):
        score_steps([step("mix")], [])


# ---------------------------------------------------------------------------------------
# Gates in SCORE (Eq. (6))
# ---------------------------------------------------------------------------------------


def _faithful_answer(steps: list[StepComponents]) -> str:
    return sketch_fill([(s, s.text()) for s in steps])


def test_sketch_fill_answer_scores_like_its_key_steps():
    result = score_completion(_faithful_answer(PRED), GOLD)
    assert result.format_ok is True and result.consistency_ok is True
    assert result.score == pytest.approx(R_SCALE * (1 + SEMANTIC))


def test_format_gate_failure_scores_zero_and_measures_nothing():
    result = score_completion(_faithful_answer(PRED).replace("<note>careful</note>", ""), GOLD)
    assert result.format_ok is False
    assert result.score == 0.0
    assert result.r_scale is None and result.semantic is None and result.step_m is None


def test_consistency_gate_failure_scores_zero_but_keeps_the_parts():
    text = _faithful_answer(PRED).replace("Step 2: centrifuge lysate tube 12000 xg 15 min", "Step 2: Centrifuge.")
    result = score_completion(text, GOLD)
    assert result.format_ok is True and result.consistency_ok is False
    assert result.score == 0.0
    assert result.semantic == pytest.approx(SEMANTIC)


def test_orc_sentences_set_the_verbosity_penalty():
    # 45 words per <orc> sentence -> g = 1.5.
    long_steps = [(s, s.text() + " " + " ".join(["word"] * (45 - len(s.text().split())))) for s in GOLD]
    result = score_completion(sketch_fill(long_steps), GOLD)
    assert result.consistency_ok is True
    assert result.r_scale == pytest.approx(1 / 1.5)
    assert result.score == pytest.approx(SCORE_MAX / 1.5)


def test_step_m_counts_steps_only():
    assert step_match(4, 4) == 1
    assert step_match(3, 4) == 0


def test_step_scale_falls_with_the_step_count_gap_on_both_sides():
    # N_gold = 4, M = 2: 1 at 4 steps, cos(pi/4) at 3 and 5, 0 from 2 and 6 outwards.
    scales = [score_steps(list(itertools.islice(itertools.cycle(GOLD), k)), GOLD).r_scale for k in range(9)]
    assert scales[4] == 1.0
    assert scales[3] == scales[5] == pytest.approx(math.cos(math.pi / 4))
    assert scales[:3] == [0.0, 0.0, 0.0] and scales[6:] == [0.0, 0.0, 0.0]
