"""The REST API of every kind of run (mining, generation, judge, SCORE components, goal-step
evaluations, CoScript runs, plain LLM jobs): each gives its state (status, outcomes,
n_failed, top_errors, reason, breaker) in its list and detail, and admins drive it with
POST retry-failed, resume, pause and cancel (cancel only with ``{"confirm": "yes"}``),
each through the service its page uses. Against the scripted server with some requests
failing: *Retry failed* through the API re-asks exactly the failed requests."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from coscript.models import CoScriptRun
from coscript.phase_services import coscript_run_execute
from coscript.run_services import coscript_run_create
from goalstep.services import task_evaluation_create, task_evaluation_execute
from judging.score_services import components_run_create, components_run_execute
from judging.services import (
    generation_run_create,
    generation_run_execute,
    judge_run_create,
    judge_run_execute,
    language_model_register,
)
from llm.request import LLMRequest
from llm.services import llm_job_create, llm_job_execute
from mining.run_services import mining_run_create
from mining.runner import mining_run_execute
from tests import coscript_world
from tests.scripted_llm import Reply, ScriptedLLM, Status, last_user_message
from tests.scripted_miner import MARKER, document_text, stage_of
from tests.test_goalstep_evaluation import ANSWERS, task_set  # noqa: F401  (fixture)
from tests.test_goalstep_evaluation import server as goalstep_server  # noqa: F401  (fixture)
from tests.test_judging_runs import _steps_answer, server  # noqa: F401  (fixture)
from tests.test_mining_runs import config, make_corpus, miner  # noqa: F401  (fixture)
from tests.test_score_components_runs import _numbered_steps

pytestmark = pytest.mark.django_db(transaction=True)

KINDS = ["mining", "generation", "judge", "components", "goalstep", "coscript", "llm_job"]
STATE_FIELDS = ("status", "outcomes", "n_failed", "top_errors", "reason", "breaker")
ACTIONS = ("retry-failed", "resume", "pause", "cancel")
DOWN = "upstream down"


@dataclass
class World:
    """One run of a kind, not executed yet, against a scripted server where the requests
    ``fails`` picks answer 500 while ``failing["on"]``."""

    url: str  # the collection, e.g. /api/mining/runs/
    pk: int
    server: ScriptedLLM
    execute: Callable[[], Any]
    failing: dict[str, bool]
    key: Callable[[dict], str | None]  # which item a request is about (None: not one of the failing kind)
    broken: set[str]  # the items whose requests fail
    stopped: str = "done_with_failures"  # the status the run ends in with failures
    n_failed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def detail(self) -> str:
        return f"{self.url}{self.pk}/"

    def action(self, name: str) -> str:
        return f"{self.url}{self.pk}/{name}/"


def _one_attempt(settings) -> None:
    settings.LLM_MAX_ATTEMPTS = 1
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    settings.LLM_PARSE_REASKS = 0


def _failing_server(server: ScriptedLLM, fails: Callable[[dict], bool], answer: Callable[[dict], Any]) -> dict:
    failing = {"on": True}
    server.default = lambda body: Status(500, DOWN) if failing["on"] and fails(body) else answer(body)
    return failing


def _first(text: str, words) -> str | None:
    return next((w for w in words if w in text), None)


# -- one world per kind ----------------------------------------------------------------------

BROKEN_GOALS = ("reticello", "Sell your share")


def _generate_answer(body):
    return _steps_answer(body)


def _judge_ok(body):
    return Reply(json.dumps({"reasoning": "Equivalent.", "critical_failures": []}))


def _generated(server) -> Any:  # noqa: F811
    model = language_model_register(name="qwen3-8b")
    run = generation_run_create(name="qwen3-8b-bench", language_model=model, start=False)
    assert generation_run_execute(run_id=run.pk) == "done"
    return run


@pytest.fixture
def generation_world(server, settings):  # noqa: F811
    _one_attempt(settings)
    key = lambda body: None if body.get("response_format") else _first(last_user_message(body), BROKEN_GOALS)  # noqa: E731
    failing = _failing_server(server, lambda body: key(body) is not None, _generate_answer)
    model = language_model_register(name="qwen3-8b")
    run = generation_run_create(name="qwen3-8b-bench", language_model=model, start=False)
    return World(
        "/api/judging/generation-runs/",
        run.pk,
        server,
        lambda: generation_run_execute(run_id=run.pk),
        failing,
        key,
        set(BROKEN_GOALS),
        n_failed=2,
    )


@pytest.fixture
def judge_world(server, settings):  # noqa: F811
    generation = _generated(server)
    _one_attempt(settings)

    def key(body):
        return _first(body["messages"][0]["content"], BROKEN_GOALS) if body.get("response_format") else None

    failing = _failing_server(
        server,
        lambda body: key(body) is not None,
        lambda body: _judge_ok(body) if body.get("response_format") else _steps_answer(body),
    )
    run = judge_run_create(name="j", generation_run=generation, judge="how2judge", start=False)
    return World(
        "/api/judging/judge-runs/",
        run.pk,
        server,
        lambda: judge_run_execute(run_id=run.pk),
        failing,
        key,
        set(BROKEN_GOALS),
        n_failed=2,
    )


@pytest.fixture
def components_world(server, settings):  # noqa: F811
    generation = _generated(server)
    _one_attempt(settings)
    roles = dict(settings.LLM_ROLES)
    roles["extract_components"] = dict(roles["generate"])
    settings.LLM_ROLES = roles

    def key(body):
        if not body.get("response_format"):
            return None
        steps = _numbered_steps(last_user_message(body))
        return "reticello" if any("reticello" in step.lower() for step in steps) else None

    def answer(body):
        if not body.get("response_format"):
            return _steps_answer(body)
        steps = _numbered_steps(last_user_message(body))
        return Reply(json.dumps({"steps": [{"action": "do", "objects": [], "parameters": []} for _ in steps]}))

    failing = _failing_server(server, lambda body: key(body) is not None, answer)
    run = components_run_create(name="components-1", generation_run=generation, start=False)
    return World(
        "/api/judging/components-runs/",
        run.pk,
        server,
        lambda: components_run_execute(run_id=run.pk),
        failing,
        key,
        {"reticello"},
        n_failed=1,
    )


FAILING_ITEMS = ("Keep a cat calm", "Plant tulips")


@pytest.fixture
def goalstep_world(task_set, goalstep_server, settings):  # noqa: F811
    _one_attempt(settings)
    key = lambda body: _first(last_user_message(body), FAILING_ITEMS)  # noqa: E731

    def answer(body: dict) -> Reply:
        prompt = _first(last_user_message(body), ANSWERS)
        assert prompt is not None, body
        return Reply(ANSWERS[prompt])

    failing = _failing_server(goalstep_server, lambda body: key(body) is not None, answer)
    model = language_model_register(name="scripted-model")
    evaluation = task_evaluation_create(task_set=task_set, language_model=model, start=False)
    return World(
        "/api/goalstep/evaluations/",
        evaluation.pk,
        goalstep_server,
        lambda: task_evaluation_execute(evaluation_id=evaluation.pk),
        failing,
        key,
        set(FAILING_ITEMS),
        n_failed=2,
    )


@pytest.fixture
def coscript_world_(db, settings):
    with coscript_world.scripted_server(settings) as scripted:
        coscript_world.make_procedures()
        _one_attempt(settings)

        def key(body):
            text = last_user_message(body)
            return "vanilla" if "List the steps of" in text and "vanilla" in text.lower() else None

        failing = _failing_server(scripted, lambda body: key(body) is not None, coscript_world.answer)
        model = language_model_register(name="scripted-model")
        run = coscript_run_create(name="plan", language_model=model, split="bench", start=False, screen=False)
        yield World(
            "/api/coscript/runs/",
            run.pk,
            scripted,
            lambda: coscript_run_execute(run_id=run.pk),
            failing,
            key,
            {"vanilla"},
            stopped="paused",
            n_failed=2,
        )


BROKEN_DOCS = {"d2", "d4"}


def _doc(body) -> str | None:
    found = MARKER.search(body["messages"][0]["content"])
    return found.group(1) if found else None


@pytest.fixture
def mining_world(miner, settings):  # noqa: F811
    server, answers = miner
    _one_attempt(settings)
    failing = _failing_server(
        server, lambda body: stage_of(body) == "llm_filter" and _doc(body) in BROKEN_DOCS, answers
    )
    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Prepare item {i}")) for i in range(6)])
    run = mining_run_create(
        config_text=config("api-mine", failure_retries=0), source="run.yaml", corpus_name=corpus.name, start=False
    )
    # A failed document is asked again from its failed stage on: the key is the document.
    return World(
        "/api/mining/runs/",
        run.pk,
        server,
        lambda: mining_run_execute(run_id=run.pk),
        failing,
        _doc,
        set(BROKEN_DOCS),
        n_failed=2,
    )


SCHEMA = {"type": "object", "properties": {"has": {"type": "boolean"}}, "required": ["has"]}


@pytest.fixture
def llm_job_world(settings):
    _one_attempt(settings)
    with ScriptedLLM() as scripted:
        roles = dict(settings.LLM_ROLES)
        roles["llm_filter"] = {
            "base_url": scripted.base_url,
            "api_key": "k",
            "model": "m",
            "temperature": None,
            "max_tokens": None,
        }
        settings.LLM_ROLES = roles
        key = lambda body: _first(last_user_message(body), ("q1", "q3"))  # noqa: E731
        failing = _failing_server(scripted, lambda body: key(body) is not None, lambda body: Reply('{"has": true}'))
        requests = [
            LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": f"q{i}"}], schema=SCHEMA)
            for i in range(5)
        ]
        job = llm_job_create(run="plain-job", role="llm_filter", requests=requests, start=False, concurrency=2)
        yield World(
            "/api/llm/jobs/",
            job.pk,
            scripted,
            lambda: llm_job_execute(job_id=job.pk),
            failing,
            key,
            {"q1", "q3"},
            n_failed=2,
        )


@pytest.fixture
def world(request, db) -> World:
    name = "coscript_world_" if request.param == "coscript" else f"{request.param}_world"
    return request.getfixturevalue(name)


# -- state and Retry failed --------------------------------------------------------------------


@pytest.mark.parametrize("world", KINDS, indirect=True)
def test_each_kind_of_run_gives_its_state_and_retry_failed_through_the_api_reasks_exactly_the_failures(
    world, admin_client_
):
    world.execute()
    listing = admin_client_.get(world.url).json()
    row = next(r for r in listing["results"] if r["id"] == world.pk)
    detail = admin_client_.get(world.detail()).json()
    for body in (row, detail):
        assert set(STATE_FIELDS) <= set(body), sorted(body)
        assert body["status"] == world.stopped and body["n_failed"] == world.n_failed
        assert body["outcomes"]["api_error"] == world.n_failed
    assert detail["top_errors"] and DOWN in detail["top_errors"][0]["error"]  # a detail always carries them

    world.failing["on"] = False  # the endpoint recovers
    before = len(world.server.chat_requests())
    response = admin_client_.post(world.action("retry-failed"))
    assert response.status_code == 200, response.content
    assert response.json()["asked_again"] == world.n_failed
    assert response.json()["run"]["status"] == "pending"
    world.execute()  # what the enqueued task does
    asked = [world.key(body) for body in world.server.chat_requests()[before:]]
    assert set(asked) == world.broken and None not in asked  # the failed ones again, nothing else
    after = admin_client_.get(world.detail()).json()
    assert after["status"] == "done" and after["n_failed"] == 0 and after["top_errors"] == []


# -- controls: pause, resume, cancel ------------------------------------------------------------


@pytest.mark.parametrize("world", KINDS, indirect=True)
def test_pause_resume_and_cancel_through_the_api_and_actions_that_do_not_apply_are_refused(world, admin_client_):
    status = lambda: admin_client_.get(world.detail()).json()["status"]  # noqa: E731
    assert status() == "pending"
    paused = admin_client_.post(world.action("pause"))
    assert paused.status_code == 200 and paused.json()["run"]["status"] == "paused"
    again = admin_client_.post(world.action("pause"))
    assert again.status_code == 409 and "paused" in again.json()["detail"] and again.json()["code"] == "run_state"
    resumed = admin_client_.post(world.action("resume"))
    assert resumed.status_code == 200 and status() == "pending"

    refused = admin_client_.post(world.action("cancel"))
    assert refused.status_code == 400 and "confirm" in refused.json()
    refused = admin_client_.post(world.action("cancel"), {"confirm": "no"}, content_type="application/json")
    assert refused.status_code == 400 and "confirm" in refused.json()
    assert status() == "pending"  # nothing was done
    cancelled = admin_client_.post(world.action("cancel"), {"confirm": "yes"}, content_type="application/json")
    assert cancelled.status_code == 200 and status() == "cancelled"
    for name in ("resume", "retry-failed", "pause", "cancel"):
        body = {"confirm": "yes"} if name == "cancel" else {}
        response = admin_client_.post(world.action(name), body, content_type="application/json")
        assert response.status_code == 409 and "cancelled" in response.json()["detail"], (name, response.content)
    assert status() == "cancelled"


@pytest.mark.parametrize("world", KINDS, indirect=True)
def test_run_actions_are_for_admins_only(world, researcher_client, admin_client_):
    anonymous = Client()
    for name in ACTIONS:
        assert researcher_client.post(world.action(name), {"confirm": "yes"}).status_code == 403
        assert anonymous.post(world.action(name), {"confirm": "yes"}).status_code == 401
    assert admin_client_.get(world.detail()).json()["status"] == "pending"
    assert admin_client_.get(world.action("pause")).status_code == 405
    assert admin_client_.post(f"{world.url}999999/pause/").status_code == 404
    reads = researcher_client.get(world.detail()).status_code
    assert reads == (403 if world.url == "/api/llm/jobs/" else 200)  # the LLM pages are for admins
    assert anonymous.get(world.url).status_code == 401


def test_retry_failed_of_a_runs_job_through_the_llm_jobs_api_goes_through_its_run(judge_world, admin_client_):
    judge_world.execute()
    from judging.models import JudgeRun

    run = JudgeRun.objects.get(pk=judge_world.pk)
    row = admin_client_.get(f"/api/llm/jobs/{run.llm_job_id}/").json()
    assert row["owner"] == "judge run j" and row["status"] == "done_with_failures"
    judge_world.failing["on"] = False
    response = admin_client_.post(f"/api/llm/jobs/{run.llm_job_id}/retry-failed/")
    assert response.status_code == 200 and response.json()["asked_again"] == 2
    run.refresh_from_db()
    assert run.status == "pending"  # the run, not the job alone, was put back in the queue
    judge_world.execute()
    run.refresh_from_db()
    assert run.status == "done" and run.judgments.filter(outcome="ok").count() == 17


# -- format suffixes ------------------------------------------------------------------------------


def test_actions_accept_a_format_suffix(coscript_world_, admin_client_):
    world = coscript_world_
    world.failing["on"] = False
    world.execute()
    goals = admin_client_.get(f"{world.url}{world.pk}/goals.json")
    assert goals.status_code == 200 and goals.json()["count"] > 0
    assert admin_client_.get(f"{world.url}{world.pk}.json").json()["status"] == "done"
    response = admin_client_.post(f"{world.url}{world.pk}/pause.json")
    assert response.status_code == 409 and "done" in response.json()["detail"]


# -- CoScript's Cancel button asks first ---------------------------------------------------------


def test_cancelling_a_coscript_run_from_its_page_asks_first(coscript_world_, admin_client_):
    world = coscript_world_
    url = reverse("coscript_run_action", args=[world.pk, "cancel"])
    page = admin_client_.get(reverse("coscript_run_detail", args=[world.pk])).content.decode()
    assert "Yes, cancel" in page and 'name="confirm" value="yes"' in page  # the question, no JavaScript needed
    refused = admin_client_.post(url)
    assert refused.status_code == 400 and "confirm" in refused.content.decode()
    assert CoScriptRun.objects.get(pk=world.pk).status == "pending"
    admin_client_.post(url, {"confirm": "yes"})
    assert CoScriptRun.objects.get(pk=world.pk).status == "cancelled"


# -- the schema ---------------------------------------------------------------------------------


def test_the_schema_lists_every_runs_endpoints_and_actions(researcher_client):
    response = researcher_client.get("/api/schema/?format=json")
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    for collection in (
        "mining/runs",
        "judging/generation-runs",
        "judging/judge-runs",
        "judging/components-runs",
        "goalstep/evaluations",
        "coscript/runs",
        "llm/jobs",
    ):
        assert f"/api/{collection}/" in paths and f"/api/{collection}/{{id}}/" in paths
        for name in ACTIONS:
            operation = paths[f"/api/{collection}/{{id}}/{name}/"]["post"]
            assert {"200", "409", "403"} <= set(operation["responses"]), (collection, name)


def test_a_coscript_run_paused_as_its_phase_ends_does_not_start_the_next_phase(coscript_world_, admin_client_):
    world = coscript_world_
    world.failing["on"] = False
    answer = world.server.default

    def pause_during_goals(body):
        # The pause lands while the goals phase finishes its last requests (its job is done
        # before the pause reaches it): the run must stop before sending any script.
        if "Create possible Specific Goals" in last_user_message(body):
            CoScriptRun.objects.filter(pk=world.pk).update(status="paused", error="paused by a user")
        return answer(body)

    world.server.default = pause_during_goals
    world.execute()
    run = CoScriptRun.objects.get(pk=world.pk)
    assert run.status == "paused" and run.phase == "scripts"
    assert not any("List the steps of" in last_user_message(b) for b in world.server.chat_requests())
    world.server.default = answer
    assert admin_client_.post(world.action("resume")).status_code == 200
    world.execute()
    assert CoScriptRun.objects.get(pk=world.pk).status == "done"
