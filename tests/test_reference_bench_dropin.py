"""The reference CLI's bench configurations, run from the reference's working tree, behave
as the reference does (issue 32, items 1, 4, 5, 7):

* a configuration without a ``prompts:`` block sends the prompt files the reference reads
  by default (``prompts/inference_inst.txt``, ``prompts/inference_base.txt``,
  ``prompts/judge.txt`` relative to the working directory) when they are there, else the
  product's own, and every run says which file it used and its hash (the command's output,
  ``bench_run status``, the run's page and the API);
* ``generations.jsonl`` records the prompt that was sent;
* ``generator.model`` is the model id that was asked, not the run's name;
* the reference's step parsing is an option, per run and in the reference's configurations,
  and the leaderboard and run pages say which parser a run used;
* the judgments are written where the reference writes them, with its manifests and its
  ``aggregate/summary.json`` and ``aggregate/by_topic.csv``, whose numbers are the ones
  ``bench_aggregate`` gives for the same file.

The prompt files and records here are written by the tests, in the reference's file names
and formats."""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from judging.models import GenerationRun, JudgeRun
from tests.scripted_llm import Reply
from tests.test_reference_bench_configs import scripted  # noqa: F401  (the scripted generate/judge server)

pytestmark = pytest.mark.django_db(transaction=True)

# Prompt files in the reference's names, with the reference's placeholders (texts of our own).
INST = "Goal: {goal}\nYou have: {resources}\nWrite exactly {n} steps, numbered 1. 2. 3.\n"
BASE = "Goal: {goal}\nResources: {resources}\nexactly {n} steps\n1."
JUDGE = "Compare.\nGoal: {goal}\nReference:\n{reference_steps}\nCandidate:\n{steps}\nAnswer in JSON."

# The reference's API-only shape, no prompts block.
CONFIG = """\
out_root: out/bench
generator_defaults:
  backend: deluge
  temperature: 0.0
  max_new_tokens: 1500
models:
  - model: allenai/Olmo-3-1025-7B
    run_name: olmo3-1025-7b
    provider: openai
    prompt_style: inst
evaluator:
  model: gpt-4.1
  backend: deluge
  provider: openai
sample_per_topic: 1
seed: 1
"""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _tree(tmp_path, *, prompts: bool = True, config: str = CONFIG) -> str:
    """A copy of the reference's working tree: its prompts/ folder and a config."""
    if prompts:
        folder = tmp_path / "prompts"
        folder.mkdir()
        (folder / "inference_inst.txt").write_text(INST, encoding="utf-8")
        (folder / "inference_base.txt").write_text(BASE, encoding="utf-8")
        (folder / "judge.txt").write_text(JUDGE, encoding="utf-8")
    path = tmp_path / "examples" / "bench" / "configs" / "api_only.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent(config), encoding="utf-8")
    return str(path.relative_to(tmp_path))


def _generation_bodies(server) -> list[dict]:
    return [b for b in server.chat_requests() if not b.get("response_format")]


def _judge_bodies(server) -> list[dict]:
    return [b for b in server.chat_requests() if b.get("response_format")]


# --- 1. the reference's prompt files by default ------------------------------------------


def test_a_config_without_prompts_sends_the_reference_prompt_files_of_the_working_directory(
    scripted,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
    researcher_client,
):
    monkeypatch.chdir(tmp_path)
    config = _tree(tmp_path)
    call_command("bench_run", "generate", "--config", config, "--wait")
    out = capsys.readouterr().out
    run = GenerationRun.objects.get(name="olmo3-1025-7b")
    inst = tmp_path / "prompts" / "inference_inst.txt"
    assert run.prompt_file == str(inst) and run.prompt_hash == _sha(INST)
    bodies = _generation_bodies(scripted)
    assert len(bodies) == len(run.procedure_ids) > 0
    assert all(b["messages"][0]["content"].startswith("Goal: ") for b in bodies)
    assert all("numbered 1. 2. 3." in b["messages"][0]["content"] for b in bodies)
    # the output says which file and which hash, and that the reference's default was read
    assert f"prompt {inst} (sha256 {_sha(INST)})" in out
    assert "prompts.inference_inst: omitted" in out and "working directory" in out

    call_command("bench_run", "judge", "--config", config, "--wait")
    out = capsys.readouterr().out
    judge_run = JudgeRun.objects.get(generation_run=run)
    judge_file = tmp_path / "prompts" / "judge.txt"
    assert judge_run.prompt_file == str(judge_file) and judge_run.prompt_hash == _sha(JUDGE)
    judge_bodies = _judge_bodies(scripted)
    assert judge_bodies and all(b["messages"][0]["content"].startswith("Compare.\nGoal: ") for b in judge_bodies)
    assert f"prompt {judge_file} (sha256 {_sha(JUDGE)})" in out

    # bench_run status, the run's page and the API name the file and its hash
    call_command("bench_run", "status", run.name)
    status = json.loads(capsys.readouterr().out)
    assert status["prompt_file"] == str(inst) and status["prompt_hash"] == _sha(INST)
    page = researcher_client.get(f"/runs/generation/{run.pk}/").content.decode()
    assert str(inst) in page and _sha(INST)[:12] in page and str(judge_file) in page
    detail = researcher_client.get(f"/api/judging/generation-runs/{run.pk}/").json()
    assert (detail["prompt_file"], detail["prompt_hash"]) == (str(inst), _sha(INST))
    detail = researcher_client.get(f"/api/judging/judge-runs/{judge_run.pk}/").json()
    assert (detail["prompt_file"], detail["prompt_hash"]) == (str(judge_file), _sha(JUDGE))


def test_a_base_model_reads_the_reference_base_prompt_and_a_prompts_block_still_wins(
    scripted,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "my_judge.txt"
    mine.write_text("Mine. " + JUDGE, encoding="utf-8")
    config = CONFIG.replace("prompt_style: inst", "prompt_style: base") + f"prompts:\n  judge: {mine}\n"
    call_command("bench_run", "generate", "--config", _tree(tmp_path, config=config), "--wait")
    run = GenerationRun.objects.get(name="olmo3-1025-7b")
    assert run.prompt_file == str(tmp_path / "prompts" / "inference_base.txt") and run.prompt_hash == _sha(BASE)
    call_command("bench_run", "judge", "--config", "examples/bench/configs/api_only.yaml", "--wait")
    judge_run = JudgeRun.objects.get(generation_run=run)
    assert judge_run.prompt_file == str(mine)
    assert all(b["messages"][0]["content"].startswith("Mine. Compare.") for b in _judge_bodies(scripted))


def test_without_the_reference_prompt_files_the_product_prompts_are_used_and_the_output_says_so(
    scripted,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
    settings,
):
    monkeypatch.chdir(tmp_path)
    call_command("bench_run", "generate", "--config", _tree(tmp_path, prompts=False), "--wait")
    out = capsys.readouterr().out
    run = GenerationRun.objects.get(name="olmo3-1025-7b")
    bundled = Path(settings.JUDGING_PROMPTS_DIR) / "generate_inst.txt"
    assert run.prompt_file == str(bundled)
    assert run.prompt_hash == _sha(bundled.read_text(encoding="utf-8"))
    assert "prompts.inference_inst: omitted, and no prompts/inference_inst.txt in the working directory" in out
    assert f"prompt {bundled} (sha256 {run.prompt_hash})" in out


def test_the_api_never_reads_the_servers_working_directory_for_prompts(tmp_path, monkeypatch):
    """A launch through the API has no user's working directory: the product's prompts (or
    the ones its prompts block names)."""
    from judging.run_configs import reference_bench_config_parse

    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    config = reference_bench_config_parse(CONFIG, source="api", server_files=False)
    assert config is not None
    assert "prompt_file" not in config["generations"][0] and "prompt_file" not in config["judge"]
    config = reference_bench_config_parse(CONFIG, source="cli")
    assert config is not None
    assert config["generations"][0]["prompt_file"] == str(tmp_path / "prompts" / "inference_inst.txt")
    assert config["judge"]["prompt_file"] == str(tmp_path / "prompts" / "judge.txt")


# --- 4 and 5. generations.jsonl: the prompt sent, the model id ---------------------------


def test_generations_jsonl_records_the_prompt_sent_and_the_model_id(scripted, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    call_command("bench_run", "generate", "--config", _tree(tmp_path), "--wait")
    records = [json.loads(line) for line in records_file(tmp_path).read_text().splitlines()]
    sent = [b["messages"][0]["content"] for b in _generation_bodies(scripted)]
    assert records and sorted(r["prompt"] for r in records) == sorted(sent)
    assert all(r["prompt"].startswith("Goal: ") for r in records)
    # the reference's leaderboard reads generator.model: the model id that was asked
    assert {r["generator"]["model"] for r in records} == {"allenai/Olmo-3-1025-7B"}
    assert {r["model"] for r in records} == {"olmo3-1025-7b"}  # the run's model name, as before
    # a round trip through import and export keeps both
    out = tmp_path / "again.jsonl"
    call_command("bench_transfer", "import-generations", str(records_file(tmp_path)), "--run", "copy")
    call_command("bench_transfer", "export-generations", "--run", "copy", "--output", str(out))
    again = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["prompt"], r["generator"]["model"]) for r in again] == [
        (r["prompt"], r["generator"]["model"]) for r in records
    ]


def records_file(tmp_path):
    """The generations file of the config's one model: ``out_root/<run_name>_<generator_id>/``."""
    (found,) = (tmp_path / "out" / "bench").glob("olmo3-1025-7b_*/generations.jsonl")
    return found


def test_a_run_on_the_roles_model_records_the_model_the_endpoint_was_asked(scripted, tmp_path):  # noqa: F811
    """Our own shape names no model id: the record says the one the role's endpoint served."""
    path = tmp_path / "gen.yaml"
    path.write_text("name: ours\nmodel: {name: my-model, prompt_style: inst}\nsample_per_topic: 1\n")
    call_command("bench_run", "generate", "--config", str(path), "--wait")
    out = tmp_path / "g.jsonl"
    call_command("bench_transfer", "export-generations", "--run", "ours", "--output", str(out))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["generator"]["model"] for r in records} == {"served-judge"}  # the role's model
    assert {r["model"] for r in records} == {"my-model"}
    assert all(r["prompt"] for r in records)


def test_a_generation_with_its_ledger_answer_gone_falls_back_to_the_registered_model_id(
    scripted,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    from llm.models import LedgerEntry

    monkeypatch.chdir(tmp_path)
    call_command("bench_run", "generate", "--config", _tree(tmp_path), "--wait")
    LedgerEntry.objects.all().delete()
    out = tmp_path / "g.jsonl"
    call_command("bench_transfer", "export-generations", "--run", "olmo3-1025-7b", "--output", str(out))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["generator"]["model"] for r in records} == {"allenai/Olmo-3-1025-7B"}
    assert all(r["prompt"].startswith("Goal: ") for r in records)


# --- 7. the reference's step parsing, as an option ----------------------------------------

# The three completions of issue 32 where the two parsers differ, and their steps by each.
DIFFERENT = {
    "1.5 cups flour are needed.\n1. Mix the flour.\n2. Bake.": (
        ["Mix the flour.", "Bake."],
        ["5 cups flour are needed.", "Mix the flour.", "Bake."],
    ),
    "3-4 eggs\n1. Beat the eggs.\n2. Fry them.": (
        ["Beat the eggs.", "Fry them."],
        ["4 eggs", "Beat the eggs.", "Fry them."],
    ),
    "<ANSWER>1. Mix.\n2. Bake.</ANSWER>": (["Mix.", "Bake."], ["Bake.</ANSWER>"]),
}


@pytest.mark.parametrize("completion", list(DIFFERENT))
def test_the_reference_parser_reads_the_steps_the_reference_reads(completion):
    from judging.steps import steps_parse

    ours, theirs = DIFFERENT[completion]
    assert steps_parse(completion, parser="product") == ours
    assert steps_parse(completion, parser="reference") == theirs


def test_the_reference_parser_agrees_with_the_restated_rule_on_every_case_of_the_parsing_tests():
    from judging.steps import parse_steps_reference
    from tests.test_reference_step_parsing import AGREE, DIFFER, reference_steps

    cases = [*AGREE.values(), *(case if isinstance(case, str) else case[0] for case in DIFFER.values())]
    cases += [
        *DIFFERENT,
        "",
        "   ",
        "10\n1. Mix.",
        "<think>1. no</think>\n<answer>1. A\n2. B</answer><answer>1. C</answer>",
    ]
    for completion in cases:
        assert parse_steps_reference(completion) == reference_steps(completion), completion
    assert parse_steps_reference(None) == []  # type: ignore[arg-type]


def test_a_reference_config_with_step_parser_reference_reads_steps_as_the_reference(
    scripted,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
    researcher_client,
):
    monkeypatch.chdir(tmp_path)
    config = CONFIG + "step_parser: reference\n"
    first = next(iter(DIFFERENT))
    scripted.queue(Reply(first))
    call_command("bench_run", "generate", "--config", _tree(tmp_path, config=config), "--wait")
    out = capsys.readouterr().out
    run = GenerationRun.objects.get(name="olmo3-1025-7b")
    assert run.step_parser == "reference" and "step parser reference" in out
    generation = run.generations.get(model_completion=first)
    assert generation.predicted_steps == DIFFERENT[first][1]
    call_command("bench_run", "status", run.name)
    assert json.loads(capsys.readouterr().out)["step_parser"] == "reference"
    page = researcher_client.get(f"/runs/generation/{run.pk}/").content.decode()
    assert "step parser: reference" in page
    assert researcher_client.get(f"/api/judging/generation-runs/{run.pk}/").json()["step_parser"] == "reference"
    # the judge sees the steps the reference's parser read; the leaderboard says which parser
    call_command("bench_run", "judge", "--config", "examples/bench/configs/api_only.yaml", "--wait")
    judged = [b["messages"][0]["content"] for b in scripted.chat_requests() if b.get("response_format")]
    assert any("1. 5 cups flour are needed." in text for text in judged)
    board = researcher_client.get("/api/leaderboard", {"judge": "gpt-4.1"}).json()
    row = next(r for r in board["rows"] if r["model"] == "olmo3-1025-7b")
    assert row["step_parsers"] == ["reference"]
    page = researcher_client.get("/leaderboard/", {"judge": "gpt-4.1"}).content.decode()
    assert "steps: reference" in page


def test_our_shape_takes_step_parser_per_run_and_refuses_an_unknown_one(scripted, tmp_path):  # noqa: F811
    from django.core.management import CommandError

    first = next(iter(DIFFERENT))
    for name, parser in (("ours", None), ("theirs", "reference")):
        scripted.queue(Reply(first))
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            f"name: {name}\nmodel: {{name: m-{name}, prompt_style: inst}}\nsample_per_topic: 1\n"
            + (f"step_parser: {parser}\n" if parser else "")
        )
        call_command("bench_run", "generate", "--config", str(path), "--wait")
    ours, theirs = GenerationRun.objects.get(name="ours"), GenerationRun.objects.get(name="theirs")
    assert (ours.step_parser, theirs.step_parser) == ("product", "reference")
    assert ours.generations.get(model_completion=first).predicted_steps == DIFFERENT[first][0]
    assert theirs.generations.get(model_completion=first).predicted_steps == DIFFERENT[first][1]
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmodel: m-ours\nstep_parser: mine\n")
    with pytest.raises(CommandError, match="step_parser must be one of product, reference"):
        call_command("bench_run", "generate", "--config", str(bad))
    reference_bad = tmp_path / "ref_bad.yaml"
    reference_bad.write_text(textwrap.dedent(CONFIG) + "step_parser: mine\n")
    with pytest.raises(CommandError, match="step_parser: must be product or reference"):
        call_command("bench_run", "generate", "--config", str(reference_bad))
    assert not GenerationRun.objects.filter(name__in=["bad", "olmo3-1025-7b"]).exists()


def test_imported_completions_are_parsed_by_the_chosen_parser_and_the_run_says_which(demo, tmp_path):
    from mining.models import Procedure

    procedure = Procedure.objects.filter(split="bench").order_by("id").first()
    assert procedure is not None
    completion = next(iter(DIFFERENT))
    record = {"source_example_id": procedure.source_example_id, "goal": procedure.goal, "model": "imp"}
    plain = tmp_path / "completions.jsonl"
    plain.write_text(json.dumps({**record, "model_completion": completion}) + "\n")
    given = tmp_path / "steps.jsonl"
    given.write_text(json.dumps({**record, "predicted_steps": ["A step."]}) + "\n")
    call_command("bench_transfer", "import-generations", str(plain), "--run", "imp-ref", "--step-parser", "reference")
    call_command("bench_transfer", "import-generations", str(plain), "--run", "imp-ours")
    call_command("bench_transfer", "import-generations", str(given), "--run", "imp-file")
    runs = {r.name: r for r in GenerationRun.objects.filter(name__startswith="imp-")}
    assert {name: run.step_parser for name, run in runs.items()} == {
        "imp-ref": "reference",
        "imp-ours": "product",
        "imp-file": "file",
    }
    assert runs["imp-ref"].generations.get().predicted_steps == DIFFERENT[completion][1]
    assert runs["imp-ours"].generations.get().predicted_steps == DIFFERENT[completion][0]


# --- the reference's output folders, ids and manifests ----------------------------------


def _restated_id(payload: dict) -> str:
    """The reference's short hash, restated: SHA-256 of the payload as canonical JSON (keys
    sorted at every level, no spaces, text beyond ASCII kept), its first 12 hex digits."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_reference_config_writes_its_folders_ids_and_manifests_as_the_reference(
    scripted,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
):
    monkeypatch.chdir(tmp_path)
    config = _tree(tmp_path)
    call_command("bench_run", "generate", "--config", config, "--wait")
    generator = {  # CONFIG's generator as the reference resolves it (defaults filled in)
        "backend": "deluge",
        "provider": "openai",
        "model": "allenai/Olmo-3-1025-7B",
        "temperature": 0.0,
        "max_new_tokens": 1500,
        "max_requests_per_minute": 1000,
        "max_tokens_per_minute": 100000,
        "reasoning_effort": None,
        "vllm_overrides": {},
    }
    expected_gid = _restated_id(
        {
            "generator_id_version": "how2bench.generator_id.v1",
            "generator": generator,
            "generation": {"model_type": "inst"},
            "generation_prompt_sha256": _sha(INST),
        }
    )
    folder = tmp_path / "out" / "bench" / f"olmo3-1025-7b_{expected_gid}"
    out = capsys.readouterr().out
    assert f"wrote {folder / 'generations.jsonl'}" in out and f"wrote {folder / 'generation_manifest.json'}" in out
    records = _read_records(folder / "generations.jsonl")
    assert records and {r["generator_id"] for r in records} == {expected_gid}
    assert {(r["generator"]["backend"], r["generator"]["provider"]) for r in records} == {("deluge", "openai")}
    assert {r["generation_prompt_sha256"] for r in records} == {_sha(INST)}
    manifest = json.loads((folder / "generation_manifest.json").read_text(encoding="utf-8"))
    assert manifest == {
        "generator_id": expected_gid,
        "generation_prompt_sha256": _sha(INST),
        "generation_prompt_path": str((tmp_path / "prompts" / "inference_inst.txt").resolve()),
        "generation": {"model_type": "inst"},
        "generator": generator,
    }

    call_command("bench_run", "judge", "--config", config, "--wait")
    judge = {  # CONFIG's evaluator as the reference resolves it
        "backend": "deluge",
        "provider": "openai",
        "model": "gpt-4.1",
        "temperature": 0.0,
        "max_new_tokens": 4096,
        "reasoning_effort": None,
        "vllm_overrides": {},
    }
    judge_path = str((tmp_path / "prompts" / "judge.txt").resolve())
    expected_jid = _restated_id(
        {
            "judge_id_version": "how2bench.judge_id.v1",
            "judge": judge,
            "judge_prompt_sha256": _sha(JUDGE),
            "judge_prompt_path": judge_path,
        }
    )
    judged = folder / "judgments" / f"gpt-4.1_{expected_jid}"
    judgments = _read_records(judged / "judgments.jsonl")
    assert len(judgments) == len(records) and {j["judge_id"] for j in judgments} == {expected_jid}
    assert {(j["judge"]["backend"], j["judge"]["provider"]) for j in judgments} == {("deluge", "openai")}
    assert json.loads((judged / "judge_manifest.json").read_text(encoding="utf-8")) == {
        "judge_id": expected_jid,
        "judge_prompt_sha256": _sha(JUDGE),
        "judge_prompt_path": judge_path,
        "judge": judge,
    }
    # the layout the reference's leaderboard walks: <gen_run>/generations.jsonl and
    # <gen_run>/judgments/<model>_<judge_id>/{judgments.jsonl, judge_manifest.json}
    # and <model>_<judge_id>/aggregate/{summary.json, by_topic.csv}, which it writes after judging
    assert sorted(p.relative_to(tmp_path / "out" / "bench").as_posix() for p in folder.rglob("*") if p.is_file()) == [
        f"olmo3-1025-7b_{expected_gid}/generation_manifest.json",
        f"olmo3-1025-7b_{expected_gid}/generations.jsonl",
        f"olmo3-1025-7b_{expected_gid}/judgments/gpt-4.1_{expected_jid}/aggregate/by_topic.csv",
        f"olmo3-1025-7b_{expected_gid}/judgments/gpt-4.1_{expected_jid}/aggregate/summary.json",
        f"olmo3-1025-7b_{expected_gid}/judgments/gpt-4.1_{expected_jid}/judge_manifest.json",
        f"olmo3-1025-7b_{expected_gid}/judgments/gpt-4.1_{expected_jid}/judgments.jsonl",
    ]
    # bench_transfer's exports of these runs write the same ids
    again = tmp_path / "again.jsonl"
    call_command("bench_transfer", "export-generations", "--run", "olmo3-1025-7b", "--output", str(again))
    assert {r["generator_id"] for r in _read_records(again)} == {expected_gid}


def test_the_reference_settings_merge_vllm_blocks_and_default_the_judge_as_the_reference(tmp_path, monkeypatch):
    """A vLLM model's provider is ``local``, its ``vllm`` block is merged one level deep over
    generator_defaults', a bare model id takes the defaults, and without an evaluator the
    judge is How2Judge under vLLM; the ids hash exactly those settings."""
    from judging.reference_identity import generator_id, judge_dir_name, judge_id
    from judging.run_configs import reference_bench_config_parse

    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    text = textwrap.dedent(
        """\
        out_root: out/official
        generator_defaults:
          backend: vllm
          prompt_style: base
          max_new_tokens: 2048
          vllm:
            mode: generate
            engine_kwargs: {max_model_len: 8192}
        models:
          - model: Qwen/Qwen3-8B
            run_name: qwen3-8b-no-thinking
            prompt_style: inst
            temperature: 0.7
            vllm:
              mode: chat
              engine_kwargs: {tensor_parallel_size: 2}
              chat_template_kwargs: {enable_thinking: false}
          - allenai/Olmo-3-1025-7B
        """
    )
    config = reference_bench_config_parse(text, source="official.yaml")
    assert config is not None
    qwen, olmo = (run["reference_settings"] for run in config["generations"])
    assert qwen == {
        "backend": "vllm",
        "provider": "local",
        "model": "Qwen/Qwen3-8B",
        "temperature": 0.7,
        "max_new_tokens": 2048,
        "max_requests_per_minute": 1000,
        "max_tokens_per_minute": 100000,
        "reasoning_effort": None,
        "vllm_overrides": {
            "mode": "chat",
            "engine_kwargs": {"max_model_len": 8192, "tensor_parallel_size": 2},
            "chat_template_kwargs": {"enable_thinking": False},
        },
        "model_type": "inst",
        "prompt_path": str((tmp_path / "prompts" / "inference_inst.txt").resolve()),
    }
    assert olmo["model"] == "allenai/Olmo-3-1025-7B" and olmo["model_type"] == "base"
    assert olmo["vllm_overrides"] == {"mode": "generate", "engine_kwargs": {"max_model_len": 8192}}
    assert (olmo["temperature"], olmo["max_new_tokens"], olmo["provider"]) == (0.0, 2048, "local")
    expected = _restated_id(
        {
            "generator_id_version": "how2bench.generator_id.v1",
            "generator": {k: v for k, v in qwen.items() if k not in ("model_type", "prompt_path")},
            "generation": {"model_type": "inst"},
            "generation_prompt_sha256": "ab" * 32,
        }
    )
    assert generator_id(qwen, prompt_sha256="ab" * 32) == expected
    assert generator_id({**qwen, "temperature": 0.6}, prompt_sha256="ab" * 32) != expected
    judge = config["judge"]["reference_settings"]
    assert {k: judge[k] for k in ("backend", "provider", "model", "vllm_overrides")} == {
        "backend": "vllm",
        "provider": "local",
        "model": "how2everything/how2judge",
        "vllm_overrides": {"chat_template_kwargs": {"enable_thinking": False}},
    }
    jid = judge_id(judge, prompt_sha256="cd" * 32, prompt_path="/p/judge.txt")
    assert judge_dir_name("how2everything/how2judge", jid) == f"how2judge_{jid}"
    assert judge_dir_name("org/my_judge:v2", jid) == f"judge-v2_{jid}"


def test_an_imported_generations_file_keeps_its_ids_and_is_judged_into_out_root_judgments(
    scripted,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """``paths.generations``: the imported records' generator_id, backend and provider are
    written back as they came; the judgments go to ``out_root/judgments/<model>_<judge_id>/``
    (the reference's ``h2e bench judge``), with their manifest."""
    from mining.models import Procedure

    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    procedures = list(Procedure.objects.filter(split="bench").order_by("id")[:3])
    generations = tmp_path / "elsewhere" / "generations.jsonl"
    generations.parent.mkdir()
    generations.write_text(
        "".join(
            json.dumps(
                {
                    "schema_version": "how2bench.generation.v1",
                    "generator_id": "0123456789ab",
                    "generation_prompt_sha256": "ef" * 32,
                    "source_example_id": p.source_example_id,
                    "goal": p.goal,
                    "steps": p.steps,
                    "resources": p.resources,
                    "model_completion": "1. Do it.\n2. Check it.",
                    "predicted_steps": ["Do it.", "Check it."],
                    "prompt": "sent",
                    "generator": {"backend": "vllm", "provider": "local", "model": "org/base-7b"},
                }
            )
            + "\n"
            for p in procedures
        ),
        encoding="utf-8",
    )
    config = tmp_path / "rejudge.yaml"
    config.write_text(
        f"out_root: out/rejudge\npaths:\n  generations: {generations}\n"
        "evaluator: {backend: deluge, provider: openai, model: gpt-4.1, max_new_tokens: 2048}\n",
        encoding="utf-8",
    )
    call_command("bench_run", "judge", "--config", str(config), "--wait")
    (judged,) = (tmp_path / "out" / "rejudge" / "judgments").glob("gpt-4.1_*/judgments.jsonl")
    manifest = json.loads((judged.parent / "judge_manifest.json").read_text(encoding="utf-8"))
    assert judged.parent.name == f"gpt-4.1_{manifest['judge_id']}"
    assert manifest["judge"]["max_new_tokens"] == 2048 and manifest["judge_prompt_sha256"] == _sha(JUDGE)
    assert {j["judge_id"] for j in _read_records(judged)} == {manifest["judge_id"]}
    out = tmp_path / "back.jsonl"
    call_command("bench_transfer", "export-generations", "--run", "rejudge", "--output", str(out))
    assert {(r["generator_id"], r["generator"]["backend"], r["generator"]["provider"]) for r in _read_records(out)} == {
        ("0123456789ab", "vllm", "local")
    }


def test_a_run_of_our_own_shape_has_no_reference_identity(scripted, tmp_path):  # noqa: F811
    """Our own YAML names no backend or provider: the record says the executor, and no id."""
    path = tmp_path / "gen.yaml"
    path.write_text("name: ours\nmodel: {name: my-model, prompt_style: inst}\nsample_per_topic: 1\n")
    call_command("bench_run", "generate", "--config", str(path), "--wait")
    assert GenerationRun.objects.get(name="ours").reference_settings == {}
    out = tmp_path / "g.jsonl"
    call_command("bench_transfer", "export-generations", "--run", "ours", "--output", str(out))
    assert {(r["generator_id"], r["generator"]["backend"], r["generator"]["provider"]) for r in _read_records(out)} == {
        ("", "online", "")
    }


# --- the reference's aggregate files ------------------------------------------------------

SUMMARY_KEYS = [  # the reference's summary.json keys in its order, then ours
    "how2score",
    "how2score_percent",
    "n_examples",
    "n_with_failures",
    "failure_rate",
    "avg_failures_per_example",
    "n_parse_failed",
    "ci95",
    "ci95_percent",
]
BY_TOPIC_HEADER = (  # the reference's by_topic.csv columns in its order, n_parse_failed last
    "topic,n_judged,n_with_failures,how2score,how2score_percent,failure_rate,avg_failures_per_example,n_parse_failed"
)


def _judgment(source_example_id: str, topic: str, n_failures: int | None) -> dict:
    """A how2bench.judgment.v1 record as the reference's judge writes it; ``None``: an
    answer it could not parse (``parse_failed: true`` with ``has_failure: true``)."""
    failures = [{"failure": f"Failure {i}.", "L1_steps": [1], "L2_steps": [1]} for i in range(n_failures or 0)]
    return {
        "schema_version": "how2bench.judgment.v1",
        "judge_id": "0123456789ab",
        "source_example_id": source_example_id,
        "topic": topic,
        "goal": f"Goal of {source_example_id}",
        "steps": ["Mix.", "Bake."],
        "predicted_steps": ["Mix.", "Bake."],
        "judge": {"backend": "deluge", "provider": "openai", "model": "gpt-4.1"},
        "reasoning": "",
        "critical_failures": failures,
        "has_failure": n_failures is None or n_failures > 0,
        "n_failures": len(failures),
        "parse_failed": n_failures is None,
    }


def _aggregate_files(folder: Path) -> tuple[dict, list[list[str]]]:
    import csv

    summary = json.loads((folder / "aggregate" / "summary.json").read_text(encoding="utf-8"))
    raw = (folder / "aggregate" / "by_topic.csv").read_bytes().decode("utf-8")
    assert raw.splitlines()[0] == BY_TOPIC_HEADER and "\r\n" in raw  # csv's line ends, as the reference
    rows = list(csv.reader(raw.splitlines()))
    return summary, rows


def _bench_aggregate(path: Path, capsys) -> dict:
    capsys.readouterr()
    call_command("bench_aggregate", "--judgments", str(path))
    return json.loads(capsys.readouterr().out)


def _cell(value):
    """How a number of bench_aggregate's output reads in the CSV: Python's text, or empty."""
    return "" if value is None else str(value)


def _assert_files_agree_with_bench_aggregate(summary: dict, rows: list[list[str]], printed: dict) -> None:
    assert list(summary) == SUMMARY_KEYS
    assert summary == {key: printed[key] for key in SUMMARY_KEYS}
    header, *body = rows
    by_written_topic = {("" if topic == "none" else topic): row for topic, row in printed["by_topic"].items()}
    assert [r[0] for r in body] == sorted(by_written_topic)
    for row in body:
        expected = by_written_topic[row[0]]
        assert row[1:] == [_cell(expected[column]) for column in header[1:]], row[0]


def test_the_aggregate_files_are_the_references_with_the_numbers_bench_aggregate_prints(tmp_path, capsys):
    """Two topics, one record without a topic, three parse failures: the numbers written are
    bench_aggregate's for the same file, and each is the hand computation below."""
    from judging.reference_outputs import aggregate_write

    plan = [  # (id, topic, critical failures; None = parse failure)
        ("a1", "Food & Dining", 0),
        ("a2", "Food & Dining", 2),
        ("a3", "Food & Dining", 0),
        ("a4", "Food & Dining", None),
        ("b1", "Home & Garden", 1),
        ("b2", "Home & Garden", None),
        ("b3", "Home & Garden", 3),
        ("c1", "", None),
    ]
    judgments = tmp_path / "judgments" / "gpt-4.1_0123456789ab" / "judgments.jsonl"
    judgments.parent.mkdir(parents=True)
    judgments.write_text("".join(json.dumps(_judgment(*p)) + "\n" for p in plan), encoding="utf-8")

    written = aggregate_write(judgments)
    folder = judgments.parent
    assert written == [str(folder / "aggregate" / "summary.json"), str(folder / "aggregate" / "by_topic.csv")]
    summary, rows = _aggregate_files(folder)

    # by hand: 8 judgments, 3 parse failures left out, 5 scored; a2, b1 and b3 have
    # failures (2 + 1 + 3 = 6 of them), a1 and a3 none: How2Score 2/5.
    assert summary["n_examples"] == 5 and summary["n_with_failures"] == 3 and summary["n_parse_failed"] == 3
    assert summary["how2score"] == pytest.approx(0.4) and summary["how2score_percent"] == pytest.approx(40.0)
    assert summary["failure_rate"] == pytest.approx(0.6)
    assert summary["avg_failures_per_example"] == pytest.approx(6 / 5)
    # Wilson 95 % of 2 of 5: centre (0.4 + z²/10) / (1 + z²/5) ± z·√(0.24/5 + z²/100) / (1 + z²/5)
    z = 1.959963984540054
    centre, half = (0.4 + z * z / 10) / (1 + z * z / 5), z * (0.24 / 5 + z * z / 100) ** 0.5 / (1 + z * z / 5)
    assert [centre - half, centre + half] == pytest.approx([0.1176, 0.7693], abs=1e-4)
    assert summary["ci95"] == pytest.approx([centre - half, centre + half])
    assert summary["ci95_percent"] == pytest.approx([100 * (centre - half), 100 * (centre + half)])

    header, *body = rows
    table = {row[0]: dict(zip(header, row)) for row in body}
    assert [row[0] for row in body] == ["", "Food & Dining", "Home & Garden"]  # sorted, as the reference
    food, home, untopiced = table["Food & Dining"], table["Home & Garden"], table[""]
    assert (food["n_judged"], food["n_with_failures"], food["n_parse_failed"]) == ("3", "1", "1")
    assert float(food["how2score"]) == pytest.approx(2 / 3)
    assert float(food["how2score_percent"]) == pytest.approx(200 / 3)
    assert float(food["failure_rate"]) == pytest.approx(1 / 3)
    assert float(food["avg_failures_per_example"]) == pytest.approx(2 / 3)
    assert (home["n_judged"], home["n_with_failures"], home["n_parse_failed"]) == ("2", "2", "1")
    assert float(home["how2score"]) == 0.0 and float(home["failure_rate"]) == 1.0
    assert float(home["avg_failures_per_example"]) == pytest.approx(2.0)
    # nothing scored: the product's one rule, no score (the reference writes 0.0 beside n 0)
    assert untopiced == {
        "topic": "",
        "n_judged": "0",
        "n_with_failures": "0",
        "how2score": "",
        "how2score_percent": "",
        "failure_rate": "",
        "avg_failures_per_example": "",
        "n_parse_failed": "1",
    }

    _assert_files_agree_with_bench_aggregate(summary, rows, _bench_aggregate(judgments, capsys))


def test_a_file_without_parse_failures_still_says_n_parse_failed_0(tmp_path, capsys):
    from judging.reference_outputs import aggregate_write

    judgments = tmp_path / "j.jsonl"
    judgments.write_text(
        json.dumps(_judgment("x", "Arts", 0)) + "\n" + json.dumps(_judgment("y", "Pets", 1)) + "\n", encoding="utf-8"
    )
    aggregate_write(judgments)
    summary, rows = _aggregate_files(tmp_path)
    assert summary["n_parse_failed"] == 0 and summary["how2score"] == pytest.approx(0.5)
    assert [(r[0], r[-1]) for r in rows[1:]] == [("Arts", "0"), ("Pets", "0")]
    _assert_files_agree_with_bench_aggregate(summary, rows, _bench_aggregate(judgments, capsys))


def test_a_reference_judge_run_with_wait_writes_the_aggregate_beside_its_judgments(
    scripted,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
):
    """``bench_run judge --config`` of a reference configuration (``paths.generations``, with
    the procedures as ``inputs``, all written here) writes ``aggregate/summary.json`` and
    ``aggregate/by_topic.csv`` in the judgments' folder; the scripted judge finds failures in
    some generations and answers others with text that is no JSON, every time it is asked."""
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    plan = {  # goal -> (topic, critical failures; None = the judge never answers JSON)
        "Bake sourdough bread": ("Food & Dining", 0),
        "Make a vinaigrette": ("Food & Dining", 2),
        "Brew cold coffee": ("Food & Dining", None),
        "Repot a fern": ("Home & Garden", 1),
        "Hang a shelf": ("Home & Garden", 0),
        "Fix a dripping tap": ("Home & Garden", 0),
        "Clean a gutter": ("Home & Garden", None),
    }
    steps = ["Gather what you need.", "Prepare it.", "Do the main part.", "Check the result.", "Clean up."]
    examples = tmp_path / "bench.jsonl"
    examples.write_text(
        "".join(
            json.dumps(
                {
                    "source_example_id": f"agg-{i}",
                    "url": f"https://example.org/{i}",
                    "source_text": f"How to {goal.lower()}.",
                    "topic": topic,
                    "goal": goal,
                    "resources": [],
                    "steps": steps,
                }
            )
            + "\n"
            for i, (goal, (topic, _)) in enumerate(plan.items())
        ),
        encoding="utf-8",
    )
    generations = tmp_path / "generations.jsonl"
    generations.write_text(
        "".join(
            json.dumps(
                {
                    "schema_version": "how2bench.generation.v1",
                    "source_example_id": f"agg-{i}",
                    "goal": goal,
                    "steps": steps,
                    "resources": [],
                    "model_completion": "1. Start.\n2. Finish.",
                    "predicted_steps": ["Start.", "Finish."],
                    "generator": {"backend": "vllm", "provider": "local", "model": "org/base-7b"},
                }
            )
            + "\n"
            for i, goal in enumerate(plan)
        ),
        encoding="utf-8",
    )
    answer_generation = scripted.default

    def answer(body):
        if not body.get("response_format"):
            return answer_generation(body)
        prompt = body["messages"][0]["content"]
        goal = next(line[len("Goal: ") :] for line in prompt.splitlines() if line.startswith("Goal: "))
        n_failures = plan[goal][1]
        if n_failures is None:
            return Reply("I cannot decide.")
        failures = [{"failure": f"Failure {i}.", "L1_steps": [1], "L2_steps": [2]} for i in range(n_failures)]
        return Reply(json.dumps({"reasoning": "Compared.", "critical_failures": failures}))

    scripted.default = answer
    config = tmp_path / "rejudge.yaml"
    config.write_text(
        f"out_root: out/rejudge\ninputs:\n  path: {examples}\npaths:\n  generations: {generations}\n"
        "evaluator: {backend: deluge, provider: openai, model: gpt-4.1}\n",
        encoding="utf-8",
    )
    # two answers were never usable: the run is not done (exit status 1), and says so, but
    # what it judged is written, with its aggregate, as the reference writes it
    with pytest.raises(CommandError, match="ended done_with_failures"):
        call_command("bench_run", "judge", "--config", str(config), "--wait")
    out = capsys.readouterr().out
    (judged,) = (tmp_path / "out" / "rejudge" / "judgments").glob("gpt-4.1_*/judgments.jsonl")
    folder = judged.parent
    assert f"wrote {folder / 'aggregate' / 'summary.json'}" in out
    assert f"wrote {folder / 'aggregate' / 'by_topic.csv'}" in out
    assert sum(1 for j in _read_records(judged) if j["parse_failed"]) == 2
    summary, rows = _aggregate_files(folder)

    # by hand, from the plan: 7 generations judged, 2 never answered JSON; of the 5 scored,
    # 2 have failures (2 + 1 = 3 of them), 3 have none.
    assert (summary["n_examples"], summary["n_with_failures"], summary["n_parse_failed"]) == (5, 2, 2)
    assert summary["how2score"] == pytest.approx(3 / 5) and summary["how2score_percent"] == pytest.approx(60.0)
    assert summary["failure_rate"] == pytest.approx(2 / 5)
    assert summary["avg_failures_per_example"] == pytest.approx(3 / 5)
    header, *body = rows
    table = {row[0]: dict(zip(header, row)) for row in body}
    assert list(table) == ["Food & Dining", "Home & Garden"]
    food, home = table["Food & Dining"], table["Home & Garden"]
    assert (food["n_judged"], food["n_with_failures"], food["n_parse_failed"]) == ("2", "1", "1")
    assert float(food["how2score_percent"]) == pytest.approx(50.0)
    assert float(food["avg_failures_per_example"]) == pytest.approx(1.0)
    assert (home["n_judged"], home["n_with_failures"], home["n_parse_failed"]) == ("3", "1", "1")
    assert float(home["how2score"]) == pytest.approx(2 / 3)
    assert float(home["failure_rate"]) == pytest.approx(1 / 3)
    assert float(home["avg_failures_per_example"]) == pytest.approx(1 / 3)

    _assert_files_agree_with_bench_aggregate(summary, rows, _bench_aggregate(judged, capsys))
