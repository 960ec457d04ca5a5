"""The optional SCORE term of POST /api/reward: SCORE / 2.5 from rule-based components,
offline, added to total only when asked for; plain numbered answers and Sketch-and-Fill
answers."""

from __future__ import annotations

import json

import pytest

from judging.components import rule_based_components
from judging.constants import SCORE_MAX
from judging.score_metric import score_reward, score_steps

# The endpoint's fixtures: a token-authenticated client and the scripted judge.
from tests.test_reward_endpoint import api, judge  # noqa: F401

REFERENCE = ["Heat oil in a large pot.", "Fry pork pieces in the oil until golden.", "Simmer for about 2 hours."]
SAME = "1. Heat oil in a large pot.\n2. Fry pork pieces in the oil until golden.\n3. Simmer for about 2 hours."
REORDERED = "1. Heat oil in a large pot.\n2. Simmer for about 2 hours.\n3. Fry pork pieces in the oil until golden."


def _rule(steps):
    return [rule_based_components(s) for s in steps]


# ---------------------------------------------------------------------------------------
# The term itself (pure)
# ---------------------------------------------------------------------------------------


def test_a_completion_equal_to_the_reference_gets_the_full_term():
    assert score_reward(REFERENCE, SAME) == pytest.approx(1.0)


def test_a_plain_answer_is_parsed_and_read_by_the_rule():
    steps = ["Heat oil in a large pot.", "Simmer for about 2 hours.", "Fry pork pieces in the oil until golden."]
    expected = score_steps(_rule(steps), _rule(REFERENCE)).score
    assert 0 < expected < SCORE_MAX  # reordered: strict order 0, partial semantics
    assert score_reward(REFERENCE, REORDERED) == pytest.approx(expected / SCORE_MAX)


def test_an_empty_completion_gets_zero():
    # N_pred 0 vs N_gold 3: d = 3 >= M = 1, so f = 0.
    assert score_reward(REFERENCE, "") == 0.0


def test_a_sketch_fill_answer_goes_through_both_gates():
    key = "\n".join(f"Step {n}: {json.dumps(c.as_dict())}" for n, c in enumerate(_rule(REFERENCE), start=1))
    orc = "\n".join(f"Step {n}: {c.text()}" for n, c in enumerate(_rule(REFERENCE), start=1))
    answer = f"<think>plan</think>\n<key>\n{key}\n</key>\n<orc>\n{orc}\n</orc>\n<note>hot oil</note>"
    assert score_reward(REFERENCE, answer) == pytest.approx(1.0)
    assert score_reward(REFERENCE, answer.replace("<note>hot oil</note>", "")) == 0.0


def test_a_reference_step_without_words_gives_no_term():
    assert score_reward(["Heat oil.", "..."], SAME) is None


# ---------------------------------------------------------------------------------------
# Through the endpoint
# ---------------------------------------------------------------------------------------


def _item(completion, **extra):
    return {"goal": "Prepare a pork stew.", "reference_steps": REFERENCE, "completion": completion, **extra}


@pytest.mark.django_db(transaction=True)
def test_with_score_adds_the_term_to_the_total(api, judge):
    body = api.post("/api/reward", _item(REORDERED, with_score=True), format="json").json()
    assert body["score"] == pytest.approx(score_reward(REFERENCE, REORDERED))
    assert body["total"] == pytest.approx(body["how2score"] + body["format"] + body["length"] + body["score"])


@pytest.mark.django_db(transaction=True)
def test_without_with_score_there_is_no_term(api, judge):
    body = api.post("/api/reward", _item(SAME), format="json").json()
    assert "score" not in body
    assert body["total"] == pytest.approx(body["how2score"] + body["format"] + body["length"])


@pytest.mark.django_db(transaction=True)
def test_batch_items_choose_the_term_one_by_one(api, judge):
    body = api.post("/api/reward", {"items": [_item(SAME, with_score=True), _item(SAME)]}, format="json").json()
    with_term, without = body["items"]
    assert with_term["score"] == pytest.approx(1.0) and "score" not in without
    assert with_term["total"] == pytest.approx(without["total"] + 1.0)


@pytest.mark.django_db(transaction=True)
def test_with_score_must_be_a_boolean(api, judge):
    response = api.post("/api/reward", _item(SAME, with_score="sometimes"), format="json")
    assert response.status_code == 400
    assert "with_score" in response.json()
