"""The ``constraint_faithfulness`` study kind (CoScript, Yuan et al. 2023: §4.4, Table 10,
App. D): CoScript export lines become items, bad lines are refused with line and field and
nothing is created, the three questions and the wrong steps with their error types are
validated by the server, drafts are kept, items go to k distinct annotators, attention checks
and qualification items have known answers per question, and the study page reports Fleiss'
kappa, Krippendorff's alpha, accuracy by constraint type and error-type counts."""

from __future__ import annotations

import json
from typing import Any

import krippendorff
import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from annotate.constants import FAITHFULNESS_MIN_SECONDS_DEFAULT
from annotate.errors import DraftRejected, StudyFull, SubmissionRejected
from annotate.kinds import kind_get
from annotate.kinds.base import ItemRecordError
from annotate.kinds.constraint_faithfulness.definition import goal_parts
from annotate.kinds.constraint_faithfulness.questions import ERROR_TYPES
from annotate.kinds.constraint_faithfulness.results import FaithfulnessItem, majority_yes, study_results
from annotate.kinds.constraint_faithfulness.study_results import faithfulness_study_results
from annotate.models import Annotation, ParticipationState, Study
from annotate.participation.drafts import assignment_save
from annotate.participation.reservations import assignment_next
from annotate.participation.services import participation_consent, participation_enter
from annotate.participation.submissions import annotation_submit
from annotate.reports.selectors import calibration_from_studies
from annotate.stats.kappa import count_table, fleiss_kappa, fleiss_kappa_interval
from annotate.studies.round_selectors import study_round_summaries
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import backdate

KIND = kind_get("constraint_faithfulness")

YES_ALL = {"specific_goal_ok": "yes", "meets_constraint": "yes", "steps_correct": "yes", "wrong_steps": []}


def _line(n: int = 1, constraint_type: str = "modifier", **extra) -> dict:
    return {
        "id": f"cs-{n}",
        "abstract_goal": "Make a cake",
        "specific_goal": "Make a vanilla cake",
        "constraint": "Vanilla",
        "constraint_type": constraint_type,
        "topic": "Food",
        "steps": [
            "Gather your ingredients.",
            "Preheat the oven to 325 °F.",
            "Cream the butter and sugar.",
            "Add the eggs and vanilla.",
            "Bake the cake for 1 hour 15 minutes.",
        ],
        "source": {"procedure_id": 7, "candidate": n},
        **extra,
    }


def _answer(q1="yes", q2="yes", q3="yes", wrong=None, comments=""):
    return {
        "specific_goal_ok": q1,
        "meets_constraint": q2,
        "steps_correct": q3,
        "wrong_steps": wrong or [],
        "comments": comments,
    }


def _study(lines: list[dict], **settings) -> Study:
    defaults: dict[str, Any] = {
        "training_enabled": False,
        "qualification_enabled": False,
        "min_seconds": 0,
        "attention_check_rate": 0,
        "allow_other_pids": True,
    }  # test PIDs are not Prolific's 24 hex characters
    defaults.update(settings)
    return study_create(
        name="Constraint faithfulness",
        kind="constraint_faithfulness",
        items=[KIND.parse_record(line) for line in lines],
        settings=StudySettings(**defaults),
    )


def _enter(study, pid: str):
    p = participation_enter(study=study, pid=pid, prolific_study_id="S", session_id=f"s-{pid}")
    return participation_consent(participation=p)


def _submit(p, a, answer):
    return annotation_submit(participation=p, public_id=a.public_id, answer=answer, submission_id="t")


# --- input lines -----------------------------------------------------------------------------


def test_a_coscript_export_line_becomes_an_item_with_its_goals_constraint_and_provenance():
    spec = KIND.parse_record(_line(3, constraint_type="method"))
    assert (spec.item_id, spec.goal, spec.role, spec.topic) == ("cs-3", "Make a vanilla cake", "main", "Food")
    assert spec.candidate_steps[3] == "Add the eggs and vanilla." and spec.reference_steps == []
    assert spec.source == {
        "procedure_id": 7,
        "candidate": 3,
        "abstract_goal": "Make a cake",
        "constraint": "Vanilla",
        "constraint_type": "method",
    }
    assert spec.expected is None


def test_known_answers_of_attention_checks_and_qualification_items_are_kept_per_question():
    check = KIND.parse_record(_line(attention_check={"meets_constraint": "no"}))
    gold = KIND.parse_record(
        _line(qualification={"steps_correct": "yes", "specific_goal_ok": "yes", "explanation": "A faithful script."})
    )
    assert (check.role, check.expected) == ("attention", {"meets_constraint": "no"})
    assert (gold.role, gold.expected, gold.explanation) == (
        "qualification",
        {"specific_goal_ok": "yes", "steps_correct": "yes"},
        "A faithful script.",
    )


@pytest.mark.parametrize(
    "change, field",
    [
        ({"id": " "}, "id"),
        ({"id": None}, "id"),
        ({"abstract_goal": ""}, "abstract_goal"),
        ({"abstract_goal": None}, "abstract_goal"),
        ({"specific_goal": 5}, "specific_goal"),
        ({"constraint": "  "}, "constraint"),
        ({"constraint_type": "purpose"}, "constraint_type"),
        ({"constraint_type": None}, "constraint_type"),
        ({"steps": []}, "steps"),
        ({"steps": "1. Mix."}, "steps"),
        ({"steps": ["Mix.", "", "Bake."]}, "steps[1]"),
        ({"steps": ["Mix.", 3]}, "steps[1]"),
        ({"topic": ["Food"]}, "topic"),
        ({"source": "coscript"}, "source"),
        ({"attention_check": "no"}, "attention_check"),
        ({"attention_check": {}}, "attention_check"),
        ({"attention_check": {"steps_correct": "not_sure"}}, "attention_check.steps_correct"),
        ({"attention_check": {"steps_correct": True}}, "attention_check.steps_correct"),
        ({"attention_check": {"stepz_correct": "no"}}, "attention_check.stepz_correct"),
        ({"qualification": {"steps_correct": "no"}}, "qualification.explanation"),
        ({"qualification": {"steps_correct": "no", "explanation": 4}}, "qualification.explanation"),
        (
            {"attention_check": {"steps_correct": "no"}, "qualification": {"steps_correct": "no", "explanation": "x"}},
            "attention_check",
        ),
    ],
)
def test_a_bad_line_is_refused_with_its_field(change, field):
    with pytest.raises(ItemRecordError) as error:
        KIND.parse_record({**_line(), **change})
    assert error.value.field == field


@pytest.mark.parametrize("missing", ["abstract_goal", "specific_goal", "constraint", "constraint_type", "steps"])
def test_a_line_without_a_required_field_is_refused_naming_it(missing):
    line = _line()
    del line[missing]
    with pytest.raises(ItemRecordError) as error:
        KIND.parse_record(line)
    assert error.value.field == missing


def test_a_record_that_is_not_an_object_is_refused():
    with pytest.raises(ItemRecordError, match="JSON object"):
        KIND.parse_record(["cs-1"])  # type: ignore[arg-type]


@pytest.mark.django_db
def test_create_study_reports_every_bad_line_with_its_field_and_creates_nothing(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        "\n".join(
            [
                json.dumps(_line(1)),
                json.dumps({**_line(2), "constraint_type": "purpose"}),
                json.dumps({**_line(3), "steps": ["Mix.", ""]}),
                "{not json",
            ]
        )
        + "\n"
    )
    with pytest.raises(CommandError) as error:
        call_command(
            "create_study",
            "--name",
            "Bad",
            "--kind",
            "constraint_faithfulness",
            "--items",
            str(bad),
            "--no-qualification",
            "--no-training",
        )
    message = str(error.value)
    assert "line 2, field 'constraint_type'" in message and "line 3, field 'steps[1]'" in message
    assert "line 4: invalid JSON" in message and "Nothing was created." in message
    assert not Study.objects.exists()


@pytest.mark.django_db
def test_create_study_makes_a_faithfulness_study_with_the_kinds_minimum_seconds(tmp_path, capsys):
    good = tmp_path / "coscript.jsonl"
    lines = [
        _line(1),
        _line(2, "intent"),
        _line(3, attention_check={"steps_correct": "yes"}),
        _line(4, qualification={"meets_constraint": "yes", "explanation": "It adds vanilla."}),
    ]
    good.write_text("".join(json.dumps(line) + "\n" for line in lines))
    call_command(
        "create_study",
        "--name",
        "CoScript check",
        "--kind",
        "constraint_faithfulness",
        "--items",
        str(good),
        "--no-training",
    )
    study = Study.objects.get()
    assert study.kind == "constraint_faithfulness" and study.min_seconds == FAITHFULNESS_MIN_SECONDS_DEFAULT == 45
    assert not study.training_enabled and study.qualification_enabled
    gold = study.items.get(role="qualification")
    assert gold.expected == {"meets_constraint": "yes"} and gold.source["line"] == 4
    assert "Prolific entry URL" in capsys.readouterr().out


def test_the_constraint_is_highlighted_in_the_specific_goal_case_insensitively():
    assert goal_parts("Make a vanilla cake", "Vanilla") == [("Make a ", False), ("vanilla", True), (" cake", False)]
    assert goal_parts("Register to vote online", "Online") == [("Register to vote ", False), ("online", True)]
    assert goal_parts("Make a cake", "Chocolate") == [("Make a cake", False)]


# --- answers --------------------------------------------------------------------------------


def _errors(answer, n_steps: int = 5) -> dict[str, str]:
    cleaned, errors = KIND.validate_submission(answer, 0, n_steps)
    assert (cleaned is None) == bool(errors)
    return {e.field: e.message for e in errors}


def test_each_question_needs_yes_no_or_not_sure():
    errors = _errors({"specific_goal_ok": "yes", "meets_constraint": "maybe"})
    assert set(errors) == {"meets_constraint", "steps_correct"}
    assert errors["meets_constraint"] == "Question 2: choose Yes, No or Not sure."
    assert _errors(_answer("not_sure", "no", "not_sure")) == {}
    assert _errors("yes") == {"answer": "The answer is missing."}


def test_steps_not_correct_requires_marking_the_wrong_steps():
    errors = _errors(_answer(q3="no"))
    assert set(errors) == {"wrong_steps"} and "click the wrong steps" in errors["wrong_steps"]


def test_every_wrong_step_needs_an_error_type_and_other_needs_a_description():
    errors = _errors(
        _answer(q3="no", wrong=[{"step": 2, "error_types": []}, {"step": 4, "error_types": ["other"], "other": "  "}])
    )
    assert errors == {
        "wrong_steps.2.error_types": "Step 2: select at least one error type (or Other with a description).",
        "wrong_steps.4.other": "Step 4: describe what is wrong under Other.",
    }


def test_a_description_alone_counts_as_other_and_the_answer_is_cleaned():
    cleaned, errors = KIND.validate_submission(
        _answer(
            q3="no",
            comments=" ok ",
            wrong=[
                {"step": 4, "error_types": ["no_constraint", "missing_steps"]},
                {"step": 1, "error_types": [], "other": " Says nothing about vanilla. "},
            ],
        ),
        0,
        5,
    )
    assert errors == []
    assert cleaned == {
        "specific_goal_ok": "yes",
        "meets_constraint": "yes",
        "steps_correct": "no",
        "comments": "ok",
        "wrong_steps": [
            {"step": 1, "error_types": ["other"], "other": "Says nothing about vanilla."},
            {"step": 4, "error_types": ["missing_steps", "no_constraint"], "other": ""},
        ],
    }


@pytest.mark.parametrize("q3", ["yes", "not_sure"])
def test_marked_steps_are_refused_unless_question_3_is_no(q3):
    errors = _errors(_answer(q3=q3, wrong=[{"step": 2, "error_types": ["wrong_order"]}]))
    assert set(errors) == {"wrong_steps"} and "unmark them or answer No" in errors["wrong_steps"]


def test_steps_outside_the_script_twice_marked_or_with_unknown_error_types_are_refused():
    errors = _errors(
        _answer(
            q3="no",
            wrong=[
                {"step": 9, "error_types": ["wrong_order"]},
                {"step": 2, "error_types": ["wrong_order"]},
                {"step": 2, "error_types": ["unrelated_steps"]},
                {"step": 3, "error_types": ["typo"]},
                {"step": "1"},
            ],
        )
    )
    assert errors["wrong_steps.9.step"] == "Step 9 does not exist: the script has steps 1 to 5."
    assert errors["wrong_steps.2.step"] == "Step 2 is marked twice."
    assert "error types must be among" in errors["wrong_steps.3.error_types"]
    assert "wrong_steps[5].step" in errors


def test_the_six_error_types_keep_the_papers_names_and_explanations():
    assert [e["label"] for e in ERROR_TYPES.values()] == [
        "Wrong order",
        "Repeat steps",
        "Missing steps",
        "No constraint",
        "Incoherent steps",
        "Unrelated steps",
    ]
    assert ERROR_TYPES["incoherent_steps"]["explanation"] == (
        "Steps that are related to the goal, but are not coherent within the script."
    )
    for key in ERROR_TYPES:
        assert ERROR_TYPES[key]["label"] in KIND.default_instructions
        assert ERROR_TYPES[key]["explanation"] in KIND.default_instructions


@pytest.mark.django_db
def test_a_submit_is_stored_with_its_answer_and_no_has_failure_label():
    study = _study([_line(1)])
    p = _enter(study, "pid-one")
    a = assignment_next(participation=p)
    assert a is not None
    answer = _answer(q2="no", q3="no", wrong=[{"step": 4, "error_types": ["no_constraint"], "other": ""}])
    ann = _submit(p, a, answer).annotation
    assert ann.has_failure is None and ann.failures == [] and ann.correct is None
    assert ann.answer["wrong_steps"] == [{"step": 4, "error_types": ["no_constraint"], "other": ""}]
    assert ann.l2_hash == a.item.l2_hash and ann.guideline_version.startswith("constraint_faithfulness-v")
    assert (
        ann.label == "Specific goal: Yes · Meets the constraint: No · Steps correct: No · wrong steps 4 (No constraint)"
    )


@pytest.mark.django_db
def test_submit_before_the_minimum_time_is_refused_and_nothing_is_stored():
    study = _study([_line(1)], min_seconds=None)
    assert study.min_seconds == FAITHFULNESS_MIN_SECONDS_DEFAULT
    p = _enter(study, "pid-early")
    a = assignment_next(participation=p)
    assert a is not None
    with pytest.raises(SubmissionRejected) as error:
        _submit(p, a, YES_ALL)
    assert [e.field for e in error.value.errors] == ["time"] and "45 seconds" in error.value.message
    assert not Annotation.objects.exists()
    backdate(a, FAITHFULNESS_MIN_SECONDS_DEFAULT + 1)
    assert _submit(p, a, YES_ALL).created


# --- drafts ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_draft_is_cleaned_kept_and_shown_again_on_the_page():
    study = _study([_line(1)])
    client = Client()
    client.get(f"/a/{study.slug}/?PROLIFIC_PID=pid-draft&STUDY_ID=S&SESSION_ID=s1")
    client.post(f"/a/{study.slug}/consent/", {"agree": "yes"})
    page = client.get(f"/a/{study.slug}/work/")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<mark class="constraint">vanilla</mark>' in html and "Make a cake" in html and "modifier" in html
    assert "Are the steps in the script correct in achieving the specific goal?" in html
    assert "constraint_faithfulness.js" in html and 'id="goal-ack"' not in html
    a = page.context["assignment"]
    draft = {
        "specific_goal_ok": "yes",
        "steps_correct": "no",
        "meets_constraint": "perhaps",
        "wrong_steps": [
            {"step": 2, "error_types": ["wrong_order", "bogus"], "other": "x"},
            {"step": 99},
            {"step": 2, "error_types": []},
        ],
        "comments": "half done",
    }
    saved = client.post(
        f"/a/{study.slug}/work/{a.public_id}/save",
        json.dumps({"draft": draft, "seq": 3}),
        content_type="application/json",
    )
    assert saved.json()["draft_saved"]
    stale = assignment_save(participation=a.participation_id, public_id=a.public_id, draft=YES_ALL, seq=2)
    assert not stale.draft_saved
    expected = {
        "specific_goal_ok": "yes",
        "meets_constraint": None,
        "steps_correct": "no",
        "comments": "half done",
        "wrong_steps": [{"step": 2, "error_types": ["wrong_order"], "other": "x"}],
    }
    again = client.get(f"/a/{study.slug}/work/")
    assert again.context["page_state"]["draft"] == expected and again.context["page_state"]["draftSeq"] == 3
    p = a.participation
    _submit(p, a, YES_ALL)
    with pytest.raises(DraftRejected):
        assignment_save(participation=p, public_id=a.public_id, draft=draft, seq=4)
    assert Annotation.objects.get().answer["steps_correct"] == "yes"


# --- assignment, attention checks, qualification ----------------------------------------------


@pytest.mark.django_db
def test_each_item_goes_to_k_distinct_annotators():
    study = _study([_line(1), _line(2)], annotators_per_item=2)
    seen: dict[str, list[str]] = {}
    for pid in ("p1", "p2"):
        p = _enter(study, pid)
        seen[pid] = []
        while (a := assignment_next(participation=p)) is not None:
            seen[pid].append(a.item.item_id)
            _submit(p, a, YES_ALL)
        p.refresh_from_db()
        assert p.state == ParticipationState.COMPLETED
    assert seen == {"p1": ["cs-1", "cs-2"], "p2": ["cs-1", "cs-2"]}
    with pytest.raises(StudyFull):  # the study is full: a third is turned away at the entry
        _enter(study, "p3")
    assert Annotation.objects.filter(surplus=False).count() == 4


@pytest.mark.django_db
def test_attention_checks_compare_each_known_question_and_screen_out_after_too_many_misses():
    lines = [_line(n) for n in range(1, 5)] + [
        _line(10, attention_check={"meets_constraint": "no", "steps_correct": "no"}),
        _line(11, attention_check={"specific_goal_ok": "yes"}),
    ]
    study = _study(lines, attention_check_rate=0.5, attention_max_failures=0, annotators_per_item=2)
    good = _enter(study, "careful")
    wrong = [{"step": 1, "error_types": ["unrelated_steps"]}]
    results = []
    while (a := assignment_next(participation=good)) is not None:
        if a.role == "attention":
            answer = _answer(q2="no", q3="no", wrong=wrong) if a.item.item_id == "cs-10" else _answer()
        else:
            answer = YES_ALL
        results.append((a.role, _submit(good, a, answer).annotation.correct))
    assert ("attention", True) in results and all(c is None for role, c in results if role == "main")
    good.refresh_from_db()
    assert good.state == ParticipationState.COMPLETED and good.attention_passed == 2 and good.attention_failures == 0

    careless = _enter(study, "careless")
    while (a := assignment_next(participation=careless)) is not None:
        # "not sure" is not the known answer: a miss.
        _submit(careless, a, _answer(q2="not_sure", q3="not_sure") if a.role == "attention" else YES_ALL)
    careless.refresh_from_db()
    assert careless.state == ParticipationState.SCREENED_OUT and careless.excluded
    assert Annotation.objects.filter(participation=careless, source="attention", correct=False).exists()
    assert all(a.excluded for a in Annotation.objects.filter(participation=careless, source="main"))


@pytest.mark.django_db
def test_the_qualification_test_passes_or_screens_out_on_the_known_answers():
    lines = [
        _line(1),
        _line(2),
        _line(20, qualification={"meets_constraint": "yes", "steps_correct": "yes", "explanation": "Fine."}),
        _line(21, qualification={"steps_correct": "no", "explanation": "Step order is wrong."}),
    ]
    study = _study(lines, qualification_enabled=True)
    assert study.qualification_pass == 2

    def take(pid: str, answers: dict[str, dict]):
        p = _enter(study, pid)
        assert p.state == ParticipationState.QUALIFICATION
        while p.state == ParticipationState.QUALIFICATION and (a := assignment_next(participation=p)) is not None:
            if a.role != "qualification":
                break
            _submit(p, a, answers[a.item.item_id])
            p.refresh_from_db()
        return p

    bad_order = _answer(q3="no", wrong=[{"step": 2, "error_types": ["wrong_order"]}])
    passed = take("qualified", {"cs-20": _answer(), "cs-21": bad_order})
    assert passed.state == ParticipationState.ANNOTATING
    failed = take("unqualified", {"cs-20": _answer(), "cs-21": _answer(q3="not_sure")})
    assert failed.state == ParticipationState.SCREENED_OUT and "1 of 2 correct" in failed.state_reason


# --- Fleiss' kappa ---------------------------------------------------------------------------

# Fleiss (1971), the worked example (also on Wikipedia's "Fleiss' kappa" page): 10 subjects,
# 14 raters, 5 categories; P = 0.378, P_e = 0.213, kappa = 0.210.
FLEISS_1971 = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_fleiss_kappa_on_the_worked_example_of_fleiss_1971():
    kappa = fleiss_kappa(FLEISS_1971)
    assert kappa is not None
    assert kappa == pytest.approx(0.2099, abs=1e-4)
    assert round(kappa, 3) == 0.210


def test_fleiss_kappa_is_one_for_perfect_agreement_and_undefined_without_variation():
    assert fleiss_kappa([[3, 0], [0, 3], [3, 0]]) == pytest.approx(1.0)
    assert fleiss_kappa([[3, 0], [3, 0]]) is None
    assert fleiss_kappa(np.zeros((0, 3))) is None
    # Two raters who always disagree over two balanced categories: P = 0, P_e = 1/2.
    assert fleiss_kappa([[1, 1], [1, 1]]) == pytest.approx(-1.0)


def test_fleiss_kappa_refuses_items_with_different_numbers_of_ratings():
    with pytest.raises(ValueError, match="same number of ratings"):
        fleiss_kappa([[2, 1], [1, 1]])
    with pytest.raises(ValueError, match="at least two ratings"):
        fleiss_kappa([[1, 0], [0, 1]])


def test_the_bootstrap_interval_of_kappa_is_seeded_and_surrounds_the_estimate():
    interval = fleiss_kappa_interval(FLEISS_1971, bootstrap=500, seed=3)
    kappa = fleiss_kappa(FLEISS_1971)
    assert interval is not None and kappa is not None
    low, high = interval
    assert low < kappa < high
    assert fleiss_kappa_interval(FLEISS_1971, bootstrap=500, seed=3) == [low, high]
    assert fleiss_kappa_interval(FLEISS_1971, bootstrap=0) is None
    assert fleiss_kappa_interval([[3, 0], [3, 0]], bootstrap=50) is None


def test_count_table_counts_each_items_ratings_by_category():
    table = count_table([["yes", "yes", "no"], ["not_sure", "no", "no"]], ["yes", "no", "not_sure"])
    assert table.tolist() == [[2, 1, 0], [0, 2, 1]]
    with pytest.raises(ValueError, match="maybe"):
        count_table([["maybe", "yes"]], ["yes", "no"])


# --- study results ----------------------------------------------------------------------------

# Four complete items (k = 3) and one with a single answer; answers per annotator as
# (question 1, question 2, question 3, wrong steps).
NO_CONSTRAINT = [{"step": 2, "error_types": ["no_constraint"]}]
PLAN: dict[str, tuple[str, list[tuple[str, str, str, list[dict[str, Any]] | None]]]] = {
    "m1": ("modifier", [("yes", "yes", "yes", None), ("yes", "yes", "yes", None), ("yes", "no", "yes", None)]),
    "m2": (
        "modifier",
        [
            ("yes", "no", "no", NO_CONSTRAINT),
            ("yes", "no", "no", [{"step": 2, "error_types": ["no_constraint", "unrelated_steps"]}]),
            ("no", "no", "not_sure", None),
        ],
    ),
    "me1": (
        "method",
        [
            ("yes", "yes", "yes", None),
            (
                "yes",
                "yes",
                "no",
                [{"step": 1, "error_types": ["wrong_order"]}, {"step": 3, "error_types": [], "other": "Too vague."}],
            ),
            ("yes", "yes", "yes", None),
        ],
    ),
    "i1": (
        "intent",
        [
            ("no", "no", "no", [{"step": 1, "error_types": ["unrelated_steps"]}]),
            ("yes", "yes", "yes", None),
            ("not_sure", "no", "yes", None),
        ],
    ),
    "i2": ("intent", [("yes", "yes", "yes", None)]),
}


def _plan_study():
    lines = [{**_line(), "id": item_id, "constraint_type": ctype} for item_id, (ctype, _) in PLAN.items()]
    study = _study(lines, annotators_per_item=3)
    for position, pid in enumerate(("p1", "p2", "p3")):
        p = _enter(study, pid)
        for item_id, (_, answers) in PLAN.items():
            if position >= len(answers):
                continue
            a = assignment_next(participation=p)
            assert a is not None and a.item.item_id == item_id
            q1, q2, q3, wrong = answers[position]
            _submit(p, a, _answer(q1, q2, q3, wrong))
    return study


@pytest.mark.django_db
def test_study_results_give_kappa_alpha_accuracy_by_constraint_type_and_error_counts():
    study = _plan_study()
    r = faithfulness_study_results(study, bootstrap=200)
    assert (r["items"], r["complete_items"], r["answers"], r["answers_with_wrong_steps"]) == (5, 4, 13, 4)
    q1 = r["questions"]["specific_goal_ok"]
    # By hand: counts (yes, no, not sure) per complete item (3,0,0) (2,1,0) (3,0,0) (1,1,1);
    # P = (1 + 1/3 + 1 + 0) / 4 = 7/12, P_e = (9/12)^2 + (2/12)^2 + (1/12)^2 = 86/144,
    # kappa = (84/144 - 86/144) / (58/144) = -1/29.
    assert q1["fleiss_kappa"] == pytest.approx(-1 / 29)
    assert q1["kappa_items"] == 4 and q1["answers"] == {"yes": 10, "no": 2, "not_sure": 1}
    q3 = r["questions"]["steps_correct"]
    # Question 3: (3,0,0) (0,2,1) (2,1,0) (2,1,0): P = (1 + 1/3 + 1/3 + 1/3) / 4 = 1/2,
    # p = (7/12, 4/12, 1/12), P_e = 66/144, kappa = (72 - 66) / (144 - 66) = 1/13.
    assert q3["fleiss_kappa"] == pytest.approx(1 / 13)
    low, high = q3["fleiss_kappa_ci95"]
    assert low <= q3["fleiss_kappa"] <= high
    # Alpha: nominal, the krippendorff package on the annotators x items matrix (the
    # single-answer item adds nothing pairable).
    code = {"yes": 0, "no": 1, "not_sure": 2}
    for question, position in (("specific_goal_ok", 0), ("meets_constraint", 1), ("steps_correct", 2)):
        data = np.full((3, 5), np.nan)
        for j, (_, answers) in enumerate(PLAN.values()):
            for i, (q1, q2, q3, _) in enumerate(answers):
                data[i, j] = code[(q1, q2, q3)[position]]
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        assert r["questions"][question]["alpha"] == pytest.approx(expected)
    low, high = r["questions"]["meets_constraint"]["alpha_ci95"]
    assert low <= r["questions"]["meets_constraint"]["alpha"] <= high
    accuracy = r["accuracy"]
    assert {t: accuracy[t]["specific_goal_ok"]["correct"] for t in accuracy} == {
        "modifier": 2,
        "method": 1,
        "intent": 0,
        "all": 3,
    }
    assert {t: accuracy[t]["meets_constraint"]["accuracy"] for t in accuracy} == {
        "modifier": 0.5,
        "method": 1.0,
        "intent": 0.0,
        "all": 0.5,
    }
    assert {t: accuracy[t]["steps_correct"]["accuracy"] for t in accuracy} == {
        "modifier": 0.5,
        "method": 1.0,
        "intent": 1.0,
        "all": 0.75,
    }
    assert {t: accuracy[t]["script_correct"]["accuracy"] for t in accuracy} == {
        "modifier": 0.5,
        "method": 1.0,
        "intent": 0.0,
        "all": 0.5,
    }
    assert accuracy["intent"]["steps_correct"]["items"] == 1  # i2 has one answer of three: left out
    errors = r["error_types"]
    assert {k: (v["answers"], v["steps"]) for k, v in errors.items()} == {
        "wrong_order": (1, 1),
        "repeated_steps": (0, 0),
        "missing_steps": (0, 0),
        "no_constraint": (2, 2),
        "incoherent_steps": (0, 0),
        "unrelated_steps": (2, 2),
        "other": (1, 1),
    }


def test_the_majority_is_strict_and_not_sure_counts_against_yes():
    assert majority_yes(["yes", "yes", "no"]) and not majority_yes(["yes", "not_sure", "no"])
    assert not majority_yes(["yes", "no"]) and not majority_yes([])


def test_results_of_a_study_without_answers_are_empty_not_made_up():
    r = study_results([FaithfulnessItem("a", "modifier", "", ())], 3, bootstrap=10)
    assert r["complete_items"] == 0 and r["accuracy"]["all"]["steps_correct"]["accuracy"] is None
    assert r["questions"]["steps_correct"]["fleiss_kappa"] is None and r["questions"]["steps_correct"]["alpha"] is None


@pytest.mark.django_db
def test_failed_attention_checks_and_surplus_answers_do_not_count_in_the_results():
    study = _plan_study()
    first = Annotation.objects.filter(annotator__pid="p1").first()
    assert first is not None
    p1 = first.participation
    Annotation.objects.filter(participation=p1).update(excluded=True, exclusion_reason="failed_attention_checks")
    r = faithfulness_study_results(study, bootstrap=0)
    assert r["answers"] == 8 and r["complete_items"] == 0
    assert r["questions"]["steps_correct"]["fleiss_kappa"] is None


@pytest.mark.django_db
def test_the_study_page_shows_the_results_and_the_exports_carry_the_answer(researcher_client, tmp_path):
    study = _plan_study()
    page = researcher_client.get(f"/studies/{study.slug}/")
    html = page.content.decode()
    assert page.status_code == 200 and 'id="faithfulness-results"' in html
    assert "Fleiss&#x27; κ" in html or "Fleiss' κ" in html
    assert "-0.034" in html  # question 1's kappa, -1/29
    assert "Steps correct: No · wrong steps 2 (No constraint)" in html
    [row] = study_round_summaries(study)
    assert row["alpha"] == pytest.approx(
        faithfulness_study_results(study, bootstrap=0)["questions"]["steps_correct"]["alpha"]
    )
    out = tmp_path / "annotations.jsonl"
    call_command("export_annotations", "--study", study.slug, "--output", str(out))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # The kind's own columns and no other kind's (no has_failure, no choice).
    assert len(rows) == 13 and all("has_failure" not in r and r["kind"] == "constraint_faithfulness" for r in rows)
    assert all("choice" not in r and "expected_answer" in r for r in rows)
    m2 = [r for r in rows if r["item_id"] == "m2"]
    assert m2[0]["answer"]["wrong_steps"] == [{"step": 2, "error_types": ["no_constraint"], "other": ""}]
    assert m2[0]["item_source"]["constraint"] == "Vanilla"
    csv_text = b"".join(researcher_client.get(f"/studies/{study.slug}/export.csv").streaming_content).decode()
    assert csv_text.splitlines()[0].endswith(",answer,expected_answer") and "no_constraint" in csv_text


@pytest.mark.django_db
def test_the_calibrated_how2score_never_reads_faithfulness_answers_as_has_failure(demo):
    from judging.models import Judgment

    judgment = Judgment.objects.filter(has_failure__isnull=False).first()
    assert judgment is not None
    study = _study([{**_line(1), "source": {"generation_id": judgment.generation_id}}], annotators_per_item=1)
    p = _enter(study, "pid-cal")
    _submit(p, assignment_next(participation=p), _answer(q3="no", wrong=NO_CONSTRAINT))
    assert calibration_from_studies(judgment.judge, [True, False]) is None


def test_the_kind_and_its_statistics_import_no_django():
    # The pure modules are usable from any script without Django settings.
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, annotate.stats.kappa, annotate.kinds.constraint_faithfulness.results, annotate.kinds.constraint_faithfulness.definition; "
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": ""},
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.django_db
def test_the_critical_failure_dashboards_say_where_a_faithfulness_studys_results_are(researcher_client):
    from django.urls import reverse

    study = _study([_line(1), _line(2)])
    for name in ("annotate:report_agreement", "annotate:report_annotators", "annotate:report_disagreements"):
        html = researcher_client.get(reverse(name, args=[study.slug])).content.decode()
        assert 'id="other-kind-note"' in html and "carry no has_failure" in html, name
        assert reverse("annotate:study_detail", args=[study.slug]) in html
    response = researcher_client.get(f"/api/studies/{study.slug}/agreement")
    assert response.status_code == 400 and "no critical-failure agreement report" in response.json()["detail"]
    detail = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert "Krippendorff's α (nominal, question 3: steps correct)" in detail
    assert "Nominal Krippendorff's α over the Yes / No / Not sure answers to question 3" in detail
    assert "0.273" not in detail  # How2Everything's critical-failure pilots are not this alpha
