"""Model evaluation on goal-step task sets against the scripted OpenAI-compatible server:
the prompt lists the candidates, the answer is read from the completion, unparseable answers
are counted and never guessed nor scored, accuracy (over readable answers) per task set and
topic, the goalstep_evaluate command, and the leaderboard page per task with the paper's
figures beside the models."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from core.intervals import wilson_interval
from goalstep.answers import candidate_list, letter_list, parse_choice
from goalstep.models import TaskItem, TaskSet
from goalstep.selectors import leaderboard, task_evaluation_accuracy
from goalstep.services import task_evaluation_create, task_evaluation_execute
from judging.services import language_model_register
from tests.scripted_llm import Reply, ScriptedLLM, last_user_message

CANDIDATES = ["wash your hands", "wash your cat", "clap your hands", "eat your protein"]


# --- reading answers (pure) --------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("A", 0),
        (" b ", 1),
        ("(C)", 2),
        ("D.", 3),
        ("**B**", 1),
        ("Answer: C", 2),
        ("The answer is (D).", 3),
        ("C. clap your hands", 2),
        ("wash your cat", 1),
    ],
)
def test_an_answer_naming_one_candidate_is_read(text, expected):
    assert parse_choice(text, CANDIDATES) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "E",
        "Answer: E",
        "I am not sure.",
        "Both wash steps help.",
        "washing",
    ],
)
def test_an_answer_naming_no_single_candidate_is_unparseable(text):
    assert parse_choice(text, CANDIDATES) is None


def test_the_ordering_task_accepts_only_a_or_b():
    assert parse_choice("B", ["dry the silver", "handwash the silver"]) == 1
    assert parse_choice("C", ["dry the silver", "handwash the silver"]) is None


def test_candidates_are_listed_with_letters():
    assert candidate_list(["x", "y"]) == "A. x\nB. y"
    assert letter_list(4) == "A, B, C or D" and letter_list(2) == "A or B"


# --- runs against the scripted server ---------------------------------------------------

ANSWERS = {  # prompt -> the scripted model's completion
    "Prevent Coronavirus": "A",  # correct (label 0)
    "Keep a cat calm": "Answer: D",  # wrong (label 1)
    "Clean silver": "I would need more context to decide.",  # unparseable
    "Plant tulips": "(C)",  # correct (label 2)
}


@pytest.fixture
def task_set(db):
    task_set = TaskSet.objects.create(task="step_inference", split="bench", seed=0, n_items=4)
    rows = [
        ("Prevent Coronavirus", 0, "Health"),
        ("Keep a cat calm", 1, "Pets & Animals"),
        ("Clean silver", 3, "Home & Hobbies"),
        ("Plant tulips", 2, "Home & Hobbies"),
    ]
    for position, (prompt, label, topic) in enumerate(rows):
        TaskItem.objects.create(
            task_set=task_set,
            item_id=f"item-{position}",
            position=position,
            prompt=prompt,
            candidates=CANDIDATES,
            label=label,
            topic=topic,
            source_procedure_ids=[position],
        )
    return task_set


@pytest.fixture
def server(settings):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    with ScriptedLLM() as scripted:
        roles = dict(settings.LLM_ROLES)
        roles["generate"] = {
            "base_url": scripted.base_url,
            "api_key": "k",
            "model": "m",
            "temperature": None,
            "max_tokens": None,
        }
        settings.LLM_ROLES = roles

        def answer(body):
            text = last_user_message(body)
            prompt = next(p for p in ANSWERS if p in text)
            return Reply(ANSWERS[prompt])

        scripted.default = answer
        yield scripted


@pytest.mark.django_db(transaction=True)
def test_accuracy_counts_unparseable_answers_and_never_guesses_nor_scores_them(task_set, server):
    model = language_model_register(name="scripted-model")
    evaluation = task_evaluation_create(task_set=task_set, language_model=model, start=False)
    assert task_evaluation_execute(evaluation_id=evaluation.pk) == "done"
    evaluation.refresh_from_db()
    assert evaluation.status == "done"
    result = task_evaluation_accuracy(evaluation)
    assert (result["correct"], result["answered"], result["unparseable"]) == (2, 4, 1)
    assert (result["readable"], result["ambiguous"]) == (3, 0)
    assert result["accuracy"] == pytest.approx(2 / 3)  # correct / readable: the unparseable answer is left out
    assert result["by_topic"]["Home & Hobbies"] == {
        "correct": 1,
        "readable": 1,
        "answered": 2,
        "accuracy": 1.0,
        "ci95": list(wilson_interval(1, 1) or ()),
    }
    assert result["by_topic"]["Health"]["accuracy"] == 1.0
    unparseable = evaluation.predictions.get(item__prompt="Clean silver")
    assert unparseable.outcome == "unparseable" and unparseable.choice is None and unparseable.correct is None
    # The prompt is the task's prompt file with the candidates listed by letter.
    sent = [r["messages"][0]["content"] for r in server.chat_requests()]
    first = next(text for text in sent if "Prevent Coronavirus" in text)
    assert first.startswith("Goal: Prevent Coronavirus") and "A. wash your hands\nB. wash your cat" in first
    assert "(A, B, C or D)" in first and "you have to choose one" in first
    assert len(sent) == 4 and all(r["temperature"] == 0 for r in server.chat_requests())


@pytest.mark.django_db(transaction=True)
def test_a_rerun_of_a_finished_evaluation_sends_nothing_and_stores_nothing_twice(task_set, server):
    model = language_model_register(name="scripted-model")
    evaluation = task_evaluation_create(task_set=task_set, language_model=model, start=False)
    task_evaluation_execute(evaluation_id=evaluation.pk)
    sent = len(server.requests)
    again = task_evaluation_create(task_set=task_set, language_model=model, start=False)
    assert task_evaluation_execute(evaluation_id=again.pk) == "done"  # answered from the request ledger
    assert len(server.requests) == sent
    assert again.predictions.count() == 4 and evaluation.predictions.count() == 4


@pytest.mark.django_db(transaction=True)
def test_base_models_get_a_completion_prompt(task_set, server):
    model = language_model_register(name="scripted-base", prompt_style="base")
    evaluation = task_evaluation_create(task_set=task_set, language_model=model, start=False)
    task_evaluation_execute(evaluation_id=evaluation.pk)
    prompts = [r["prompt"] for r in server.requests if r.get("prompt")]
    assert len(prompts) == 4 and all(p.endswith("\nAnswer:") for p in prompts)


@pytest.mark.django_db(transaction=True)
def test_the_evaluate_command_prints_accuracy_per_topic(task_set, server, capsys):
    language_model_register(name="scripted-model")
    call_command("goalstep_evaluate", "--task-set", str(task_set.pk), "--model", "scripted-model")
    out = capsys.readouterr().out
    interval = wilson_interval(2, 3)
    assert interval is not None
    low, high = interval
    assert (
        f"accuracy 0.667 (95% Wilson {low:.3f}–{high:.3f}) = 2 / 3 readable of 4 answered "
        "(0 ambiguous, 1 unparseable: not scored), 4 items; left out: 0 unusable (none), 0 unanswered"
    ) in out
    assert "Health: 1.000 (1 / 1 readable of 1 answered; 95% Wilson 0.207–1.000)" in out


@pytest.mark.django_db(transaction=True)
def test_leaderboard_page_ranks_models_with_the_papers_figures_beside_them(task_set, server, researcher_client):
    scripted, weak = (
        language_model_register(name="scripted-model"),
        language_model_register(name="a-weak-model", model="weak"),
    )
    for model in (scripted, weak):
        evaluation = task_evaluation_create(task_set=task_set, language_model=model, start=False)
        if model is weak:
            server.default = lambda body: Reply("D")  # right only on "Clean silver": 1 / 4
        task_evaluation_execute(evaluation_id=evaluation.pk)
    board = leaderboard("step_inference")
    assert [(row["model"], row["accuracy"]) for row in board["rows"]] == [
        ("scripted-model", pytest.approx(2 / 3)),  # the unparseable answer is left out
        ("a-weak-model", 0.25),
    ]
    page = researcher_client.get("/goalstep/step_inference/")
    html = page.content.decode()
    assert page.status_code == 200
    assert html.index("scripted-model") < html.index("a-weak-model")
    assert "0.882" in html and "0.965" in html  # RoBERTa and humans, Table 1
    assert researcher_client.get("/goalstep/step_guessing/").status_code == 404


@pytest.mark.django_db
def test_leaderboard_needs_a_researcher(client, task_set):
    response = client.get("/goalstep/step_inference/")
    assert response.status_code == 302 and "/login" in response["Location"]
