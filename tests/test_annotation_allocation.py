"""Annotation allocation, the pure rules (annotate/participation/allocation.py): when an item is
undecided under dynamic k, which stratum active selection draws from, and the study's interval."""

from __future__ import annotations

from annotate.participation.allocation import (
    PILOT_LABELS,
    StratumState,
    calibration_interval,
    interval_unsettled,
    interval_width,
    item_undecided,
    residual_variance,
    strata_order,
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


def test_active_selection_fills_every_topic_to_its_pilot_before_the_gains_decide() -> None:
    states = [
        StratumState(key="big", pool=900, decided=40, no_failure=20, judge_no_failure=20, annotations=90, open=500),
        StratumState(key="small", pool=100, decided=3, no_failure=1, judge_no_failure=1, annotations=7, open=90),
    ]
    assert strata_order(states, prior_cost=2.5, pilot=10) == ["small", "big"]


def test_active_selection_prefers_the_topic_where_the_judge_predicts_people_worst() -> None:
    # Equal sizes and labels so far: where the judge's label matches every human label, little
    # is left to learn; where it matches half of them, a label narrows the interval most. A
    # topic with no open item is never offered.
    sure = StratumState(
        key="judge right",
        pool=500,
        pool_judge_no_failure=250,
        decided=40,
        no_failure=20,
        judge_no_failure=20,
        both_no_failure=20,
        annotations=80,
        open=400,
    )
    unsure = StratumState(
        key="judge a coin",
        pool=500,
        pool_judge_no_failure=250,
        decided=40,
        no_failure=20,
        judge_no_failure=20,
        both_no_failure=10,
        annotations=80,
        open=400,
    )
    done = StratumState(key="done", pool=20, decided=20, no_failure=10, annotations=40, open=0)
    assert residual_variance(sure) < residual_variance(unsure)
    assert strata_order([sure, unsure, done], prior_cost=2.5) == ["judge a coin", "judge right"]


def test_active_selection_weighs_the_annotations_a_topic_costs() -> None:
    cheap = StratumState(
        key="cheap", pool=500, decided=30, no_failure=15, judge_no_failure=15, annotations=60, open=400
    )
    costly = StratumState(
        key="costly", pool=500, decided=30, no_failure=15, judge_no_failure=15, annotations=150, open=400
    )
    assert strata_order([costly, cheap], prior_cost=2.5) == ["cheap", "costly"]


def test_the_study_interval_is_ppi_over_topics_and_cannot_stop_a_study_before_every_topic_has_its_labels() -> None:
    labelled = [("a", HAS, HAS)] * 6 + [("a", NO, NO)] * 6 + [("b", NO, NO)] * 4
    unlabelled = [("a", HAS)] * 300 + [("a", NO)] * 300 + [("b", NO)] * 400
    result = calibration_interval(labelled, unlabelled)
    assert result == ppi_score(labelled, unlabelled)  # the agreement report's estimator
    reason = interval_unsettled(result, labelled, unlabelled)
    assert reason is not None and "topic b has 4 of the 10 labels" in reason
    width = interval_width(result)
    assert width is not None and not target_reached(width, 0.99, unsettled=reason)
    more = labelled + [("b", NO, NO)] * 6
    settled = calibration_interval(more, unlabelled)
    assert interval_unsettled(settled, more, unlabelled) is None
    width = interval_width(settled)
    assert width is not None and 0 < width < 1
    assert target_reached(width, width + 0.01) and not target_reached(width, width - 0.01)
    assert not target_reached(width, None)
    # A topic with fewer items than the pilot needs all of them, not 10.
    small = [("c", NO)] * 3
    assert "topic c has 0 of the 3" in (interval_unsettled(settled, more, unlabelled + small) or "")


def test_active_selection_pilots_each_topic_to_the_labels_ppi_keeps_apart() -> None:
    assert PILOT_LABELS == PPI_MIN_LABELLED
