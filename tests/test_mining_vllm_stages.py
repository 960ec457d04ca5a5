"""A mining stage can run its model in-process with vLLM (executor ``vllm_offline``), as
the reference CLI runs a ``backend: vllm`` stage, while the other stages of the same run
stay online: such a run is executed in waves, one LLM job per stage with the stage's
executor, and the vLLM stage's jobs carry its engine options to ``vllm.LLM(...)``.

vLLM is not installed here (it needs a GPU), so these tests check what the run hands to
the executor, that a machine without vLLM pauses the run with the executor's message,
and that once the vLLM stage's answers are in the ledger the online stages run against
the scripted server."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.run_configs import RunConfigError
from llm.completions import classify_completion
from llm.constants import PATH_JSON_SCHEMA
from llm.ledger import ledger_write
from llm.models import LedgerEntry, LLMJob
from llm.request import LLMRequest
from llm.services import job_endpoint
from llm.vllm_offline import chat_kwargs, engine_environment, engine_kwargs, job_engine
from mining.models import MiningRun, MiningRunStatus, Procedure, StageResult
from mining.procedure_services import topics_ensure
from mining.run_configs import mining_config_parse
from mining.run_services import mining_run_resume
from mining.runner import mining_run_execute
from tests.scripted_miner import MARKER, document_text, stage_of
from tests.test_mining_runs import miner  # noqa: F401  (fixture: the scripted miner behind every stage's role)

MINING_PROMPTS = Path(__file__).resolve().parent.parent / "mining" / "prompts"

# Extraction on a local vLLM model (in-process), the other stages on the API: the shape of
# the reference's mixed example, written here with engine options of our choosing.
MIXED = """\
out_root: out/how2mine/gpu_mixed
inputs:
  path: {inputs}
  id_field: doc
  text_field: body
  url_field: link
  topic_field: topic_label
topics: [Health]
stage_llm_overrides:
  procedures:
    backend: vllm
    model: Qwen/Qwen3-8B
    temperature: 0.0
    max_new_tokens: 3000
    vllm:
      mode: chat
      worker_multiproc_method: spawn
      hf_token_env: MY_HF_TOKEN
      engine_kwargs:
        revision: main
        max_model_len: 16384
        dtype: bfloat16
        tensor_parallel_size: 1
      sampling_kwargs: {{top_p: 0.95}}
      chat_template_kwargs: {{"enable_thinking": false}}
      add_generation_prompt: true
      require_guided_json: true
llm:
  provider: openai
  model: gpt-4.1
  temperature: 0.0
  max_new_tokens: 2048
prompts:
  procedures: {prompts}/extract_procedure.txt
  filter: {prompts}/llm_filter.txt
  postprocess: {prompts}/rewrite.txt
  resources: {prompts}/extract_resources.txt
  final_filter: {prompts}/final_validation.txt
targets:
  candidates_per_topic: 3
export:
  format: jsonl
"""
ENGINE = {
    "revision": "main",
    "max_model_len": 16384,
    "dtype": "bfloat16",
    "tensor_parallel_size": 1,
    "worker_multiproc_method": "spawn",
    "hf_token_env": "MY_HF_TOKEN",
}


def mixed(inputs: str = "docs") -> str:
    return MIXED.format(inputs=inputs, prompts=MINING_PROMPTS)


# --- configuration (pure) -------------------------------------------------------------


def test_a_reference_vllm_stage_translates_to_the_in_process_executor_with_its_engine_options():
    config = mining_config_parse(mixed(), source="gpu_mixed.yaml")
    extract = config["stages"]["extract_procedure"]
    assert extract["executor"] == "vllm_offline" and extract["engine"] == ENGINE
    assert extract["model"] == "Qwen/Qwen3-8B" and extract["max_tokens"] == 3000
    assert extract["params"] == {"top_p": 0.95, "chat_template_kwargs": {"enable_thinking": False}}
    for stage in ("llm_filter", "rewrite", "extract_resources", "final_validation"):
        assert "executor" not in config["stages"][stage] and "engine" not in config["stages"][stage]
    assert config["executor"] == "online"
    # nothing about the engine is left as a note: every option is passed on
    assert not [n for n in config["reference"]["notes"] if "worker_multiproc_method" in n or "hf_token_env" in n]


def test_our_own_shape_gives_a_stage_its_executor_and_engine_options():
    text = textwrap.dedent("""\
        name: own
        candidates_per_topic: 3
        stages:
          extract_procedure: {model: Qwen/Qwen3-8B, executor: vllm_offline, engine: {revision: main}}
          final_validation: {executor: batch}
        """)
    config = mining_config_parse(text, source="own.yaml")
    assert config["stages"]["extract_procedure"]["executor"] == "vllm_offline"
    assert config["stages"]["extract_procedure"]["engine"] == {"revision": "main"}
    assert config["stages"]["final_validation"]["executor"] == "batch"
    assert "executor" not in config["stages"]["rewrite"]


@pytest.mark.parametrize(
    "stage_text, message",
    [
        (
            "{engine: {revision: main}}",
            "stages.extract_procedure.engine: engine options apply only to executor vllm_offline",
        ),
        ("{executor: gpu}", "stages.extract_procedure.executor must be one of online, batch, vllm_offline"),
        ("{executor: vllm_offline, engine: [revision]}", "stages.extract_procedure.engine must be a mapping"),
    ],
)
def test_a_stage_executor_or_engine_we_cannot_honour_is_refused_by_name(stage_text, message):
    text = f"name: own\ncandidates_per_topic: 3\nstages:\n  extract_procedure: {stage_text}\n"
    with pytest.raises(RunConfigError) as caught:
        mining_config_parse(text, source="own.yaml")
    assert message in str(caught.value) and "own.yaml" in str(caught.value)


# --- runs -----------------------------------------------------------------------------


def write_documents(folder: Path, n: int = 3) -> Path:
    folder.mkdir()
    with open(folder / "part-0.jsonl", "w") as handle:
        for i in range(n):
            handle.write(
                json.dumps(
                    {
                        "doc": f"d{i}",
                        "body": document_text(f"d{i}", f"Make thing {i}"),
                        "link": f"https://example.org/{i}",
                        "topic_label": "Health",
                    }
                )
                + "\n"
            )
    return folder


def launch(tmp_path: Path, monkeypatch) -> MiningRun:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here; these tests cover machines without it")
    topics_ensure()
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "gpu_mixed.yaml"
    config.write_text(mixed(str(write_documents(tmp_path / "docs"))))
    # without vLLM the run pauses at the vLLM stage: the command says so and exits non-zero
    with pytest.raises(
        CommandError, match=r"mining run 'gpu_mixed' ended paused, not done \(the vllm_offline executor"
    ):
        call_command("mine_run", "--config", str(config), "--wait")
    return MiningRun.objects.get(name="gpu_mixed")


def answer_as_the_gpu_would(job: LLMJob, miner_answers) -> None:
    """Stand-in for the GPU: write an ok answer for every request of the vLLM job into the
    ledger (the ledger's own ``ledger_write``, with the outcome decided by
    ``classify_completion`` as the vLLM executor decides it), answering as the scripted
    miner answers the extraction prompt."""
    for key, raw in zip(job.keys, job.requests):
        request = LLMRequest.from_dict(raw)
        text = request.messages[0]["content"]
        found = MARKER.search(text)
        answer = miner_answers.answer("extract_procedure", text, found, found.group(2).split() if found else [])
        body = {
            "choices": [{"message": {"role": "assistant", "content": json.dumps(answer)}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 40},
        }
        verdict = classify_completion(request, body)
        assert verdict.outcome == "ok"
        ledger_write(
            key,
            dict(
                stage=request.stage,
                role=job.role,
                run=job.run,
                base_url="vllm-offline",
                model=job_endpoint(job).model,
                executor=job.executor,
                request=request.to_dict(),
                response=body,
                response_text=verdict.text,
                finish_reason=verdict.finish_reason,
                outcome=verdict.outcome,
                parsed=verdict.value,
                error="",
                path=PATH_JSON_SCHEMA,
                attempts=1,
                tokens_in=100,
                tokens_out=40,
                latency_ms=5,
                cost_usd=None,
            ),
        )


@pytest.mark.django_db(transaction=True)
def test_the_vllm_stage_gets_wave_jobs_that_carry_its_engine_options_to_the_engine(miner, tmp_path, monkeypatch):
    server, _ = miner
    run = launch(tmp_path, monkeypatch)
    jobs = list(LLMJob.objects.filter(run=run.ledger_run))
    assert [(j.role, j.executor) for j in jobs] == [("extract_procedure", "vllm_offline")]
    job = jobs[0]
    assert job.n_total == 3 and job.endpoint_overrides == {"model": "Qwen/Qwen3-8B"}
    requests = [LLMRequest.from_dict(raw) for raw in job.requests]
    assert all(r.engine == ENGINE for r in requests)
    assert all(r.params["max_tokens"] == 3000 and r.params["top_p"] == 0.95 for r in requests)
    # what the executor passes to vllm.LLM(...), to the environment and to LLM.chat()
    options = job_engine(requests)
    assert engine_kwargs(job_endpoint(job).model, options, environ={"MY_HF_TOKEN": "hf_secret"}) == {
        "model": "Qwen/Qwen3-8B",
        "hf_token": "hf_secret",
        "revision": "main",
        "max_model_len": 16384,
        "dtype": "bfloat16",
        "tensor_parallel_size": 1,
    }
    assert engine_environment(options) == {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    assert chat_kwargs(requests[0]) == {"chat_template_kwargs": {"enable_thinking": False}}
    # the engine options are part of each request's identity
    assert len({r.key_for(job_endpoint(job)) for r in requests}) == 3
    assert requests[0].key_for(job_endpoint(job)) != LLMRequest.from_dict(
        {**job.requests[0], "engine": {**ENGINE, "revision": "other"}}
    ).key_for(job_endpoint(job))
    assert server.chat_requests() == []  # nothing went to a server


@pytest.mark.django_db(transaction=True)
def test_without_vllm_the_run_pauses_with_the_executors_message_instead_of_crashing(miner, tmp_path, monkeypatch):
    run = launch(tmp_path, monkeypatch)
    assert run.status == MiningRunStatus.PAUSED
    assert "vllm_offline executor needs vLLM" in run.pause_reason and "requirements-gpu.txt" in run.pause_reason
    job = LLMJob.objects.get(run=run.ledger_run)
    assert job.status == LLMJob.Status.FAILED and "requirements-gpu.txt" in job.error
    assert not StageResult.objects.filter(run=run).exists()  # no document was failed for the machine's sake
    # resuming on the same machine pauses again with the same message (no crash, no lost document)
    mining_run_resume(run=run, start=False)
    assert mining_run_execute(run_id=run.pk).startswith("paused: the vllm_offline executor needs vLLM")
    assert run.candidates.filter(status="pending").count() == 3


@pytest.mark.django_db(transaction=True)
def test_with_the_vllm_answers_in_the_ledger_the_online_stages_run_against_the_server(miner, tmp_path, monkeypatch):
    """The extraction answers are written to the ledger as the GPU would have written them
    (see ``answer_as_the_gpu_would``); the resumed run takes them from there and asks the
    other four stages online, in waves, at the scripted server."""
    server, answers = miner
    run = launch(tmp_path, monkeypatch)
    vllm_job = LLMJob.objects.get(run=run.ledger_run)
    answer_as_the_gpu_would(vllm_job, answers)
    mining_run_resume(run=run, start=False)
    outcome = mining_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert outcome == "done" and run.status == MiningRunStatus.DONE
    assert Procedure.objects.filter(provenance__mining_run_id=run.pk).count() == 3
    sent = sorted(stage_of(body) for body in server.chat_requests())
    assert sent == sorted(["llm_filter", "rewrite", "extract_resources", "final_validation"] * 3)
    assert all(body["model"] == "gpt-4.1" for body in server.chat_requests())
    later = LLMJob.objects.filter(run=run.ledger_run).exclude(pk=vllm_job.pk)
    assert {(j.role, j.executor) for j in later} == {
        (role, "online") for role in ("llm_filter", "rewrite", "extract_resources", "final_validation")
    }
    extract = StageResult.objects.filter(run=run, stage="extract_procedure")
    assert extract.count() == 3 and set(extract.values_list("status", flat=True)) == {"passed"}
    assert set(extract.values_list("request_key", flat=True)) == set(vllm_job.keys)
    assert LedgerEntry.objects.filter(key__in=vllm_job.keys, executor="vllm_offline").count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_failed_vllm_answer_is_asked_again_in_a_later_wave_not_taken_twice(miner, tmp_path, monkeypatch):
    """One extraction answer comes back unparseable (written to the ledger as the GPU
    would have written it): the document is retried through a new vLLM job, not online
    and not by reusing the failure, and passes once the new answer is in the ledger."""
    server, answers = miner
    run = launch(tmp_path, monkeypatch)
    first = LLMJob.objects.get(run=run.ledger_run)
    answer_as_the_gpu_would(first, answers)
    broken = first.keys[2]
    LedgerEntry.objects.filter(key=broken).delete()
    ledger_write(
        broken,
        dict(
            stage="extract_procedure",
            role=first.role,
            run=first.run,
            base_url="vllm-offline",
            model="Qwen/Qwen3-8B",
            executor="vllm_offline",
            request=first.requests[2],
            response=None,
            response_text="not json",
            finish_reason="stop",
            outcome="parse_failed",
            parsed=None,
            error="no JSON object",
            path=PATH_JSON_SCHEMA,
            attempts=1,
            tokens_in=100,
            tokens_out=3,
            latency_ms=5,
            cost_usd=None,
        ),
    )
    mining_run_resume(run=run, start=False)
    assert mining_run_execute(run_id=run.pk).startswith("paused: the vllm_offline executor needs vLLM")
    again = LLMJob.objects.filter(run=run.ledger_run, executor="vllm_offline").exclude(pk=first.pk)
    assert [job.keys for job in again] == [[broken]]  # asked again in its own wave, with the same request
    assert not any(stage_of(body) == "extract_procedure" for body in server.chat_requests())
    failed = StageResult.objects.get(run=run, stage="extract_procedure", request_key=broken)
    assert failed.status == "parse_failed" and failed.candidate.failures == 1
    answer_as_the_gpu_would(again[0], answers)  # the failure is replaced by the new attempt's answer
    mining_run_resume(run=run, start=False)
    assert mining_run_execute(run_id=run.pk) == "done"
    assert Procedure.objects.filter(provenance__mining_run_id=run.pk).count() == 3
    failed.refresh_from_db()
    assert failed.status == "passed"


def test_a_top_level_vllm_llm_block_runs_every_stage_in_process():
    text = mixed().replace(
        "llm:\n  provider: openai\n  model: gpt-4.1\n",
        "llm:\n  backend: vllm\n  model: Qwen/Qwen3-8B\n  vllm: {engine_kwargs: {revision: v2}}\n",
    )
    config = mining_config_parse(text, source="all_vllm.yaml")
    assert {stage: spec["executor"] for stage, spec in config["stages"].items()} == dict.fromkeys(
        config["stages"], "vllm_offline"
    )
    assert config["stages"]["rewrite"]["engine"] == {"revision": "v2"}
    assert config["stages"]["extract_procedure"]["engine"] == ENGINE  # its own block wins
