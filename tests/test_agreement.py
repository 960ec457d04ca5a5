"""Agreement statistics (annotate/stats/) checked against independent values:
Krippendorff's published reliability example, hand-computed cases, crafted majority, tie and
leave-one-out cases, Rogan-Gladen by hand, MASI by its definition, and the input readers'
file/line errors."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import random
from collections.abc import Callable
from itertools import combinations
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest

from annotate.stats.agreement import agreement_report, judge_agreement, leave_one_out_agreement, pairwise_agreement
from annotate.stats.alpha import (
    coincidence_alpha,
    krippendorff_alpha,
    masi_alpha,
    masi_distance,
    masi_distance_matrix,
    nominal_alpha,
    reliability_matrix,
)
from annotate.stats.calibration import calibrated_score, rogan_gladen
from annotate.stats.kappa import cohen_kappa
from annotate.stats.majority import (
    HumanMajority,
    annotation_l2_steps,
    first_failure_location,
    human_majority,
    majority_label,
)
from annotate.stats.records import (
    AnnotationRow,
    JudgmentRow,
    parse_annotation_lines,
    parse_judgment_lines,
    read_annotations,
    read_judgments,
)
from core.intervals import bootstrap_mean_interval, wilson_interval
from core.record_files import RecordError


def _wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson interval of k of n (n > 0: never None)."""
    interval = wilson_interval(k, n)
    assert interval is not None
    return interval


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the example with four
# coders (rows A-D), twelve units and values 1-5; None is a missing cell. Published nominal
# alpha: 0.743.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def failure(*l2_steps: int, l1_steps: tuple[int, ...] = ()) -> dict:
    return {"description": "a critical failure", "L1_steps": list(l1_steps), "L2_steps": list(l2_steps)}


def ann(item: str, annotator: str, has_failure: bool, *failures: dict, excluded: bool = False) -> AnnotationRow:
    return AnnotationRow(item, annotator, has_failure, list(failures), excluded)


def binary_rows(labels: dict[str, dict[str, bool]]) -> list[AnnotationRow]:
    """item -> {annotator: has_failure} as rows (a has_failure row links L2 step 1)."""
    return [
        ann(item, who, label, *([failure(1)] if label else []))
        for item, by_annotator in labels.items()
        for who, label in by_annotator.items()
    ]


def judged(judge: str, labels: dict[str, bool]) -> list[JudgmentRow]:
    return [JudgmentRow(item, judge, label) for item, label in labels.items()]


# --------------------------------------------------------------------------- alpha


def test_first_failure_location_alpha_reproduces_krippendorffs_published_example():
    rows = [
        ann(f"unit-{unit + 1}", coder, True, failure(value))
        for coder, values in zip("ABCD", KRIPPENDORFF_2011)
        for unit, value in enumerate(values)
        if value is not None
    ]
    alpha = krippendorff_alpha(rows, "first_failure_location")
    assert alpha is not None and round(alpha, 3) == 0.743
    report = agreement_report(rows, [], bootstrap=0)
    assert round(report["alpha"]["first_failure_location"], 3) == 0.743
    # Unit 12 has a single value: it cannot be paired and is counted, not used.
    assert report["alpha_details"]["first_failure_location"]["n_single"] == 1
    assert report["alpha_details"]["first_failure_location"]["n_units"] == 11


def test_binary_alpha_matches_a_hand_computed_case():
    # Items (values as has_failure True/False), item 4 has one annotation and is not pairable:
    #   i1: T T F    i2: F F    i3: T T    i4: T
    # Pairable values n = 7: n_T = 4, n_F = 3.
    # Observed: only i1 disagrees: ordered T/F pairs = 2 * 1 * 2 = 4, divided by m - 1 = 2 -> 2.
    #   D_o = 2 / n = 2/7.
    # Expected: D_e = (n_T * n_F * 2) / (n (n - 1)) = 24 / 42 = 4/7.
    # alpha = 1 - D_o / D_e = 1 - (2/7) / (4/7) = 0.5
    rows = binary_rows(
        {
            "i1": {"a": True, "b": True, "c": False},
            "i2": {"a": False, "b": False},
            "i3": {"b": True, "c": True},
            "i4": {"a": True},
        }
    )
    assert krippendorff_alpha(rows, "binary") == pytest.approx(0.5, abs=1e-12)


def test_masi_alpha_matches_a_hand_computed_case():
    # i1: {1} and {1, 2};  i2: {} and {} (two no_failure annotations).
    # d({1}, {1,2}) = 1 - (1/2)(2/3) = 2/3; d({}, {1}) = d({}, {1,2}) = 1; d({}, {}) = 0.
    # n = 4 with n_{} = 2, n_{1} = 1, n_{1,2} = 1.
    # D_o = (1/4) * [i1: 2 ordered pairs * 2/3 / (2 - 1)] = (1/4)(4/3) = 1/3.
    # D_e = (1/(4*3)) * [2*(1*1*2/3) + 2*(2*1*1) + 2*(2*1*1)] = (1/12)(4/3 + 8) = 7/9.
    # alpha = 1 - (1/3)/(7/9) = 4/7.
    rows = [
        ann("i1", "a", True, failure(1)),
        ann("i1", "b", True, failure(1), failure(2, l1_steps=(3,))),
        ann("i2", "a", False),
        ann("i2", "b", False),
    ]
    assert krippendorff_alpha(rows, "l2_step_sets_masi") == pytest.approx(4 / 7, abs=1e-12)


def test_own_coincidence_alpha_equals_the_krippendorff_package_on_nominal_data():
    matrix = [list(unit) for unit in zip(*KRIPPENDORFF_2011)]
    reliability = [[np.nan if v is None else v for v in coder] for coder in KRIPPENDORFF_2011]
    expected = krippendorff.alpha(reliability_data=reliability, level_of_measurement="nominal")
    assert coincidence_alpha(matrix) == pytest.approx(expected, abs=1e-12)
    generator = random.Random(7)
    for _ in range(20):
        coders = generator.randint(2, 5)
        values = generator.randint(2, 6)
        units = [
            [generator.randint(1, values) if generator.random() < 0.75 else None for _ in range(coders)]
            for _ in range(generator.randint(5, 40))
        ]
        data = [[np.nan if v is None else v for v in coder] for coder in zip(*units)]  # coders x units
        try:
            reference = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        except ValueError:
            continue  # the package refuses data with no pairable unit or one value
        if math.isnan(reference):
            assert coincidence_alpha(units) is None
            continue
        assert coincidence_alpha(units) == pytest.approx(reference, abs=1e-10)
        assert nominal_alpha(units) == pytest.approx(reference, abs=1e-10)


def test_masi_alpha_with_the_package_equals_the_coincidence_definition():
    generator = random.Random(11)
    for _ in range(10):
        matrix = [
            [
                frozenset(generator.sample(range(1, 7), generator.randint(0, 3))) if generator.random() < 0.8 else None
                for _ in range(3)
            ]
            for _ in range(30)
        ]
        # masi_alpha goes through the krippendorff package with a MASI lookup; coincidence_alpha
        # applies the scalar masi_distance pair by pair.
        assert masi_alpha(matrix) == pytest.approx(coincidence_alpha(matrix, masi_distance), abs=1e-10)


def test_large_inputs_fall_back_to_the_same_alpha(monkeypatch):
    import annotate.stats.alpha as agreement

    rows = [
        ann(f"unit-{unit}", coder, True, failure(value))
        for coder, values in zip("ABCD", KRIPPENDORFF_2011)
        for unit, value in enumerate(values)
        if value is not None
    ]
    monkeypatch.setattr(agreement, "PACKAGE_MAX_CELLS", 0)
    alpha = krippendorff_alpha(rows, "first_failure_location")
    assert alpha is not None and round(alpha, 3) == 0.743


def test_alpha_is_null_when_no_item_has_two_annotations_or_nobody_varies():
    singles = binary_rows({"i1": {"a": True}, "i2": {"b": False}})
    assert agreement_report(singles, [], bootstrap=10)["alpha"] == {
        "binary": None,
        "first_failure_location": None,
        "l2_step_sets_masi": None,
    }
    unanimous = binary_rows({"i1": {"a": False, "b": False}, "i2": {"a": False, "b": False}})
    report = agreement_report(unanimous, [], bootstrap=10)
    assert report["alpha"]["binary"] is None
    assert report["alpha_ci95"]["binary"] is None


def test_reliability_matrix_has_a_cell_per_item_and_annotator_and_gives_the_same_alpha():
    rows = [
        ann(f"unit-{unit + 1:02d}", coder, True, failure(value))
        for coder, values in zip("ABCD", KRIPPENDORFF_2011)
        for unit, value in enumerate(values)
        if value is not None
    ] + [ann("unit-01", "E", False, excluded=True)]
    items, annotators, matrix = reliability_matrix(rows, "first_failure_location")
    assert annotators == ["A", "B", "C", "D"]
    assert len(items) == 12
    assert [row[0] for row in matrix] == [KRIPPENDORFF_2011[0][unit] for unit in range(12)]
    assert nominal_alpha(matrix) == pytest.approx(krippendorff_alpha(rows, "first_failure_location"), abs=1e-12)
    with pytest.raises(ValueError, match="unknown alpha kind"):
        krippendorff_alpha(rows, "ordinal")  # type: ignore[arg-type]


def test_alpha_ignores_excluded_annotations():
    rows = binary_rows({"i1": {"a": True, "b": True}, "i2": {"a": False, "b": False}})
    with_excluded = rows + [ann("i1", "c", False, excluded=True)]
    assert krippendorff_alpha(with_excluded, "binary") == krippendorff_alpha(rows, "binary") == 1.0


# --------------------------------------------------------------------------- labels and MASI


def test_masi_distance_follows_its_definition():
    assert masi_distance({1, 2}, {2, 1}) == 0.0
    assert masi_distance(set(), set()) == 0.0
    assert masi_distance({1}, {2}) == 1.0
    assert masi_distance(set(), {3}) == 1.0
    # Subset: J = 1/2, M = 2/3.
    assert masi_distance({1}, {1, 2}) == pytest.approx(1 - (1 / 2) * (2 / 3))
    # Overlap, neither a subset: J = 1/3, M = 1/3.
    assert masi_distance({1, 2}, {2, 3}) == pytest.approx(1 - (1 / 3) * (1 / 3))


def test_masi_distance_matrix_equals_pairwise_distances():
    sets = [frozenset(), frozenset({1}), frozenset({1, 2}), frozenset({2, 3}), frozenset({4}), frozenset({1, 2, 3, 15})]
    matrix = masi_distance_matrix(sets)
    for i, j in np.ndindex(len(sets), len(sets)):
        assert matrix[i, j] == pytest.approx(masi_distance(sets[i], sets[j]), abs=1e-12)


def test_first_failure_location_is_none_smallest_l2_step_or_unlocated():
    assert first_failure_location(ann("i", "a", False)) == "none"
    assert first_failure_location(ann("i", "a", True, failure(7, 4), failure(5))) == 4
    assert first_failure_location(ann("i", "a", True, failure(l1_steps=(2,)))) == "unlocated"
    assert first_failure_location(ann("i", "a", True)) == "unlocated"
    assert annotation_l2_steps(ann("i", "a", True, failure(7, 4), failure(5, l1_steps=(1,)))) == {4, 5, 7}


# --------------------------------------------------------------------------- majority


def test_strict_majority_and_ties():
    assert majority_label([True, True, False]) is True
    assert majority_label([False, False, True]) is False
    assert majority_label([True]) is True
    assert majority_label([True, False]) is None
    assert majority_label([True, True, False, False]) is None
    assert majority_label([]) is None


def test_human_majority_counts_ties_and_leaves_out_excluded_rows():
    rows = binary_rows(
        {
            "i1": {"a": True, "b": True, "c": False},
            "i2": {"a": True, "b": False},
            "i3": {"a": False, "b": False, "c": True},
        }
    ) + [ann("i2", "c", False, excluded=True), ann("i4", "a", True, failure(2), excluded=True)]
    assert human_majority(rows).labels == {"i1": True, "i2": None, "i3": False}
    report = agreement_report(rows, [], bootstrap=0)
    assert report["human_majority"] == {
        "min_annotations": 2,
        "n_items": 3,
        "n_with_majority": 2,
        "n_ties": 1,
        "has_failure": 1,
        "no_failure": 1,
        "n_too_few": 0,
    }
    assert (report["n_items"], report["n_annotators"], report["n_annotations"], report["n_excluded"]) == (3, 3, 8, 2)


def test_leave_one_out_uses_the_other_annotators_and_counts_what_it_leaves_out():
    rows = binary_rows(
        {
            "i1": {"a": True, "b": True, "c": False},  # a: others b,c tie; b: others a,c tie; c: others T -> miss
            "i2": {"a": True, "b": True, "c": True},  # everyone matches the others
            "i3": {"a": False, "b": True},  # a and b: one other annotation is not a majority
            "i4": {"c": False},  # c alone
        }
    )
    result = leave_one_out_agreement(rows)
    # Every share carries its Wilson interval whatever the bootstrap (issue 27).
    assert result["a"] == {
        "agreement": 1.0,
        "ci95": [pytest.approx(_wilson(1, 1)[0]), 1.0],
        "interval": "wilson",
        "interval_name": "Wilson score interval",
        "approximate": False,
        "n": 1,
        "n_items": 3,
        "n_others_tie": 1,
        "n_others_too_few": 1,
        "n_no_others": 0,
    }
    assert result["b"] == {
        "agreement": 1.0,
        "ci95": [pytest.approx(_wilson(1, 1)[0]), 1.0],
        "interval": "wilson",
        "interval_name": "Wilson score interval",
        "approximate": False,
        "n": 1,
        "n_items": 3,
        "n_others_tie": 1,
        "n_others_too_few": 1,
        "n_no_others": 0,
    }
    assert result["c"] == {
        "agreement": 1 / 2,
        "ci95": pytest.approx(list(_wilson(1, 2))),
        "interval": "wilson",
        "interval_name": "Wilson score interval",
        "approximate": False,
        "n": 2,
        "n_items": 3,
        "n_others_tie": 0,
        "n_others_too_few": 0,
        "n_no_others": 1,
    }


def test_leave_one_out_agreement_is_null_when_the_others_always_tie():
    rows = binary_rows({"i1": {"a": True, "b": True, "c": False}})
    assert leave_one_out_agreement(rows)["c"]["agreement"] == 0.0  # the others (T, T) outvote c (F)
    assert leave_one_out_agreement(rows)["a"] == {
        "agreement": None,
        "ci95": None,
        "interval": "wilson",
        "interval_name": "Wilson score interval",
        "approximate": False,
        "n": 0,
        "n_items": 1,
        "n_others_tie": 1,
        "n_others_too_few": 0,
        "n_no_others": 0,
    }


# --------------------------------------------------------------------------- judges


def test_judge_agreement_per_class_and_kappa_by_hand():
    majority = HumanMajority(labels={"i1": True, "i2": True, "i3": True, "i4": False, "i5": False, "i6": None})
    judge = {"i1": True, "i2": True, "i3": False, "i4": False, "i5": True, "i6": True, "i7": False}
    result = judge_agreement(majority, judge, bootstrap=0)
    # n = 5 (i6 is a human tie, i7 has no annotations). Matches: i1, i2, i4 -> 3/5.
    # p_e = P(h=T)P(j=T) + P(h=F)P(j=F) = (3/5)(3/5) + (2/5)(2/5) = 13/25; kappa = (3/5 - 13/25)/(12/25) = 1/6.
    assert result["agreement"] == pytest.approx(3 / 5)
    assert result["agreement_has_failure"] == pytest.approx(2 / 3)
    assert result["agreement_no_failure"] == pytest.approx(1 / 2)
    assert result["cohen_kappa"] == pytest.approx(1 / 6)
    assert (result["n"], result["n_has_failure"], result["n_no_failure"]) == (5, 3, 2)
    assert (result["n_judged"], result["n_human_tie"], result["n_no_human_labels"]) == (7, 1, 1)
    assert result["confusion"] == {
        "human_has_failure": {"judge_has_failure": 2, "judge_no_failure": 1},
        "human_no_failure": {"judge_has_failure": 1, "judge_no_failure": 1},
    }
    # Wilson, a closed form, whatever the bootstrap; kappa's bootstrap interval is off with 0 resamples.
    assert result["ci95"] == pytest.approx(list(_wilson(3, 5)))
    assert result["cohen_kappa_ci95"] is None


def test_a_judge_that_always_says_has_failure_has_kappa_zero_and_no_failure_agreement_zero():
    labels = {f"i{k}": {"a": k % 3 == 0, "b": k % 3 == 0, "c": k % 2 == 0} for k in range(12)}
    rows = binary_rows(labels)
    report = agreement_report(rows, judged("always", {item: True for item in labels}), bootstrap=100)
    result = report["judges"]["always"]
    assert result["cohen_kappa"] == 0.0
    assert result["agreement_no_failure"] == 0.0
    assert result["agreement_has_failure"] == 1.0
    majority = human_majority(rows).decided()
    assert result["agreement"] == pytest.approx(sum(majority.values()) / len(majority))
    assert report["calibration"]["always"]["corrected_score"] is None  # TPR + TNR - 1 = 0


def test_a_study_with_no_has_failure_majority_reports_null_not_an_error():
    rows = binary_rows({"i1": {"a": False, "b": False}, "i2": {"a": False, "b": True, "c": False}})
    report = agreement_report(rows, judged("gpt-5", {"i1": False, "i2": True}), bootstrap=50)
    result = report["judges"]["gpt-5"]
    assert result["agreement_has_failure"] is None
    assert result["agreement_no_failure"] == 0.5
    # Humans give one class only: p_e = 1 * P(judge no_failure) = 1/2 = p_o, so kappa = 0.
    assert result["cohen_kappa"] == 0.0
    assert report["human_majority"]["has_failure"] == 0
    json.dumps(report, allow_nan=False)  # serialisable, nulls and no NaN


def test_cohen_kappa_by_hand():
    # p_o = 3/4; p_e = (2/4)(1/4) + (2/4)(3/4) = 1/2; kappa = (3/4 - 1/2) / (1/2) = 1/2
    assert cohen_kappa([True, True, False, False], [True, False, False, False]) == pytest.approx(0.5)
    assert cohen_kappa([True, True], [True, True]) is None
    assert cohen_kappa([], []) is None


def test_judge_pairs_are_keyed_in_sorted_order_over_shared_items():
    judgments = (
        judged("how2judge", {"i1": True, "i2": False, "i3": True, "i4": False})
        + judged("gpt-5", {"i1": True, "i2": True, "i3": True, "i9": False})
        + judged("alone", {"z": True})
    )
    report = agreement_report(binary_rows({"i1": {"a": True}}), judgments, bootstrap=0)
    pairs = report["judge_pairs"]
    assert sorted(pairs) == ["alone|gpt-5", "alone|how2judge", "gpt-5|how2judge"]
    assert pairs["gpt-5|how2judge"]["n"] == 3
    assert pairs["gpt-5|how2judge"]["agreement"] == pytest.approx(2 / 3)
    assert pairs["alone|gpt-5"] == {
        "raters": ["alone", "gpt-5"],
        "agreement": None,
        "ci95": None,
        "interval": "wilson",
        "interval_name": "Wilson score interval",
        "approximate": False,
        "cohen_kappa": None,
        "n": 0,
    }


def test_annotator_pairs_cover_only_annotators_with_shared_items():
    labels = {"i1": {"a": True, "b": True}, "i2": {"a": True, "b": False}, "i3": {"c": True}}
    pairs = pairwise_agreement(labels)
    assert list(pairs) == ["a|b"]
    assert (pairs["a|b"]["agreement"], pairs["a|b"]["n"]) == (0.5, 2)


def test_pair_keys_that_would_collide_are_refused():
    with pytest.raises(ValueError, match="pair key"):
        pairwise_agreement({"i1": {"a|b": True, "c": True, "a": True, "b|c": False}})


# --------------------------------------------------------------------------- bootstrap


def synthetic(seed: int, items: int = 60) -> tuple[list[AnnotationRow], list[JudgmentRow]]:
    generator = random.Random(seed)
    rows, judgments = [], []
    for k in range(items):
        truth = generator.random() < 0.5
        for who in ("a", "b", "c"):
            label = truth if generator.random() < 0.8 else not truth
            rows.append(ann(f"i{k}", who, label, *([failure(generator.randint(1, 8))] if label else [])))
        judgments.append(JudgmentRow(f"i{k}", "gpt-5", truth if generator.random() < 0.85 else not truth))
        judgments.append(JudgmentRow(f"i{k}", "how2judge", truth if generator.random() < 0.8 else not truth))
    return rows, judgments


def test_bootstrap_intervals_are_the_same_for_the_same_seed_and_any_row_order():
    rows, judgments = synthetic(3)
    first = agreement_report(rows, judgments, bootstrap=200, seed=5)
    shuffled_rows, shuffled_judgments = rows[:], judgments[:]
    random.Random(1).shuffle(shuffled_rows)
    random.Random(2).shuffle(shuffled_judgments)
    assert agreement_report(shuffled_rows, shuffled_judgments, bootstrap=200, seed=5) == first
    # The bootstrap intervals (kappa's; agreement shares are Wilson, issue 27) move with the seed.
    others = [
        agreement_report(rows, judgments, bootstrap=200, seed=s)["judges"]["gpt-5"]["cohen_kappa_ci95"]
        for s in range(6, 12)
    ]
    assert any(ci != first["judges"]["gpt-5"]["cohen_kappa_ci95"] for ci in others)


def test_bootstrap_intervals_contain_the_estimate_and_zero_resamples_turn_them_off():
    rows, judgments = synthetic(4)
    report = agreement_report(rows, judgments, bootstrap=300)
    for judge in ("gpt-5", "how2judge"):
        low, high = report["judges"][judge]["ci95"]
        assert 0.0 <= low <= report["judges"][judge]["agreement"] <= high <= 1.0
    for kind, (low, high) in report["alpha_ci95"].items():
        assert low <= report["alpha"][kind] <= high
    low, high = report["calibration"]["gpt-5"]["ci95"]
    assert low <= report["calibration"]["gpt-5"]["corrected_score"] <= high
    low, high = report["judges"]["gpt-5"]["cohen_kappa_ci95"]
    assert low <= report["judges"]["gpt-5"]["cohen_kappa"] <= high
    off = agreement_report(rows, judgments, bootstrap=0)
    # The Wilson interval of a share is a closed form: there with 0 resamples too (issue 27).
    assert off["judges"]["gpt-5"]["ci95"] == report["judges"]["gpt-5"]["ci95"]
    assert off["judges"]["gpt-5"]["cohen_kappa_ci95"] is None
    assert set(off["alpha_ci95"].values()) == {None}
    assert off["alpha"] == report["alpha"]


def test_bootstrap_interval_of_a_constant_is_not_estimable_never_zero_width():
    assert bootstrap_mean_interval([1.0] * 10, bootstrap=50, seed=0) is None
    assert bootstrap_mean_interval([], bootstrap=50) is None


def test_a_judges_interval_does_not_depend_on_other_judges():
    rows, judgments = synthetic(5)
    both = agreement_report(rows, judgments, bootstrap=200)
    alone = agreement_report(rows, [j for j in judgments if j.judge == "gpt-5"], bootstrap=200)
    assert alone["judges"]["gpt-5"] == both["judges"]["gpt-5"]


def test_negative_bootstrap_or_seed_is_refused():
    with pytest.raises(ValueError, match="bootstrap"):
        agreement_report([], [], bootstrap=-1)
    with pytest.raises(ValueError, match="seed"):
        agreement_report([], [], seed=-1)


# --------------------------------------------------------------------------- calibration


def test_rogan_gladen_by_hand():
    # (0.5 + 0.8 - 1) / (0.9 + 0.8 - 1) = 0.3 / 0.7 = 3/7
    assert rogan_gladen(0.5, 0.9, 0.8) == pytest.approx(3 / 7)
    # (0.05 + 0.8 - 1) / 0.7 < 0 -> clipped to 0; (1.0 + 0.8 - 1) / 0.6 > 1 -> clipped to 1
    assert rogan_gladen(0.05, 0.9, 0.8) == 0.0
    assert rogan_gladen(1.0, 0.8, 0.8) == 1.0
    assert rogan_gladen(0.5, 0.5, 0.5) is None


def test_calibrated_score_counts_no_failure_as_the_positive_class():
    # 10 items with human majority no_failure: the judge says no_failure on 9 -> TPR = 0.9.
    # 10 items with human majority has_failure: the judge says has_failure on 8 -> TNR = 0.8.
    human = [False] * 10 + [True] * 10
    judge = [False] * 9 + [True] + [True] * 8 + [False] * 2
    target = [False] * 10 + [True] * 10  # observed score 0.5
    result = calibrated_score(judge, human, target, bootstrap=0)
    assert result["positive_class"] == "no_failure"
    assert (result["tpr"], result["tnr"], result["observed_score"]) == (0.9, 0.8, 0.5)
    assert result["corrected_score"] == pytest.approx(3 / 7)
    assert (result["n_positive"], result["n_negative"], result["n_target"]) == (10, 10, 20)
    with_interval = calibrated_score(judge, human, target, bootstrap=200, seed=1)
    assert with_interval == calibrated_score(judge, human, target, bootstrap=200, seed=1)
    low, high = with_interval["ci95"]
    assert 0.0 <= low <= high <= 1.0


def test_calibration_is_null_without_both_human_classes():
    result = calibrated_score([True, False], [True, True], [True], bootstrap=20)
    assert result["tpr"] is None
    assert result["corrected_score"] is None
    assert result["ci95"] is None
    assert result["n_bootstrap_undefined"] == 20


# --------------------------------------------------------------------------- the report


def test_report_has_the_required_keys_and_is_strict_json():
    rows, judgments = synthetic(6, items=20)
    report = agreement_report(rows, judgments, bootstrap=50)
    assert {
        "n_items",
        "n_annotators",
        "n_annotations",
        "alpha",
        "human_majority",
        "leave_one_out",
        "judges",
        "judge_pairs",
    } <= set(report)
    assert set(report["alpha"]) == {"binary", "first_failure_location", "l2_step_sets_masi"}
    assert set(report["human_majority"]) == {
        "min_annotations",
        "n_items",
        "n_with_majority",
        "n_ties",
        "n_too_few",
        "has_failure",
        "no_failure",
    }
    assert {"agreement", "n"} <= set(report["leave_one_out"]["a"])
    assert {"agreement", "agreement_has_failure", "agreement_no_failure", "cohen_kappa", "n", "ci95"} <= set(
        report["judges"]["gpt-5"]
    )
    assert list(report["judge_pairs"]) == ["gpt-5|how2judge"]
    assert {"agreement", "n"} <= set(report["judge_pairs"]["gpt-5|how2judge"])
    assert {"human_majority", "leave_one_out", "judges", "judge_pairs", "calibration"} <= set(report["denominators"])
    assert json.loads(json.dumps(report, allow_nan=False)) == report


def test_duplicate_or_contradictory_rows_are_refused():
    with pytest.raises(ValueError, match="two annotations"):
        agreement_report([ann("i1", "a", True), ann("i1", "a", False)], [])
    with pytest.raises(ValueError, match="two judgments"):
        agreement_report([], [JudgmentRow("i1", "j", True), JudgmentRow("i1", "j", True)])
    with pytest.raises(ValueError, match="has_failure is false"):
        agreement_report([ann("i1", "a", False, failure(1))], [])


def test_an_excluded_duplicate_is_not_a_duplicate():
    report = agreement_report([ann("i1", "a", True), ann("i1", "a", False, excluded=True)], [], bootstrap=0)
    assert (report["n_annotations"], report["n_excluded"]) == (1, 1)


# --------------------------------------------------------------------------- readers


def line(**fields) -> str:
    return json.dumps(fields)


GOOD = line(item_id="i1", annotator="a", has_failure=True, failures=[failure(2, l1_steps=(1,))])


def test_reader_reads_rows_counts_excluded_and_skips_blank_lines(tmp_path: Path):
    path = tmp_path / "annotations.jsonl"
    path.write_text(
        "\n".join(
            [
                GOOD,
                "",
                line(item_id="i1", annotator="b", has_failure=False, failures=[], excluded=True, extra="kept out"),
                line(item_id="i1", annotator="c", has_failure=False, failures=[]),
            ]
        )
        + "\n"
    )
    rows = read_annotations(path)
    assert [(r.item_id, r.annotator, r.has_failure, r.excluded) for r in rows] == [
        ("i1", "a", True, False),
        ("i1", "b", False, True),
        ("i1", "c", False, False),
    ]
    assert rows[0].failures == [failure(2, l1_steps=(1,))]
    assert agreement_report(rows, [], bootstrap=0)["n_excluded"] == 1


def test_reader_reads_gzip_files(tmp_path: Path):
    path = tmp_path / "judgments.jsonl.gz"
    path.write_bytes(
        gzip.compress((line(item_id="i1", judge="gpt-5", has_failure=False, critical_failures=[]) + "\n").encode())
    )
    assert read_judgments(path) == [JudgmentRow("i1", "gpt-5", False)]


@pytest.mark.parametrize(
    ("bad", "field", "problem"),
    [
        ("{not json", None, "invalid JSON"),
        ("[1, 2]", None, "expected a JSON object"),
        (line(annotator="a", has_failure=True, failures=[]), "item_id", "missing"),
        (line(item_id=3, annotator="a", has_failure=True, failures=[]), "item_id", "expected a string"),
        (line(item_id="i2", annotator="", has_failure=True, failures=[]), "annotator", "must not be empty"),
        (line(item_id="i2", annotator="a", has_failure="yes", failures=[]), "has_failure", "expected true or false"),
        (line(item_id="i2", annotator="a", has_failure=True, failures={}), "failures", "expected a list"),
        (
            line(item_id="i2", annotator="a", has_failure=True, failures=[{"L1_steps": [], "L2_steps": []}]),
            "failures[0].description",
            "missing",
        ),
        (
            line(item_id="i2", annotator="a", has_failure=True, failures=[{"description": "d", "L1_steps": []}]),
            "failures[0].L2_steps",
            "missing",
        ),
        (
            line(
                item_id="i2",
                annotator="a",
                has_failure=True,
                failures=[{"description": "d", "L1_steps": [], "L2_steps": [1, True]}],
            ),
            "failures[0].L2_steps[1]",
            "step number",
        ),
        (
            line(
                item_id="i2",
                annotator="a",
                has_failure=True,
                failures=[{"description": "d", "L1_steps": [0], "L2_steps": []}],
            ),
            "failures[0].L1_steps[0]",
            "step number",
        ),
        (
            line(item_id="i2", annotator="a", has_failure=False, failures=[failure(1)]),
            "has_failure",
            "failure(s) are listed",
        ),
        (
            line(item_id="i2", annotator="a", has_failure=True, failures=[], excluded="no"),
            "excluded",
            "expected true or false",
        ),
        (GOOD, None, "duplicate of line 1"),
    ],
)
def test_reader_names_file_line_and_field_of_a_malformed_annotation(
    tmp_path: Path, bad: str, field: str | None, problem: str
):
    path = tmp_path / "annotations.jsonl"
    path.write_text(GOOD + "\n\n" + bad + "\n")
    with pytest.raises(RecordError) as caught:
        read_annotations(path)
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), 3, field)
    assert problem in str(error)
    assert str(error).startswith(f"{path}, line 3")


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (line(item_id="i1", has_failure=True), "judge"),
        (line(item_id="i1", judge="j", has_failure=1), "has_failure"),
        (line(item_id="i1", judge="j", has_failure=True, critical_failures="none"), "critical_failures"),
    ],
)
def test_reader_names_the_line_of_a_malformed_judgment(bad: str, field: str):
    with pytest.raises(RecordError) as caught:
        parse_judgment_lines([line(item_id="i0", judge="j", has_failure=False), bad], source="judgments.jsonl")
    assert (caught.value.path, caught.value.line, caught.value.field) == ("judgments.jsonl", 2, field)


def test_reader_reports_a_line_that_is_not_utf8():
    with pytest.raises(RecordError, match=r"annotations.jsonl, line 2: not UTF-8"):
        parse_annotation_lines([GOOD.encode(), b'{"item_id": "\xff"}'], source="annotations.jsonl")


def test_reader_reports_a_missing_file(tmp_path: Path):
    with pytest.raises(RecordError, match="no such file"):
        read_annotations(tmp_path / "absent.jsonl")


def test_report_from_file_equals_report_from_rows(tmp_path: Path):
    rows, judgments = synthetic(8, items=15)
    annotations_path = tmp_path / "a.jsonl"
    annotations_path.write_text(
        "".join(
            json.dumps(
                {"item_id": r.item_id, "annotator": r.annotator, "has_failure": r.has_failure, "failures": r.failures}
            )
            + "\n"
            for r in rows
        )
    )
    judgments_path = tmp_path / "j.jsonl"
    judgments_path.write_text(
        "".join(
            json.dumps({"item_id": j.item_id, "judge": j.judge, "has_failure": j.has_failure}) + "\n" for j in judgments
        )
    )
    assert agreement_report(read_annotations(annotations_path), read_judgments(judgments_path), bootstrap=50) == (
        agreement_report(rows, judgments, bootstrap=50)
    )


def test_every_annotator_pair_in_a_full_design_is_reported():
    rows, _ = synthetic(9, items=10)
    report = agreement_report(rows, [], bootstrap=0)
    assert list(report["annotator_pairs"]) == ["|".join(p) for p in combinations("abc", 2)]
    assert all(pair["n"] == 10 for pair in report["annotator_pairs"].values())


@pytest.mark.parametrize("nominal", [True, False])
def test_bootstrap_alpha_of_a_resample_equals_alpha_of_the_resampled_items(nominal: bool):
    from annotate.stats.alpha_bootstrap import _resample_index, _weighted_alphas
    from annotate.stats.coincidence import pairable as _pairable

    generator = random.Random(13)
    # Numbers (nominal) or step sets (MASI): the one test walks both.
    matrix: list[list[Any]]
    distance: Callable[[Any, Any], float] | None
    if nominal:
        matrix = [[generator.choice([None, 1, 2, 3]) for _ in range(4)] for _ in range(25)]
        distance = None
    else:
        matrix = [
            [
                frozenset(generator.sample(range(1, 6), generator.randint(0, 2))) if generator.random() < 0.8 else None
                for _ in range(3)
            ]
            for _ in range(25)
        ]
        distance = masi_distance
    pairable = _pairable(matrix)
    units = [unit for unit in matrix if sum(v is not None for v in unit) >= 2]
    delta = (1.0 - np.eye(len(pairable.domain))) if nominal else masi_distance_matrix(pairable.domain)
    index = _resample_index(pairable, delta)
    rng = np.random.default_rng(0)
    counts = np.stack([np.bincount(rng.integers(0, len(units), len(units)), minlength=len(units)) for _ in range(5)])
    weights = counts.T.astype(float)  # units x resamples
    dense = _weighted_alphas(pairable, delta, nominal, index, weights)
    assert index.counts_t is not None
    sparse = _weighted_alphas(pairable, delta, nominal, dataclasses.replace(index, counts_t=None), weights)
    for row, value, other in zip(counts, dense, sparse):
        listed = [unit for unit, times in zip(units, row) for _ in range(times)]
        assert value == pytest.approx(coincidence_alpha(listed, distance), abs=1e-10)
        assert other == pytest.approx(value, abs=1e-12)
