"""The study page's numbers say how much they rest on (a product walk of studies created
through the API): an alpha or kappa on too few items to resample says "interval not
estimable (n = …)" instead of a zero-width interval, and carries its n and the small-sample
marker on every page and in the API; multiple-choice and constraint-faithfulness results
show the intervals the API has and give alpha its n and bootstrap interval; pass rates and
accuracy cells show their Wilson intervals; the multiple-choice table renders the
breakdown its heading names; and an implied hourly pay is not computed from a median
active time under one second."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.urls import reverse

from annotate.kinds import kind_get
from annotate.kinds.base import ItemSpec
from annotate.kinds.constraint_faithfulness.testing import vanilla_cake_faithfulness_study
from annotate.kinds.multiple_choice.testing import step_inference_study
from annotate.models import Annotation
from annotate.participation.drafts import assignment_save
from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.stats.agreement import agreement_report
from annotate.stats.records import AnnotationRow
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import (
    annotate_all,
    annotate_next,
    annotator_start,
    backdate,
    read_everything,
    study_make,
)
from core.intervals import share_estimate

pytestmark = pytest.mark.django_db


def _text(html: str, element_id: str) -> str:
    """The text of the element with this id (tags removed, whitespace collapsed)."""
    match = re.search(rf'<(\w+)[^>]*id="{element_id}"[^>]*>(.*?)</\1>', html, re.S)
    assert match, f"no element with id {element_id!r}"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(2)).split())


def _page(client, study) -> str:
    response = client.get(reverse("annotate:study_detail", args=[study.slug]))
    assert response.status_code == 200
    return response.content.decode()


def _percent_interval(ci: list[float]) -> str:
    """A Wilson interval as the study page shows a rate's: whole percents."""
    return f"[{round(ci[0] * 100)} %, {round(ci[1] * 100)} %]"


# --------------------------------------------------------------------------- A: tiny samples


def _disagreeing_study(n_items: int):
    """k = 2 annotators who disagree on every item: alpha -0.5 (two items) or 0 (one), and
    every bootstrap resample of the items gives the same value."""
    study = study_make(n_items=n_items, annotators_per_item=2, name=f"Tiny {n_items}")
    for pid, label in (("tiny-a", True), ("tiny-b", False)):
        assert annotate_all(annotator_start(study, pid), label) == n_items
    return study


def test_the_rule_a_zero_width_bootstrap_interval_is_not_estimable():
    from annotate.stats.bootstrap import interval_not_estimable

    reason = interval_not_estimable(2, [-0.5, -0.5])
    assert reason is not None and reason.startswith("interval not estimable (n = 2)")
    assert interval_not_estimable(40, [0.2, 0.6]) is None
    assert interval_not_estimable(3, None) is None


def test_the_agreement_report_gives_no_zero_width_alpha_interval():
    rows = [
        AnnotationRow(item_id=item, annotator=who, has_failure=label)
        for item in ("i1", "i2")
        for who, label in (("a", True), ("b", False))
    ]
    report = agreement_report(rows, [], bootstrap=200)
    assert report["alpha"]["binary"] == pytest.approx(-0.5)
    assert report["alpha_ci95"]["binary"] is None
    assert report["alpha_ci95_not_estimable"]["binary"].startswith("interval not estimable (n = 2)")
    assert "n = 2 items" in report["alpha_small_sample"]["binary"]
    assert "alpha_ci95_not_estimable" in report["denominators"]


@pytest.mark.parametrize("n_items, alpha", [(2, "-0.500"), (1, "0.000")])
def test_a_tiny_critical_failure_round_says_its_interval_is_not_estimable_on_every_page(
    researcher_client, n_items, alpha
):
    study = _disagreeing_study(n_items)
    html = _page(researcher_client, study)
    rounds = _text(html, "rounds")
    assert alpha in rounds and f"interval not estimable (n = {n_items})" in rounds, rounds
    assert f"[{alpha}, {alpha}]" not in rounds and "small sample" in rounds, rounds
    [row] = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).context["rounds"]
    assert row["alpha_ci95"] is None and row["alpha_n"] == n_items
    assert row["alpha_ci95_not_estimable"].startswith(f"interval not estimable (n = {n_items})")
    assert row["alpha_small_sample"] and f"n = {n_items} items" in row["alpha_small_sample"]
    # The API says the same: rounds, the report's rounds, the agreement report.
    [api_row] = researcher_client.get(f"/api/studies/{study.slug}/rounds/").json()
    report = researcher_client.get(f"/api/studies/{study.slug}/report/").json()
    for r in (api_row, report["rounds"][0]):
        assert r["alpha_ci95"] is None and r["alpha_n"] == n_items
        assert r["alpha_ci95_not_estimable"] == row["alpha_ci95_not_estimable"]
        assert r["alpha_small_sample"] == row["alpha_small_sample"]
    agreement = researcher_client.get(f"/api/studies/{study.slug}/agreement").json()
    assert agreement["alpha_ci95"]["binary"] is None
    assert agreement["alpha_ci95_not_estimable"]["binary"] == row["alpha_ci95_not_estimable"]
    # The agreement page: the same words, the same marker.
    page = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug])).content.decode()
    table = _text(page, "alpha-table")
    assert f"interval not estimable (n = {n_items})" in table and f"[{alpha}, {alpha}]" not in table, table
    assert "small sample" in table


def test_a_round_with_a_real_interval_shows_it_with_its_n_and_the_small_sample_marker(researcher_client):
    study = study_make(n_items=6, annotators_per_item=2, name="Six")
    annotate_all(annotator_start(study, "six-a"), lambda k: k % 2 == 0)
    annotate_all(annotator_start(study, "six-b"), lambda k: k % 3 == 0)
    [row] = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).context["rounds"]
    rounds = _text(_page(researcher_client, study), "rounds")
    assert row["alpha_n"] == 6 and "n = 6" in rounds and "small sample" in rounds, rounds
    if row["alpha_ci95"] is not None:
        low, high = row["alpha_ci95"]
        assert high > low and f"[{low:.3f}, {high:.3f}]" in rounds
        assert row["alpha_ci95_not_estimable"] is None


def _faithfulness_study(n_items: int, steps: list[tuple[str, str]]):
    study = vanilla_cake_faithfulness_study(n_items=n_items, name="Faithful tiny")
    for position, pid in enumerate(("cf-a", "cf-b")):
        p = annotator_start(study, pid)
        for _ in range(n_items):
            a = assignment_next(participation=p)
            assert a is not None
            index = int(a.item.item_id.split("-")[1]) - 1
            answer = steps[index][position]
            annotation_submit(
                participation=p,
                public_id=a.public_id,
                submission_id="t",
                answer={
                    "specific_goal_ok": "yes",
                    "meets_constraint": "yes",
                    "steps_correct": answer,
                    "wrong_steps": [{"step": 2, "error_types": ["wrong_order"]}] if answer == "no" else [],
                    "comments": "",
                },
            )
    return study


def test_a_tiny_faithfulness_study_shows_kappa_and_alpha_with_n_and_no_zero_width_interval(researcher_client):
    study = _faithfulness_study(3, [("yes", "no")] * 3)
    html = _page(researcher_client, study)
    row = re.search(r'<tr data-question="steps_correct">(.*?)</tr>', html, re.S)
    assert row is not None
    text = " ".join(re.sub(r"<[^>]+>", " ", row.group(1)).split())
    assert "-1.000" in text and "-0.667" in text, text
    assert "[-1.00, -1.00]" not in text and "[-0.67, -0.67]" not in text, text
    assert text.count("interval not estimable (n = 3)") == 2 and "small sample" in text, text
    steps = researcher_client.get(f"/api/studies/{study.slug}/report/").json()["faithfulness_results"]["questions"][
        "steps_correct"
    ]
    assert steps["fleiss_kappa_ci95"] is None and steps["alpha_ci95"] is None
    assert steps["kappa_items"] == 3 and steps["alpha_n"] == 3
    assert steps["fleiss_kappa_ci95_not_estimable"].startswith("interval not estimable (n = 3)")
    assert steps["alpha_ci95_not_estimable"].startswith("interval not estimable (n = 3)")
    assert "n = 3 items" in steps["fleiss_kappa_small_sample"] and "n = 3 items" in steps["alpha_small_sample"]
    # The pilot-round row: question 3's alpha with the same n, interval and note.
    [round_] = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).context["rounds"]
    assert round_["alpha"] == pytest.approx(steps["alpha"]) and round_["alpha_n"] == 3
    assert round_["alpha_ci95"] is None and round_["alpha_ci95_not_estimable"] == steps["alpha_ci95_not_estimable"]
    assert "interval not estimable (n = 3)" in _text(html, "rounds")


# --------------------------------------------------------------------------- B, D: multiple choice


def _choice_study():
    """Four step-inference items (label 0), k = 2: one item both annotators answer right,
    three where one does: by_correct {0: 0, 1: 3, 2: 1}, yield 1/4, accuracy 5/8."""
    study = step_inference_study(n_items=4)
    plans = {"mc-a": {"q1": 0, "q2": 0, "q3": 0, "q4": 0}, "mc-b": {"q1": 0, "q2": 1, "q3": 1, "q4": 2}}
    for pid, choices in plans.items():
        p = annotator_start(study, pid)
        while (a := assignment_next(participation=p)) is not None:
            annotation_submit(
                participation=p, public_id=a.public_id, answer={"choice": choices[a.item.item_id]}, submission_id="t"
            )
    return study


def test_multiple_choice_results_show_yield_alpha_and_accuracy_with_n_and_intervals(researcher_client):
    study = _choice_study()
    html = _page(researcher_client, study)
    context = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).context
    r = context["choice_results"]["step_inference"]
    assert r["yield"] == 0.25 and r["human_accuracy"] == 0.625 and r["answers"] == 8
    table = _text(html, "choice-results-table")
    yield_ci = share_estimate(1, 4)["ci95"]
    accuracy_ci = share_estimate(5, 8)["ci95"]
    assert f"0.250 [{yield_ci[0]:.3f}, {yield_ci[1]:.3f}] n = 4" in table, table
    assert f"0.625 [{accuracy_ci[0]:.3f}, {accuracy_ci[1]:.3f}] n = 8 answers" in table, table
    # Alpha: its n (items with two answers) and a bootstrap interval, like critical failure's.
    assert r["alpha_n"] == 4 and r["alpha_ci95"] is not None and r["alpha_ci95_not_estimable"] is None
    low, high = r["alpha_ci95"]
    assert low <= r["alpha"] <= high and high > low
    assert f"{r['alpha']:.3f} [{low:.3f}, {high:.3f}] n = 4" in table, table
    assert "small sample" in table
    # The API: the same alpha with its n and interval; the pilot-round row too.
    report = researcher_client.get(f"/api/studies/{study.slug}/report/").json()
    api = report["choice_results"]["step_inference"]
    assert api["alpha_ci95"] == [low, high] and api["alpha_n"] == 4
    assert api["yield_estimate"]["ci95"] == yield_ci and api["human_accuracy_estimate"]["ci95"] == accuracy_ci
    [round_] = report["rounds"]
    assert round_["alpha"] == pytest.approx(r["alpha"]) and round_["alpha_n"] == 4
    assert round_["alpha_ci95"] == pytest.approx([low, high])  # one task: the same items, resamples and seed
    rounds = _text(html, "rounds")
    assert f"[{low:.3f}, {high:.3f}]" in rounds and "n = 4" in rounds, rounds


def test_the_multiple_choice_table_renders_items_by_annotators_choosing_the_label(researcher_client):
    study = _choice_study()
    table = _text(_page(researcher_client, study), "choice-results-table")
    assert re.search(r"Annotators choosing the label step_inference 0 0 1 3 2 1 Complete items", table), table
    report = researcher_client.get(f"/api/studies/{study.slug}/report/").json()
    assert report["choice_results"]["step_inference"]["by_correct"] == {"0": 0, "1": 3, "2": 1}


# --------------------------------------------------------------------------- C: pass rates, accuracy


def test_attention_check_and_qualification_pass_rates_show_their_wilson_intervals(researcher_client):
    study = study_make(
        name="Checked",
        n_items=4,
        annotators_per_item=2,
        n_gold=2,
        gold_answers=[False, False],
        qualification_pass=1,
        n_attention=2,
        attention_answers=[False, False],
        attention_check_rate=0.5,
    )
    for pid in ("chk-a", "chk-b"):
        annotate_all(annotator_start(study, pid), False)
    body = researcher_client.get(f"/api/studies/{study.slug}/").json()["progress"]
    attention, qualification = body["attention_checks"], body["qualification"]
    assert attention["n"] >= 1 and qualification["n"] >= 1
    progress = _text(_page(researcher_client, study), "progress")
    for estimate in (attention, qualification):
        shown = f"{round(estimate['share'] * 100)} % of {estimate['n']} {_percent_interval(estimate['ci95'])}"
        assert shown in progress, (shown, progress)


def test_faithfulness_accuracy_cells_show_their_wilson_intervals(researcher_client):
    study = _faithfulness_study(3, [("yes", "yes")] * 3)
    html = _page(researcher_client, study)
    accuracy = _text(html, "faithfulness-accuracy")
    assert f"100 % (3/3) {_percent_interval(share_estimate(3, 3)['ci95'])}" in accuracy, accuracy
    page = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).context["faithfulness_results"]
    api = researcher_client.get(f"/api/studies/{study.slug}/report/").json()["faithfulness_results"]
    assert page["accuracy"]["all"]["steps_correct"]["ci95"] == api["accuracy"]["all"]["steps_correct"]["ci95"]


# --------------------------------------------------------------------------- E: hourly pay


def test_no_hourly_pay_from_a_median_active_time_under_a_second(researcher_client):
    study = study_make(n_items=4, annotators_per_item=1, payment_per_item=Decimal("1.00"), name="Fast")
    annotate_all(annotator_start(study, "fast-a"), False)
    Annotation.objects.filter(study=study).update(active_seconds=0.127)
    html = _page(researcher_client, study)
    pay = _text(html, "hourly-pay")
    assert "USD/h" not in pay and "28346" not in pay, pay
    assert "cannot be estimated from a median active time under 1 s" in pay and "n = 4" in pay, pay
    assert researcher_client.get(f"/api/studies/{study.slug}/report/").json()["hourly_pay"] is None
    assert researcher_client.get(f"/api/studies/{study.slug}/").json()["progress"]["hourly_pay"] is None


def test_an_hourly_pay_from_a_real_median_carries_its_n(researcher_client):
    study = study_make(n_items=2, annotators_per_item=1, payment_per_item=Decimal("1.00"), name="Paid")
    p = annotator_start(study, "paid-a")
    for _ in range(2):
        a = assignment_next(participation=p)
        assert a is not None
        read_everything(p, a)
        backdate(a, 120)
        assignment_save(participation=p, public_id=a.public_id, active_ms=120_000)
        annotation_submit(participation=p, public_id=a.public_id, answer={"has_failure": False, "failures": []})
    assert annotate_next(p, label=False) is None
    pay = _text(_page(researcher_client, study), "hourly-pay")
    assert "30.00 USD/h" in pay and "n = 2" in pay, pay
