"""Which metric agrees with people: AUC, agreement at the best threshold and Kendall's tau
by hand; the bootstrap against scikit-learn and SciPy on resamples; a crafted study built
through the real services whose ranking of signals is known by construction, on the page,
the downloads, the API and the command; bad input; access."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rouge_score import rouge_scorer
from sacrebleu import sentence_bleu
from scipy.stats import kendalltau
from sklearn.metrics import roc_auc_score

from annotate.metric_agreement import (
    _accuracy_by_cut,
    _best_accuracy,
    _group_weights,
    _groups,
    _model_sums,
    _weighted_auc,
    _weighted_tau,
    best_threshold,
    failure_scores,
    metric_agreement_report,
    roc_auc,
    signal_spec,
)
from annotate.metric_signals import bleu, item_signals, lcs_length, rouge_l

BASE_DIR = Path(__file__).resolve().parent.parent
SCORE = signal_spec("score")
JUDGE = signal_spec("judge:j")


def _by_key(report: dict) -> dict[str, dict]:
    return {s["key"]: s for s in report["signals"]}


# --------------------------------------------------------------------------- by hand


def test_auc_counts_ties_as_half_and_reads_higher_score_as_no_failure():
    # has_failure: items 1, 2. SCORE 0.1, 0.5 (failures) vs 0.5, 0.9 (no failure).
    # Pairs (failure, no failure) where the failure scores lower: (0.1, 0.5), (0.1, 0.9),
    # (0.5, 0.9) = 3, and (0.5, 0.5) ties = 1/2: 3.5 / 4.
    labels, values = [True, True, False, False], [0.1, 0.5, 0.5, 0.9]
    assert roc_auc(labels, values, SCORE) == pytest.approx(0.875)
    groups = _groups(failure_scores(values, SCORE), np.array(labels))
    positive, negative = _group_weights(groups, np.ones((4, 1)))
    assert _weighted_auc(positive, negative)[0] == pytest.approx(0.875)


def test_auc_is_not_flipped_for_a_signal_that_points_the_wrong_way():
    # A high SCORE on every failure: the fixed orientation gives 0, not 1.
    assert roc_auc([True, True, False, False], [0.9, 0.8, 0.2, 0.1], SCORE) == 0.0
    assert roc_auc([True, True, False], [5.0, 5.0, 5.0], SCORE) == 0.5  # constant: all ties
    assert roc_auc([True, True], [0.1, 0.2], SCORE) is None  # one class


def test_best_threshold_by_hand_prefers_the_rule_flagging_fewest_items():
    # Rules "has_failure when SCORE <= t": t = 0.1 flags item 1 -> 3/4 right; t = 0.5 flags
    # items 1-3 -> 3/4; t = 0.9 flags all -> 2/4; never -> 2/4. Tie: t = 0.1 (one flagged).
    best = best_threshold([True, True, False, False], [0.1, 0.5, 0.5, 0.9], SCORE)
    assert best == {"accuracy": 0.75, "threshold": 0.1, "rule": "has_failure when score <= 0.1", "n_flagged": 1,
                    "baseline_accuracy": 0.5}
    # A judge's verdict: "has_failure when >= 1" beats "never" when it is right more often.
    judge = best_threshold([True, False, False, True], [1.0, 0.0, 1.0, 1.0], JUDGE)
    assert (judge["accuracy"], judge["threshold"], judge["n_flagged"]) == (0.75, 1.0, 3)
    constant = best_threshold([True, False], [1.0, 1.0], JUDGE)
    assert (constant["accuracy"], constant["threshold"], constant["rule"]) == (0.5, None, "never has_failure")


def test_kendall_tau_by_hand_over_model_means():
    # Human success: A 1.0 > B 0.5 > C 0.0. SCORE means: A 0.9 > C 0.5 > B 0.2.
    # (A,B) and (A,C) concordant, (B,C) discordant: tau = (2 - 1) / 3.
    majority = {"a1": False, "a2": False, "b1": False, "b2": True, "c1": True, "c2": True}
    models = {item: item[0].upper() for item in majority}
    score = {"a1": 0.9, "a2": 0.9, "b1": 0.1, "b2": 0.3, "c1": 0.5, "c2": 0.5}
    # A judge flagging A 0/2, B 2/2, C 1/2: success A 1 > C 0.5 > B 0: the same tau.
    judge = {"a1": 0.0, "a2": 0.0, "b1": 1.0, "b2": 1.0, "c1": 1.0, "c2": 0.0}
    report = metric_agreement_report(majority=majority, models=models, signals={"score": score, "judge:j": judge},
                                     bootstrap=0)
    by_key = _by_key(report)
    assert by_key["score"]["kendall_tau"] == pytest.approx(1 / 3)
    assert by_key["judge:j"]["kendall_tau"] == pytest.approx(1 / 3)
    assert by_key["score"]["models"]["B"] == {"n": 2, "human_no_failure": 0.5, "signal_mean": pytest.approx(0.2)}
    assert by_key["score"]["n_models"] == 3 and report["n_models"] == 3


def test_ties_and_missing_values_are_left_out_and_counted():
    majority = {"i1": True, "i2": False, "i3": None, "i4": True}
    signals = {"judge:j": {"i1": 1.0, "i2": 0.0, "i3": 1.0, "other": 0.0}}
    report = metric_agreement_report(majority=majority, signals=signals, bootstrap=0)
    judge = report["signals"][0]
    assert report["human_majority"] == {"has_failure": 2, "no_failure": 1, "n_ties": 1}
    assert (judge["n"], judge["n_missing"], judge["n_unlabelled"]) == (2, 1, 2)  # i4 unjudged; i3 tied, other unannotated
    assert judge["auc"] == 1.0 and judge["kendall_tau"] is None and judge["auc_ci95"] is None


# --------------------------------------------------------------------------- bootstrap


def test_weighted_statistics_equal_scikit_learn_and_scipy_on_resamples():
    rng = np.random.default_rng(7)
    n = 60
    labels = rng.random(n) < 0.4
    values = np.round(rng.random(n) * 4) / 4 - 0.3 * labels  # ties on purpose
    models = rng.integers(0, 4, n)
    draws = rng.integers(0, n, size=(25, n))
    counts = np.stack([np.bincount(d, minlength=n) for d in draws], axis=1).astype(float)  # items x resamples
    groups = _groups(failure_scores(values, SCORE), labels)
    positive, negative = _group_weights(groups, counts)
    aucs, best = _weighted_auc(positive, negative), _best_accuracy(positive, negative)
    assert np.allclose(best, np.nanmax(_accuracy_by_cut(positive, negative), axis=0))
    goodness = values
    count = _model_sums(models, 4, counts, np.ones(n))
    taus = _weighted_tau(count, _model_sums(models, 4, counts, goodness), _model_sums(models, 4, counts, (~labels) * 1.0))
    for r, d in enumerate(draws):
        y, v, m = labels[d], values[d], models[d]
        assert aucs[r] == pytest.approx(roc_auc_score(y, -v))
        cuts = [np.inf, *np.unique(-v)]
        assert best[r] == pytest.approx(max(np.mean((-v >= t) == y) for t in cuts))
        present = sorted(set(m))
        x = [v[m == k].mean() for k in present]
        h = [(~y[m == k]).mean() for k in present]
        assert taus[r] == pytest.approx(kendalltau(x, h).statistic)


def _noisy_inputs(seed: int = 3, n: int = 200):
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < 0.45
    items = [f"i{k:03d}" for k in range(n)]
    majority = {i: bool(t) for i, t in zip(items, truth)}
    models = {i: f"m{k % 5}" for k, i in enumerate(items)}
    signals = {
        "judge:good": {i: float(t if rng.random() < 0.85 else not t) for i, t in majority.items()},
        "score": {i: float(rng.normal(1.5 - 0.6 * t, 0.5)) for i, t in majority.items()},
        "rouge_l": {i: float(rng.random()) for i in items},
        "bleu": {i: 12.0 for i in items},
    }
    return majority, models, signals


def test_intervals_contain_the_point_estimates_and_the_seed_fixes_them():
    majority, models, signals = _noisy_inputs()
    report = metric_agreement_report(majority=majority, models=models, signals=signals, bootstrap=400, seed=5)
    for s in report["signals"]:
        for point, interval in ((s["auc"], s["auc_ci95"]), (s["best_threshold"]["accuracy"], s["best_threshold"]["ci95"]),
                                (s["kendall_tau"], s["kendall_tau_ci95"])):
            if point is None:
                assert interval is None
            else:
                assert interval[0] <= point <= interval[1], (s["key"], point, interval)
    again = metric_agreement_report(majority=dict(reversed(majority.items())), models=models,
                                    signals={k: dict(reversed(v.items())) for k, v in reversed(signals.items())},
                                    bootstrap=400, seed=5)
    assert again == report  # input order does not matter
    other = metric_agreement_report(majority=majority, models=models, signals=signals, bootstrap=400, seed=6)
    assert _by_key(other)["score"]["auc_ci95"] != _by_key(report)["score"]["auc_ci95"]
    assert _by_key(other)["score"]["auc"] == _by_key(report)["score"]["auc"]


def test_constant_signal_sits_at_chance_and_its_undefined_resamples_are_counted():
    majority, models, signals = _noisy_inputs()
    signals["judge:sparse"] = {"i000": 1.0 if majority["i000"] else 0.0, "i001": 1.0 if majority["i001"] else 0.0}
    report = metric_agreement_report(majority=majority, models=models, signals=signals, bootstrap=300, seed=0)
    by_key = _by_key(report)
    assert by_key["bleu"]["auc"] == 0.5 and by_key["bleu"]["auc_ci95"] == [0.5, 0.5]
    assert by_key["bleu"]["kendall_tau"] is None and by_key["bleu"]["n_bootstrap_undefined"]["tau"] == 300
    sparse = by_key["judge:sparse"]
    if majority["i000"] != majority["i001"]:
        # Two items drawn from 200: most resamples miss one of them, so AUC is undefined there.
        assert 0 < sparse["n_bootstrap_undefined"]["auc"] < 300
    ranks = [s["key"] for s in report["signals"]]
    assert ranks.index("judge:good") < ranks.index("bleu") and ranks.index("score") < ranks.index("bleu")
    assert report["bootstrap"]["resamples"] == 300


def test_bad_bootstrap_seed_or_signal_is_refused():
    with pytest.raises(ValueError, match="bootstrap"):
        metric_agreement_report(majority={}, signals={}, bootstrap=-1)
    with pytest.raises(ValueError, match="seed"):
        metric_agreement_report(majority={}, signals={}, seed=-2)
    with pytest.raises(ValueError, match="unknown signal 'meteor'"):
        metric_agreement_report(majority={"i": True}, signals={"meteor": {"i": 1.0}})


# --------------------------------------------------------------------------- signals


def test_rouge_l_equals_the_rouge_score_package_and_bleu_equals_sacrebleu():
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    rng = np.random.default_rng(0)
    words = "add adding added the cup cups of water boil boiling stir 10 minutes bowl Bowls".split()
    for _ in range(200):
        reference = [" ".join(rng.choice(words, rng.integers(0, 9))) for _ in range(rng.integers(1, 5))]
        candidate = [" ".join(rng.choice(words, rng.integers(0, 9))) for _ in range(rng.integers(0, 5))]
        expected = scorer.score("\n".join(reference), "\n".join(candidate))["rougeL"].fmeasure
        assert rouge_l(reference, candidate) == pytest.approx(expected, abs=1e-12)
    assert lcs_length(list("ABCBDAB"), list("BDCABA")) == 4  # the textbook example
    reference, candidate = ["Boil the water for 10 minutes."], ["Boil water for ten minutes."]
    assert bleu(reference, candidate) == pytest.approx(sentence_bleu(candidate[0], reference).score)


def test_item_signals_by_hand():
    reference = ["Boil water.", "Add tea leaves.", "Wait 3 minutes."]
    values, rule = item_signals(reference, ["Boil water.", "Boil water."])
    assert rule is True
    assert values["step_count_mismatch"] == 1.0 and values["duplicate_step"] == 1.0
    same, _ = item_signals(reference, list(reference))
    assert same["rouge_l"] == 1.0 and same["bleu"] == pytest.approx(100.0) and same["length_ratio"] == 1.0
    assert same["score"] == pytest.approx(2.5) and same["dup_ngram_rate"] == 0.0


def test_signal_modules_work_offline_without_django_or_nltk_data(tmp_path):
    code = (
        "import sys, annotate.metric_agreement, annotate.metric_signals as m; "
        "print(round(m.rouge_l(['Stirring the soups'], ['Stir the soup']), 6)); "
        "print(sorted(x for x in sys.modules if x == 'django' or x.startswith('django.')))"
    )
    env = {"PATH": "", "HOME": str(tmp_path), "NLTK_DATA": str(tmp_path / "none")}
    out = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split("\n")[:2] == ["1.0", "[]"]
