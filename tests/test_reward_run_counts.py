"""The reward endpoint keeps its own accounts: its judge requests share ledger keys with judge
runs (the same request, the same hash), but a judge run counts only what it asked itself. A
reward's failure never shows in a judge run's counts; a reward's ``ok`` answer may still answer
the judge run from the ledger."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from core.services import api_token_create
from judging.services import generation_run_create, judge_run_create, judge_run_execute, language_model_register
from llm.models import LedgerEntry
from llm.runs import owned_run_state
from tests.scripted_llm import Reply, ScriptedLLM, Status, last_user_message

pytestmark = pytest.mark.django_db(transaction=True)


def _steps_answer(body):
    import re

    n = int(re.findall(r"(?:exactly |Exactly |return exactly )(\d+) steps", last_user_message(body))[-1])
    return Reply("\n".join(f"{i}. Do part {i} of the task." for i in range(1, n + 1)))


@pytest.fixture
def server(settings, demo):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    settings.LLM_BACKOFF_MAX_SECONDS = 0.01
    settings.LLM_MAX_ATTEMPTS = 2
    with ScriptedLLM() as scripted:
        roles = dict(settings.LLM_ROLES)
        for role in ("generate", "how2score_judge"):
            roles[role] = {"base_url": scripted.base_url, "api_key": "k", "model": "m", "temperature": None}
            roles[role]["max_tokens"] = None
        settings.LLM_ROLES = roles
        scripted.judge_down = True  # type: ignore[attr-defined]

        def answer(body):
            if not body.get("response_format"):
                return _steps_answer(body)
            if scripted.judge_down:  # type: ignore[attr-defined]
                return Status(500, "judge is down")
            return Reply(json.dumps({"reasoning": "Equivalent.", "critical_failures": []}))

        scripted.default = answer
        yield scripted


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher).secret}")
    return client


def _reward_items(run) -> list[dict]:
    return [
        {
            "goal": g.procedure.goal,
            "resources": g.procedure.resources,
            "reference_steps": g.procedure.steps,
            "completion": g.model_completion,
        }
        for g in run.generations.filter(outcome="ok").select_related("procedure").order_by("id")[:6]
    ]


def test_a_failed_reward_batch_never_counts_in_a_judge_run_over_the_same_generation(server, api):
    model = language_model_register(name="qwen3-8b")
    generation = generation_run_create(name="gen", language_model=model, start=False)
    from judging.services import generation_run_execute

    assert generation_run_execute(run_id=generation.pk) == "done"
    judge = judge_run_create(name="judge-a", generation_run=generation, judge="how2judge", start=False)
    assert judge.llm_job is not None

    rewards = api.post("/api/reward", _reward_items(generation), format="json").json()
    assert [r["status"] for r in rewards] == ["failed"] * 6
    reward_failures = LedgerEntry.objects.filter(run="reward-endpoint", outcome="api_error")
    assert reward_failures.count() == 6
    assert set(reward_failures.values_list("key", flat=True)) <= set(judge.llm_job.keys)  # the very same requests

    state = owned_run_state(judge)
    assert state["outcomes"]["api_error"] == 0 and state["n_failed"] == 0  # not asked by the judge run yet
    assert state["outcomes"]["pending"] == len(set(judge.llm_job.keys))
    detail = api.get(f"/api/judging/judge-runs/{judge.pk}/").json()  # the API shows the same
    assert detail["outcomes"]["api_error"] == 0 and detail["n_failed"] == 0

    server.judge_down = False
    assert judge_run_execute(run_id=judge.pk) == "done"
    judge.refresh_from_db()
    for live in (True, False):  # the run page (live) and the lists (the counts the job stored)
        state = owned_run_state(judge, live=live)
        assert state["outcomes"]["api_error"] == 0 and state["outcomes"]["ok"] == len(set(judge.llm_job.keys))
    assert judge.judgments.filter(outcome="ok").count() == judge.judgments.count() == len(set(judge.llm_job.keys))


def test_a_judge_run_counts_its_own_failure_even_after_a_reward_asked_the_same_request_again(server, api, settings):
    settings.LLM_BREAKER_CONSECUTIVE = 1000  # the judge run asks everything once (no pause)
    settings.LLM_BREAKER_WINDOW_FAILURES = 1.0
    model = language_model_register(name="qwen3-8b")
    generation = generation_run_create(name="gen", language_model=model, start=False)
    from judging.services import generation_run_execute

    generation_run_execute(run_id=generation.pk)
    judge = judge_run_create(name="judge-a", generation_run=generation, judge="how2judge", start=False)
    assert judge.llm_job is not None
    assert judge_run_execute(run_id=judge.pk) == "done"  # the job ran to its end
    n = len(set(judge.llm_job.keys))
    before = owned_run_state(judge)["outcomes"]
    assert before["api_error"] == n  # its own failures

    api.post("/api/reward", _reward_items(generation), format="json")  # fails again, under its own label
    assert LedgerEntry.objects.filter(run="reward-endpoint").count() == 6  # the entries now say "reward"
    assert owned_run_state(judge)["outcomes"] == before  # still the judge run's own failures, not "pending"


def test_a_reward_answer_the_judge_run_refuses_is_the_judge_runs_failure(server, api):
    model = language_model_register(name="qwen3-8b")
    generation = generation_run_create(name="gen", language_model=model, start=False)
    from judging.services import generation_run_execute

    generation_run_execute(run_id=generation.pk)
    judge = judge_run_create(name="judge-a", generation_run=generation, judge="how2judge", start=False)
    server.judge_down = False
    blank = json.dumps({"reasoning": "x", "critical_failures": [{"failure": " ", "L1_steps": [1], "L2_steps": [1]}]})
    server.queue(Reply(blank))  # the schema's ok, but no verdict (a failure without its text)
    rewards = api.post("/api/reward", _reward_items(generation)[:1], format="json").json()
    assert rewards[0]["status"] == "failed" and "unusable" in rewards[0]["reason"]
    assert judge_run_execute(run_id=judge.pk) == "done"
    judge.refresh_from_db()
    state = owned_run_state(judge)
    # The judge run found the answer in the ledger, refused it when storing it: its own failure.
    assert state["outcomes"]["parse_failed"] == 1 and state["outcomes"]["pending"] == 0
    assert judge.status == "done_with_failures"
