"""Configurations of the reference CLI (``h2e mine run --config``, ``h2e bench run
--config``) run here as they are: hand-written configurations in each of its example
shapes are accepted and become the runs, stages and settings their keys say; a key we
do not know is refused by name, a key we cannot honour is refused with the reason; and
one mining and one bench configuration run end to end against the scripted server."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.run_configs import RunConfigError
from mining.models import MiningRun, Procedure
from mining.procedure_services import topics_ensure
from mining.run_configs import mining_config_parse
from tests.scripted_miner import document_text
from tests.test_mining_runs import miner  # noqa: F401  (fixture: the scripted miner behind every stage's role)

MINING_PROMPTS = Path(__file__).resolve().parent.parent / "mining" / "prompts"


def yaml_text(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def reference_prompts_block() -> str:
    """The reference's ``prompts:`` block, pointing at prompt files by path."""
    files = {
        "procedures": "extract_procedure.txt",
        "filter": "llm_filter.txt",
        "postprocess": "rewrite.txt",
        "resources": "extract_resources.txt",
        "final_filter": "final_validation.txt",
    }
    return "prompts:\n" + "".join(f"  {key}: {MINING_PROMPTS / name}\n" for key, name in files.items())


# An API-only mining configuration with topics (the shape of the reference's openai_sync example).
OPENAI_SYNC = """\
out_root: out/how2mine
inputs:
  path: {inputs}
  include_globs: ["*.jsonl"]
  format: auto
  compression: auto
  id_field: doc
  text_field: body
  url_field: link
  topic_field: topic_label
topics:
  - Food & Dining
  - Health
llm:
  provider: openai
  model: gpt-4.1
  temperature: 0.0
  max_new_tokens: 4096
  max_requests_per_minute: 600
  max_tokens_per_minute: 900000
{prompts}targets:
  candidates_per_topic: 40
  desired_valid_per_topic: 3
  extract_batch_size: 10
  min_steps: 4
  max_steps: 12
export:
  format: arrow_ipc
  max_file_size: "500MB"
"""

# The no-topics mode: topics [] (every record under one pseudo-topic, a total budget).
NO_TOPICS = """\
out_root: out/how2mine/no_topics_run
inputs:
  path: {inputs}
  id_field: doc
  text_field: body
  url_field: link
topics: []
llm: {{provider: openai, model: gpt-4.1, temperature: 0.0, max_new_tokens: 2048}}
{prompts}targets:
  candidates_per_topic: 5
export:
  format: jsonl
"""

# A local vLLM model for extraction, the API for the rest (the mixed example's shape).
MIXED = """\
out_root: out/how2mine/mixed
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
    vllm:
      mode: chat
      worker_multiproc_method: spawn
      hf_token_env: HF_TOKEN
      engine_kwargs:
      sampling_kwargs:
        top_p: 0.95
        top_k: 20
      chat_template_kwargs: {{"enable_thinking": false}}
      add_generation_prompt: true
      require_guided_json: true
  final_filter:
    model: gpt-5
    reasoning_effort: minimal
    temperature: 1.0
    max_new_tokens: 8192
llm:
  provider: openai
  model: gpt-4.1
  temperature: 0.0
  max_new_tokens: 2048
{prompts}targets:
  candidates_per_topic: 20
export:
  format: parquet
"""


def fill(template: str, inputs: str = "docs") -> str:
    return template.format(inputs=inputs, prompts=reference_prompts_block())


# --- translation (pure) ---------------------------------------------------------------


def test_api_only_mining_config_becomes_our_run_configuration():
    config = mining_config_parse(fill(OPENAI_SYNC), source="openai_sync.yaml")
    assert config["name"] == "how2mine"
    assert config["topics"] == ["Food & Dining", "Health"]
    assert (config["candidates_per_topic"], config["desired_valid_per_topic"], config["extract_batch_size"]) == (
        40,
        3,
        10,
    )
    assert (config["min_steps"], config["max_steps"]) == (4, 12)  # targets.min_steps honoured
    extract = config["stages"]["extract_procedure"]
    assert extract["model"] == "gpt-4.1" and extract["temperature"] == 0.0 and extract["max_tokens"] == 4096
    assert (extract["requests_per_minute"], extract["tokens_per_minute"]) == (600, 900000)
    assert extract["prompt_file"] == str(MINING_PROMPTS / "extract_procedure.txt")
    assert config["stages"]["final_validation"]["prompt_file"] == str(MINING_PROMPTS / "final_validation.txt")
    reference = config["reference"]
    assert reference["inputs"]["fields"] == {"id": "doc", "text": "body", "url": "link", "topic": "topic_label"}
    assert reference["inputs"]["include"] == ["*.jsonl"] and reference["inputs"]["fixed_topic"] == ""
    assert reference["export"]["format"] == "arrow" and reference["export"]["output"].endswith("data/all_valid.arrow")
    assert reference["export"]["max_file_size"] == 500_000_000


def test_the_reference_default_of_min_steps_is_not_taken_without_targets_min_steps():
    config = mining_config_parse(fill(NO_TOPICS), source="no_topics.yaml")
    assert (config["min_steps"], config["max_steps"]) == (5, 15)  # ours (App. B.3), not the reference's 4


def test_no_topics_mode_mines_every_record_under_one_topic_with_a_total_budget():
    config = mining_config_parse(fill(NO_TOPICS), source="no_topics.yaml")
    assert config["name"] == "no_topics_run" and config["topics"] == ["all"] and config["candidates_per_topic"] == 5
    # the documents keep their own topics; the run samples all of them under the pseudo-topic
    assert config["reference"]["inputs"]["fixed_topic"] == "" and config["reference"]["no_topics"]
    assert config["reference"]["pooled"]
    assert config["desired_valid_per_topic"] is None and config["extract_batch_size"] == 0


def test_mixed_vllm_extract_and_api_stages_carry_their_sampling_and_template_options():
    config = mining_config_parse(fill(MIXED), source="mixed.yaml")
    extract = config["stages"]["extract_procedure"]
    assert extract["model"] == "Qwen/Qwen3-8B" and extract["role"] == "extract_procedure"
    assert extract["params"] == {"top_p": 0.95, "top_k": 20, "chat_template_kwargs": {"enable_thinking": False}}
    final = config["stages"]["final_validation"]
    assert final["model"] == "gpt-5" and final["temperature"] == 1.0 and final["max_tokens"] == 8192
    assert final["params"] == {"reasoning_effort": "minimal"}
    rewrite = config["stages"]["rewrite"]  # inherits the top-level llm block
    assert rewrite["model"] == "gpt-4.1" and rewrite["max_tokens"] == 2048 and "params" not in rewrite
    # backend: vllm runs in-process, as in the reference; the API stages keep the run's executor
    assert extract["executor"] == "vllm_offline" and extract["engine"] == {"worker_multiproc_method": "spawn"}
    assert "executor" not in rewrite and "engine" not in rewrite and config["executor"] == "online"


def test_with_our_executor_online_a_vllm_stage_is_asked_at_its_served_endpoint():
    config = mining_config_parse("executor: online\n" + fill(MIXED), source="mixed.yaml")
    extract = config["stages"]["extract_procedure"]
    assert "executor" not in extract and "engine" not in extract and extract["role"] == "extract_procedure"
    notes = " ".join(config["reference"]["notes"])
    assert "worker_multiproc_method" in notes and "hf_token_env" in notes
    with pytest.raises(RunConfigError, match="engine_kwargs: engine options need the in-process vLLM executor"):
        mining_config_parse(
            "executor: online\n"
            + fill(MIXED).replace("      engine_kwargs:\n", "      engine_kwargs: {revision: main}\n"),
            source="mixed.yaml",
        )


@pytest.mark.parametrize(
    "change, message",
    [
        (("\nllm:\n", "\nllm:\n  top_k_sampler: 3\n"), "llm: unknown key(s) top_k_sampler"),
        (("out_root:", "outputs: x\nout_root:"), "unknown key(s) outputs"),
        (("targets:\n", "targets:\n  train_per_topic: 2\n"), "targets.train_per_topic: mining runs do not split"),
        (("require_guided_json: true", "require_guided_json: false"), "require_guided_json: JSON stages always ask"),
        (("top_k: 20", "top_k: 20\n        best_of: 3"), "sampling_kwargs.best_of: not a sampling option"),
        (("format: parquet", "format: feather"), "export.format: must be one of jsonl, jsonl_zst, parquet, arrow_ipc"),
        (
            ("  procedures:\n    backend", "  tools_stage: {}\n  procedures:\n    backend"),
            "stage_llm_overrides: unknown stage(s) tools_stage",
        ),
    ],
)
def test_a_key_we_do_not_know_or_cannot_honour_is_refused_by_name(change, message):
    text = fill(MIXED)
    assert change[0] in text
    with pytest.raises(RunConfigError) as caught:
        mining_config_parse(text.replace(change[0], change[1], 1), source="mixed.yaml")
    assert message in str(caught.value) and "mixed.yaml" in str(caught.value)


def test_our_own_shape_still_refuses_unknown_keys_as_before():
    with pytest.raises(RunConfigError, match="unknown key"):
        mining_config_parse("name: x\ncandidates_per_topic: 3\nbogus: 1\n", source="ours.yaml")


# --- end to end -----------------------------------------------------------------------


def write_documents(folder: Path, n: int = 6) -> Path:
    folder.mkdir()
    topics = ("Food & Dining", "Health", "Sports & Fitness")
    with open(folder / "part-0.jsonl", "w") as handle:
        for i in range(n):
            row = {
                "doc": f"d{i}",
                "body": document_text(f"d{i}", f"Make thing {i}"),
                "link": f"https://example.org/{i}",
                "topic_label": topics[i % 3],
            }
            handle.write(json.dumps(row) + "\n")
    (folder / "notes.txt").write_text("not a record file")  # left out by include_globs
    return folder


@pytest.mark.django_db(transaction=True)
def test_a_reference_mining_config_runs_end_to_end_and_exports_arrow(miner, tmp_path, monkeypatch):
    import pyarrow as pa

    server, _ = miner
    topics_ensure()
    monkeypatch.chdir(tmp_path)  # out_root is relative to the working directory, as in the reference
    docs = write_documents(tmp_path / "docs")
    config = tmp_path / "openai_sync.yaml"
    config.write_text(fill(OPENAI_SYNC, inputs=str(docs)))
    call_command("mine_run", "--config", str(config), "--wait")
    run = MiningRun.objects.get(name="how2mine")
    assert run.corpus.name == "how2mine" and run.corpus.documents.count() == 6
    assert sorted(run.topics.values_list("name", flat=True)) == ["Food & Dining", "Health"]
    assert (run.min_steps, run.max_steps, run.desired_valid_per_topic, run.extract_batch_size) == (4, 12, 3, 10)
    assert run.stages["extract_procedure"]["model"] == "gpt-4.1"
    assert run.status == "done"
    assert Procedure.objects.count() == 4  # d0, d1, d3, d4: the two topics' documents
    bodies = [body for body in server.chat_requests()]
    assert {b["model"] for b in bodies} == {"gpt-4.1"} and {b["max_tokens"] for b in bodies} == {4096}
    exported = tmp_path / "out" / "how2mine" / "data" / "all_valid_00000.arrow"  # max_file_size: the reference's name
    with pa.ipc.open_file(pa.OSFile(str(exported))) as reader:
        table = reader.read_all()
    assert table.num_rows == 4 and table.column("schema_version").to_pylist()[0] == "how2mine.v1"


@pytest.mark.django_db(transaction=True)
def test_no_topics_mode_runs_on_documents_without_topics(miner, tmp_path, monkeypatch):
    topics_ensure()
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.jsonl").write_text(
        "".join(json.dumps({"doc": f"d{i}", "body": document_text(f"d{i}", f"Fix part {i}")}) + "\n" for i in range(7))
    )
    config = tmp_path / "no_topics.yaml"
    config.write_text(fill(NO_TOPICS, inputs=str(docs)))
    call_command("mine_run", "--config", str(config), "--wait")
    run = MiningRun.objects.get(name="no_topics_run")
    assert list(run.topics.values_list("name", flat=True)) == ["all"]
    assert run.candidates.count() == 5  # candidates_per_topic is the total budget
    assert (tmp_path / "out" / "how2mine" / "no_topics_run" / "data" / "all_valid.jsonl").read_text().count("\n") == 5


@pytest.mark.django_db(transaction=True)
def test_the_mixed_config_sends_vllm_options_and_reasoning_effort_with_its_stages(miner, tmp_path, monkeypatch):
    server, _ = miner
    topics_ensure()
    monkeypatch.chdir(tmp_path)
    docs = write_documents(tmp_path / "docs", n=3)
    config = tmp_path / "mixed.yaml"
    # executor: online: the vLLM stage is asked at its role's endpoint (a `vllm serve` of the model)
    config.write_text("executor: online\n" + fill(MIXED, inputs=str(docs)))
    call_command("mine_run", "--config", str(config), "--wait")
    bodies = {b["response_format"]["json_schema"]["name"]: b for b in server.chat_requests()}
    assert bodies["extract_procedure"]["model"] == "Qwen/Qwen3-8B"
    assert bodies["extract_procedure"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert (bodies["extract_procedure"]["top_p"], bodies["extract_procedure"]["top_k"]) == (0.95, 20)
    assert bodies["final_validation"]["reasoning_effort"] == "minimal"
    assert bodies["final_validation"]["max_tokens"] == 8192 and bodies["final_validation"]["temperature"] == 1.0
    assert "reasoning_effort" not in bodies["rewrite"]


@pytest.mark.django_db(transaction=True)
def test_a_bad_reference_mining_config_stops_mine_run_naming_the_key(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text(fill(OPENAI_SYNC).replace("targets:\n", "targets:\n  test_per_topic: 1\n"))
    with pytest.raises(CommandError, match="targets.test_per_topic"):
        call_command("mine_run", "--config", str(config))
    assert not MiningRun.objects.exists()
