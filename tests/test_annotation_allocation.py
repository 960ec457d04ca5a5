"""Annotation allocation, the pure rules (annotate/participation/allocation.py): when an item is
undecided under dynamic k, which stratum active selection draws from, and the study's interval."""

from __future__ import annotations

from annotate.participation.allocation import (
    PILOT_LABELS,
    StratumState,
    calibration_interval,
    interval_width,
    item_undecided,
    strata_order,
    stratum_key,
    target_reached,
)
from annotate.stats.calibration import PPI_MIN_LABELLED, ppi_score

HAS, NO = True, False


def test_dynamic_k_stops_at_two_when_the_first_two_agree_with_the_judge() -> None:
    assert not item_undecided([HAS, HAS], judge_has_failure=HAS, min_k=2, max_k=3)
    assert not item_undecided([NO, NO], judge_has_failure=NO, min_k=2, max_k=5)


def test_dynamic_k_asks_a_third_when_the_first_two_disagree() -> None:
    assert item_undecided([HAS, NO], judge_has_failure=HAS, min_k=2, max_k=3)
    assert not item_undecided([HAS, NO, HAS], judge_has_failure=HAS, min_k=2, max_k=5)


def test_dynamic_k_asks_a_third_when_the_two_agree_against_the_judge() -> None:
    assert item_undecided([NO, NO], judge_has_failure=HAS, min_k=2, max_k=3)
    assert not item_undecided([NO, NO, NO], judge_has_failure=HAS, min_k=2, max_k=5)
    # Two against the judge and one with it: a fourth when the maximum allows one.
    assert item_undecided([NO, NO, HAS], judge_has_failure=HAS, min_k=2, max_k=5)


def test_dynamic_k_never_exceeds_the_maximum_and_always_reaches_the_minimum() -> None:
    assert not item_undecided([NO, HAS, NO, HAS], judge_has_failure=HAS, min_k=2, max_k=4)
    assert item_undecided([HAS, HAS], judge_has_failure=HAS, min_k=3, max_k=5)
    assert item_undecided([], judge_has_failure=None, min_k=2, max_k=3)


def test_dynamic_k_without_a_judge_label_needs_two_agreeing_votes() -> None:
    assert not item_undecided([NO, NO], judge_has_failure=None, min_k=2, max_k=3)
    assert item_undecided([NO, HAS], judge_has_failure=None, min_k=2, max_k=3)


def test_active_selection_fills_every_stratum_to_its_pilot_before_the_gains_decide() -> None:
    states = [
        StratumState(key="big", pool=900, decided=40, no_failure=20, annotations=90, open=500),
        StratumState(key="small", pool=100, decided=3, no_failure=1, annotations=7, open=90),
    ]
    assert strata_order(states, prior_cost=2.5, pilot=10) == ["small", "big"]


def test_active_selection_prefers_the_stratum_whose_label_narrows_the_interval_most() -> None:
    # Equal sizes and labels so far; the uncertain stratum (half no_failure) beats the one where
    # humans always agree, and a stratum with no open item is never offered.
    states = [
        StratumState(key="sure", pool=500, decided=30, no_failure=30, annotations=60, open=400),
        StratumState(key="unsure", pool=500, decided=30, no_failure=15, annotations=60, open=400),
        StratumState(key="done", pool=20, decided=20, no_failure=10, annotations=40, open=0),
    ]
    assert strata_order(states, prior_cost=2.5) == ["unsure", "sure"]


def test_active_selection_weighs_the_annotations_a_stratum_costs() -> None:
    cheap = StratumState(key="cheap", pool=500, decided=30, no_failure=15, annotations=60, open=400)
    costly = StratumState(key="costly", pool=500, decided=30, no_failure=15, annotations=150, open=400)
    assert strata_order([costly, cheap], prior_cost=2.5) == ["cheap", "costly"]


def test_the_study_interval_keeps_strata_of_uniform_labels_apart() -> None:
    # The judge's has_failure stratum has only has_failure humans: kept as its own stratum
    # (merging it with the no_failure stratum, sampled at another rate, would bias the score).
    labelled = [("t", HAS, HAS)] * 12 + [("t", NO, NO)] * 8 + [("t", NO, HAS)] * 4
    unlabelled = [("t", HAS)] * 300 + [("t", NO)] * 700
    result = calibration_interval(labelled, unlabelled)
    assert [s["stratum"] for s in result["strata"]] == [stratum_key("t", HAS), stratum_key("t", NO)]
    assert abs(result["estimate"] - 0.7 * 8 / 12) < 1e-9
    merged = ppi_score(
        [(stratum_key("t", j), j, h) for _, j, h in labelled], [(stratum_key("t", j), j) for _, j in unlabelled]
    )
    assert merged["pooled_because"]  # the default merges it
    width = interval_width(result)
    assert width is not None and 0 < width < 1
    assert target_reached(width, width + 0.01) and not target_reached(width, width - 0.01)
    assert not target_reached(width, None)


def test_active_selection_pilots_each_stratum_to_the_labels_ppi_keeps_apart() -> None:
    assert PILOT_LABELS == PPI_MIN_LABELLED
