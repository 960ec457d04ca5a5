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

from annotate.stats.majority import HumanMajority
from annotate.stats.metric_agreement import metric_agreement_report
from annotate.stats.ranking import (
    accuracy_by_cut,
    best_accuracy,
    best_threshold,
    group_weights,
    model_sums,
    roc_auc,
    score_groups,
    weighted_auc,
    weighted_tau,
)
from annotate.stats.signals import bleu, failure_scores, item_signals, lcs_length, rouge_l, signal_spec

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
    groups = score_groups(failure_scores(values, SCORE), np.array(labels))
    positive, negative = group_weights(groups, np.ones((4, 1)))
    assert weighted_auc(positive, negative)[0] == pytest.approx(0.875)


def test_auc_is_not_flipped_for_a_signal_that_points_the_wrong_way():
    # A high SCORE on every failure: the fixed orientation gives 0, not 1.
    assert roc_auc([True, True, False, False], [0.9, 0.8, 0.2, 0.1], SCORE) == 0.0
    assert roc_auc([True, True, False], [5.0, 5.0, 5.0], SCORE) == 0.5  # constant: all ties
    assert roc_auc([True, True], [0.1, 0.2], SCORE) is None  # one class


def test_best_threshold_by_hand_prefers_the_rule_flagging_fewest_items():
    # Rules "has_failure when SCORE <= t": t = 0.1 flags item 1 -> 3/4 right; t = 0.5 flags
    # items 1-3 -> 3/4; t = 0.9 flags all -> 2/4; never -> 2/4. Tie: t = 0.1 (one flagged).
    best = best_threshold([True, True, False, False], [0.1, 0.5, 0.5, 0.9], SCORE)
    assert best == {
        "accuracy": 0.75,
        "threshold": 0.1,
        "rule": "has_failure when score <= 0.1",
        "n_flagged": 1,
        "baseline_accuracy": 0.5,
    }
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
    report = metric_agreement_report(
        majority=HumanMajority(majority), models=models, signals={"score": score, "judge:j": judge}, bootstrap=0
    )
    by_key = _by_key(report)
    assert by_key["score"]["kendall_tau"] == pytest.approx(1 / 3)
    assert by_key["judge:j"]["kendall_tau"] == pytest.approx(1 / 3)
    assert by_key["score"]["models"]["B"] == {"n": 2, "human_no_failure": 0.5, "signal_mean": pytest.approx(0.2)}
    assert by_key["score"]["n_models"] == 3 and report["n_models"] == 3


def test_ties_and_missing_values_are_left_out_and_counted():
    majority = {"i1": True, "i2": False, "i3": None, "i4": True}
    signals = {"judge:j": {"i1": 1.0, "i2": 0.0, "i3": 1.0, "other": 0.0}}
    report = metric_agreement_report(majority=HumanMajority(majority), signals=signals, bootstrap=0)
    judge = report["signals"][0]
    assert report["human_majority"] == {
        "min_annotations": 2,
        "n_items": 4,
        "n_with_majority": 3,
        "has_failure": 2,
        "no_failure": 1,
        "n_ties": 1,
        "n_too_few": 0,
    }
    assert (judge["n"], judge["n_missing"], judge["n_unlabelled"]) == (
        2,
        1,
        2,
    )  # i4 unjudged; i3 tied, other unannotated
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
    groups = score_groups(failure_scores(values, SCORE), labels)
    positive, negative = group_weights(groups, counts)
    aucs, best = weighted_auc(positive, negative), best_accuracy(positive, negative)
    assert np.allclose(best, np.nanmax(accuracy_by_cut(positive, negative), axis=0))
    goodness = values
    count = model_sums(models, 4, counts, np.ones(n))
    taus = weighted_tau(
        count, model_sums(models, 4, counts, goodness), model_sums(models, 4, counts, (~labels).astype(float))
    )
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
    report = metric_agreement_report(
        majority=HumanMajority(majority), models=models, signals=signals, bootstrap=400, seed=5
    )
    for s in report["signals"]:
        for point, interval, reason in (
            (s["auc"], s["auc_ci95"], s["auc_ci95_not_estimable"]),
            (s["best_threshold"]["accuracy"], s["best_threshold"]["ci95"], s["best_threshold"]["ci95_not_estimable"]),
            (s["kendall_tau"], s["kendall_tau_ci95"], s["kendall_tau_ci95_not_estimable"]),
        ):
            if point is None or reason:
                assert interval is None
            else:
                assert interval[0] <= point <= interval[1], (s["key"], point, interval)
    again = metric_agreement_report(
        majority=HumanMajority(dict(reversed(majority.items()))),
        models=models,
        signals={k: dict(reversed(v.items())) for k, v in reversed(signals.items())},
        bootstrap=400,
        seed=5,
    )
    assert again == report  # input order does not matter
    other = metric_agreement_report(
        majority=HumanMajority(majority), models=models, signals=signals, bootstrap=400, seed=6
    )
    assert _by_key(other)["score"]["auc_ci95"] != _by_key(report)["score"]["auc_ci95"]
    assert _by_key(other)["score"]["auc"] == _by_key(report)["score"]["auc"]


def test_constant_signal_sits_at_chance_and_its_undefined_resamples_are_counted():
    majority, models, signals = _noisy_inputs()
    signals["judge:sparse"] = {"i000": 1.0 if majority["i000"] else 0.0, "i001": 1.0 if majority["i001"] else 0.0}
    report = metric_agreement_report(
        majority=HumanMajority(majority), models=models, signals=signals, bootstrap=300, seed=0
    )
    by_key = _by_key(report)
    # Issue 27: a constant signal's AUC has no interval (every resample gives 0.5), not [0.5, 0.5].
    assert by_key["bleu"]["auc"] == 0.5 and by_key["bleu"]["auc_ci95"] is None
    assert by_key["bleu"]["auc_ci95_not_estimable"].startswith("interval not estimable (n = 200)")
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
        metric_agreement_report(majority=HumanMajority({}), signals={}, bootstrap=-1)
    with pytest.raises(ValueError, match="seed"):
        metric_agreement_report(majority=HumanMajority({}), signals={}, seed=-2)
    with pytest.raises(ValueError, match="unknown signal 'meteor'"):
        metric_agreement_report(majority=HumanMajority({"i": True}), signals={"meteor": {"i": 1.0}})


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
        "import sys, annotate.stats.metric_agreement, annotate.stats.signals as m; "
        "print(round(m.rouge_l(['Stirring the soups'], ['Stir the soup']), 6)); "
        "print(sorted(x for x in sys.modules if x == 'django' or x.startswith('django.')))"
    )
    env = {"PATH": "", "HOME": str(tmp_path), "NLTK_DATA": str(tmp_path / "none")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=BASE_DIR, capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.split("\n")[:2] == ["1.0", "[]"]


# --------------------------------------------------------------------------- a crafted study


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("metric_agreement", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_crafted_study_ranks_the_judge_equal_to_the_majority_first(crafted):
    from annotate.reports.metric_selectors import study_metric_agreement_report

    report = study_metric_agreement_report(crafted, bootstrap=200, seed=0)
    assert (report["n_items"], report["n_ties"], report["n_models"]) == (36, 0, 3)
    assert report["human_majority"] == {
        "min_annotations": 2,
        "n_items": 36,
        "n_with_majority": 36,
        "has_failure": 18,
        "no_failure": 18,
        "n_ties": 0,
        "n_too_few": 0,
    }
    keys = [s["key"] for s in report["signals"]]
    by_key = _by_key(report)
    oracle, noisy, always = by_key["judge:oracle"], by_key["judge:noisy"], by_key["judge:always"]
    assert keys[0] == "judge:oracle" and oracle["rank"] == 1
    assert (oracle["auc"], oracle["best_threshold"]["accuracy"], oracle["kendall_tau"]) == (1.0, 1.0, 1.0)
    # Perfect separation: every resample gives 1, so no interval (issue 27), not [1.0, 1.0].
    assert oracle["auc_ci95"] is None and oracle["auc_ci95_not_estimable"].startswith("interval not estimable (n = 36)")
    assert noisy["auc"] == pytest.approx(5 / 6) and noisy["best_threshold"]["accuracy"] == pytest.approx(30 / 36)
    assert noisy["kendall_tau"] == pytest.approx(1 / 3)
    assert always["auc"] == 0.5 and always["kendall_tau"] is None
    assert keys.index("judge:noisy") < keys.index("judge:always")
    # Every reference-based signal is computed, on every item, and cannot reach AUC 1.
    for key in (
        "score",
        "score_r_scale",
        "score_order",
        "score_semantics",
        "rouge_l",
        "bleu",
        "length_ratio",
        "step_count_mismatch",
        "duplicate_step",
        "dup_ngram_rate",
    ):
        assert by_key[key]["n"] == 36 and by_key[key]["auc"] < 1.0, key
    assert by_key["score"]["note"] == "components: 36 items by the rule-based fallback"
    assert report["score_components"] == {"rule": 36}
    for s in report["signals"]:
        for point, interval, reason in (
            (s["auc"], s["auc_ci95"], s["auc_ci95_not_estimable"]),
            (s["kendall_tau"], s["kendall_tau_ci95"], s["kendall_tau_ci95_not_estimable"]),
        ):
            # A point without an interval says why (issue 27: never a zero-width interval).
            assert point is None or (interval is None and reason) or interval[0] <= point <= interval[1]


def test_score_reads_stored_components_when_the_run_has_them(crafted):
    from annotate.reports.metric_selectors import study_metric_agreement_report
    from judging.components import rule_based_steps
    from judging.models import ComponentExtraction, ComponentsRun, GenerationRun, RunStatus
    from judging.score_services import steps_hash

    run = GenerationRun.objects.get(name="craft-model-a")
    extractor = "llm:test-model@0123456789ab"
    ComponentsRun.objects.create(
        name="craft-components",
        generation_run=run,
        extractor=extractor,
        prompt_file="extract_components.txt",
        prompt_hash="0123456789ab",
        status=RunStatus.DONE,
    )
    step_lists = {
        tuple(s) for g in run.generations.select_related("procedure") for s in (g.procedure.steps, g.predicted_steps)
    }
    extractions = []
    for steps in step_lists:
        components = rule_based_steps(steps)
        assert components is not None, steps
        extractions.append(
            ComponentExtraction(
                steps_hash=steps_hash(list(steps)),
                extractor=extractor,
                steps=list(steps),
                components=[c.as_dict() for c in components],
            )
        )
    ComponentExtraction.objects.bulk_create(extractions)
    report = study_metric_agreement_report(crafted, bootstrap=0)
    assert report["score_components"] == {extractor: 12, "rule": 24}
    assert _by_key(report)["score_r_scale"]["note"] == (
        f"components: 12 items by {extractor}, 24 items by the rule-based fallback"
    )


def test_page_shows_the_ranking_chart_notes_and_downloads(crafted, researcher_client):
    from annotate.reports.metric_selectors import study_metric_agreement_report

    url = reverse("annotate:report_metric_agreement", args=[crafted.slug])
    html = researcher_client.get(url).content.decode()
    rows = [line.split('data-signal="')[1].split('"')[0] for line in html.splitlines() if 'data-signal="' in line]
    assert rows[0] == "judge:oracle" and rows.index("judge:noisy") < rows.index("judge:always") and len(rows) == 13
    assert 'id="metric-agreement-chart"' in html and "/static/vendor/plotly.min.js" in html
    assert "Orientation is fixed in advance" in html and "ties count ½" in html
    report = researcher_client.get(url + "?format=json").json()
    assert report == json.loads(json.dumps(study_metric_agreement_report(crafted)))
    csv_lines = researcher_client.get(url + "?format=csv").content.decode().splitlines()
    assert csv_lines[0].startswith("rank,key,label,family,higher_means,n,") and len(csv_lines) == 14
    assert csv_lines[1].startswith("1,judge:oracle,How2Score · oracle,judge,has_failure,36,18,18,1.0,,,1.0,,,1.0,")


def test_command_and_api_give_the_page_report(crafted, researcher_client, tmp_path):
    url = reverse("annotate:report_metric_agreement", args=[crafted.slug])
    page = researcher_client.get(url + "?format=json").json()
    assert json.loads(_run("--study", crafted.slug)) == page
    output = tmp_path / "report.json"
    _run("--study", crafted.slug, "--bootstrap", "50", "--seed", "4", "--output", str(output))
    api = researcher_client.get(f"/api/studies/{crafted.slug}/metric-agreement?bootstrap=50&seed=4")
    assert api.status_code == 200 and api.json() == json.loads(output.read_text())
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []  # no temporary file left
    bad = researcher_client.get(f"/api/studies/{crafted.slug}/metric-agreement?bootstrap=lots")
    assert bad.status_code == 400 and "bootstrap" in bad.json()
    assert researcher_client.get(f"/api/studies/{crafted.slug}/metric-agreement?seed=-1").status_code == 400
    item_id = crafted.items.order_by("item_id").values_list("item_id", flat=True).first()
    again = _write(tmp_path / "again.jsonl", [{"item_id": item_id, "judge": "oracle", "has_failure": True}])
    with pytest.raises(CommandError, match=f"two judgments of item '{item_id}' by judge 'oracle'"):
        _run("--study", crafted.slug, "--judgments", str(again))


def test_study_page_and_agreement_dashboard_link_to_the_metric_page(crafted, researcher_client):
    url = reverse("annotate:report_metric_agreement", args=[crafted.slug])
    for page in ("annotate:study_detail", "annotate:report_agreement"):
        html = researcher_client.get(reverse(page, args=[crafted.slug])).content.decode()
        assert f'href="{url}" id="metric-agreement-link"' in html, page


def test_only_researchers_reach_the_page_and_the_api(crafted, client, django_user_model):
    url = reverse("annotate:report_metric_agreement", args=[crafted.slug])
    api = f"/api/studies/{crafted.slug}/metric-agreement"
    assert client.get(url).status_code == 302  # to the login page
    assert client.get(api).status_code in (401, 403)
    nobody = django_user_model.objects.create_user(username="nobody", password="nobody-Password-1")
    client.force_login(nobody)
    assert client.get(url).status_code == 403 and client.get(api).status_code == 403


def test_openapi_schema_lists_the_endpoint(researcher_client):
    import yaml

    schema = yaml.safe_load(researcher_client.get("/api/schema/").content)
    operation = schema["paths"]["/api/studies/{slug}/metric-agreement/"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"slug", "bootstrap", "seed"}


@pytest.mark.parametrize("kind", ["multiple_choice", "constraint_faithfulness"])
def test_a_study_of_another_kind_is_refused(researcher_client, db, kind):
    from annotate.testing import study_make

    study = study_make(n_items=2)
    study.kind = kind
    study.save(update_fields=["kind"])
    # The page says why there is nothing to rank and where the kind's results are.
    for query in ("", "?format=json", "?format=csv"):
        response = researcher_client.get(reverse("annotate:report_metric_agreement", args=[study.slug]) + query)
        html = response.content.decode()
        assert response.status_code == 200 and response["Content-Type"].startswith("text/html"), query
        assert 'id="other-kind-note"' in html and "carry no has_failure" in html
        assert "ranks automatic signals by their agreement with the human majority" in html
        assert f'href="{reverse("annotate:study_detail", args=[study.slug])}"' in html
    response = researcher_client.get(f"/api/studies/{study.slug}/metric-agreement")
    assert response.status_code == 400
    assert response.json()["detail"] == (
        f"study {study.slug!r} is a {kind} study: its answers carry no has_failure, "
        f"so there is no metric-agreement report; its results are on the study page"
    )
    assert researcher_client.get("/api/studies/missing/metric-agreement").status_code == 404
    with pytest.raises(CommandError, match="metric agreement needs has_failure labels"):
        _run("--study", study.slug)
    with pytest.raises(CommandError, match="no study with slug 'missing'"):
        _run("--study", "missing")


def test_a_study_without_labels_says_so(researcher_client, db):
    from annotate.testing import study_make

    study = study_make(n_items=2)
    html = researcher_client.get(reverse("annotate:report_metric_agreement", args=[study.slug])).content.decode()
    assert 'id="no-majority"' in html


# --------------------------------------------------------------------------- the command on files


def _write(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def _annotation(item: str, annotator: str, has_failure: bool) -> dict:
    failures = [{"description": "breaks it", "L1_steps": [1], "L2_steps": [1]}] if has_failure else []
    return {"item_id": item, "annotator": annotator, "has_failure": has_failure, "failures": failures}


@pytest.fixture
def files(tmp_path):
    annotations = [
        _annotation(i, a, label)
        for i, label in (("i1", True), ("i2", False), ("i3", True), ("i4", False))
        for a in ("x", "y")
    ]
    annotations += [_annotation("i5", "x", True), _annotation("i5", "y", False)]  # a tie
    reference = ["Boil water.", "Add tea leaves.", "Wait three minutes.", "Pour the tea."]
    generations = [
        {
            "item_id": "i1",
            "model": "m1",
            "reference_steps": reference,
            "candidate_steps": ["Boil water.", "Pour the tea."],
        },
        {"item_id": "i2", "model": "m1", "reference_steps": reference, "candidate_steps": list(reference)},
        {
            "item_id": "i3",
            "source": {"model": "m2"},
            "reference_steps": reference,
            "candidate_steps": ["Pour the tea."] * 3,
        },
        {"item_id": "i4", "model": "m2", "reference_steps": reference, "candidate_steps": reference[:3] + ["Pour it."]},
        {"item_id": "i5", "model": "m2", "reference_steps": reference, "candidate_steps": ["Drink."]},
    ]
    judgments = [
        {"item_id": i, "judge": "j", "has_failure": label}
        for i, label in (("i1", True), ("i2", False), ("i3", False), ("i4", False), ("i5", True))
    ]
    return (
        _write(tmp_path / "annotations.jsonl", annotations),
        _write(tmp_path / "generations.jsonl", generations),
        _write(tmp_path / "judgments.jsonl", judgments),
    )


def test_command_on_files_scores_file_items_from_their_steps(files):
    annotations, generations, judgments = files
    report = json.loads(
        _run(
            "--annotations",
            str(annotations),
            "--generations",
            str(generations),
            "--judgments",
            str(judgments),
            "--bootstrap",
            "100",
        )
    )
    by_key = _by_key(report)
    assert (report["n_items"], report["n_ties"], report["n_models"]) == (4, 1, 2)
    assert by_key["judge:j"]["auc"] == 0.75  # has_failure i1 (flagged) i3 (missed); no_failure i2, i4 (right)
    assert by_key["judge:j"]["n_unlabelled"] == 1  # i5 is tied
    assert by_key["rouge_l"]["n"] == 4 and by_key["rouge_l"]["auc"] == 1.0  # failures overlap less here
    assert by_key["score"]["note"] == "components: 4 items by the rule-based fallback"
    assert by_key["duplicate_step"]["models"] == {
        "m1": {"n": 2, "human_no_failure": 0.5, "signal_mean": 0.0},
        "m2": {"n": 2, "human_no_failure": 0.5, "signal_mean": 0.5},
    }
    only_judges = json.loads(_run("--annotations", str(annotations), "--judgments", str(judgments), "--bootstrap", "0"))
    assert [s["key"] for s in only_judges["signals"]] == ["judge:j"] and only_judges["n_models"] == 0


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            '{"item_id": "i1", "reference_steps": ["a"], "candidate_steps": ["b", 3]}',
            "generations.jsonl, line 2, field 'candidate_steps[1]': expected a string, got int",
        ),
        (
            '{"item_id": "i1", "reference_steps": [], "candidate_steps": []}',
            "generations.jsonl, line 2, field 'reference_steps': expected at least one step",
        ),
        ('{"item_id": "i1", "candidate_steps": []}', "generations.jsonl, line 2, field 'reference_steps': missing"),
        (
            '{"item_id": "i1", "reference_steps": ["a"], "candidate_steps": [], "model": 7}',
            "generations.jsonl, line 2, field 'model': expected a non-empty string or null, got int 7",
        ),
        (
            '{"item_id": "i0", "reference_steps": ["a"], "candidate_steps": []}',
            "generations.jsonl, line 2: duplicate of line 1 (same item_id 'i0')",
        ),
        ('{"item_id": "i1", ', "generations.jsonl, line 2: invalid JSON"),
    ],
)
def test_bad_generations_lines_name_file_line_and_field(tmp_path, files, line, expected):
    annotations, _, _ = files
    generations = _write(
        tmp_path / "generations.jsonl", ['{"item_id": "i0", "reference_steps": ["a"], "candidate_steps": ["b"]}', line]
    )
    output = tmp_path / "out.json"
    with pytest.raises(CommandError) as error:
        _run("--annotations", str(annotations), "--generations", str(generations), "--output", str(output))
    assert expected in str(error.value)
    assert not output.exists()


def test_bad_annotations_judgments_and_options_are_refused(tmp_path, files):
    annotations, generations, judgments = files
    bad = _write(tmp_path / "bad-judgments.jsonl", [{"item_id": "i1", "judge": "j", "has_failure": "yes"}])
    with pytest.raises(CommandError, match=r"bad-judgments.jsonl, line 1, field 'has_failure': expected true or false"):
        _run("--annotations", str(annotations), "--judgments", str(bad))
    with pytest.raises(CommandError, match=r"missing.jsonl: no such file"):
        _run("--annotations", str(tmp_path / "missing.jsonl"))
    with pytest.raises(CommandError, match="--generations goes with --annotations"):
        _run("--study", "any", "--generations", str(generations))
