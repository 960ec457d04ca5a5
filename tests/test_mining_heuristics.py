"""The How2Mine heuristics stage (How2Everything App. B.3): step-count bounds, n-gram
repetition at and around each threshold, normalisation, and n-grams kept within steps.

Every expected rate below is worked out by hand in the comments. Notation: a step of
L words has L-1 bigrams, L-2 trigrams and L-3 fourgrams (none when that is <= 0);
rate_n = (total - distinct) / total over the n-grams of all steps pooled."""

from __future__ import annotations

import pytest

from mining.constants import MAX_STEPS, MIN_STEPS, REPETITION_THRESHOLDS
from mining.heuristics import (
    HeuristicsFilter,
    PrefilterResult,
    normalise_step,
    prefilter,
    reason_code,
    repetition_rate,
    repetition_rates,
)


def distinct_steps(count: int) -> list[str]:
    """``count`` steps "Do task<i> now." whose n-grams never repeat (each contains task<i>)."""
    return [f"Do task{i} now." for i in range(1, count + 1)]


# --- the constants are the paper's ---------------------------------------------------


def test_defaults_are_the_papers_step_bounds_and_thresholds():
    assert (MIN_STEPS, MAX_STEPS) == (5, 15)
    assert REPETITION_THRESHOLDS == {2: 0.40, 3: 0.35, 4: 0.30}


# --- step count ----------------------------------------------------------------------


def test_four_steps_are_too_few():
    result = prefilter(distinct_steps(4))
    assert result == PrefilterResult(False, "too_few_steps: 4 < 5", {"2": 0.0, "3": 0.0, "4": 0.0})


@pytest.mark.parametrize("count", [5, 15])
def test_five_and_fifteen_steps_are_kept(count):
    result = prefilter(distinct_steps(count))
    assert (result.passed, result.reason) == (True, "")


def test_sixteen_steps_are_too_many():
    result = prefilter(distinct_steps(16))
    assert (result.passed, result.reason) == (False, "too_many_steps: 16 > 15")


def test_no_steps_at_all_is_too_few_with_zero_rates():
    assert prefilter([]) == PrefilterResult(False, "too_few_steps: 0 < 5", {"2": 0.0, "3": 0.0, "4": 0.0})


def test_step_bounds_are_configurable():
    stage = HeuristicsFilter(min_steps=2, max_steps=3)
    assert stage.check(distinct_steps(1)).reason == "too_few_steps: 1 < 2"
    assert stage.check(distinct_steps(2)).passed
    assert stage.check(distinct_steps(3)).passed
    assert stage.check(distinct_steps(4)).reason == "too_many_steps: 4 > 3"
    assert prefilter(distinct_steps(4), min_steps=4).passed


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_steps": 6, "max_steps": 5},
        {"min_steps": -1},
        {"max_steps": 2.5},
        {"thresholds": {2: 0.4, 3: 0.35}},
        {"thresholds": {2: 0.4, 3: 0.35, 4: 0.0}},
    ],
)
def test_inconsistent_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        HeuristicsFilter(**kwargs)


def test_step_count_is_checked_before_repetition_and_rates_are_still_reported():
    # 4 identical two-word steps: 4 bigrams, 1 distinct -> rate_2 = 3/4; the step count
    # fails first, so it is the reason, and the rate is still in the result.
    result = prefilter(["Stir soup."] * 4)
    assert result.reason == "too_few_steps: 4 < 5"
    assert result.repetition["2"] == 0.75


# --- 2-gram threshold (0.40) ---------------------------------------------------------
# Two-word steps have exactly one bigram and no trigram or fourgram, so only rate_2 moves.

EIGHT_DISTINCT_PAIRS = [
    "Add salt.",
    "Add pepper.",
    "Taste broth.",
    "Chop parsley.",
    "Warm bowls.",
    "Ladle portions.",
    "Garnish generously.",
    "Serve hot.",
]


def test_bigram_rate_of_exactly_040_is_rejected():
    # bigrams: (stir soup) x3, (add salt), (serve hot) -> total 5, distinct 3
    # rate_2 = (5 - 3) / 5 = 2/5 = 0.40 >= 0.40 -> rejected; rate_3 = rate_4 = 0
    result = prefilter(["Stir soup.", "Stir soup.", "Stir soup.", "Add salt.", "Serve hot."])
    assert result == PrefilterResult(False, "repetition_2gram: 0.4000 >= 0.40", {"2": 0.4, "3": 0.0, "4": 0.0})


def test_bigram_rate_of_exactly_040_over_fifteen_steps_is_rejected():
    # 7 x (stir soup) + 8 distinct pairs: total 15, distinct 1 + 8 = 9
    # rate_2 = (15 - 9) / 15 = 6/15 = 0.40 -> rejected
    result = prefilter(["Stir soup."] * 7 + EIGHT_DISTINCT_PAIRS)
    assert result.repetition["2"] == 0.4
    assert result.reason == "repetition_2gram: 0.4000 >= 0.40"


def test_bigram_rate_just_below_040_is_kept():
    # 6 x (stir soup) + 7 distinct pairs: total 13, distinct 1 + 7 = 8
    # rate_2 = (13 - 8) / 13 = 5/13 = 0.3846... < 0.40 -> kept
    result = prefilter(["Stir soup."] * 6 + EIGHT_DISTINCT_PAIRS[:7])
    assert result.repetition == {"2": 5 / 13, "3": 0.0, "4": 0.0}
    assert (result.passed, result.reason) == (True, "")


def test_bigram_rate_above_040_is_rejected_with_its_rate():
    # 4 x (stir soup) + (add salt) + (serve hot): total 6, distinct 3 -> rate_2 = 3/6 = 0.50
    result = prefilter(["Stir soup."] * 4 + ["Add salt.", "Serve hot."])
    assert result.reason == "repetition_2gram: 0.5000 >= 0.40"


# --- 3-gram threshold (0.35) ---------------------------------------------------------
# P = "rinse the brush in water" (5 words), Q = "wipe it on cloth" (4 words); step 1 holds
# P then Q; the later copies of P and Q are the only repeats. All other words are unique.
#
#   step                                   words  bigrams  trigrams  fourgrams
#   1 rinse the brush in water wipe it on cloth 9    8        7         6
#   2 P                                        5     4 rep    3 rep     2 rep
#   3 Q                                        4     3 rep    2 rep     1 rep
#   4 Q                                        4     3 rep    2 rep     1 rep
#   5 let every bristle dry flat overnight before storing  8   7   6   5
#   6 store upright                            2     1        0         0
#
#   rate_3 = (3+2+2) / (7+3+2+2+6)     = 7/20  = 0.35   -> at the threshold: rejected
#   rate_2 = (4+3+3) / (8+4+3+3+7+1)   = 10/26 = 0.385  (< 0.40)
#   rate_4 = (2+1+1) / (6+2+1+1+5)     = 4/15  = 0.267  (< 0.30)

TRIGRAM_AT_THRESHOLD = [
    "Rinse the brush in water, wipe it on cloth.",
    "Rinse the brush in water.",
    "Wipe it on cloth.",
    "Wipe it on cloth.",
    "Let every bristle dry flat overnight before storing.",
    "Store upright.",
]


def test_trigram_rate_of_exactly_035_is_rejected():
    result = prefilter(TRIGRAM_AT_THRESHOLD)
    assert result.repetition == {"2": 10 / 26, "3": 0.35, "4": 4 / 15}
    assert result.reason == "repetition_3gram: 0.3500 >= 0.35"


def test_trigram_rate_just_below_035_is_kept():
    # one more word in step 5 adds one bigram, trigram and fourgram, none repeated:
    # rate_3 = 7/21 = 0.333 (< 0.35), rate_2 = 10/27 = 0.370, rate_4 = 4/16 = 0.25
    steps = TRIGRAM_AT_THRESHOLD.copy()
    steps[4] = "Let every bristle dry flat overnight before storing indoors."
    result = prefilter(steps)
    assert result.repetition == {"2": 10 / 27, "3": 7 / 21, "4": 4 / 16}
    assert result.passed


# --- 4-gram threshold (0.30) ---------------------------------------------------------
# R = "sand the board along its grain" (6 words) is step 1 and repeated as step 2.
#
#   step                                   words  bigrams  trigrams  fourgrams
#   1 R                                        6     5        4         3
#   2 R                                        6     5 rep    4 rep     3 rep
#   3 wipe away all dust with tack cloth       7     6        5         4
#   4 apply thin varnish                       3     2        1         0
#   5 let dry                                  2     1        0         0
#
#   rate_4 = 3 / (3+3+4)        = 3/10 = 0.30  -> at the threshold: rejected
#   rate_3 = 4 / (4+4+5+1)      = 4/14 = 0.286 (< 0.35)
#   rate_2 = 5 / (5+5+6+2+1)    = 5/19 = 0.263 (< 0.40)

FOURGRAM_AT_THRESHOLD = [
    "Sand the board along its grain.",
    "Sand the board along its grain.",
    "Wipe away all dust with tack cloth.",
    "Apply thin varnish.",
    "Let dry.",
]


def test_fourgram_rate_of_exactly_030_is_rejected():
    result = prefilter(FOURGRAM_AT_THRESHOLD)
    assert result.repetition == {"2": 5 / 19, "3": 4 / 14, "4": 0.3}
    assert result.reason == "repetition_4gram: 0.3000 >= 0.30"


def test_fourgram_rate_just_below_030_is_kept():
    # "a" added to step 3 (8 words): rate_4 = 3/11 = 0.273, rate_3 = 4/15, rate_2 = 5/20
    steps = FOURGRAM_AT_THRESHOLD.copy()
    steps[2] = "Wipe away all dust with a tack cloth."
    result = prefilter(steps)
    assert result.repetition == {"2": 5 / 20, "3": 4 / 15, "4": 3 / 11}
    assert result.passed


def test_the_first_failing_ngram_size_is_the_reason():
    # 5 identical three-word steps: 10 bigrams / 2 distinct -> 0.8; 5 trigrams / 1 -> 0.8.
    # Both fail; the 2-gram check runs first.
    result = prefilter(["Stir the soup."] * 5)
    assert result.repetition == {"2": 0.8, "3": 0.8, "4": 0.0}
    assert result.reason == "repetition_2gram: 0.8000 >= 0.40"


def test_a_custom_threshold_is_printed_with_the_decimals_it_needs():
    stage = HeuristicsFilter(thresholds={2: 0.375, 3: 0.35, 4: 0.30})
    # rate_2 = 5/13 = 0.3846 >= 0.375
    assert stage.check(["Stir soup."] * 6 + EIGHT_DISTINCT_PAIRS[:7]).reason == "repetition_2gram: 0.3846 >= 0.375"


# --- normalisation -------------------------------------------------------------------


def test_case_and_punctuation_do_not_make_ngrams_distinct():
    # Same as the 2/5 case above, with the three copies spelled differently.
    steps = ["Stir soup.", "STIR SOUP!", "«stir»—soup…", "Add salt.", "Serve hot."]
    assert repetition_rates(steps) == {"2": 0.4, "3": 0.0, "4": 0.0}
    assert prefilter(steps).reason == "repetition_2gram: 0.4000 >= 0.40"


def test_normalisation_lowercases_and_turns_punctuation_into_spaces():
    assert normalise_step("Pre-heat the OVEN, then… wait!") == ["pre", "heat", "the", "oven", "then", "wait"]
    assert normalise_step("Add 1/2 cup (120 ml) of the chef's milk.") == [
        "add",
        "1",
        "2",
        "cup",
        "120",
        "ml",
        "of",
        "the",
        "chef",
        "s",
        "milk",
    ]
    assert normalise_step("¿Listo? «Sí»") == ["listo", "sí"]


def test_symbols_are_not_punctuation_but_percent_is():
    # The nfkc_casefold option: '+' (Sm) and '°' (So) and '$' (Sc) are symbols and stay;
    # '%' is category Po. (The default reference rule turns all of them into spaces.)
    assert normalise_step("Set 180 °C + $5 tip 10%", normalisation="nfkc_casefold") == [
        "set",
        "180",
        "°c",
        "+",
        "$5",
        "tip",
        "10",
    ]
    assert normalise_step("Set 180 °C + $5 tip 10%") == ["set", "180", "c", "5", "tip", "10"]


def test_compatibility_forms_and_casefolding_compare_equal():
    # The nfkc_casefold option (tests/test_reference_heuristics.py covers the default).
    assert normalise_step("Ｓｔｉｒ ﬁrmly", normalisation="nfkc_casefold") == ["stir", "firmly"]
    assert normalise_step("STRASSE", normalisation="nfkc_casefold") == normalise_step(
        "Straße", normalisation="nfkc_casefold"
    )


# --- n-grams stay within a step ------------------------------------------------------


def test_ngrams_never_span_two_steps():
    # Within steps: bigrams (a b), (c d), (a b), (c d) -> total 4, distinct 2 -> rate_2 = 0.5;
    # no step has 3 words, so no trigrams or fourgrams at all. Read across the boundaries,
    # "a b c d a b c d" would have repeated trigrams and fourgrams.
    assert repetition_rates(["alpha beta", "gamma delta", "alpha beta", "gamma delta"]) == {
        "2": 0.5,
        "3": 0.0,
        "4": 0.0,
    }


def test_words_split_across_steps_do_not_form_a_bigram():
    # "add salt" once within a step; "add" and "salt" alone form no bigram: total 1 -> 0.0
    # (joined, "add salt add salt" would give 1 repeat out of 3).
    assert repetition_rates(["add salt", "add", "salt"])["2"] == 0.0


def test_empty_and_one_word_steps_have_no_ngrams_but_count_as_steps():
    steps = ["", "   ", "...", "Stir", "Serve!"]
    result = prefilter(steps)
    assert result == PrefilterResult(True, "", {"2": 0.0, "3": 0.0, "4": 0.0})
    assert prefilter(steps[:4]).reason == "too_few_steps: 4 < 5"


def test_repetition_rate_counts_every_occurrence_beyond_the_first():
    # (x y) three times and (y z) once in one step "x y x y x y z": bigrams xy, yx, xy, yx, xy, yz
    # -> total 6, distinct 3 (xy, yx, yz) -> 3 repeats / 6 = 0.5
    assert repetition_rate([["x", "y", "x", "y", "x", "y", "z"]], 2) == 0.5
    assert repetition_rate([], 2) == 0.0


# --- the pipeline-step interface -----------------------------------------------------


def test_filter_returns_kept_and_reason_for_a_record():
    stage = HeuristicsFilter()
    assert stage.filter({"goal": "g", "steps": distinct_steps(6)}) == (True, "")
    assert stage.filter({"steps": distinct_steps(3)}) == (False, "too_few_steps: 3 < 5")


def test_reason_code_is_the_check_name():
    assert reason_code("repetition_3gram: 0.3500 >= 0.35") == "repetition_3gram"
    assert reason_code("too_many_steps: 16 > 15") == "too_many_steps"
    assert reason_code("") == ""


def test_as_dict_is_the_prefilter_object():
    result = prefilter(distinct_steps(2))
    assert result.as_dict() == {
        "passed": False,
        "reason": "too_few_steps: 2 < 5",
        "repetition": {"2": 0.0, "3": 0.0, "4": 0.0},
    }
