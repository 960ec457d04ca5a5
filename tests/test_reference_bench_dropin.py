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
  and the leaderboard and run pages say which parser a run used.

The prompt files and records here are written by the tests, in the reference's file names
and formats."""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command

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
    assert "prompt_file" not in config["generations"][0] and "prompt_file" not in config["judge"]
    config = reference_bench_config_parse(CONFIG, source="cli")
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
    assert sorted(p.relative_to(tmp_path / "out" / "bench").as_posix() for p in folder.rglob("*") if p.is_file()) == [
        f"olmo3-1025-7b_{expected_gid}/generation_manifest.json",
        f"olmo3-1025-7b_{expected_gid}/generations.jsonl",
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
