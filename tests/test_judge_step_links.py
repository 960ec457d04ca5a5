"""A judge's critical failure may only link steps that exist: L1 steps 1..len(reference),
L2 steps 1..len(candidate). An answer linking another number is not a verdict: it is
re-asked with the error, like malformed JSON, and ends parse_failed with the reason if the
judge never fixes it; imported judgments with such links are refused with file, line and
field. Exercised through the scripted OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from judging.how2score import JUDGE_SCHEMA, JudgeAnswerError, judge_schema, validate_judge_answer
from judging.models import Judgment
from judging.services import (
    generation_run_create,
    generation_run_execute,
    judge_run_create,
    judge_run_execute,
    language_model_register,
)
from tests.scripted_llm import Reply
from tests.test_judging_runs import server  # noqa: F401  (fixture: the scripted server with the demo data)

pytestmark = pytest.mark.django_db(transaction=True)

CANDIDATE_STEPS = 6
CRIME_GOAL = "Sell your share"  # the Crime & Law procedure of the demo data


def _six_steps(body):
    """A model that always writes six steps, whatever it was asked."""
    return Reply("\n".join(f"{i}. Do part {i} of the task." for i in range(1, CANDIDATE_STEPS + 1)))


def _failure(l2_steps):
    return Reply(
        json.dumps(
            {
                "reasoning": "L2 skips the wait.",
                "critical_failures": [{"failure": "No 30-day waiting period.", "L1_steps": [1], "L2_steps": l2_steps}],
            }
        )
    )


def _no_failure():
    return Reply(json.dumps({"reasoning": "Equivalent.", "critical_failures": []}))


def _judge_with(server, crime_answer):
    """Generate six-step candidates, then judge them; ``crime_answer(body)`` answers for the
    Crime & Law generation, every other one has no failure."""

    def answer(body):
        if not body.get("response_format"):
            return _six_steps(body)
        if CRIME_GOAL in body["messages"][0]["content"]:
            return crime_answer(body)
        return _no_failure()

    server.default = answer
    model = language_model_register(name="six-stepper")
    run = generation_run_create(name="six-bench", language_model=model, start=False)
    assert generation_run_execute(run_id=run.pk) == "done"
    judge = judge_run_create(name="judge-links", generation_run=run, judge="how2judge", start=False)
    judge_run_execute(run_id=judge.pk)
    return judge, Judgment.objects.get(run=judge, generation__procedure__goal__contains=CRIME_GOAL)


def _crime_requests(server):
    return [r for r in server.chat_requests() if r.get("response_format") and CRIME_GOAL in r["messages"][0]["content"]]


# -- the answer's rules -----------------------------------------------------------------


def test_a_link_beyond_the_candidates_last_step_names_the_field():
    answer = {"reasoning": "r", "critical_failures": [{"failure": "f", "L1_steps": [2], "L2_steps": [3, 28]}]}
    with pytest.raises(JudgeAnswerError) as caught:
        validate_judge_answer(answer, n_l1=8, n_l2=6)
    assert caught.value.field == "critical_failures[0].L2_steps[1]"
    assert "L2 has steps 1 to 6" in str(caught.value) and "28" in str(caught.value)


def test_a_link_beyond_the_references_last_step_names_the_field():
    answer = {"reasoning": "r", "critical_failures": [{"failure": "f", "L1_steps": [9], "L2_steps": []}]}
    with pytest.raises(JudgeAnswerError) as caught:
        validate_judge_answer(answer, n_l1=8, n_l2=6)
    assert caught.value.field == "critical_failures[0].L1_steps[0]" and "L1 has steps 1 to 8" in str(caught.value)


def test_links_inside_both_lists_are_kept():
    answer = {"reasoning": "r", "critical_failures": [{"failure": "f", "L1_steps": [1, 8], "L2_steps": [6]}]}
    assert validate_judge_answer(answer, n_l1=8, n_l2=6)["critical_failures"][0]["L2_steps"] == [6]


def test_the_schema_sent_to_the_judge_bounds_each_list_and_leaves_the_shared_one_alone():
    schema = judge_schema(n_l1=8, n_l2=6)
    items = schema["properties"]["critical_failures"]["items"]["properties"]
    assert items["L1_steps"]["items"] == {"type": "integer", "minimum": 1, "maximum": 8}
    assert items["L2_steps"]["items"] == {"type": "integer", "minimum": 1, "maximum": 6}
    assert "maximum" not in JUDGE_SCHEMA["properties"]["critical_failures"]["items"]["properties"]["L2_steps"]["items"]


# -- judge runs -------------------------------------------------------------------------


def test_an_impossible_link_is_re_asked_with_the_error_and_the_corrected_answer_is_stored(server):
    def crime(body):
        return _failure([28]) if len(body["messages"]) == 1 else _failure([3])

    _, judgment = _judge_with(server, crime)
    assert judgment.outcome == "ok" and judgment.has_failure is True
    assert judgment.critical_failures[0]["L2_steps"] == [3]
    sent = _crime_requests(server)
    assert len(sent) == 2
    schema = sent[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["critical_failures"]["items"]["properties"]["L2_steps"]["items"]["maximum"] == 6
    reask = sent[1]["messages"][-1]["content"]
    assert "L2_steps" in reask and "28" in reask


def test_a_judge_that_keeps_linking_a_missing_step_ends_parse_failed_with_the_reason(server, settings):
    _, judgment = _judge_with(server, lambda body: _failure([28]))
    assert judgment.outcome == "parse_failed" and judgment.has_failure is None
    assert judgment.critical_failures == []
    assert "L2_steps" in judgment.reasoning and "28" in judgment.reasoning
    assert len(_crime_requests(server)) == 1 + settings.LLM_PARSE_REASKS


def test_an_answer_with_an_impossible_link_from_an_older_ledger_is_never_stored_as_a_verdict(server, monkeypatch):
    # Jobs created before the bounds existed ask with the unbounded schema; their answers
    # come back "ok" from the client and must still be refused when they become judgments.
    monkeypatch.setattr("judging.run_requests.judge_schema", lambda **counts: JUDGE_SCHEMA)
    judge, judgment = _judge_with(server, lambda body: _failure([28]))
    assert len(_crime_requests(server)) == 1  # the unbounded schema let it through the client
    assert judgment.outcome == "parse_failed" and judgment.has_failure is None and judgment.critical_failures == []
    assert "critical_failures[0].L2_steps[0]" in judgment.reasoning and "L2 has steps 1 to 6" in judgment.reasoning
    assert Judgment.objects.filter(run=judge, outcome="ok").count() == Judgment.objects.filter(run=judge).count() - 1


# -- imports ----------------------------------------------------------------------------


def _imported_generations(tmp_path):
    """Three-step candidates for two demo procedures."""
    path = tmp_path / "generations.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "source_example_id": source,
                    "model": "llama-x",
                    "predicted_steps": ["Wear stockings.", "Exercise.", "Apply lotion."],
                }
            )
            + "\n"
            for source in ("paper-t7-health", "paper-t7-crime-law")
        )
    )
    call_command("bench_transfer", "import-generations", str(path), "--run", "llama-import")


def test_imported_labels_linking_a_missing_step_are_refused_with_file_line_and_field(server, tmp_path):
    _imported_generations(tmp_path)
    labels = tmp_path / "labels.jsonl"
    good = {
        "source_example_id": "paper-t7-health",
        "model": "llama-x",
        "has_failure": True,
        "critical_failures": [{"failure": "f", "L1_steps": [1], "L2_steps": [3]}],
    }
    bad = dict(
        good,
        source_example_id="paper-t7-crime-law",
        critical_failures=[{"failure": "f", "L1_steps": [1], "L2_steps": [28]}],
    )
    labels.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(CommandError) as caught:
        call_command("bench_transfer", "import-judgments", str(labels), "--judge", "other")
    message = str(caught.value)
    assert str(labels) in message and "line 2" in message
    assert "field 'critical_failures[0].L2_steps[0]'" in message and "L2 has steps 1 to 3" in message
    assert not Judgment.objects.filter(judge="other").exists()


def test_imported_raw_answers_linking_a_missing_step_are_refused_with_file_line_and_field(server, tmp_path):
    _imported_generations(tmp_path)
    labels = tmp_path / "raw.jsonl"
    completion = json.dumps(
        {"reasoning": "r", "critical_failures": [{"failure": "f", "L1_steps": [99], "L2_steps": []}]}
    )
    labels.write_text(
        json.dumps({"source_example_id": "paper-t7-health", "model": "llama-x", "judge_completion": completion}) + "\n"
    )
    with pytest.raises(CommandError) as caught:
        call_command("bench_transfer", "import-judgments", str(labels), "--judge", "other")
    message = str(caught.value)
    assert "line 1" in message and "field 'judge_completion.critical_failures[0].L1_steps[0]'" in message
    assert not Judgment.objects.filter(judge="other").exists()
