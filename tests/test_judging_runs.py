"""Generation and judge runs end to end against the scripted OpenAI-compatible server:
prompts from files, decoding per model kind, step parsing, How2Score with unusable answers
counted and never scored, resumed runs making no new requests, several judges per run."""

from __future__ import annotations

import json

import pytest

from judging.leaderboard_selectors import leaderboard
from judging.models import Generation, Judgment
from judging.prompts import PromptError, prompt_load
from judging.selectors import judge_run_score
from judging.services import (
    generation_run_create,
    generation_run_execute,
    judge_run_create,
    judge_run_execute,
    language_model_register,
)
from tests.scripted_llm import Reply, ScriptedLLM, last_user_message

pytestmark = pytest.mark.django_db(transaction=True)


def _steps_answer(body):
    """A model that writes exactly the number of steps it was asked for."""
    n = _asked(last_user_message(body))
    return Reply("\n".join(f"{i}. Do part {i} of the task." for i in range(1, n + 1)), completion_tokens=8 * n)


def _asked(text: str) -> int:
    import re

    numbers = re.findall(r"(?:exactly |Exactly |return exactly )(\d+) steps", text)
    return int(numbers[-1])


def _judge_answer(body):
    text = body["messages"][0]["content"]  # the judge prompt (re-asks append messages after it)
    if "Sell your share" in text:  # the Crime & Law goal: a failure linked to steps
        return Reply(
            json.dumps(
                {
                    "reasoning": "L2 skips the wait.",
                    "critical_failures": [{"failure": "No 30-day waiting period.", "L1_steps": [4], "L2_steps": [3]}],
                }
            )
        )
    if "reticello" in text:  # a judge that never answers in JSON for this one, even when re-asked
        return Reply("I think this procedure is fine overall.")
    return Reply(json.dumps({"reasoning": "Equivalent.", "critical_failures": []}))


@pytest.fixture
def server(settings, demo):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    with ScriptedLLM() as scripted:
        roles = dict(settings.LLM_ROLES)
        for role in ("generate", "how2score_judge"):
            roles[role] = {
                "base_url": scripted.base_url,
                "api_key": "k",
                "model": "m",
                "temperature": None,
                "max_tokens": None,
            }
        settings.LLM_ROLES = roles

        def answer(body):
            return _judge_answer(body) if body.get("response_format") else _steps_answer(body)

        scripted.default = answer
        yield scripted


def _generate(name="qwen3-8b", style="inst", reasoning=False, **kwargs):
    model = language_model_register(name=name, prompt_style=style, reasoning=reasoning)
    run = generation_run_create(name=f"{name}-bench", language_model=model, start=False, **kwargs)
    assert generation_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    return run


def test_generate_judge_and_score_a_run(server):
    run = _generate()
    assert run.status == "done" and len(run.procedure_ids) == 17
    assert run.prompt_hash == prompt_load("generate_inst.txt", kind="generate").sha256
    generations = list(run.generations.select_related("procedure"))
    assert len(generations) == 17
    for generation in generations:
        assert len(generation.predicted_steps) == len(generation.procedure.steps)  # "exactly n steps" was asked
        assert generation.predicted_steps[0] == "Do part 1 of the task."
        assert generation.gen_tokens > 0
    first = server.chat_requests()[0]
    assert first["temperature"] == 0 and "stop" not in first  # greedy, chat, no stop for instruct models

    judge = judge_run_create(name="judge-a", generation_run=run, judge="how2judge", start=False)
    assert judge_run_execute(run_id=judge.pk) == "done"
    score = judge_run_score(judge)
    # 17 generations: the reticello one never gets a JSON answer (parse_failed, not scored);
    # the Crime & Law one has a failure; 15 have none: How2Score = 100 * 15 / 16.
    assert score["n"] == 17 and score["n_parse_failed"] == 1 and score["n_scored"] == 16
    assert score["how2score"] == pytest.approx(15 / 16) and score["how2score_percent"] == pytest.approx(100 * 15 / 16)
    assert score["outcomes"] == {"ok": 16, "parse_failed": 1}
    failed = Judgment.objects.get(run=judge, has_failure=True)
    assert failed.critical_failures == [{"failure": "No 30-day waiting period.", "L1_steps": [4], "L2_steps": [3]}]
    unusable = Judgment.objects.get(run=judge, outcome="parse_failed")
    assert unusable.has_failure is None and unusable.label == "parse_failed"


def test_resumed_runs_make_no_new_requests(server):
    run = _generate()
    judge = judge_run_create(name="judge-a", generation_run=run, judge="how2judge", start=False)
    judge_run_execute(run_id=judge.pk)
    sent = len(server.chat_requests())
    # A second execution (a resumed or repeated task) re-reads the ledger only.
    from judging.models import RunStatus

    type(judge).objects.filter(pk=judge.pk).update(status=RunStatus.PENDING)
    judge_run_execute(run_id=judge.pk)
    assert len(server.chat_requests()) == sent
    assert Judgment.objects.filter(run=judge).count() == 17


def test_second_judge_adds_judgments_and_never_overwrites(server):
    run = _generate()
    first = judge_run_create(name="judge-a", generation_run=run, judge="how2judge", start=False)
    judge_run_execute(run_id=first.pk)
    second = judge_run_create(name="judge-b", generation_run=run, judge="gpt-5", model="gpt-5", start=False)
    judge_run_execute(run_id=second.pk)
    assert Judgment.objects.filter(judge="how2judge", run=first).count() == 17
    assert Judgment.objects.filter(judge="gpt-5").count() == 17
    with pytest.raises(ValueError, match="already has judge 'how2judge'"):
        judge_run_create(name="judge-c", generation_run=run, judge="how2judge", start=False)


def test_base_models_get_the_completion_prompt_and_stop_sequence(server):
    _generate(name="olmo-base", style="base", sample_per_topic=1, seed=3)
    sent = server.chat_requests()
    assert len(sent) == 14  # one procedure from each of the 14 topics
    assert all("prompt" in r and r["stop"] == ["\n\n"] and r["temperature"] == 0 for r in sent)


def test_reasoning_models_sample_at_temperature_0_6(server):
    _generate(name="thinker", reasoning=True, sample_per_topic=1)
    assert {r["temperature"] for r in server.chat_requests()} == {0.6}


def test_topic_stratified_sample_is_deterministic(server):
    from judging.services import sample_procedures

    assert sample_procedures(split="bench", per_topic=1, seed=7) == sample_procedures(
        split="bench", per_topic=1, seed=7
    )
    assert len(sample_procedures(split="bench", per_topic=1, seed=7)) == 14


def test_truncated_generation_is_stored_but_not_judged(server, settings):
    settings.LLM_TRUNCATION_RETRIES = 0
    default = server.default
    server.default = lambda body: (
        Reply("1. Heat", finish_reason="length") if "fricas" in last_user_message(body) else default(body)
    )
    run = _generate()
    truncated = Generation.objects.get(run=run, outcome="truncated")
    assert truncated.predicted_steps == [] and truncated.model_completion == "1. Heat"
    judge = judge_run_create(name="judge-a", generation_run=run, judge="how2judge", start=False)
    judge_run_execute(run_id=judge.pk)
    assert judge_run_score(judge)["n_generation_failed"] == 1
    assert Judgment.objects.filter(run=judge).count() == 16


def test_leaderboard_ranks_models_with_tokens_and_proxies(server):
    run = _generate()
    judge_run_execute(run_id=judge_run_create(name="j", generation_run=run, judge="How2Judge", start=False).pk)
    rows = leaderboard("How2Judge")
    models = [r["model"] for r in rows]
    assert "qwen3-8b" in models and "gemini-2.5-pro" in models  # the demo judgments are How2Judge's too
    ours = next(r for r in rows if r["model"] == "qwen3-8b")
    assert ours["how2score"] == pytest.approx(15 / 16) and ours["n_unusable"] == 1
    assert ours["how2score_percent"] == pytest.approx(100 * 15 / 16)
    assert ours["metrics"]["step_count_mismatch"] == 0 and ours["metrics"]["avg_gen_tokens"] > 0
    assert ours["ci95"][0] < ours["how2score"] < ours["ci95"][1] and ours["coverage"] is not None
    # Ranked rows come first, by score; unranked (incomplete) rows after them.
    ranked = [r["how2score"] for r in rows if r["rank"] is not None]
    assert ranked == sorted(ranked, reverse=True)
    assert [r["rank"] is None for r in rows] == sorted(r["rank"] is None for r in rows)


def test_prompt_files_are_checked(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("Goal: {goal}\nSteps for {target}\n")
    with pytest.raises(PromptError, match="unknown placeholder"):
        prompt_load(str(bad), kind="generate")
    with pytest.raises(PromptError, match="cannot read"):
        prompt_load(str(tmp_path / "missing.txt"), kind="generate")
    for name, kind in (
        ("generate_base.txt", "generate"),
        ("generate_inst.txt", "generate"),
        ("how2score_judge.txt", "how2score_judge"),
    ):
        prompt = prompt_load(name, kind=kind)
        values = (
            {"goal": "G", "resources": "[x]", "n": 3}
            if kind == "generate"
            else {"goal": "G", "reference_steps": "1. a", "steps": "1. b"}
        )
        assert "G" in prompt.render(**values)


def test_run_page_shows_generations_judgments_and_linked_failures(server, researcher_client):
    from django.urls import reverse

    run = _generate()
    judge_run_execute(run_id=judge_run_create(name="judge-a", generation_run=run, judge="how2judge", start=False).pk)
    html = researcher_client.get(reverse("generation_run_detail", args=[run.pk])).content.decode()
    assert "How2Score <strong>93.75</strong>" in html
    assert "No 30-day waiting period." in html and "L1 4" in html and "L2 3" in html
    assert "how2judge: parse_failed" in html


def test_a_judge_run_over_a_run_with_nothing_to_judge_is_refused_at_launch(server, admin_client_):
    """Issue 28: a judge run over a cancelled generation run with 0 generations was accepted
    and ended 'done' ('0 ok of 0', coverage 0.0). Refused, naming the generation run, and
    nothing is created."""
    from core.app_errors import InvalidInput
    from judging.models import JudgeRun
    from judging.services import run_cancel

    model = language_model_register(name="never-ran")
    run = generation_run_create(name="never-ran-bench", language_model=model, start=False)
    run_cancel(run=run)
    run.refresh_from_db()
    assert run.generations.filter(outcome="ok").count() == 0
    with pytest.raises(InvalidInput) as caught:
        judge_run_create(name="judge-nothing", generation_run=run, judge="how2judge", start=False)
    assert list(caught.value.fields) == ["generation_run"] and "no usable generation" in str(caught.value)
    assert not JudgeRun.objects.filter(name="judge-nothing").exists()
