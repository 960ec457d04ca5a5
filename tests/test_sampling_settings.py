"""Every sampling variable that config/settings/llm.py reads reaches the server: with
``<PREFIX>_TEMPERATURE`` / ``<PREFIX>_MAX_TOKENS`` (or ``LLM_TEMPERATURE`` / ``LLM_MAX_TOKENS``)
set, the real code path of each role (a mining run's stage, a generation run, a goal-step
evaluation, a CoScript run, a judge run, the reward endpoint, a components run) sends them in
the body the scripted server receives. A run's explicit option wins over the variable, the
variable over the built-in default, and a changed variable is a new request, never a cached
answer (llm/sampling.py, docs/llm.md "Sampling parameters")."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from config.settings.llm import LLM_ROLE_PREFIXES, llm_settings
from core.services import api_token_create
from coscript.phase_services import coscript_run_execute
from coscript.run_services import coscript_run_create
from goalstep.models import TaskItem, TaskSet
from goalstep.services import task_evaluation_create, task_evaluation_execute
from judging.constants import JUDGE_MAX_TOKENS
from judging.models import JudgeRun
from judging.score_services import components_run_create, components_run_execute
from judging.services import (
    generation_run_create,
    generation_run_execute,
    judge_run_create,
    judge_run_execute,
    language_model_register,
)
from mining.constants import MINING_STAGE_MAX_TOKENS
from mining.models import Procedure
from mining.run_services import mining_run_create
from mining.runner import mining_run_execute
from tests import coscript_world
from tests.scripted_llm import Reply, ScriptedLLM, last_user_message
from tests.scripted_miner import ScriptedMiner, document_text, stage_of
from tests.test_mining_runs import config as mining_config
from tests.test_mining_runs import make_corpus

pytestmark = pytest.mark.django_db(transaction=True)

MINING_STAGES = ("extract_procedure", "llm_filter", "rewrite", "extract_resources", "final_validation")
REFERENCE = ["Heat oil in a large pot.", "Fry pork pieces in the oil until golden.", "Simmer for about 2 hours."]
COMPLETION = "1. Heat oil in a large pot.\n2. Fry the pork until golden.\n3. Simmer for two hours."


# --- the scripted server and the environment ----------------------------------------------


def _numbered(text: str) -> list[str]:
    return re.findall(r"^\d+\. ", text, flags=re.MULTILINE)


class Answers:
    """One scripted model for every path: the mining stages as tests/scripted_miner.py, the
    judge (no failure), the components extractor (one triple per step), CoScript's prompts
    as tests/coscript_world.py, and numbered steps for anything else."""

    def __init__(self) -> None:
        self.miner = ScriptedMiner()

    def __call__(self, body: dict[str, Any]) -> Reply:
        stage = stage_of(body)
        if stage in MINING_STAGES:
            return self.miner(body)
        if stage == "how2score_judge":
            return Reply(json.dumps({"reasoning": "Equivalent.", "critical_failures": []}))
        text = last_user_message(body)
        if stage == "extract_components":
            steps = _numbered(text.split("Steps:\n", 1)[-1])
            return Reply(json.dumps({"steps": [{"action": "do", "objects": [], "parameters": []} for _ in steps]}))
        answer = coscript_world.answer(body)
        if not answer.content.startswith("I cannot help"):
            return answer
        return Reply("1. Gather what you need.\n2. Do the task.\n3. Check the result.\n4. Clean up.\n5. Rest.")


@pytest.fixture
def server(settings):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    settings.LLM_PARSE_REASKS = 0
    with ScriptedLLM() as scripted:
        scripted.default = Answers()
        yield scripted


@pytest.fixture
def environment(monkeypatch, settings, server) -> Callable[..., None]:
    """Set environment variables and rebuild the LLM settings from them, as a fresh process
    would: every role points at the scripted server through LLM_BASE_URL."""

    def apply(**variables: str) -> None:
        for prefix in ["LLM", *LLM_ROLE_PREFIXES.values()]:
            for suffix in ("BASE_URL", "API_KEY", "MODEL", "TEMPERATURE", "MAX_TOKENS"):
                monkeypatch.delenv(f"{prefix}_{suffix}", raising=False)
        monkeypatch.setenv("LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("LLM_MODEL", "m")
        monkeypatch.setenv("LLM_API_KEY", "k")
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        built = llm_settings()
        settings.LLM_ROLES = built["LLM_ROLES"]
        settings.LLM_DEFAULT_ENDPOINT = built["LLM_DEFAULT_ENDPOINT"]

    return apply


def _bodies(server: ScriptedLLM, stage: str, since: int = 0) -> list[dict[str, Any]]:
    return [body for body in server.chat_requests()[since:] if stage_of(body) == stage]


# --- the real code path of each role --------------------------------------------------------


def _mining_run(server: ScriptedLLM, text: str | None = None) -> None:
    corpus = make_corpus([("d1", "health", document_text("d1", "Stretch the calves"))])
    run = mining_run_create(
        config_text=text or mining_config(concurrency=1), source="run.yaml", corpus_name=corpus.name, start=False
    )
    assert mining_run_execute(run_id=run.pk) == "done"


def _mining(stage: str) -> Callable[[ScriptedLLM], list[dict[str, Any]]]:
    def run(server: ScriptedLLM) -> list[dict[str, Any]]:
        _mining_run(server)
        return _bodies(server, stage)

    return run


def _generation_run(name: str = "m-bench", **model_fields: Any) -> Any:
    if not Procedure.objects.filter(split="bench").exists():
        coscript_world.make_procedures("bench")
    options = model_fields.pop("options", None)
    model = language_model_register(name=model_fields.pop("model_name", "scripted-model"), **model_fields)
    run = generation_run_create(name=name, language_model=model, start=False, options=options)
    assert generation_run_execute(run_id=run.pk) == "done"
    return run


def _generation(server: ScriptedLLM) -> list[dict[str, Any]]:
    _generation_run()
    return _bodies(server, "")


def _goalstep(server: ScriptedLLM) -> list[dict[str, Any]]:
    task_set = TaskSet.objects.create(task="step_inference", split="bench", seed=0, n_items=2)
    for position in range(2):
        TaskItem.objects.create(
            task_set=task_set,
            item_id=f"item-{position}",
            position=position,
            prompt=f"Plant tulips {position}",
            candidates=["dig a hole", "water the cat"],
            label=0,
            topic="Home & Hobbies",
            source_procedure_ids=[position],
        )
    evaluation = task_evaluation_create(
        task_set=task_set, language_model=language_model_register(name="scripted-model"), start=False
    )
    assert task_evaluation_execute(evaluation_id=evaluation.pk) == "done"
    return server.chat_requests()


def _coscript(server: ScriptedLLM) -> list[dict[str, Any]]:
    coscript_world.make_procedures()
    model = language_model_register(name="scripted-model")
    run = coscript_run_create(name="plans", language_model=model, split="bench", filter_mode="keyword", start=False)
    assert coscript_run_execute(run_id=run.pk) == "done"
    bodies = server.chat_requests()
    texts = [last_user_message(body) for body in bodies]
    # all three phases were asked: specific goals, the sensitive screen, the scripts
    assert any("Create possible Specific Goals" in t for t in texts)
    assert any("sensitive and high-risk domains" in t for t in texts)
    assert any("List the steps of" in t for t in texts)
    return bodies


def _judge_run(server: ScriptedLLM) -> list[dict[str, Any]]:
    generation_run = _generation_run()
    judge = judge_run_create(name="judge-a", generation_run=generation_run, judge="how2judge", start=False)
    assert judge_run_execute(run_id=judge.pk) == "done"
    return _bodies(server, "how2score_judge")


def _reward_post(completion: str = COMPLETION) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from core.roles import ROLE_RESEARCHER
    from core.services import user_create

    user = get_user_model().objects.filter(username="rita").first()
    if user is None:
        created = user_create(username="rita", role=ROLE_RESEARCHER, password="rita-Password-1")
        user = get_user_model().objects.get(username=created.username)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user).secret}")
    item = {"goal": "Prepare a pork stew.", "resources": ["oil"], "reference_steps": REFERENCE}
    response = client.post("/api/reward", {**item, "completion": completion}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _reward(server: ScriptedLLM) -> list[dict[str, Any]]:
    assert _reward_post()["how2score"] == 1
    return _bodies(server, "how2score_judge")


def _components(server: ScriptedLLM) -> list[dict[str, Any]]:
    generation_run = _generation_run()
    run = components_run_create(name="components-1", generation_run=generation_run, start=False)
    assert components_run_execute(run_id=run.pk) == "done"
    return _bodies(server, "extract_components")


PATHS: dict[str, Callable[[ScriptedLLM], list[dict[str, Any]]]] = {
    **{f"mining:{stage}": _mining(stage) for stage in MINING_STAGES},
    "generation run": _generation,
    "goal-step evaluation": _goalstep,
    "coscript run": _coscript,
    "judge run": _judge_run,
    "reward endpoint": _reward,
    "components run": _components,
}
# Which paths each role's variables must reach (the role they run under).
ROLE_PATHS = {
    "EXTRACT": ["mining:extract_procedure"],
    "FILTER": ["mining:llm_filter"],
    "REWRITE": ["mining:rewrite"],
    "RESOURCES": ["mining:extract_resources"],
    "VALIDATION": ["mining:final_validation"],
    "GENERATE": ["generation run", "goal-step evaluation", "coscript run"],
    "JUDGE": ["judge run", "reward endpoint"],
    "COMPONENTS": ["components run"],
}
VALUES = {"TEMPERATURE": ("temperature", "0.37", 0.37), "MAX_TOKENS": ("max_tokens", "321", 321)}


def test_every_role_prefix_has_a_path_here():
    assert set(ROLE_PATHS) == set(LLM_ROLE_PREFIXES.values())


@pytest.mark.parametrize(
    "prefix, path",
    [(prefix, path) for prefix, paths in ROLE_PATHS.items() for path in paths],
    ids=lambda value: str(value),
)
@pytest.mark.parametrize("suffix", list(VALUES))
def test_a_roles_sampling_variable_is_in_the_body_the_server_receives(environment, server, prefix, path, suffix):
    field, text, value = VALUES[suffix]
    environment(**{f"{prefix}_{suffix}": text})
    bodies = PATHS[path](server)
    assert bodies and {body[field] for body in bodies} == {value}, f"{prefix}_{suffix}={text} on the {path}"


@pytest.mark.parametrize(
    "path",
    [
        "mining",
        "generation run",
        "goal-step evaluation",
        "coscript run",
        "judge run",
        "reward endpoint",
        "components run",
    ],
)
@pytest.mark.parametrize("suffix", list(VALUES))
def test_the_llm_default_variable_reaches_every_role_without_its_own(environment, server, path, suffix):
    field, text, value = VALUES[suffix]
    environment(**{f"LLM_{suffix}": text})
    if path == "mining":
        _mining_run(server)
        bodies = [body for body in server.chat_requests() if stage_of(body) in MINING_STAGES]
        assert {stage_of(body) for body in bodies} == set(MINING_STAGES)
    else:
        bodies = PATHS[path](server)
    assert bodies and {body[field] for body in bodies} == {value}, f"LLM_{suffix}={text} on the {path}"


def test_a_roles_variable_wins_over_the_llm_default(environment, server):
    environment(LLM_TEMPERATURE="0.9", LLM_MAX_TOKENS="500", JUDGE_MAX_TOKENS="200")
    (body,) = _reward(server)
    assert (body["temperature"], body["max_tokens"]) == (0.9, 200)


def test_without_variables_the_reward_judge_is_greedy_with_its_built_in_budget(environment, server):
    environment()
    (body,) = _reward(server)
    assert (body["temperature"], body["max_tokens"]) == (0.0, JUDGE_MAX_TOKENS)


def test_without_variables_each_mining_stage_has_its_built_in_budget(environment, server):
    environment()
    _mining_run(server)
    for stage in MINING_STAGES:
        assert {(b["temperature"], b["max_tokens"]) for b in _bodies(server, stage)} == {
            (0.0, MINING_STAGE_MAX_TOKENS[stage])
        }


def test_a_judge_runs_own_options_win_over_the_roles_variables_and_the_run_records_what_was_sent(environment, server):
    environment(JUDGE_TEMPERATURE="0.9", JUDGE_MAX_TOKENS="200")
    generation_run = _generation_run()
    own = judge_run_create(
        name="own",
        generation_run=generation_run,
        judge="teacher-a",
        temperature=0.2,
        options={"max_tokens": 150},
        start=False,
    )
    judge_run_execute(run_id=own.pk)
    sent = _bodies(server, "how2score_judge")
    assert sent and {(b["temperature"], b["max_tokens"]) for b in sent} == {(0.2, 150)}
    plain = judge_run_create(name="plain", generation_run=generation_run, judge="teacher-b", start=False)
    judge_run_execute(run_id=plain.pk)
    sent = _bodies(server, "how2score_judge")[len(sent) :]
    assert sent and {(b["temperature"], b["max_tokens"]) for b in sent} == {(0.9, 200)}
    assert JudgeRun.objects.get(name="own").temperature == 0.2
    assert JudgeRun.objects.get(name="plain").temperature == 0.9


def test_a_models_max_tokens_and_a_runs_temperature_win_over_the_generate_variables(environment, server):
    environment(GENERATE_TEMPERATURE="0.9", GENERATE_MAX_TOKENS="321")
    _generation_run(model_name="long-answers", max_tokens=777, options={"temperature": 0.1})
    sent = _bodies(server, "")
    assert sent and {(b["temperature"], b["max_tokens"]) for b in sent} == {(0.1, 777)}


def test_a_mining_stages_configured_values_win_over_its_roles_variables(environment, server):
    environment(EXTRACT_TEMPERATURE="0.7", EXTRACT_MAX_TOKENS="321")
    text = mining_config(concurrency=1) + "stages:\n  extract_procedure: {temperature: 0.2, max_tokens: 999}\n"
    _mining_run(server, text)
    assert {(b["temperature"], b["max_tokens"]) for b in _bodies(server, "extract_procedure")} == {(0.2, 999)}


def test_a_changed_variable_is_a_new_request_not_a_cached_answer(environment, server):
    environment(JUDGE_MAX_TOKENS="200")
    assert _reward_post()["how2score"] == 1
    assert _reward_post()["how2score"] == 1  # the same request: answered by the ledger
    environment(JUDGE_MAX_TOKENS="300")
    assert _reward_post()["how2score"] == 1
    assert [b["max_tokens"] for b in _bodies(server, "how2score_judge")] == [200, 300]
