"""Agreement numbers mean what they say (issue 16, item 4): the counts on the study page, the
annotators report, the agreement page, the metric page and the exports come from one place
and agree; a human majority needs at least ``min_annotations_for_majority`` annotations (a
study setting, default 2) and the pages say what was left out and why; the confusion matrix
is a table; an undefined alpha is a sentence; small samples carry a note."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotate.reports.selectors import study_agreement_report
from annotate.stats.agreement import agreement_report, judge_agreement
from annotate.stats.bootstrap import sample_size_note, share_interval
from annotate.stats.majority import HumanMajority, human_majority
from annotate.stats.metric_agreement import metric_agreement_report
from annotate.stats.records import AnnotationRow, JudgmentRow
from annotate.testing import annotate_all, annotate_next, annotator_start, judged_generation_study, study_make
from core.intervals import wilson_interval

pytestmark = pytest.mark.django_db


def _wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson interval of k of n (n > 0: never None)."""
    interval = wilson_interval(k, n)
    assert interval is not None
    return interval


def ann(item: str, annotator: str, has_failure: bool) -> AnnotationRow:
    failures = [{"description": "x", "L1_steps": [1], "L2_steps": [1]}] if has_failure else []
    return AnnotationRow(item_id=item, annotator=annotator, has_failure=has_failure, failures=failures)


def rows_of(labels: dict[str, dict[str, bool]]) -> list[AnnotationRow]:
    return [ann(item, who, label) for item, by in labels.items() for who, label in by.items()]


def _text(html: str, element_id: str) -> str:
    """The text of the element with this id (tags removed, whitespace collapsed)."""
    match = re.search(rf'<(\w+)[^>]*id="{element_id}"[^>]*>(.*?)</\1>', html, re.S)
    assert match, f"no element with id {element_id!r}"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(2)).split())


# --------------------------------------------------------------------------- one selector for counts


def test_study_page_counts_each_annotators_items_like_the_annotators_report(researcher_client):
    study = study_make(n_items=10, annotators_per_item=2)
    plan = {"p1": 7, "p2": 6, "p3": 3}
    for pid, n in plan.items():
        participation = annotator_start(study, pid)
        for k in range(n):
            assert annotate_next(participation, label=k % 2 == 0) is not None
    # p3 also holds a reservation (two counts over one join multiplied them).
    from annotate.participation.reservations import assignment_next

    assert assignment_next(participation=participation) is not None

    detail = researcher_client.get(reverse("annotate:study_detail", args=[study.slug]))
    on_study_page = {row["pid"]: row["n_main"] for row in detail.context["annotators"]}
    reserved = {row["pid"]: row["n_reserved"] for row in detail.context["annotators"]}
    report = researcher_client.get(reverse("annotate:report_annotators", args=[study.slug]))
    on_report = {row["annotator"]: row["n_main"] for row in report.context["table"]}
    assert on_study_page == on_report == plan
    assert reserved == {"p1": 0, "p2": 0, "p3": 1}
    csv_rows = researcher_client.get(reverse("annotate:report_annotators", args=[study.slug]) + "?format=csv")
    lines = csv_rows.content.decode().splitlines()[1:]
    assert {line.split(",")[0]: int(line.split(",")[1]) for line in lines} == plan
    export = researcher_client.get(reverse("annotate:study_export", args=[study.slug, "jsonl"]))
    exported = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]
    assert {pid: sum(1 for r in exported if r["annotator"] == pid and r["source"] == "main") for pid in plan} == plan
    agreement = study_agreement_report(study, bootstrap=0)
    assert agreement["n_annotations"] == sum(plan.values())


# --------------------------------------------------------------------------- the majority threshold


def test_one_annotation_is_not_a_human_majority():
    rows = rows_of({f"i{k}": {f"a{k}": k % 3 == 0} for k in range(7)})  # one annotator per item
    judgments = [JudgmentRow(f"i{k}", "judge", k % 2 == 0) for k in range(7)]
    report = agreement_report(rows, judgments, bootstrap=0)
    judge = report["judges"]["judge"]
    assert judge["n"] == 0 and judge["agreement"] is None and judge["cohen_kappa"] is None
    assert judge["n_too_few_annotations"] == 7
    assert report["human_majority"] == {
        "min_annotations": 2,
        "n_items": 7,
        "n_with_majority": 0,
        "has_failure": 0,
        "no_failure": 0,
        "n_ties": 0,
        "n_too_few": 7,
    }
    assert report["calibration"]["judge"]["corrected_score"] is None


def test_the_majority_threshold_is_a_choice_and_two_is_the_least():
    rows = rows_of({"i1": {"a": True, "b": True}, "i2": {"a": True, "b": False, "c": False}, "i3": {"a": False}})
    two = human_majority(rows)
    assert two.labels == {"i1": True, "i2": False} and two.too_few == {"i3": 1}
    three = human_majority(rows, min_annotations=3)
    assert three.labels == {"i2": False} and three.too_few == {"i1": 2, "i3": 1}
    for bad in (1, 0, -3):
        with pytest.raises(ValueError, match="at least 2"):
            human_majority(rows, min_annotations=bad)
        with pytest.raises(ValueError, match="at least 2"):
            agreement_report(rows, [], min_annotations=bad)


def test_majority_counts_add_up_and_name_what_they_leave_out():
    labels = {
        "h1": {"a": True, "b": True, "c": False},
        "h2": {"a": True, "b": True},
        "h3": {"a": True, "c": True},
        "n1": {"a": False, "b": False},
        "n2": {"b": False, "c": False, "a": True},
        "t1": {"a": True, "b": False},
        "s1": {"c": True},
    }
    summary = agreement_report(rows_of(labels), [], bootstrap=0)["human_majority"]
    assert (summary["has_failure"], summary["no_failure"], summary["n_ties"], summary["n_too_few"]) == (3, 2, 1, 1)
    assert summary["n_with_majority"] == summary["has_failure"] + summary["no_failure"] == 5
    assert summary["n_items"] == summary["n_with_majority"] + summary["n_ties"] + summary["n_too_few"] == 7


def test_metric_report_and_agreement_report_count_the_majority_the_same_way():
    labels = {
        "h1": {"a": True, "b": True, "c": False},
        "n1": {"a": False, "b": False},
        "t1": {"a": True, "b": False},
        "s1": {"c": True},
    }
    majority = human_majority(rows_of(labels))
    metric = metric_agreement_report(majority=majority, signals={"judge:j": {k: 1.0 for k in labels}}, bootstrap=0)
    agreement = agreement_report(rows_of(labels), [], bootstrap=0)
    assert metric["human_majority"] == agreement["human_majority"]
    assert metric["n_items"] == agreement["human_majority"]["n_with_majority"] == 2


def test_judge_agreement_counts_the_items_left_out_by_reason():
    majority = HumanMajority(labels={"i1": True, "i2": None}, too_few={"i3": 1}, min_annotations=2)
    result = judge_agreement(majority, {"i1": True, "i2": False, "i3": True, "i4": False}, bootstrap=0)
    assert (result["n"], result["n_human_tie"], result["n_too_few_annotations"], result["n_no_human_labels"]) == (
        1,
        1,
        1,
        1,
    )
    assert (
        result["n_judged"]
        == result["n"] + result["n_human_tie"] + result["n_too_few_annotations"] + result["n_no_human_labels"]
    )


def test_leave_one_out_needs_a_majority_of_the_others_too():
    rows = rows_of({"i1": {"a": True, "b": True, "c": False}, "i2": {"a": False, "b": True}})
    loo = agreement_report(rows, [], bootstrap=0)["leave_one_out"]
    # On i2 each annotator has one other: one annotation is not a majority.
    assert loo["a"]["n"] == 0 and loo["a"]["n_others_too_few"] == 1 and loo["a"]["n_others_tie"] == 1
    # The Wilson interval of 0 of 1 (issue 27: every share carries Wilson, whatever the bootstrap).
    assert loo["c"] == {
        "agreement": 0.0,
        "ci95": [0.0, pytest.approx(_wilson(0, 1)[1])],
        "interval": "wilson",
        "interval_name": "Wilson score interval",
        "approximate": False,
        "n": 1,
        "n_items": 1,
        "n_others_tie": 0,
        "n_others_too_few": 0,
        "n_no_others": 0,
    }


# --------------------------------------------------------------------------- the study setting


def _k1_study_with_a_judge():
    study = judged_generation_study(name="One annotator per item", annotators_per_item=1)
    annotate_all(annotator_start(study, "solo"), lambda k: k % 3 == 0)
    return study


def test_agreement_page_leaves_out_items_with_one_annotation_and_says_why(researcher_client, demo):
    study = _k1_study_with_a_judge()
    assert study.min_annotations_for_majority == 2
    report = study_agreement_report(study, bootstrap=0)
    assert report["judges"]["How2Judge"]["n"] == 0 and report["judges"]["How2Judge"]["agreement"] is None
    html = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug])).content.decode()
    sentence = _text(html, "human-majority")
    assert "10 items have fewer than 2 annotations" in sentence and "0 items have a majority" in sentence
    assert "1 annotator per item" in _text(html, "majority-warning")
    assert 'id="judge-agreement"' not in html  # no chart of numbers that do not exist


def test_min_annotations_for_majority_is_validated_on_the_form_the_service_and_the_command(researcher_client, tmp_path):
    from annotate.errors import StudyInvalid
    from annotate.studies.services import study_create
    from annotate.studies.settings import StudySettings
    from annotate.testing import item_spec

    with pytest.raises(StudyInvalid, match="majority needs at least 2"):
        study_create(
            name="x",
            items=[item_spec(1)],
            settings=StudySettings(qualification_enabled=False, min_annotations_for_majority=1),
        )
    items = tmp_path / "items.jsonl"
    items.write_text(
        json.dumps({"item_id": "a", "topic": "t", "goal": "g", "reference_steps": ["r"], "candidate_steps": ["c"]})
        + "\n"
    )
    with open(items, "rb") as handle:
        response = researcher_client.post(
            reverse("annotate:study_new"),
            {
                "name": "Form",
                "kind": "critical_failure",
                "items_file": handle,
                "annotators_per_item": 3,
                "lease_minutes": 30,
                "attention_check_rate": 0,
                "attention_max_failures": 1,
                "min_annotations_for_majority": 1,
            },
        )
    assert response.status_code == 400
    assert "min_annotations_for_majority" in response.context["form"].errors
    with pytest.raises(CommandError, match="majority needs at least 2"):
        call_command(
            "create_study",
            "--name",
            "Cmd",
            "--items",
            str(items),
            "--no-qualification",
            "--min-annotations-for-majority",
            "1",
            stdout=io.StringIO(),
        )
    call_command(
        "create_study",
        "--name",
        "Cmd",
        "--items",
        str(items),
        "--no-qualification",
        "--attention-rate",
        "0",
        "--min-annotations-for-majority",
        "3",
        stdout=io.StringIO(),
    )
    from annotate.models import Study

    assert Study.objects.get(name="Cmd").min_annotations_for_majority == 3


def test_a_higher_threshold_set_on_the_study_applies_to_every_page(researcher_client):
    study = study_make(n_items=3, annotators_per_item=2, min_annotations_for_majority=3)
    for pid in ("p1", "p2"):
        participation = annotator_start(study, pid)
        while annotate_next(participation, label=True) is not None:
            pass
    report = study_agreement_report(study, bootstrap=0)
    assert report["human_majority"]["n_too_few"] == 3 and report["human_majority"]["min_annotations"] == 3
    metric = researcher_client.get(
        reverse("annotate:report_metric_agreement", args=[study.slug]) + "?format=json"
    ).json()
    assert metric["human_majority"] == report["human_majority"]


# --------------------------------------------------------------------------- the command and files


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_agreement_report_and_metric_agreement_commands_take_the_threshold(tmp_path):
    records = [
        {"item_id": item, "annotator": who, "has_failure": label, "failures": []}
        for item, by in {
            "i1": {"a": False, "b": False},
            "i2": {"a": False},
            "i3": {"a": False, "b": False, "c": False},
        }.items()
        for who, label in by.items()
    ]
    annotations = _write(tmp_path / "a.jsonl", records)
    judgments = _write(
        tmp_path / "j.jsonl", [{"item_id": i, "judge": "j", "has_failure": False} for i in ("i1", "i2", "i3")]
    )
    outputs = {}
    for command in ("agreement_report", "metric_agreement"):
        for extra in ((), ("--min-annotations", "3")):
            out = io.StringIO()
            call_command(
                command,
                "--annotations",
                str(annotations),
                "--judgments",
                str(judgments),
                "--bootstrap",
                "0",
                *extra,
                stdout=out,
            )
            outputs[(command, extra)] = json.loads(out.getvalue())["human_majority"]
        with pytest.raises(CommandError, match="at least 2"):
            call_command(command, "--annotations", str(annotations), "--min-annotations", "1", stdout=io.StringIO())
    assert outputs[("agreement_report", ())] == outputs[("metric_agreement", ())]
    assert outputs[("agreement_report", ())]["n_too_few"] == 1
    assert outputs[("metric_agreement", ("--min-annotations", "3"))]["n_too_few"] == 2


# --------------------------------------------------------------------------- the agreement page


def _majority_study():
    """Seven items, three annotators: 3 has_failure majorities, 2 no_failure, 1 tie (one
    annotator missing), 1 item with a single annotation."""
    study = study_make(n_items=7, annotators_per_item=3)
    plan = {
        "p1": [True, True, True, False, False, True, True],
        "p2": [True, True, False, False, False, False],
        "p3": [True, False, True, False, True],
    }
    for pid, labels in plan.items():
        participation = annotator_start(study, pid)
        for label in labels:
            assert annotate_next(participation, label=label) is not None
    return study


def test_agreement_page_and_metric_page_show_the_same_counts_that_add_up(researcher_client):
    study = _majority_study()
    report = study_agreement_report(study, bootstrap=0)
    summary = report["human_majority"]
    assert (
        summary["n_items"] == summary["has_failure"] + summary["no_failure"] + summary["n_ties"] + summary["n_too_few"]
    )
    agreement_html = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug])).content.decode()
    metric_html = researcher_client.get(reverse("annotate:report_metric_agreement", args=[study.slug])).content.decode()
    sentence = _text(agreement_html, "human-majority")
    assert sentence == _text(metric_html, "human-majority")
    assert (
        f"{summary['n_with_majority']} items have a majority ({summary['has_failure']} has_failure, "
        f"{summary['no_failure']} no_failure)"
    ) in sentence


def test_confusion_matrix_is_a_table_with_totals(researcher_client, demo):
    study = judged_generation_study(name="Two each", annotators_per_item=2)
    for pid in ("h1", "h2"):
        annotate_all(annotator_start(study, pid), True)
    html = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug])).content.decode()
    assert "human_has_failure" not in html and "{'" not in html  # no raw dict
    judge = study_agreement_report(study, bootstrap=0)["judges"]["How2Judge"]
    table = _text(html, "confusion-How2Judge")
    flagged = judge["confusion"]["human_has_failure"]["judge_has_failure"]
    missed = judge["confusion"]["human_has_failure"]["judge_no_failure"]
    assert table.startswith("How2Judge Judge \\ human majority has_failure no_failure total")  # caption, header
    assert f"has_failure {flagged} 0 {flagged}" in table and f"no_failure {missed} 0 {missed}" in table
    assert table.endswith(f"total {judge['n']} 0 {judge['n']}")


def test_undefined_alpha_is_a_sentence_not_an_empty_chart(researcher_client):
    study = study_make(n_items=4, annotators_per_item=1)
    participation = annotator_start(study, "solo")
    while annotate_next(participation, label=True) is not None:
        pass
    html = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug])).content.decode()
    assert 'id="alpha-rounds"' not in html
    assert "no item has two annotations" in _text(html, "alpha-undefined")
    report = study_agreement_report(study, bootstrap=0)
    assert report["alpha_undefined"]["binary"].startswith("no item has two annotations")


def test_alpha_without_variation_says_so():
    rows = rows_of({"i1": {"a": True, "b": True}, "i2": {"a": True, "b": True}})
    report = agreement_report(rows, [], bootstrap=0)
    assert report["alpha"]["binary"] is None
    assert "same value" in report["alpha_undefined"]["binary"]
    varied = agreement_report(rows_of({"i1": {"a": True, "b": False}, "i2": {"a": True, "b": True}}), [], bootstrap=0)
    assert varied["alpha_undefined"]["binary"] is None


# --------------------------------------------------------------------------- small samples


def test_small_sample_note_rule():
    assert sample_size_note(29, [0.7, 0.8]) is not None  # fewer than 30 items
    assert sample_size_note(200, [0.2, 0.6]) is not None  # an interval wider than 0.3
    assert sample_size_note(200, [0.76, 0.89]) is None
    assert sample_size_note(200, None) is None
    assert "n = 5" in (sample_size_note(5, None) or "")


def test_judge_numbers_carry_n_intervals_and_a_small_sample_note(researcher_client):
    from annotate.reports.selectors import study_annotation_rows

    study = _majority_study()
    rows = [JudgmentRow(item.item_id, "j", item.position % 2 == 0) for item in study.items.all()]
    report = agreement_report(study_annotation_rows(study), rows, bootstrap=200)
    judge = report["judges"]["j"]
    for key in ("ci95", "ci95_has_failure", "ci95_no_failure", "cohen_kappa_ci95"):
        assert key in judge
    assert judge["ci95_has_failure"] is not None and len(judge["ci95_has_failure"]) == 2
    assert report["leave_one_out"]["p1"]["ci95"] is not None
    html = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug])).content.decode()
    assert "fewer than 30" in _text(html, "small-sample")


def test_study_page_shows_the_agreement_pages_alpha_with_its_interval_and_n(researcher_client):
    study = _majority_study()
    report = study_agreement_report(study)
    row = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).context["rounds"][0]
    assert row["alpha"] == report["alpha"]["binary"] and row["alpha"] is not None
    assert row["alpha_ci95"] == report["alpha_ci95"]["binary"] and row["alpha_ci95"] is not None
    assert row["alpha_n"] == report["alpha_details"]["binary"]["n_units"] == 6


def test_share_interval_is_wilson_whatever_the_bootstrap():
    # Issue 27: a share is never bootstrapped (the percentile bootstrap gave [1, 1] at 3 of 3).
    for successes, n in ((7, 20), (45, 50), (3, 3)):
        assert share_interval(successes, n)["ci95"] == pytest.approx(list(_wilson(successes, n)))
    assert share_interval(3, 3)["ci95"][0] < 1.0
    assert share_interval(0, 0)["ci95"] is None
