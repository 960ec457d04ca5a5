"""Launching runs through the REST API from the same YAML the commands read: each kind
(mining, generation, judge, SCORE components, goal-step evaluation, CoScript) is started by
``POST`` on its collection with ``{"config": "<yaml>"}`` (or the file uploaded), runs its
real Celery task (eagerly, in this process) against a scripted server on 127.0.0.1 and is
read back through the API in its end state. A refused configuration is a 400 naming the line
and the key, and stores nothing; only admins launch; lists filter and paginate; the
leaderboards and reports of the API give the pages' numbers."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from core.run_launch import config_error_location
from core.services import api_token_create
from coscript.models import CoScriptRun
from coscript.selectors import constrained_how2score
from goalstep.models import TaskEvaluation
from goalstep.selectors import leaderboard
from judging.leaderboard_selectors import leaderboard_ranking
from judging.models import ComponentsRun, GenerationRun, JudgeRun, LanguageModel
from judging.score_selectors import generation_run_score
from judging.selectors import judge_run_score
from judging.services import generation_run_create, language_model_register
from llm.models import LLMJob
from mining.models import MiningRun, SplitReport
from mining.run_selectors import mining_run_progress
from tests import coscript_world
from tests.scripted_llm import Reply, last_user_message
from tests.scripted_miner import document_text
from tests.test_goalstep_evaluation import server as goalstep_server  # noqa: F401  (fixture)
from tests.test_goalstep_evaluation import task_set  # noqa: F401  (fixture)
from tests.test_judging_runs import _steps_answer, server  # noqa: F401  (fixture)
from tests.test_mining_runs import make_corpus, miner  # noqa: F401  (fixture)
from tests.test_score_components_runs import _numbered_steps

pytestmark = pytest.mark.django_db(transaction=True)

COLLECTIONS = {
    "mining": "/api/mining/runs/",
    "generation": "/api/judging/generation-runs/",
    "judge": "/api/judging/judge-runs/",
    "components": "/api/judging/components-runs/",
    "goalstep": "/api/goalstep/evaluations/",
    "coscript": "/api/coscript/runs/",
}
RUN_MODELS = (MiningRun, GenerationRun, JudgeRun, ComponentsRun, TaskEvaluation, CoScriptRun, LLMJob, LanguageModel)


@pytest.fixture
def eager():
    """Celery runs each task as it is enqueued (after the launch's transaction commits)."""
    from config.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def api(admin_user) -> Client:
    """An admin's client authenticated by an API token, as a script is."""
    return Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=admin_user).secret}")


def _launch(client: Client, kind: str, config: str, **extra):
    return client.post(COLLECTIONS[kind], {"config": config, **extra}, content_type="application/json")


def _counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in RUN_MODELS}


# -- each kind, launched and run to its end ---------------------------------------------------


def test_a_mining_run_launched_from_yaml_through_the_api_mines_to_done(miner, eager, api):  # noqa: F811
    server, _ = miner
    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Prepare item {i}")) for i in range(3)])
    response = _launch(api, "mining", "name: api-mine\ncandidates_per_topic: 100\ntopics: all\n", corpus=corpus.name)
    assert response.status_code == 201, response.content
    body = response.json()
    run = MiningRun.objects.get(name="api-mine")
    assert [r["id"] for r in body["runs"]] == [run.pk]
    assert response["Location"].endswith(f"/api/mining/runs/{run.pk}/")
    assert run.created_by == "ada" and run.corpus == corpus
    detail = api.get(f"/api/mining/runs/{run.pk}/").json()
    assert detail["status"] == "done" and detail["procedures"] == 3 and detail["n_failed"] == 0
    assert server.chat_requests()  # the scripted stages were asked
    progress = api.get(f"/api/mining/runs/{run.pk}/progress/").json()
    expected = json.loads(json.dumps(mining_run_progress(run), default=float))
    assert progress["totals"]["procedures"] == 3
    assert progress["totals"]["yield"] == expected["totals"]["yield"]  # n and interval of the run page
    assert progress["funnel"] == expected["funnel"]


def _bench_answer(body):
    """Steps for generation, a verdict without failures for the judge, components for SCORE."""
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if schema == "extract_components":
        steps = _numbered_steps(last_user_message(body))
        return Reply(json.dumps({"steps": [{"action": "do", "objects": [], "parameters": []} for _ in steps]}))
    if schema:
        return Reply(json.dumps({"reasoning": "Equivalent.", "critical_failures": []}))
    return _steps_answer(body)


def test_generation_judge_and_components_runs_launched_from_yaml_reach_done_with_the_pages_how2score(
    server, settings, eager, api
):  # noqa: F811
    server.default = _bench_answer
    roles = dict(settings.LLM_ROLES)
    roles["extract_components"] = dict(roles["generate"])
    settings.LLM_ROLES = roles
    upload = SimpleUploadedFile(
        "generate.yaml", b"name: api-gen\nmodel: {name: api-model, role: generate}\nsplit: bench\n"
    )
    response = api.post(COLLECTIONS["generation"], {"config": upload})  # the file itself, multipart
    assert response.status_code == 201, response.content
    generation = GenerationRun.objects.get(name="api-gen")
    assert LanguageModel.objects.filter(name="api-model").exists()  # registered by the mapping, as bench_run does
    detail = api.get(f"/api/judging/generation-runs/{generation.pk}/").json()
    assert detail["status"] == "done" and detail["model"] == "api-model" and detail["outcomes"]["ok"] == 17
    assert detail["score"] == json.loads(json.dumps(generation_run_score(generation), default=float))  # the run page's
    assert api.get(COLLECTIONS["generation"]).json()["results"][0]["score"] is None  # lists stay cheap

    response = _launch(api, "judge", "name: api-judge\ngeneration_run: api-gen\njudge: how2judge\n")
    assert response.status_code == 201, response.content
    judge = JudgeRun.objects.get(name="api-judge")
    detail = api.get(f"/api/judging/judge-runs/{judge.pk}/").json()
    assert detail["status"] == "done"
    score = detail["how2score"]
    assert score == json.loads(json.dumps(judge_run_score(judge)))  # the generation run page's selector
    assert score["n_judged"] == 17 and score["how2score"] == 1.0

    response = _launch(api, "components", "generation_run: api-gen\nname: api-components\n")
    assert response.status_code == 201, response.content
    components = ComponentsRun.objects.get(name="api-components")
    assert api.get(f"/api/judging/components-runs/{components.pk}/").json()["status"] == "done"

    # The How2Bench leaderboard of the API equals the page's selector.
    board = api.get("/api/leaderboard", {"judge": "how2judge"}).json()
    page = leaderboard_ranking("how2judge", None)
    row = next(r for r in board["rows"] if r["model"] == "api-model")
    page_row = next(r for r in page["rows"] if r["model"] == "api-model")
    assert row["how2score"] == page_row["how2score"] and row["ci95"] == list(page_row["ci95"])
    assert row["n_judged"] == page_row["n_judged"] == 17


def test_a_goal_step_evaluation_launched_from_yaml_ends_done_and_the_leaderboard_api_equals_the_page(
    task_set, goalstep_server, eager, api, researcher_client
):  # noqa: F811
    language_model_register(name="scripted-model")
    response = _launch(api, "goalstep", f"task_set: {task_set.pk}\nmodel: scripted-model\nconcurrency: 2\n")
    assert response.status_code == 201, response.content
    evaluation = TaskEvaluation.objects.get()
    detail = api.get(f"/api/goalstep/evaluations/{evaluation.pk}/").json()
    assert detail["status"] == "done"
    accuracy = detail["accuracy"]
    assert (accuracy["correct"], accuracy["answered"], accuracy["unparseable"]) == (2, 4, 1)

    board = researcher_client.get("/api/goalstep/leaderboards/step_inference/", {"set": task_set.pk}).json()
    page = leaderboard("step_inference", task_set_id=task_set.pk)
    assert board["task_set"] == task_set.pk and len(board["rows"]) == 1
    row, page_row = board["rows"][0], page["rows"][0]
    assert row["evaluation"] == evaluation.pk and row["model"] == "scripted-model"
    for key in ("accuracy", "correct", "answered", "n_unusable", "n_unanswered"):
        assert row[key] == page_row[key]
    assert row["ci95"] == list(page_row["ci95"])
    html = researcher_client.get(f"/goalstep/step_inference/?set={task_set.pk}").content.decode()
    assert f"{page_row['accuracy']:.3f}" in html  # the number the page prints
    listing = researcher_client.get("/api/goalstep/leaderboards/").json()
    assert [b["task"] for b in listing["results"]] == ["step_inference", "goal_inference", "step_ordering"]
    assert researcher_client.get("/api/goalstep/leaderboards/cooking/").status_code == 404
    refused = researcher_client.get("/api/goalstep/leaderboards/step_inference/", {"set": "x"})
    assert refused.status_code == 400 and "set" in refused.json()


def test_a_coscript_run_launched_from_yaml_ends_done_and_its_slice_api_equals_the_selector(db, settings, eager, api):
    with coscript_world.scripted_server(settings):
        coscript_world.make_procedures()
        language_model_register(name="scripted-model")
        config = "name: api-plan\nmodel: scripted-model\nsplit: bench\nk: 2\nfilter_mode: keyword\nscreen: false\n"
        response = _launch(api, "coscript", config)
        assert response.status_code == 201, response.content
        run = CoScriptRun.objects.get(name="api-plan")
        detail = api.get(f"/api/coscript/runs/{run.pk}/").json()
        assert detail["status"] == "done" and detail["phase"] == "done", detail
        assert detail["n_goals"] > 0 and detail["kept_rate_n"] == detail["n_candidates"] > 0
        assert run.created_by is not None and run.created_by.username == "ada"
    slice_ = api.get("/api/coscript/runs/constrained-how2score/").json()
    assert slice_["rows"] == json.loads(json.dumps(constrained_how2score()))
    refused = api.get("/api/coscript/runs/constrained-how2score/", {"min_coverage": "2"})
    assert refused.status_code == 400 and "min_coverage" in refused.json()


# -- refusals: the line and the key, nothing stored -------------------------------------------


BAD = {
    # kind: (configuration, the line, the key, words of the message)
    "mining": ("name: bad\ncandidates_per_topic: 5\nexecutor: pigeon\n", 3, "executor", "must be one of"),
    "generation": ("name: g\nmodel: m\nsample_per_topic: 2\nbogus: 1\n", 4, "bogus", "unknown key"),
    "judge": ("name: j\ngeneration_run: nowhere\njudge: how2judge\n", 2, "generation_run", "no generation run"),
    "components": ("generation_run: g\nconcurrency: lots\n", 2, "concurrency", "whole number"),
    "goalstep": ("model: m\ntask_set: 99999\n", 2, "task_set", "no task set"),
    "coscript": ("name: p\nmodel: m\nk: 99\n", 3, "k", "whole number"),
}


@pytest.mark.parametrize("kind", list(BAD))
def test_a_refused_configuration_is_a_400_naming_its_line_and_key_and_stores_nothing(kind, api):
    config, line, key, words = BAD[kind]
    before = _counts()
    response = _launch(api, kind, config)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["line"] == line and body["key"] == key and body["code"] == "config_invalid", body
    assert f"the configuration, line {line}: " in body["config"][0] and words in body["config"][0], body
    assert _counts() == before


def test_not_yaml_is_refused_with_its_line(api):
    response = _launch(api, "mining", "name: x\ncandidates_per_topic: [1,\n")
    assert response.status_code == 400 and response.json()["line"] in (2, 3)
    assert "not valid YAML" in response.json()["config"][0]


def test_a_refusal_after_the_model_was_registered_leaves_no_model_and_no_run(server, api):  # noqa: F811
    before = _counts()
    config = (
        "name: g2\nmodel:\n  name: brand-new\n  base_url: http://127.0.0.1:9/v1\n  model: m\n"
        "prompt_file: /nonexistent/prompt.txt\n"
    )
    response = _launch(api, "generation", config)
    assert response.status_code == 400, response.content
    assert "prompt" in response.json()["config"][0]
    assert not LanguageModel.objects.filter(name="brand-new").exists()
    assert _counts() == before


def test_an_api_launch_reads_no_file_named_by_the_configuration(api):
    before = _counts()
    config = "out_root: /tmp/never-written\nmodels:\n  - model: m\ninputs:\n  path: /\n"
    for kind in ("generation", "judge"):  # refused before the translation walks the folder
        response = _launch(api, kind, config)
        assert response.status_code == 400 and response.json()["key"] == "inputs", response.content
    config = "out_root: /tmp/never-written\nmodels:\n  - model: m\npaths:\n  generations: /etc/passwd\n"
    response = _launch(api, "judge", config)
    assert response.status_code == 400 and "paths.generations" in response.json()["config"][0], response.content
    response = _launch(api, "coscript", "name: p\nmodel: m\nprompts_dir: /etc\n")
    assert response.status_code == 400 and response.json()["key"] == "prompts_dir"
    assert _counts() == before


@pytest.mark.parametrize("body", [{}, {"config": ""}, {"config": 7}, {"config": ["a"]}])
def test_a_launch_without_a_configuration_names_the_config_field(body, api):
    response = api.post(COLLECTIONS["mining"], body, content_type="application/json")
    assert response.status_code == 400 and "config" in response.json()


def test_a_configuration_above_the_size_limit_is_refused_before_parsing(api, settings):
    settings.RUN_CONFIG_MAX_BYTES = 100
    response = _launch(api, "mining", "name: x\n" + "#" * 200 + "\n")
    assert response.status_code == 400 and "RUN_CONFIG_MAX_BYTES" in response.json()["config"][0]


# -- roles ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(COLLECTIONS))
def test_only_admins_launch_runs(kind, researcher_client, researcher):
    config = BAD[kind][0]
    assert Client().post(COLLECTIONS[kind], {"config": config}, content_type="application/json").status_code == 401
    token = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher).secret}")
    for client in (researcher_client, token):
        response = client.post(COLLECTIONS[kind], {"config": config}, content_type="application/json")
        assert response.status_code == 403
        assert client.get(COLLECTIONS[kind]).status_code == 200  # researchers read runs, as the pages


def test_llm_jobs_have_no_launch(api):
    assert api.post("/api/llm/jobs/", {"config": "a: 1"}, content_type="application/json").status_code == 405


# -- filters and pagination -------------------------------------------------------------------


def test_run_lists_filter_by_status_model_and_creation_time_and_paginate(server, api):  # noqa: F811
    first = language_model_register(name="alpha")
    second = language_model_register(name="beta")
    runs = [
        generation_run_create(name=f"run-{i}", language_model=first if i % 2 else second, start=False) for i in range(4)
    ]
    GenerationRun.objects.filter(pk=runs[0].pk).update(status="done")
    GenerationRun.objects.filter(pk=runs[1].pk).update(created_at="2020-01-01T00:00:00Z")
    url = COLLECTIONS["generation"]
    # (the demo's finished runs of the paper's examples are in the lists too: only ours are compared)
    names = lambda params: sorted(  # noqa: E731
        r["name"] for r in api.get(url, params).json()["results"] if r["name"].startswith("run-")
    )
    assert names({"model": "alpha"}) == ["run-1", "run-3"]
    assert names({"status": "done"}) == ["run-0"]
    assert names({"created_before": "2021-01-01T00:00:00Z"}) == ["run-1"]
    assert names({"created_after": "2021-01-01T00:00:00Z", "model": "alpha"}) == ["run-3"]
    refused = api.get(url, {"created_after": "yesterday"})
    assert refused.status_code == 400 and "created_after" in refused.json()
    refused = api.get(url, {"status": "sleeping"})
    assert refused.status_code == 400 and "status" in refused.json()

    GenerationRun.objects.bulk_create(
        [GenerationRun(name=f"bulk-{i}", language_model=first, split="bench") for i in range(50)]
    )
    page = api.get(url).json()
    assert page["count"] == GenerationRun.objects.count() == 54 + 3  # + the demo's three runs
    assert len(page["results"]) == 50 and page["next"]
    assert len(api.get(url, {"page": 2}).json()["results"]) == 4 + 3


def test_judge_runs_filter_by_judge_and_judged_model(server, api):  # noqa: F811
    from judging.services import generation_run_execute, judge_run_create

    for name in ("alpha", "beta"):
        generation = generation_run_create(
            name=f"{name}-bench", language_model=language_model_register(name=name), start=False
        )
        assert generation_run_execute(run_id=generation.pk) == "done"  # a run with nothing to judge is refused
        judge_run_create(name=f"{name}-judged", generation_run=generation, judge="how2judge", start=False)
    url = COLLECTIONS["judge"]
    assert [r["name"] for r in api.get(url, {"model": "beta"}).json()["results"]] == ["beta-judged"]
    assert [r["name"] for r in api.get(url, {"generation_run": "alpha-bench"}).json()["results"]] == ["alpha-judged"]
    assert api.get(url, {"judge": "how2judge"}).json()["count"] == 2
    assert api.get(url, {"judge": "someone"}).json()["count"] == 0


# -- reports ---------------------------------------------------------------------------------


def test_split_reports_give_the_split_pages_numbers(researcher_client):
    report = SplitReport.objects.create(
        embedding_model="e",
        per_topic=2,
        seed=0,
        tau=0.65,
        n_procedures=10,
        n_bench=4,
        n_train=5,
        topics=[{"topic": "Health", "bench": 2}],
        records=[{"bench": 1, "train": 2, "cosine": 0.5}],
        dropped=[],
    )
    listing = researcher_client.get("/api/mining/splits/").json()
    assert listing["results"][0]["id"] == report.pk and "records" not in listing["results"][0]
    detail = researcher_client.get(f"/api/mining/splits/{report.pk}/").json()
    assert (detail["n_bench"], detail["n_train"], detail["tau"]) == (4, 5, 0.65)
    assert detail["records"] == report.records
    assert Client().get("/api/mining/splits/").status_code == 401


# -- where a refusal is (pure) ----------------------------------------------------------------


@pytest.mark.parametrize(
    "message, line, field",
    [
        ("cfg: executor must be one of online, batch, got 'x'", 3, "executor"),
        ("cfg: stages.rewrite.temperature must be a number", 6, "stages.rewrite.temperature"),
        ("cfg: unknown key(s) under stages.rewrite: colour; allowed: model", 7, "stages.rewrite.colour"),
        ("cfg: unknown stage(s) polish; allowed: rewrite", 8, "stages.polish"),
        ("cfg: unknown key(s) bogus, other; allowed: name", 2, "bogus"),
        ("cfg: missing key(s) candidates_per_topic", None, "candidates_per_topic"),
        ("cfg, line 4: not valid YAML (found)", 4, None),
        ("cfg: the configuration does not say", None, None),
    ],
)
def test_config_error_location_finds_the_line_and_key(message, line, field):
    text = (
        "name: run\nbogus: 1\nexecutor: x\nstages:\n  rewrite:\n    temperature: hot\n    colour: red\n  polish: {}\n"
    )
    where = config_error_location(text, message, source="cfg")
    assert (where["line"], where["field"]) == (line, field)
    if line is not None:
        assert where["message"].startswith(f"cfg, line {line}: ")


# -- the same file through the command ---------------------------------------------------------


def test_the_same_yaml_file_launches_an_evaluation_through_the_command_and_the_api(
    task_set, goalstep_server, eager, api, tmp_path
):  # noqa: F811
    from django.core.management import call_command

    language_model_register(name="scripted-model")
    path = tmp_path / "evaluate.yaml"
    path.write_text(f"task_set: {task_set.pk}\nmodel: scripted-model\nconcurrency: 2\n")
    call_command("goalstep_evaluate", "--config", str(path), stdout=open(tmp_path / "out.txt", "w"))
    with open(path, "rb") as handle:
        response = api.post(COLLECTIONS["goalstep"], {"config": handle})
    assert response.status_code == 201, response.content
    by_command, by_api = TaskEvaluation.objects.order_by("id")
    assert by_command.status == by_api.status == "done"
    rows = {r["id"]: r["accuracy"] for r in api.get(COLLECTIONS["goalstep"]).json()["results"]}
    for key in ("accuracy", "correct", "answered", "ci95"):
        assert rows[by_command.pk][key] == rows[by_api.pk][key]


@pytest.mark.parametrize(
    "command, kind",
    [
        (["coscript_run", "start"], "coscript"),
        (["goalstep_evaluate"], "goalstep"),
        (["bench_run", "components"], "components"),
        (["bench_run", "generate"], "generation"),
    ],
)
def test_a_file_the_command_refuses_is_refused_by_the_api_with_the_same_words(command, kind, api, tmp_path):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    config = {
        "coscript": "name: p\nmodel: m\nk: 99\n",
        "goalstep": "task_set: 1\nmodel: m\nexecutor: fax\n",
        "components": "generation_run: g\nconcurrency: 0\n",
        "generation": "name: g\nmodel: [1, 2]\n",
    }[kind]
    path = tmp_path / "run.yaml"
    path.write_text(config)
    before = _counts()
    with pytest.raises(CommandError) as refused:
        call_command(*command, "--config", str(path))
    response = _launch(api, kind, config)
    assert response.status_code == 400
    words = str(refused.value).split(": ", 1)[1]  # after the file's name
    assert response.json()["config"][0].endswith(words), (response.json(), words)
    assert _counts() == before


REFERENCE_GENERATE = """\
out_root: /tmp/never-written-by-the-api
generator_defaults:
  backend: deluge
  temperature: 0.0
  max_new_tokens: 1500
models:
  - model: gpt-4.1
    provider: openai
    prompt_style: inst
  - model: gpt-5
    provider: openai
    prompt_style: inst
    reasoning_effort: minimal
sample_per_topic: 1
seed: 1
"""


def test_a_reference_shape_configuration_launches_one_generation_run_per_model_with_its_notes(server, api):  # noqa: F811
    before = GenerationRun.objects.count()  # the demo's runs of the paper's examples
    response = _launch(api, "generation", REFERENCE_GENERATE)
    assert response.status_code == 201, response.content
    body = response.json()
    assert sorted(run["model"] for run in body["runs"]) == ["gpt-4.1", "gpt-5"]
    assert any("inputs" in note for note in body["notes"])  # the bench split stands in for the hub's dataset
    assert GenerationRun.objects.count() == before + 2
    again = _launch(api, "generation", REFERENCE_GENERATE)  # the same names: refused, nothing more stored
    assert again.status_code == 400 and "already exists" in again.json()["config"][0]
    assert GenerationRun.objects.count() == before + 2


FILTERS = {  # collection -> its own filters, with a value each takes
    **{url: {} for url in COLLECTIONS.values()},
    "/api/mining/runs/": {"corpus": "web", "executor": "online"},
    "/api/judging/generation-runs/": {"model": "m", "split": "bench"},
    "/api/judging/judge-runs/": {"judge": "j", "generation_run": "g", "model": "m"},
    "/api/judging/components-runs/": {"generation_run": "g", "extractor": "x"},
    "/api/goalstep/evaluations/": {"task": "step_ordering", "model": "m"},
    "/api/coscript/runs/": {"phase": "goals", "model": "m", "filter_mode": "keyword"},
    "/api/llm/jobs/": {"role": "generate", "run": "r"},
}


@pytest.mark.parametrize("url", list(FILTERS))
def test_every_run_list_filters_on_status_and_creation_time_and_refuses_values_naming_the_parameter(url, api):
    params = {"status": "done", "created_after": "2026-01-01T00:00:00Z", "created_before": "2030-01-01", **FILTERS[url]}
    response = api.get(url, params)
    assert response.status_code == 200, response.content
    assert response.json()["count"] == 0 and response.json()["results"] == []
    for name, value in (("status", "sleeping"), ("created_after", "yesterday"), ("created_before", "2026-13-45")):
        refused = api.get(url, {name: value})
        assert refused.status_code == 400 and name in refused.json(), (name, refused.content)


@pytest.mark.parametrize(
    "config, words",
    [
        ("a: &x [1, 2]\nb: *x\n", "aliases"),
        ("name: x\ncandidates_per_topic: 99999999999999999999999999999999\n", "too large"),
        ('name: "x\\0y"\ncandidates_per_topic: 1\n', "NUL"),
        ("- a\n- b\n", "mapping"),
        ("name: [\n", "not valid YAML"),
    ],
)
def test_hostile_configurations_are_400s_and_store_nothing(config, words, api):
    before = _counts()
    for kind in COLLECTIONS:
        response = _launch(api, kind, config)
        assert response.status_code == 400, (kind, response.content)
        assert words.lower() in response.json()["config"][0].lower(), (kind, response.json())
    upload = SimpleUploadedFile("run.yaml", b"\xff\xfe\x00binary")
    response = api.post(COLLECTIONS["mining"], {"config": upload})
    assert response.status_code == 400 and "UTF-8" in response.json()["config"][0]
    assert _counts() == before


def test_the_overview_api_gives_the_home_pages_counts(demo, researcher_client):
    from mining.selectors import procedure_counts_by_topic_and_split

    body = researcher_client.get("/api/mining/overview/").json()
    assert body["rows"] == procedure_counts_by_topic_and_split()
    assert body["totals"]["total"] == sum(row["total"] for row in body["rows"]) > 0
    html = researcher_client.get("/").content.decode()
    from django.utils.html import escape

    assert all(escape(row["topic"]) in html for row in body["rows"])
    assert Client().get("/api/mining/overview/").status_code == 401


@pytest.mark.parametrize("corpus", [["web"], {"a": 1}, "x" * 300])
def test_a_mining_launch_with_an_unusable_corpus_names_the_corpus_field(corpus, api):
    response = _launch(api, "mining", "name: m\ncandidates_per_topic: 1\n", corpus=corpus)
    assert response.status_code == 400 and "corpus" in response.json(), response.content
    response = _launch(api, "mining", "name: m\ncandidates_per_topic: 1\n", corpus="nowhere")
    assert response.status_code == 400 and "no corpus named 'nowhere'" in response.json()["config"][0]


def test_the_cross_judge_api_gives_the_cross_judge_pages_rankings(researcher_client):
    from judging.cross_judge_selectors import cross_judge_rankings
    from tests.judged_world import judge_model, procedures

    items = procedures(6)
    for judge, flips in (("judge-a", 0), ("judge-b", 1)):
        judge_model("m1", items, [False, False, False, False, True, None], judge=judge)
        judge_model("m2", items, [True, True, False, bool(flips), True, True], judge=judge)
    body = researcher_client.get("/api/leaderboard/judges/", {"judge": ["judge-a", "judge-b"]}).json()
    expected = json.loads(json.dumps(cross_judge_rankings(["judge-a", "judge-b"], None)))
    assert body == expected
    assert body["estimates"]["judge-a"]["m1"]["n_judged"] == 5  # the unusable verdict left out, and counted
    html = researcher_client.get("/leaderboard/judges/", {"judge": ["judge-a", "judge-b"]}).content.decode()
    assert "judge-b" in html
    assert researcher_client.get("/api/leaderboard/judges/").json()["judges"] == ["judge-a", "judge-b"]
    refused = researcher_client.get("/api/leaderboard/judges/", {"judge": "nobody"})
    assert refused.status_code == 400 and "judge" in refused.json()
    refused = researcher_client.get("/api/leaderboard/judges/", {"split": "nowhere"})
    assert refused.status_code == 400 and "split" in refused.json()
    assert Client().get("/api/leaderboard/judges/").status_code == 401


HOSTILE = [[1, 2], {"a": 1}, 10**18, -1, True, "x" * 3000, "", None, 0.5]


def test_every_key_of_every_configuration_with_a_hostile_value_is_a_launch_or_a_400_never_a_500(server, task_set, api):  # noqa: F811
    """Each key of a valid configuration of each kind replaced by a value of the wrong type or
    size: the API launches the run or refuses it with a 400, and never fails with a 500."""
    import yaml

    from mining.models import Corpus

    generation_run_create(name="g", language_model=language_model_register(name="m"), start=False)
    Corpus.objects.create(name="web")
    bases = {
        "mining": {
            "name": "mm",
            "corpus": "web",
            "candidates_per_topic": 1,
            "topics": "all",
            "seed": 1,
            "executor": "online",
            "concurrency": 2,
            "min_steps": 5,
            "max_steps": 15,
            "workers": 1,
            "budget_usd": 1,
            "failure_retries": 1,
            "extract_batch_size": 2,
            "desired_valid_per_topic": 1,
        },
        "generation": {
            "name": "gg",
            "model": "m",
            "split": "bench",
            "sample_per_topic": 1,
            "seed": 1,
            "executor": "online",
            "concurrency": 2,
            "budget_usd": 1,
            "temperature": 0.1,
            "top_p": 0.9,
            "prompt_file": "generate_inst.txt",
            "mode": "chat",
        },
        "judge": {
            "name": "jj",
            "generation_run": "g",
            "judge": "how2judge",
            "executor": "online",
            "concurrency": 2,
            "budget_usd": 1,
            "temperature": 0,
            "seed": 1,
            "max_tokens": 100,
            "role": "how2score_judge",
        },
        "components": {"generation_run": "g", "name": "cc", "executor": "online", "concurrency": 2, "budget_usd": 1},
        "goalstep": {"task_set": task_set.pk, "model": "m", "executor": "online", "concurrency": 2, "budget_usd": 1},
        "coscript": {
            "name": "pp",
            "model": "m",
            "split": "bench",
            "limit": 1,
            "seed": 0,
            "k": 2,
            "filter_mode": "keyword",
            "keyword_bonus": 0.1,
            "screen": False,
            "executor": "online",
            "concurrency": 2,
            "budget_usd": 1,
        },
    }
    bad = []
    for kind, base in bases.items():
        for key in base:
            for value in HOSTILE:
                config = dict(base)
                config[key] = value
                config_text = yaml.safe_dump(config)
                response = _launch(api, kind, config_text)
                if response.status_code not in (201, 400):
                    bad.append((kind, key, repr(value)[:40], response.status_code, response.content[:300]))
    assert not bad, "\n".join(map(str, bad))


def test_a_bare_model_name_must_be_registered_and_a_mapping_keeps_what_it_does_not_give(api):
    from judging.services import language_model_register

    stored = language_model_register(name="tuned", base_url="http://127.0.0.1:9/v1", model="m", max_tokens=4096)
    response = api.post(COLLECTIONS["generation"], {"config": "name: typo-run\nmodel: tunde\n"}, format="json")
    assert response.status_code == 400 and response.json()["key"] == "model"
    assert "no registered language model named 'tunde'" in response.json()["config"][0]
    assert not LanguageModel.objects.filter(name="tunde").exists() and not GenerationRun.objects.exists()
    hostile = "name: x-run\nmodel: {name: tuned, base_url: 'javascript:alert(1)'}\n"
    response = api.post(COLLECTIONS["generation"], {"config": hostile}, format="json")
    assert response.status_code == 400 and "must start with http:// or https://" in response.json()["config"][0]
    stored.refresh_from_db()
    assert stored.base_url == "http://127.0.0.1:9/v1"  # nothing changed
    from judging.run_launch import language_model_resolve

    language_model_resolve(name="tuned", registering={"prompt_style": "base"}, source="run.yaml")
    stored.refresh_from_db()
    assert (stored.base_url, stored.model, stored.max_tokens, stored.prompt_style) == (
        "http://127.0.0.1:9/v1",
        "m",
        4096,
        "base",
    )
