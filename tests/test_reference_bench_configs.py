"""Bench configurations of the reference CLI (``h2e bench run --config``) run here as they
are: hand-written configurations in the shape of each of its bench examples (an official
suite of local and API generators, an API-only suite, judging existing generations) become
the generation and judge runs their keys say, with every request option; a key we do not
know or cannot honour is refused by name; and a generate and a judge-existing-generations
configuration run end to end against the scripted server."""

from __future__ import annotations

import json
import textwrap

import pytest
from django.core.management import CommandError, call_command

from core.run_configs import RunConfigError
from judging.models import GenerationRun, JudgeRun
from judging.reference_configs import bench_reference_translate
from judging.reference_runs import reference_generation_runs_create
from judging.run_configs import reference_bench_config_load
from llm.models import LLMJob
from llm.request import LLMRequest
from llm.vllm_offline import chat_kwargs, engine_environment, engine_kwargs, job_engine
from tests.scripted_llm import Reply, ScriptedLLM, last_user_message
from tests.test_judging_runs import _asked


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return str(path)


# The official suite's shape: local vLLM generators (base with an engine revision, chat
# without thinking, chat with sampling options) and API generators; no evaluator.
OFFICIAL = """\
out_root: out/bench
generator_defaults:
  backend: vllm
  temperature: 0.0
  max_new_tokens: 4096
models:
  - model: allenai/Olmo-3-1025-7B
    run_name: olmo-early
    prompt_style: base
    vllm:
      engine_kwargs:
        revision: stage1-step566000
        max_model_len: 8192
        tensor_parallel_size: 2
      sampling_kwargs:
        stop: ["\\n\\n"]
  - model: allenai/Olmo-3-1025-7B
    run_name: olmo-late
    prompt_style: base
    vllm:
      engine_kwargs: {revision: stage1-step1413814}
  - model: Qwen/Qwen3-8B
    run_name: qwen-no-thinking
    prompt_style: inst
    vllm:
      mode: chat
      chat_template_kwargs: {enable_thinking: false}
  - model: Qwen/Qwen3-8B
    run_name: qwen-thinking
    prompt_style: inst
    temperature: 0.6
    vllm:
      mode: chat
      sampling_kwargs: {top_p: 0.95, top_k: 20, min_p: 0.0}
  - model: gpt-5
    provider: openai
    backend: deluge
    prompt_style: inst
    reasoning_effort: minimal
"""

# The API-only suite's shape: API generators and an API evaluator.
API_ONLY = """\
out_root: {out_root}
generator_defaults:
  backend: deluge
  temperature: 0.0
  max_new_tokens: 1500
models:
  - model: gpt-4.1
    provider: openai
    prompt_style: inst
    temperature: 0.3
  - model: gpt-5
    provider: openai
    prompt_style: inst
    reasoning_effort: minimal
    temperature: 1.0
    max_new_tokens: 8192
  - model: Qwen/Qwen3-8B
    run_name: qwen-served
    backend: vllm
    prompt_style: inst
    vllm:
      mode: chat
      chat_template_kwargs: {{enable_thinking: false}}
      sampling_kwargs: {{top_p: 0.95, top_k: 20}}
evaluator:
  model: gpt-5
  reasoning_effort: minimal
  backend: deluge
  provider: openai
  temperature: 1.0
  max_new_tokens: 8192
executor: online
sample_per_topic: 1
seed: 1
"""

# Judging a generations file that lives elsewhere (the judge-existing-generations shape).
JUDGE_EXISTING = """\
out_root: {out_root}
paths:
  generations: {generations}
  judgments: {judgments}
evaluator:
  backend: deluge
  provider: openai
  model: gpt-4.1
  temperature: 0.0
  max_new_tokens: 2048
"""


def translate(text: str, tmp_path=None):
    import yaml

    return bench_reference_translate(yaml.safe_load(textwrap.dedent(text)), source="bench.yaml", base_dir=tmp_path)


# --- translation (pure) ---------------------------------------------------------------


def test_official_suite_becomes_one_generation_run_per_model_with_its_options(tmp_path):
    config = translate(OFFICIAL, tmp_path)
    runs = {r["name"]: r for r in config["generations"]}
    assert list(runs) == ["olmo-early", "olmo-late", "qwen-no-thinking", "qwen-thinking", "gpt-5"]
    early = runs["olmo-early"]
    assert early["executor"] == "vllm_offline" and early["model"]["model"] == "allenai/Olmo-3-1025-7B"
    assert early["model"]["prompt_style"] == "base" and early["options"]["mode"] == "generate"
    assert early["options"]["engine"] == {
        "revision": "stage1-step566000",
        "max_model_len": 8192,
        "tensor_parallel_size": 2,
    }
    assert early["options"]["params"] == {"stop": ["\n\n"]}
    assert runs["olmo-late"]["options"]["params"] == {"stop": None}  # no stop unless the config gives one
    assert runs["qwen-no-thinking"]["options"]["params"] == {"chat_template_kwargs": {"enable_thinking": False}}
    thinking = runs["qwen-thinking"]["options"]
    assert thinking["temperature"] == 0.6 and thinking["mode"] == "chat"
    assert thinking["params"] == {"top_p": 0.95, "top_k": 20, "min_p": 0.0}
    api = runs["gpt-5"]
    assert api["executor"] == "online" and api["options"]["params"] == {"reasoning_effort": "minimal"}
    assert api["options"]["max_tokens"] == 4096
    # No evaluator: the reference's How2Judge under vLLM, at our judge role's endpoint.
    judge = config["judge"]
    assert judge["judge"] == "how2judge" and judge["role"] == "how2score_judge" and judge["model"] == ""
    assert judge["options"] == {"temperature": 0.0, "max_tokens": 4096, "mode": "generate", "params": {}}
    assert any(note.startswith("inputs:") for note in config["reference"]["notes"])


def test_api_only_suite_keeps_free_temperatures_reasoning_effort_and_the_evaluator(tmp_path):
    config = translate(API_ONLY.format(out_root="out/api"), tmp_path)
    runs = {r["name"]: r for r in config["generations"]}
    assert runs["gpt-4.1"]["options"]["temperature"] == 0.3 and runs["gpt-4.1"]["options"]["max_tokens"] == 1500
    assert runs["gpt-5"]["options"] == {
        "temperature": 1.0,
        "max_tokens": 8192,
        "mode": "chat",
        "params": {"reasoning_effort": "minimal"},
    }
    served = runs["qwen-served"]  # executor: online → asked at the generate role (a vllm serve)
    assert served["executor"] == "online" and "engine" not in served["options"]
    assert config["judge"]["judge"] == "gpt-5" and config["judge"]["model"] == "gpt-5"
    assert config["judge"]["options"] == {
        "temperature": 1.0,
        "max_tokens": 8192,
        "mode": "chat",
        "params": {"reasoning_effort": "minimal"},
    }
    assert config["own"] == {"sample_per_topic": 1, "seed": 1}


def test_judge_existing_generations_names_the_file_to_import_and_the_judgments_file(tmp_path):
    config = translate(
        JUDGE_EXISTING.format(out_root="out/rejudge", generations="g/generations.jsonl", judgments="j.jsonl"), tmp_path
    )
    assert config["generations"] == []
    assert config["reference"]["generations_file"] == str(tmp_path / "g" / "generations.jsonl")
    assert config["reference"]["judgments_file"] == str(tmp_path / "j.jsonl")
    assert config["reference"]["imported_run"] == "rejudge"
    assert config["judge"]["options"]["max_tokens"] == 2048 and config["judge"]["judge"] == "gpt-4.1"


@pytest.mark.parametrize(
    "change, message",
    [
        (("out_root:", "outputs: x\nout_root:"), "top level: unknown key(s) outputs"),
        (
            ("    run_name: olmo-late\n", "    run_name: olmo-late\n    beam_width: 3\n"),
            "models[1]: unknown key(s) beam_width",
        ),
        (("generator_defaults:\n", "generator_defaults:\n  top_p: 0.9\n"), "generator_defaults: unknown key(s) top_p"),
        (("out_root:", "generator: {model: x}\nout_root:"), "generator: the reference's older bench shape"),
        (("out_root:", "prompts: {extract: a.txt}\nout_root:"), "prompts: unknown key(s) extract"),
        (("out_root:", "paths: {outputs: a}\nout_root:"), "paths: unknown key(s) outputs"),
        (("stop: [", "best_of: 2\n        stop: ["), "sampling_kwargs.best_of: not a sampling option"),
        (
            ("out_root:", "executor: online\nout_root:"),
            "models[0].vllm.engine_kwargs: engine options need the in-process",
        ),
        (
            ("    run_name: qwen-thinking\n    prompt_style: inst\n", "    run_name: qwen-thinking\n"),
            "models[3].prompt_style: is required",
        ),
        (("run_name: olmo-late", "run_name: olmo-early"), "models[1].run_name: 'olmo-early' names two models"),
        (("reasoning_effort: minimal", "reasoning_effort: extreme"), "models[4].reasoning_effort: must be one of"),
        (
            ("out_root:", "inputs: {hf_repo: someone/missing-bench}\nout_root:"),
            "inputs.hf_repo: no local copy of the Hugging Face dataset 'someone/missing-bench'",
        ),
        (("out_root:", "paths: {generations: g.jsonl}\nout_root:"), "paths.generations: give either models"),
    ],
)
def test_a_key_we_do_not_know_or_cannot_honour_is_refused_by_name(change, message, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert change[0] in OFFICIAL
    with pytest.raises(RunConfigError) as caught:
        translate(OFFICIAL.replace(change[0], change[1], 1), tmp_path)
    assert message in str(caught.value) and "bench.yaml" in str(caught.value)


def test_a_hub_dataset_id_is_read_from_its_local_copy_and_never_downloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    snapshot = tmp_path / "cache" / "datasets--someone--bench" / "snapshots" / "abc" / "data"
    snapshot.mkdir(parents=True)
    (snapshot / "train-00000.jsonl").write_text("{}\n")
    (snapshot / "test-00000.jsonl").write_text("{}\n")
    text = OFFICIAL.replace(
        "out_root:",
        f"inputs:\n  hf_repo: someone/bench\n  hf_cache_dir: {tmp_path / 'cache'}\n  hf_streaming: true\nout_root:",
        1,
    )
    config = translate(text, tmp_path)
    assert config["reference"]["inputs"] == [str(snapshot / "train-00000.jsonl")]  # hf_split train
    assert any("hf_streaming" in note for note in config["reference"]["notes"])


def test_engine_options_reach_the_vllm_engine_constructor_arguments():
    engine = {
        "revision": "stage1-step566000",
        "max_model_len": 8192,
        "tensor_parallel_size": 2,
        "hf_token_env": "MY_TOKEN",
        "worker_multiproc_method": "spawn",
    }
    assert engine_kwargs("allenai/Olmo-3-1025-7B", engine, environ={"MY_TOKEN": "t0k"}) == {
        "model": "allenai/Olmo-3-1025-7B",
        "hf_token": "t0k",
        "revision": "stage1-step566000",
        "max_model_len": 8192,
        "tensor_parallel_size": 2,
    }
    assert engine_environment(engine) == {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    request = LLMRequest(
        stage="generate",
        messages=[{"role": "user", "content": "x"}],
        params={"chat_template_kwargs": {"enable_thinking": False}, "top_p": 0.9},
        engine=engine,
    )
    assert chat_kwargs(request) == {"chat_template_kwargs": {"enable_thinking": False}}
    assert job_engine([request, request]) == engine
    other = LLMRequest(
        stage="generate", messages=request.messages, params=request.params, engine={**engine, "revision": "main"}
    )
    with pytest.raises(ValueError, match="different engine options"):
        job_engine([request, other])
    assert request.key("m") != other.key("m")  # the revision is part of the request's identity
    assert LLMRequest.from_dict(request.to_dict()) == request


# --- runs created -----------------------------------------------------------------------


@pytest.fixture
def scripted(settings, demo):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01

    def answer(body):
        if body.get("response_format"):
            return Reply(json.dumps({"reasoning": "Equivalent.", "critical_failures": []}))
        n = _asked(last_user_message(body))
        return Reply("\n".join(f"{i}. Do part {i} of the task." for i in range(1, n + 1)))

    with ScriptedLLM() as server:
        server.default = answer
        roles = dict(settings.LLM_ROLES)
        for role in ("generate", "how2score_judge"):
            roles[role] = {
                "base_url": server.base_url,
                "api_key": "k",
                "model": "served-judge",
                "temperature": None,
                "max_tokens": None,
            }
        settings.LLM_ROLES = roles
        yield server


def _job(run: GenerationRun) -> LLMJob:
    assert run.llm_job is not None
    return run.llm_job


@pytest.mark.django_db(transaction=True)
def test_the_official_suite_creates_runs_whose_requests_carry_their_options(scripted, tmp_path):
    config = reference_bench_config_load(
        _write(
            tmp_path,
            "official.yaml",
            OFFICIAL.replace("generator_defaults:", "sample_per_topic: 1\ngenerator_defaults:"),
        )
    )
    assert config is not None
    runs = {r.name: r for r in reference_generation_runs_create(config=config, start=False)}
    early = runs["olmo-early"]
    assert early.executor == "vllm_offline" and _job(early).executor == "vllm_offline"
    assert early.language_model.model == "allenai/Olmo-3-1025-7B" and early.language_model.max_tokens == 4096
    first = _job(early).requests[0]
    assert first["prompt"] and first["messages"] == []  # mode generate: the plain prompt
    assert first["engine"]["revision"] == "stage1-step566000" and first["engine"]["max_model_len"] == 8192
    assert first["params"]["stop"] == ["\n\n"] and first["params"]["temperature"] == 0.0
    # The same model at two revisions never shares a ledger answer.
    assert not set(_job(early).keys) & set(_job(runs["olmo-late"]).keys)
    qwen = _job(runs["qwen-no-thinking"]).requests[0]
    assert qwen["messages"][0]["role"] == "user" and qwen["params"]["chat_template_kwargs"] == {
        "enable_thinking": False
    }
    assert _job(runs["qwen-thinking"]).requests[0]["params"]["top_k"] == 20
    assert _job(runs["gpt-5"]).requests[0]["params"]["reasoning_effort"] == "minimal"
    assert len(early.procedure_ids) == 14


@pytest.mark.django_db(transaction=True)
def test_a_reference_generate_config_runs_end_to_end_with_its_request_options(scripted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, "api_only.yaml", API_ONLY.format(out_root="out/bench"))
    call_command("bench_run", "generate", "--config", path, "--wait")
    bodies: dict[str, list] = {}
    for body in scripted.chat_requests():
        bodies.setdefault(body["model"], []).append(body)
    assert {len(v) for v in bodies.values()} == {14}
    gpt41, gpt5, qwen = bodies["gpt-4.1"][0], bodies["gpt-5"][0], bodies["Qwen/Qwen3-8B"][0]
    assert (gpt41["temperature"], gpt41["max_tokens"]) == (0.3, 1500) and "reasoning_effort" not in gpt41
    assert (gpt5["temperature"], gpt5["max_tokens"], gpt5["reasoning_effort"]) == (1.0, 8192, "minimal")
    assert qwen["chat_template_kwargs"] == {"enable_thinking": False} and (qwen["top_p"], qwen["top_k"]) == (0.95, 20)
    assert {r.status for r in GenerationRun.objects.all()} == {"done"}
    (written,) = (tmp_path / "out" / "bench").glob("gpt-5_*/generations.jsonl")  # <run_name>_<generator_id>
    assert written.read_text().count("\n") == 14
    # the same file judges what it generated, with its evaluator
    call_command("bench_run", "judge", "--config", path, "--wait")
    judge_bodies = [b for b in scripted.chat_requests() if b.get("response_format")]
    # the three models wrote the same steps: the ledger answers the repeated judge requests
    assert len(judge_bodies) == 14 and {b["model"] for b in judge_bodies} == {"gpt-5"}
    assert [r.judgments.count() for r in JudgeRun.objects.order_by("name")] == [14, 14, 14]
    assert {(b["max_tokens"], b["temperature"], b["reasoning_effort"]) for b in judge_bodies} == {
        (8192, 1.0, "minimal")
    }
    assert sorted(JudgeRun.objects.values_list("name", flat=True)) == [
        "gpt-4.1--gpt-5",
        "gpt-5--gpt-5",
        "qwen-served--gpt-5",
    ]
    assert len(list(written.parent.glob("judgments/gpt-5_*/judgments.jsonl"))) == 1  # <judge model>_<judge_id>


@pytest.mark.django_db(transaction=True)
def test_a_judge_existing_generations_config_imports_the_file_and_judges_it(scripted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gen = _write(
        tmp_path,
        "gen.yaml",
        "name: elsewhere\nmodel: {name: some-model, prompt_style: inst}\nsample_per_topic: 1\nseed: 2\n",
    )
    call_command("bench_run", "generate", "--config", gen, "--wait")
    generations = tmp_path / "elsewhere" / "generations.jsonl"
    generations.parent.mkdir()
    call_command("bench_transfer", "export-generations", "--run", "elsewhere", "--output", str(generations))
    judgments = tmp_path / "rejudged.jsonl"
    config = _write(
        tmp_path,
        "judge_existing.yaml",
        JUDGE_EXISTING.format(out_root="out/rejudge", generations=generations, judgments=judgments),
    )
    call_command("bench_run", "judge", "--config", config, "--wait")
    imported = GenerationRun.objects.get(name="rejudge")
    assert imported.generations.count() == 14 and imported.language_model.name == "some-model"
    run = JudgeRun.objects.get(generation_run=imported)
    assert run.judge == "gpt-4.1" and run.status == "done"
    judge_bodies = [b for b in scripted.chat_requests() if b.get("response_format")]
    assert len(judge_bodies) == 14 and {(b["model"], b["max_tokens"]) for b in judge_bodies} == {("gpt-4.1", 2048)}
    assert judge_bodies[0]["messages"][0]["content"].endswith("Return only valid json.")
    records = [json.loads(line) for line in judgments.read_text().splitlines()]
    assert len(records) == 14 and records[0]["schema_version"] == "how2bench.judgment.v1"
    # Launching it again is refused naming the judge run (one judge judges a run once).
    with pytest.raises(CommandError, match="rejudge--gpt-4.1"):
        call_command("bench_run", "judge", "--config", config)


@pytest.mark.django_db(transaction=True)
def test_without_an_evaluator_the_judge_role_is_asked_as_how2judge_with_plain_prompts(scripted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _write(
        tmp_path,
        "no_evaluator.yaml",
        "models:\n  - {model: gpt-4.1, provider: openai, prompt_style: inst}\nout_root: out/b\nsample_per_topic: 1\n",
    )
    call_command("bench_run", "generate", "--config", path, "--wait")
    call_command("bench_run", "judge", "--config", path, "--wait")
    judge_bodies = [b for b in scripted.chat_requests() if b.get("response_format")]
    assert len(judge_bodies) == 14 and all("prompt" in b and "messages" not in b for b in judge_bodies)
    assert {(b["model"], b["max_tokens"], b["temperature"]) for b in judge_bodies} == {("served-judge", 4096, 0.0)}
    assert JudgeRun.objects.get().judge == "how2judge"


@pytest.mark.django_db(transaction=True)
def test_our_own_shape_takes_the_same_request_options(scripted, tmp_path):
    gen = _write(
        tmp_path,
        "gen.yaml",
        "name: mine\nmodel: {name: m1, prompt_style: inst, max_tokens: 700}\n"
        "sample_per_topic: 1\ntemperature: 0.7\ntop_p: 0.9\nreasoning_effort: low\n"
        "params: {chat_template_kwargs: {enable_thinking: false}}\n",
    )
    call_command("bench_run", "generate", "--config", gen, "--wait")
    judge = _write(
        tmp_path,
        "judge.yaml",
        "name: j\ngeneration_run: mine\njudge: how2judge\nmax_tokens: 3000\nreasoning_effort: high\n",
    )
    call_command("bench_run", "judge", "--config", judge, "--wait")
    bodies = scripted.chat_requests()
    gen_body = next(b for b in bodies if not b.get("response_format"))
    assert (gen_body["temperature"], gen_body["top_p"], gen_body["max_tokens"]) == (0.7, 0.9, 700)
    assert gen_body["reasoning_effort"] == "low" and gen_body["chat_template_kwargs"] == {"enable_thinking": False}
    judge_body = next(b for b in bodies if b.get("response_format"))
    assert (judge_body["max_tokens"], judge_body["reasoning_effort"]) == (3000, "high")
    with pytest.raises(CommandError, match="engine options apply only to the vllm_offline executor"):
        call_command(
            "bench_run",
            "generate",
            "--config",
            _write(tmp_path, "e.yaml", "name: e\nmodel: m1\nengine: {revision: main}\n"),
        )


@pytest.mark.django_db(transaction=True)
def test_a_reference_config_with_inputs_generates_for_exactly_the_inputs_procedures(scripted, tmp_path, monkeypatch):
    """The demo's bench procedures are in the split too: a run over the whole split would be
    judged on other items than the reference's run on the same file."""
    from mining.models import Procedure

    monkeypatch.chdir(tmp_path)
    steps = [f"Do step {i} of the task." for i in range(1, 6)]
    records = [
        {
            "schema_version": "how2bench.example.v1",
            "source_example_id": f"input-{i}",
            "url": "",
            "source_text": "",
            "topic": "Food & Dining",
            "goal": f"Cook dish number {i}.",
            "resources": ["pot"],
            "steps": steps,
        }
        for i in range(3)
    ]
    records.append(records[0])  # a repeated record: generated for once
    inputs = tmp_path / "bench.jsonl"
    inputs.write_text("".join(json.dumps(r) + "\n" for r in records))
    already = Procedure.objects.filter(split="bench").count()
    assert already > 0  # the demo's
    text = API_ONLY.format(out_root="out/inputs").replace("sample_per_topic: 1\n", "")
    path = _write(tmp_path, "inputs.yaml", f"inputs:\n  path: {inputs}\n" + text)
    call_command("bench_run", "generate", "--config", path, "--wait")
    imported = list(
        Procedure.objects.filter(source_example_id__startswith="input-")
        .order_by("source_example_id")
        .values_list("pk", flat=True)
    )
    assert len(imported) == 3 and Procedure.objects.filter(split="bench").count() == already + 3
    for run in GenerationRun.objects.filter(name__in=["gpt-4.1", "gpt-5", "qwen-served"]):
        assert run.procedure_ids == imported, run.name
    bodies: dict[str, int] = {}
    for body in scripted.chat_requests():
        bodies[body["model"]] = bodies.get(body["model"], 0) + 1
    assert set(bodies.values()) == {3}, bodies


@pytest.mark.django_db
def test_a_generation_run_over_given_procedures_refuses_ones_outside_the_split(demo):
    from judging.services import generation_run_create, language_model_register
    from mining.models import Procedure

    model = language_model_register(name="given-ids", model="m")
    train = Procedure.objects.exclude(split="bench").values_list("pk", flat=True).first() or 10**9
    with pytest.raises(ValueError, match="not in split 'bench'"):
        generation_run_create(name="given", language_model=model, procedure_ids=[train], start=False)
    assert not GenerationRun.objects.filter(name="given").exists()
