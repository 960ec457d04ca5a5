"""A specific-goal answer (one per abstract goal and constraint type, §4.2) from which no
``Constraint: <c>; Specific Goal: <g>`` pair can be read gives the run nothing: it is counted
as its own outcome, by reason, and shown under *Dropped* on the run page and in the API,
never left out silently. Found with SmolLM2-135M, whose 6 such answers the page showed as
"Dropped: none"."""

from __future__ import annotations

import re

import pytest

from coscript.parsing import parse_specific_goals
from coscript.phase_services import coscript_run_execute
from coscript.run_services import coscript_run_create
from judging.services import language_model_register
from tests import coscript_world
from tests.scripted_llm import Reply, last_user_message

# What a small model writes for two abstract goals instead of pairs.
PROSE = {
    "Make a cupcake": "Sure! Cupcakes can be chocolate or vanilla, and you can bake them in a microwave.",
    "Wash a car": "Constraint: With a hose",  # half a pair: no specific goal
}


def _answer(body):
    text = last_user_message(body)
    if "Create possible Specific Goals" in text:
        abstract = re.findall(r"Abstract Goal: (.+)", text)[-1].strip()
        if abstract in PROSE:
            return Reply(PROSE[abstract])
        if abstract == "Clean your skin" and "Constraint Type is Intent" in text:
            return Reply("Constraint: ; Specific Goal: Clean your skin")  # pairs read, none usable
    return coscript_world.answer(body)


@pytest.fixture
def run(db, settings):
    coscript_world.make_procedures()
    with coscript_world.scripted_server(settings) as server:
        server.default = _answer
        model = language_model_register(name="scripted-model")
        created = coscript_run_create(name="small-model", language_model=model, split="bench", start=False)
        assert coscript_run_execute(run_id=created.pk) == "done"
    created.refresh_from_db()
    return created


def test_reading_counts_the_pairs_it_read():
    assert parse_specific_goals("Sure! Chocolate or vanilla.", abstract_goal="Make a cake").pairs_read == 0
    assert parse_specific_goals("Constraint: With a hose", abstract_goal="Wash a car").pairs_read == 0
    reading = parse_specific_goals("Constraint: ; Specific Goal: Make a cake", abstract_goal="Make a cake")
    assert (reading.pairs_read, reading.goals, dict(reading.dropped)) == (1, [], {"empty": 1})


@pytest.mark.django_db(transaction=True)
def test_answers_without_a_usable_constraint_pair_are_counted_by_reason(run):
    goals = run.report["goals"]
    assert goals["requests"] == {"ok": 12}
    # 2 abstract goals x 3 constraint types gave no pair at all; one answer gave only an
    # unusable pair (its reason is the pair's: empty).
    assert goals["answers_dropped"] == {"no_constraint_pair": 6, "pairs_dropped": 1}
    assert goals["dropped"] == {"duplicate": 1, "empty": 1}
    assert run.goals.filter(abstract_goal__in=list(PROSE)).count() == 0


@pytest.mark.django_db(transaction=True)
def test_the_run_page_and_the_api_show_them_under_dropped(run, researcher_client):
    page = researcher_client.get(f"/coscript/runs/{run.pk}/").content.decode()
    dropped = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page.split('id="goals-dropped">', 1)[1].split("</p>", 1)[0]))
    assert "none" not in dropped
    assert "answers: 6 without a constraint pair, 1 whose every pair was dropped;" in dropped, dropped
    assert "pairs: duplicate 1, empty 1" in dropped, dropped

    report = researcher_client.get(f"/api/coscript/runs/{run.pk}/").json()["report"]
    assert report["goals"]["answers_dropped"] == {"no_constraint_pair": 6, "pairs_dropped": 1}
    assert report["goals"]["dropped"] == {"duplicate": 1, "empty": 1}


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_answers_all_gave_pairs_says_dropped_none_for_answers(db, settings, researcher_client):
    coscript_world.make_procedures()
    with coscript_world.scripted_server(settings) as server:
        base = coscript_world.answer

        def every_goal_answers(body):
            text = last_user_message(body)
            if "Create possible Specific Goals" in text:
                abstract = re.findall(r"Abstract Goal: (.+)", text)[-1].strip()
                constraint = re.search(r"Constraint Type is (\w+)", text)
                assert constraint is not None, text
                kind = constraint.group(1).lower()
                if abstract in PROSE:
                    return Reply(f"Constraint: By {kind}; Specific Goal: {abstract} by {kind}")
            return base(body)

        server.default = every_goal_answers
        model = language_model_register(name="scripted-model")
        run = coscript_run_create(name="all-answer", language_model=model, split="bench", start=False)
        assert coscript_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    assert run.report["goals"]["answers_dropped"] == {}
    page = researcher_client.get(f"/coscript/runs/{run.pk}/").content.decode()
    dropped = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page.split('id="goals-dropped">', 1)[1].split("</p>", 1)[0]))
    assert "answers: none;" in dropped and "pairs: duplicate 1" in dropped, dropped


@pytest.mark.django_db(transaction=True)
def test_a_run_collected_before_answers_were_counted_says_so(run, researcher_client):
    goals = dict(run.report["goals"])
    goals.pop("answers_dropped")
    run.report = {**run.report, "goals": goals}
    run.save(update_fields=["report"])
    page = researcher_client.get(f"/coscript/runs/{run.pk}/").content.decode()
    dropped = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page.split('id="goals-dropped">', 1)[1].split("</p>", 1)[0]))
    assert "answers: not counted for this run;" in dropped, dropped
