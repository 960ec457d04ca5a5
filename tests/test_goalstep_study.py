"""The ``multiple_choice`` study kind (Zhang et al. 2020 §3.4, Figure 4, Table 2): goal-step
lines become study items, answers are a candidate, "none" or (ordering) "neutral", pages of
several items are reserved under the usual assignment rules, attention checks screen people
out, and the results give Table 2 (0/1/2/3 correct, yield, gold and harder tiers, alpha, human
accuracy), whose human accuracy shows on the goal-step leaderboard."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import call_command

from annotate.errors import StudyFull, SubmissionRejected
from annotate.kinds import kind_get
from annotate.kinds.base import ItemRecordError
from annotate.kinds.multiple_choice.results import ChoiceItem, task_results
from annotate.kinds.multiple_choice.study_results import (
    choice_human_accuracy,
    choice_study_results,
    choice_tier_records,
)
from annotate.models import Annotation, ParticipationState, Study
from annotate.participation.reservations import assignment_page
from annotate.participation.services import participation_consent, participation_enter
from annotate.participation.submissions import annotation_submit
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from goalstep.validation import human_accuracy

KIND = kind_get("multiple_choice")


def _line(n: int, task: str = "step_inference", label: int = 0, **extra) -> dict:
    candidates = ["wash your hands", "wash your cat", "clap your hands", "eat your protein"]
    if task == "step_ordering":
        candidates = ["handwash the silver", "dry the silver"]
    return {
        "id": f"{task}-{n}",
        "task": task,
        "prompt": f"Prevent illness {n}",
        "candidates": candidates,
        "label": label,
        "topic": "Health",
        "source_procedure_ids": [n, n + 100],
        **extra,
    }


def _study(lines: list[dict], **settings) -> Study:
    defaults: dict[str, Any] = {
        "training_enabled": False,
        "qualification_enabled": False,
        "min_seconds": 0,
        "allow_other_pids": True,
    }  # test PIDs are not Prolific's 24 hex characters
    defaults.update(settings)
    return study_create(
        name="Goal-step validation",
        kind="multiple_choice",
        items=[KIND.parse_record(line) for line in lines],
        settings=StudySettings(**defaults),
    )


def _enter(study, pid: str):
    p = participation_enter(study=study, pid=pid, prolific_study_id="S", session_id=f"s-{pid}")
    return participation_consent(participation=p)


def _answer(p, a, choice):
    return annotation_submit(participation=p, public_id=a.public_id, answer={"choice": choice}, submission_id="t")


# --- input lines -----------------------------------------------------------------------


def test_a_goalstep_build_line_becomes_an_item_with_its_label_and_provenance():
    spec = KIND.parse_record(_line(1, label=2))
    assert (spec.item_id, spec.goal, spec.expected, spec.role) == ("step_inference-1", "Prevent illness 1", 2, "main")
    assert spec.candidate_steps[1] == "wash your cat" and spec.reference_steps == []
    assert spec.source == {"task": "step_inference", "source_procedure_ids": [1, 101]}


@pytest.mark.parametrize(
    "change, field",
    [
        ({"label": 4}, "label"),
        ({"label": True}, "label"),
        ({"candidates": ["a", "b"]}, "candidates"),
        ({"task": "guessing"}, "task"),
        ({"prompt": " "}, "prompt"),
        ({"candidates": ["a", "", "c", "d"]}, "candidates[1]"),
        ({"attention_check": {"label": 9}}, "attention_check.label"),
    ],
)
def test_a_bad_line_is_refused_with_its_field(change, field):
    with pytest.raises(ItemRecordError) as error:
        KIND.parse_record({**_line(1), **change})
    assert error.value.field == field


# --- answers ---------------------------------------------------------------------------


def test_answers_are_a_candidate_none_of_the_above_or_for_ordering_neutral():
    for answer, n in (({"choice": 3}, 4), ({"choice": "none"}, 4), ({"choice": "neutral"}, 2)):
        cleaned, _ = KIND.validate_submission(answer, 0, n)
        assert cleaned is not None and cleaned["choice"] == answer["choice"]
    for bad, n in (
        ({"choice": "neutral"}, 4),
        ({"choice": "none"}, 2),
        ({"choice": 4}, 4),
        ({}, 4),
        ({"choice": True}, 4),
    ):
        cleaned, errors = KIND.validate_submission(bad, 0, n)
        assert cleaned is None and errors[0].field == "choice"
        assert "you have to choose one" in errors[0].message


@pytest.mark.django_db
def test_a_submit_without_a_choice_is_refused_and_a_choice_is_stored_with_its_correctness():
    study = _study([_line(1, label=1)])
    p = _enter(study, "pid-a")
    [a] = assignment_page(participation=p, size=5)
    with pytest.raises(SubmissionRejected, match="Choose one option"):
        _answer(p, a, None)
    result = _answer(p, a, 1)
    assert result.annotation.answer["choice"] == 1 and result.annotation.correct is True
    assert result.annotation.has_failure is None and result.annotation.label == "choice 1"


@pytest.mark.django_db
def test_the_minimum_time_applies_to_each_item():
    study = _study([_line(1)], min_seconds=30)
    p = _enter(study, "pid-fast")
    [a] = assignment_page(participation=p, size=1)
    with pytest.raises(SubmissionRejected, match="30 seconds"):
        _answer(p, a, 0)


# --- pages and assignment ---------------------------------------------------------------


@pytest.mark.django_db
def test_a_page_reserves_up_to_the_studys_items_per_page_and_a_reload_gets_the_same_page():
    study = _study([_line(n) for n in range(7)], items_per_page=3, annotators_per_item=1)
    p = _enter(study, "pid-page")
    page = assignment_page(participation=p, size=study.items_per_page)
    assert len(page) == 3 and len({a.item_id for a in page}) == 3
    assert [a.pk for a in assignment_page(participation=p, size=3)] == [a.pk for a in page]
    for a in page:
        _answer(p, a, 0)
    second = assignment_page(participation=p, size=3)
    assert len(second) == 3 and not {a.item_id for a in second} & {a.item_id for a in page}
    for a in second:
        _answer(p, a, 0)
    last = assignment_page(participation=p, size=3)
    assert len(last) == 1
    p.refresh_from_db()
    assert p.state == ParticipationState.ANNOTATING  # the page still holds an item
    _answer(p, last[0], 0)
    assert assignment_page(participation=p, size=3) == []
    p.refresh_from_db()
    assert p.state == ParticipationState.COMPLETED


@pytest.mark.django_db
def test_each_item_goes_to_k_distinct_annotators_across_pages():
    study = _study([_line(n) for n in range(4)], items_per_page=4, annotators_per_item=2)
    pages = {pid: assignment_page(participation=_enter(study, pid), size=4) for pid in ("x", "y")}
    assert len(pages["x"]) == 4 and len(pages["y"]) == 4
    with pytest.raises(StudyFull):  # every item held k times: a third is turned away at the entry
        _enter(study, "z")


@pytest.mark.django_db
def test_a_failed_attention_check_screens_out_and_excludes_the_annotators_answers():
    lines = [_line(n) for n in range(6)] + [_line(90, attention_check={"label": 2})]
    study = _study(lines, items_per_page=1, attention_check_rate=0.5, attention_max_failures=0, annotators_per_item=1)
    p = _enter(study, "pid-careless")
    for _ in range(6):
        page = assignment_page(participation=p, size=1)
        if not page:
            break
        a = page[0]
        _answer(p, a, 3 if a.role == "attention" else 0)
    p.refresh_from_db()
    assert p.state == ParticipationState.SCREENED_OUT
    assert Annotation.objects.filter(participation=p, source="attention", correct=False).exists()
    assert all(a.excluded for a in Annotation.objects.filter(participation=p, source="main"))


@pytest.mark.django_db
def test_over_http_a_question_flagged_broken_on_a_page_submits_without_a_choice_and_keeps_its_draft():
    """The page of several questions (issue 31 part 5, docs/annotation.md "Flags"): each
    question has its own "This item is broken" / "I'm unsure" controls; a question's draft keeps
    its flag across a reload; broken needs a reason (a 400 naming flag.reason, nothing stored),
    then goes in without a choice, graded neither pass nor miss and left out of the counts."""
    from django.test import Client
    from django.urls import reverse

    from annotate.studies.selectors import annotations_counted

    study = _study([_line(n) for n in range(3)], items_per_page=3, annotators_per_item=1)
    client = Client()
    entry = {"PROLIFIC_PID": "mc-flags", "STUDY_ID": "st", "SESSION_ID": "se"}
    assert client.get(reverse("annotate:entry", args=[study.slug]), entry).status_code == 302
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    page = client.get(reverse("annotate:work", args=[study.slug]))
    html = page.content.decode()
    for n in (1, 2, 3):  # one set of controls per question, each id the page's only one
        for part in ("flag-broken", "flag-reason", "flag-unsure", "flag-note", "flag-error"):
            assert html.count(f'id="question-{n}-{part}"') == 1, (n, part)
    assert html.count('value="goal_mismatch"') == 3 and html.count('data-flag-part="broken"') == 3
    items = page.context["page_state"]["items"]

    def post(url, body):
        r = client.post(url, data=json.dumps(body), content_type="application/json")
        return r.status_code, r.json()

    broken = {"flag": "broken", "reason": "other", "note": "Two candidates are the same step."}
    status, body = post(items[0]["saveUrl"], {"draft": {"choice": None, "flag": broken}, "seq": 1})
    assert status == 200 and body["draft_saved"]
    again = client.get(reverse("annotate:work", args=[study.slug])).context["page_state"]["items"]
    assert [i["assignment"] for i in again] == [i["assignment"] for i in items]
    assert again[0]["draft"] == {"choice": None, "comments": "", "flag": broken}

    status, body = post(items[0]["submitUrl"], {"answer": {"choice": None, "flag": {"flag": "broken"}}})
    assert status == 400 and "flag.reason" in {e["field"] for e in body["errors"]}
    assert not Annotation.objects.exists()

    answers = [
        {"choice": None, "flag": broken},
        {"choice": 0, "flag": {"flag": "unsure", "note": "Hands or cat?"}},
        {"choice": 2},
    ]
    for item, answer in zip(items, answers):
        status, body = post(item["submitUrl"], {"answer": answer, "submission_id": item["assignment"]})
        assert status == 200 and body["created"], body
    stored = [Annotation.objects.get(assignment__public_id=item["assignment"]) for item in items]
    assert [(a.flag, a.flag_reason, a.flag_note) for a in stored] == [
        ("broken", "other", "Two candidates are the same step."),
        ("unsure", "", "Hands or cat?"),
        ("", "", ""),
    ]
    assert [a.answer["choice"] for a in stored] == [None, 0, 2]
    assert [a.correct for a in stored] == [None, True, False]
    assert all("flag" not in a.answer for a in stored)
    assert set(annotations_counted(Annotation.objects.all())) == set(stored[1:])


# --- Table 2 ----------------------------------------------------------------------------


def test_table_2_counts_items_by_annotators_choosing_the_label_with_yield_and_tiers():
    items = [
        ChoiceItem("a", "step_inference", "Health", 0, (0, 0, 0)),
        ChoiceItem("b", "step_inference", "Health", 1, (1, 1, 2)),
        ChoiceItem("c", "step_inference", "Health", 2, (0, "none", 2)),
        ChoiceItem("d", "step_inference", "Health", 3, (0, 1, 2)),
        ChoiceItem("e", "step_inference", "Health", 0, (0, 0)),  # incomplete: left out of the table
    ]
    result = task_results(items, k=3)
    assert result["by_correct"] == {"0": 1, "1": 1, "2": 1, "3": 1}
    assert result["yield"] == 0.25 and result["gold"] == ["a"] and result["harder"] == ["b"]
    assert result["human_accuracy"] == pytest.approx(8 / 14)
    assert -1.0 <= result["alpha"] <= 1.0


def test_alpha_is_one_when_every_annotator_agrees_on_every_item():
    items = [ChoiceItem(str(n), "step_ordering", "", n % 2, (n % 2,) * 3) for n in range(6)]
    assert task_results(items, k=3)["alpha"] == pytest.approx(1.0)


@pytest.mark.django_db
def test_study_results_tiers_export_and_human_accuracy_on_the_leaderboard(tmp_path, researcher_client):
    lines = [_line(n, label=0) for n in range(3)] + [_line(n, task="step_ordering", label=1) for n in range(3, 5)]
    study = _study(lines, items_per_page=5, annotators_per_item=3)
    plans: dict[str, list[int | str]] = {"p1": [0, 0, 0, 1, 1], "p2": [0, 0, 2, 1, "neutral"], "p3": [0, 3, 2, 1, 0]}
    for pid, choices in plans.items():
        p = _enter(study, pid)
        page = assignment_page(participation=p, size=5)
        by_id = {a.item.item_id: a for a in page}
        for line, choice in zip(lines, choices):
            _answer(p, by_id[line["id"]], choice)
    results = choice_study_results(study)
    step = results["step_inference"]
    assert step["by_correct"] == {"0": 0, "1": 1, "2": 1, "3": 1}
    assert step["gold"] == ["step_inference-0"] and step["harder"] == ["step_inference-1"]
    assert results["step_ordering"]["by_correct"] == {"0": 0, "1": 1, "2": 0, "3": 1}
    assert results["step_ordering"]["yield"] == 0.5
    # The gold tier as goal-step task lines, from the command and from the study page.
    out = tmp_path / "gold.jsonl"
    call_command("export_choice_tier", "--study", study.slug, "--tier", "gold", "--output", str(out))
    gold = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["id"] for g in gold] == ["step_inference-0", "step_ordering-3"]
    assert gold[0] == {**_line(0, label=0), "topic": "Health"}
    assert [r["id"] for r in choice_tier_records(study, "harder")] == ["step_inference-1"]
    page = researcher_client.get(f"/studies/{study.slug}/")
    assert page.status_code == 200 and "Table 2" in page.content.decode()
    download = researcher_client.get(f"/studies/{study.slug}/tiers/harder.jsonl")
    assert json.loads(download.content.decode().splitlines()[0])["id"] == "step_inference-1"
    # Human accuracy of the validated items, beside model accuracy on the leaderboard.
    inference, ordering = choice_human_accuracy("step_inference"), human_accuracy("step_ordering")
    assert inference is not None and inference["accuracy"] == pytest.approx(6 / 9)
    assert ordering is not None and ordering["accuracy"] == pytest.approx(4 / 6)
    board = researcher_client.get("/goalstep/step_inference/").content.decode()
    assert "0.667" in board and "9 answers on 3 items" in board


@pytest.mark.django_db
def test_the_critical_failure_kind_keeps_its_goal_acknowledgement_and_known_answer_rules():
    """The optional kind fields the multiple-choice kind added leave critical-failure studies as they were."""
    from annotate.participation.reservations import assignment_next
    from annotate.testing import NO_FAILURE, annotator_start, read_everything, study_make

    study = study_make(n_items=2, n_gold=1, gold_answers=[False])
    p = annotator_start(study, "cf-pid")
    a = assignment_next(participation=p)
    assert a is not None
    with pytest.raises(SubmissionRejected, match="read the goal"):
        annotation_submit(participation=p, public_id=a.public_id, answer=NO_FAILURE, submission_id="t")
    read_everything(p, a)
    result = annotation_submit(participation=p, public_id=a.public_id, answer=NO_FAILURE, submission_id="t")
    assert result.annotation.source == "qualification" and result.annotation.correct is True
    assert result.annotation.has_failure is False and result.annotation.label == "no_failure"
    main = assignment_next(participation=p)
    assert main is not None
    read_everything(p, main)
    stored = annotation_submit(participation=p, public_id=main.public_id, answer=NO_FAILURE, submission_id="t")
    assert stored.annotation.source == "main" and stored.annotation.correct is None


@pytest.mark.django_db
def test_the_critical_failure_dashboards_point_a_choice_study_to_its_own_results(researcher_client):
    from django.urls import reverse

    from annotate.studies.round_selectors import study_round_summaries

    lines = [_line(n, label=0) for n in range(3)]
    study = _study(lines, items_per_page=3, annotators_per_item=2)
    for pid, choices in {"p1": [0, 0, 1], "p2": [0, 2, 1]}.items():
        p = _enter(study, pid)
        by_id = {a.item.item_id: a for a in assignment_page(participation=p, size=3)}
        for line, choice in zip(lines, choices):
            _answer(p, by_id[line["id"]], choice)
    detail = reverse("annotate:study_detail", args=[study.slug])
    for name in (
        "annotate:report_agreement",
        "annotate:report_annotators",
        "annotate:report_disagreements",
        "annotate:report_metric_agreement",
    ):
        html = researcher_client.get(reverse(name, args=[study.slug])).content.decode()
        assert 'id="other-kind-note"' in html and "is a Multiple choice (goal-step tasks) study" in html, name
        assert "carry no has_failure" in html and f'href="{detail}"' in html, name
        assert "Krippendorff's alpha over the options" in html, name
    html = researcher_client.get(reverse("annotate:report_item", args=[study.slug, lines[0]["id"]])).content.decode()
    assert 'id="other-kind-note"' in html and "critical failures on the steps" in html
    for api in ("agreement", "metric-agreement"):
        response = researcher_client.get(f"/api/studies/{study.slug}/{api}")
        assert response.status_code == 400 and "is a multiple_choice study" in response.json()["detail"]
    # The pilot-round column is the nominal alpha over the chosen options, not a binary one.
    page = researcher_client.get(detail).content.decode()
    assert "Krippendorff's α (nominal, over the options)" in page and "(binary)" not in page
    assert "Nominal Krippendorff's α over the options annotators chose" in page and "0.273" not in page
    [round_] = study_round_summaries(study)
    assert round_["alpha"] == pytest.approx(choice_study_results(study)["step_inference"]["alpha"])
    assert f"{round_['alpha']:.3f}" in page
