"""An answer that names two or more different options is ambiguous, and one that names none
is unparseable: neither is scored as right or wrong. Accuracy is correct / readable answers,
and every surface that shows it (the leaderboard page, the evaluation and leaderboard APIs,
goalstep_evaluate) says how many answers it left out and why. Hard cases in both
directions: a letter restated ("A. A is correct"), a letter inside an option's text, the
article "A" and the pronoun "I" are not second options; a listing of the options is."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from core.intervals import wilson_interval
from goalstep.answers import AMBIGUOUS, OK, UNPARSEABLE, parse_choice, read_choice
from goalstep.models import TaskPrediction
from goalstep.selectors import leaderboard, task_evaluation_accuracy
from goalstep.services import task_evaluation_create, task_evaluation_execute
from judging.services import language_model_register
from tests.scripted_llm import Reply, last_user_message
from tests.test_goalstep_evaluation import CANDIDATES, server, task_set  # noqa: F401  (fixtures)


def _wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson interval of k of n (n > 0: never None)."""
    interval = wilson_interval(k, n)
    assert interval is not None
    return interval


# Options whose own text holds capital letters that are also option letters.
LETTERED = ["Buy flour", "Take vitamin C", "Use plan B", "Mix"]


# --- reading (pure) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "A. Buy flour B. Mix",  # SmolLM2-135M listing the options
        "A. Buy flour\nB. Take vitamin C\nC. Use plan B\nD. Mix",
        "A or B",
        "A or B, hard to say",
        "(A) or (C)",
        "A/D",
        "The answer is A, but B could also be",
        "I considered A, but the answer is B",
        "Answer: B. Option D is also plausible.",
        "Both A and C are right.",
        "A\nB",
        "B is right, and so is D.",
    ],
)
def test_an_answer_naming_two_options_is_ambiguous(text):
    reading = read_choice(text, LETTERED)
    assert reading.outcome == AMBIGUOUS and reading.choice is None, reading
    assert len(reading.named) >= 2
    assert parse_choice(text, LETTERED) is None


def test_an_ambiguous_reading_says_which_options_it_names():
    assert read_choice("The answer is A, but B could also be", LETTERED).named == ("A", "B")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("A. A is correct", 0),  # the same letter twice is one option
        ("Answer: A. A is the right one.", 0),
        ("B. Take vitamin C", 1),  # C inside option B's text
        ("B. Take vitamin C.", 1),
        ("**B**. Take vitamin C", 1),
        ("The answer is B (Take vitamin C).", 1),
        ("C. Use plan B", 2),  # B inside option C's text
        ("C: use plan B.", 2),
        ("Take vitamin C", 1),  # the option's text alone
        ("B, because you need vitamin C first", 1),
        ("A good first step is D.", 3),  # the article A
        ("A. Buy flour, then mix it with a spoon", 0),  # the article a
        ("D\nBecause everything else comes after mixing.", 3),
        ("The correct answer is (C).", 2),
        ("answer: b", 1),
    ],
)
def test_an_answer_naming_one_option_is_read_even_with_other_capitals_in_it(text, expected):
    reading = read_choice(text, LETTERED)
    assert (reading.outcome, reading.choice) == (OK, expected), reading


def test_the_pronoun_i_is_not_option_i():
    ten = [f"option text {n}" for n in range(10)]  # A to J: I is an option letter
    assert read_choice("I think the answer is B", ten).choice == 1
    assert read_choice("I would say J.", ten).choice == 9
    assert read_choice("I", ten).choice == 8


@pytest.mark.parametrize(
    "text", ["", "   ", "E", "Answer: E", "I am not sure.", "Both wash steps help.", "washing", "The answer is a guess"]
)
def test_an_answer_naming_no_option_is_unparseable(text):
    reading = read_choice(text, CANDIDATES)
    assert (reading.outcome, reading.choice) == (UNPARSEABLE, None), reading


def test_an_answer_naming_an_option_and_one_out_of_range_is_ambiguous():
    assert read_choice("Option B or option E", CANDIDATES).outcome == AMBIGUOUS


# --- through a real evaluation ---------------------------------------------------------------

SCRIPTED = {  # prompt -> the scripted model's completion (labels in the task_set fixture)
    "Prevent Coronavirus": "A. A is correct",  # correct (label 0)
    "Keep a cat calm": "Answer: D",  # wrong (label 1)
    "Clean silver": "I would need more context to decide.",  # unparseable
    "Plant tulips": "A. wash your hands B. wash your cat",  # ambiguous (label 2)
}


@pytest.fixture
def listing_server(server):  # noqa: F811
    server.default = lambda body: Reply(SCRIPTED[next(p for p in SCRIPTED if p in last_user_message(body))])
    return server


def _evaluated(task_set):  # noqa: F811
    model = language_model_register(name="scripted-model")
    evaluation = task_evaluation_create(task_set=task_set, language_model=model, start=False)
    assert task_evaluation_execute(evaluation_id=evaluation.pk) == "done"
    evaluation.refresh_from_db()
    return evaluation


@pytest.mark.django_db(transaction=True)
def test_an_ambiguous_answer_is_stored_as_such_and_accuracy_is_over_readable_answers(task_set, listing_server):  # noqa: F811
    evaluation = _evaluated(task_set)
    assert evaluation.status == "done"  # an ambiguous answer is an answer: nothing to retry
    listing = evaluation.predictions.get(item__prompt="Plant tulips")
    assert (listing.outcome, listing.choice, listing.correct) == ("ambiguous", None, None)
    assert listing.completion == "A. wash your hands B. wash your cat"
    restated = evaluation.predictions.get(item__prompt="Prevent Coronavirus")
    assert (restated.outcome, restated.choice, restated.correct) == ("ok", 0, True)

    result = task_evaluation_accuracy(evaluation)
    assert (result["correct"], result["readable"], result["answered"]) == (1, 2, 4)
    assert (result["ambiguous"], result["unparseable"]) == (1, 1)
    assert result["accuracy"] == pytest.approx(0.5)
    assert result["ci95"] == pytest.approx(list(_wilson(1, 2)))
    assert "accuracy_parsed" not in result  # one accuracy: over readable answers
    # Home & Hobbies: one unparseable, one ambiguous answer: no readable answer, no accuracy.
    assert result["by_topic"]["Home & Hobbies"] == {
        "correct": 0,
        "readable": 0,
        "answered": 2,
        "accuracy": None,
        "ci95": None,
    }
    assert result["by_topic"]["Health"]["accuracy"] == 1.0


@pytest.mark.django_db(transaction=True)
def test_every_surface_showing_the_accuracy_says_what_it_left_out(
    task_set,  # noqa: F811
    listing_server,
    researcher_client,
    capsys,
):
    evaluation = _evaluated(task_set)
    result = task_evaluation_accuracy(evaluation)

    html = researcher_client.get(f"/goalstep/step_inference/?set={task_set.pk}").content.decode()
    found = re.search(r"<tr><td>1</td><td>scripted-model</td>(.*?)</tr>", html, re.S)
    assert found is not None
    row = found.group(1)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    low, high = _wilson(1, 2)
    assert cells[:6] == ["0.500", f"{low:.3f}–{high:.3f}", "2", "4", "1", "1"], cells
    assert "ambiguous" in html.lower() and "correct / readable" in html

    detail = researcher_client.get(f"/api/goalstep/evaluations/{evaluation.pk}/").json()["accuracy"]
    board = researcher_client.get("/api/goalstep/leaderboards/step_inference/", {"set": task_set.pk}).json()
    [board_row] = board["rows"]
    [page_row] = leaderboard("step_inference", task_set_id=task_set.pk)["rows"]
    for key in ("accuracy", "correct", "readable", "answered", "ambiguous", "unparseable", "n_unusable"):
        assert detail[key] == board_row[key] == page_row[key] == result[key], key

    capsys.readouterr()
    call_command("goalstep_evaluate", "--task-set", str(task_set.pk), "--model", "scripted-model")
    out = capsys.readouterr().out
    assert "  Home & Hobbies: — (0 / 0 readable of 2 answered: no readable answer)" in out
    assert (
        f"accuracy 0.500 (95% Wilson {low:.3f}–{high:.3f}) = 1 / 2 readable of 4 answered "
        "(1 ambiguous, 1 unparseable: not scored), 4 items; left out: 0 unusable (none), 0 unanswered"
    ) in out


@pytest.mark.django_db
def test_stored_answers_are_read_again_by_the_migration(task_set):  # noqa: F811
    """Predictions stored before ambiguous answers were told apart (a listing read as its
    first letter) are read again by goalstep's migration 0003."""
    from importlib import import_module

    from django.apps import apps

    from goalstep.models import TaskEvaluation

    model = language_model_register(name="scripted-model")
    evaluation = TaskEvaluation.objects.create(task_set=task_set, language_model=model, item_ids=[])
    items = {item.prompt: item for item in task_set.items.all()}
    stored = {
        "Prevent Coronavirus": ("ok", 0, True, "A. A is correct"),
        "Keep a cat calm": ("ok", 0, False, "A. wash your hands B. wash your cat"),
        "Clean silver": ("unparseable", None, None, "A or B"),
        "Plant tulips": ("truncated", None, None, "C"),
    }
    for prompt, (outcome, choice, correct, completion) in stored.items():
        TaskPrediction.objects.create(
            evaluation=evaluation,
            item=items[prompt],
            outcome=outcome,
            choice=choice,
            correct=correct,
            completion=completion,
        )
    import_module("goalstep.migrations.0003_ambiguous_answers").read_answers_again(apps, None)
    now = {p.item.prompt: (p.outcome, p.choice, p.correct) for p in evaluation.predictions.select_related("item")}
    assert now == {
        "Prevent Coronavirus": ("ok", 0, True),
        "Keep a cat calm": ("ambiguous", None, None),
        "Clean silver": ("ambiguous", None, None),
        "Plant tulips": ("truncated", None, None),  # no usable completion: not read
    }
