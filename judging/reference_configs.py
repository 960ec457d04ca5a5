"""Bench configurations in the reference CLI's shape (``h2e bench run|gen|judge --config``),
translated into our generation and judge runs. Pure Python, no Django.

``bench_reference_translate(data, source=...)`` takes the parsed YAML and returns:

* ``generations``: one generation run per entry of ``models`` (``generator_defaults``
  under each entry, ``vllm`` blocks merged one level deep as the reference merges them):
  its name (``run_name``, else the model id made file-safe), the language model to
  register, the executor and the request options (``temperature``, ``max_tokens``,
  ``mode``, ``params``, ``engine``; judging/run_requests.py ``request_options_check``);
* ``judge``: the judge run the ``evaluator`` block says, or, without it, the reference's
  default (How2Judge under vLLM) mapped to our ``how2score_judge`` role's endpoint;
* ``reference``: what the command does around the runs (the ``inputs`` files to import
  as bench procedures, ``paths.generations`` to import and judge, where to write the
  generations and judgments files, and the notes).

The shared LLM-block reading is core/reference_configs.py; docs/reference-cli.md lists
every key and what it becomes."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from core.reference_configs import (
    Translation,
    input_format_check,
    inputs_local_path,
    llm_block,
    mapping,
    path_value,
    refuse_unknown,
    short_name,
)
from judging.reference_identity import evaluator_settings, generator_settings, reference_prompt_path

REFERENCE_KEYS = {"out_root", "models", "generator_defaults", "evaluator", "inputs", "prompts", "paths"}
# Our own keys that may stand beside the reference's.
OWN_KEYS = {"executor", "concurrency", "budget_usd", "split", "sample_per_topic", "seed", "step_parser"}
# step_parser: how every generation run of the configuration reads its completions' steps
# (judging/steps.py): ours, or the reference CLI's (to reproduce its numbers exactly).
STEP_PARSER_VALUES = ("product", "reference")
LEGACY_KEYS = ("generator", "llm", "generation", "generations_root", "stage_llm_overrides")
LLM_KEYS = {
    "backend",
    "provider",
    "model",
    "temperature",
    "max_new_tokens",
    "max_requests_per_minute",
    "max_tokens_per_minute",
    "reasoning_effort",
    "vllm",
}
INPUT_KEYS = {
    "path",
    "hf_repo",
    "hf_split",
    "hf_streaming",
    "hf_cache_dir",
    "kind",
    "format",
    "compression",
    "include_globs",
}
PROMPT_KEYS = {"inference_base", "inference_inst", "judge"}
# The reference's prompt file for each key a config's prompts block leaves out, relative to
# the working directory (its bench/config.py): used when the file is there (a user running
# from the reference's tree has them), else the product's own prompt (PROMPTS_DIR, bundled).
REFERENCE_DEFAULT_PROMPTS = {
    "inference_base": "prompts/inference_base.txt",
    "inference_inst": "prompts/inference_inst.txt",
    "judge": "prompts/judge.txt",
}
EXECUTORS = ("online", "batch", "vllm_offline")
RECORD_SUFFIXES = (
    ".jsonl",
    ".jsonl.gz",
    ".jsonl.zst",
    ".jsonl.bz2",
    ".jsonl.xz",
    ".json",
    ".parquet",
    ".arrow",
    ".csv",
)
# The reference's default judge: How2Judge (8B) served by vLLM, greedy, 4096 new tokens.
DEFAULT_JUDGE_NAME = "how2judge"
DEFAULT_JUDGE_MAX_TOKENS = 4096
DEFAULT_RATE_LIMITS = {"max_requests_per_minute": 1000, "max_tokens_per_minute": 100000}
# Request options that only a chat template reads.
CHAT_TEMPLATE_PARAMS = ("chat_template", "chat_template_kwargs", "add_generation_prompt")

__all__ = ["bench_reference_translate", "is_bench_reference_shape", "REFERENCE_KEYS", "OWN_KEYS"]


def is_bench_reference_shape(data: dict[str, Any]) -> bool:
    """The reference's bench shape is recognised by its keys (ours has none of them)."""
    return bool((REFERENCE_KEYS | set(LEGACY_KEYS)) & set(data))


def _merge_vllm(defaults: Any, entry: Any) -> Any:
    """One level deep, as the reference merges ``generator_defaults.vllm`` and a model's ``vllm``."""
    if not isinstance(defaults, dict) or not isinstance(entry, dict):
        return entry if entry is not None else defaults
    merged = dict(defaults)
    for key, value in entry.items():
        merged[key] = (
            {**merged[key], **value} if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def _executor(backend: str, own: str | None, where: str, t: Translation) -> str:
    if own is None:
        return "vllm_offline" if backend == "vllm" else "online"
    if backend == "vllm" and own == "batch":
        raise t.error(
            "executor",
            f"{where} is a vLLM model: executor must be vllm_offline (in-process, as the "
            "reference runs it) or online (a `vllm serve` at the role's endpoint)",
        )
    if backend == "deluge" and own == "vllm_offline":
        return "online"  # API models are asked online whatever the vLLM models use
    return own


def _spec(
    block: dict[str, Any],
    where: str,
    t: Translation,
    base_dir: Path,
    *,
    defaults: dict[str, Any],
    own_executor: str | None,
    extra: AbstractSet[str] = frozenset(),
) -> tuple[dict[str, Any], str]:
    """A stage spec (core.reference_configs.llm_block) and its executor."""
    backend = str(block.get("backend", defaults.get("backend", "deluge")) or "deluge").strip().lower()
    executor = _executor(backend, own_executor, where, t)
    vllm = block.get("vllm", defaults.get("vllm"))
    if executor != "vllm_offline" and isinstance(vllm, dict) and vllm.get("engine_kwargs"):
        raise t.error(
            f"{where}.vllm.engine_kwargs",
            "engine options need the in-process vLLM executor (executor: vllm_offline, the default for "
            "vLLM models); with executor online start `vllm serve MODEL` with them (e.g. --revision)",
        )
    spec = llm_block(
        block,
        where,
        t,
        base_dir,
        defaults=defaults,
        in_process_vllm=executor == "vllm_offline",
        allowed_extra=set(extra),
    )
    for key, default in DEFAULT_RATE_LIMITS.items():
        if key in block or key in defaults:
            value = block.get(key, defaults.get(key))
            if value != default:
                t.note(
                    f"{where}.{key}",
                    "bench runs share the endpoint's limits (LLM_REQUESTS_PER_MINUTE, "
                    "LLM_TOKENS_PER_MINUTE, or the role's own); concurrency: bounds parallel "
                    "requests per run",
                )
    return spec, executor


def _options(spec: dict[str, Any], where: str, t: Translation, *, prompt_style: str | None = None) -> dict[str, Any]:
    """Request options (judging/run_requests.py ``request_options_check``) from a stage spec."""
    mode = spec["mode"] if spec["backend"] == "vllm" else "chat"
    params = dict(spec["params"])
    if mode == "generate":
        for key in CHAT_TEMPLATE_PARAMS:
            if key in params:
                params.pop(key)
                t.note(
                    f"{where}.vllm.{key}",
                    "no chat template is applied in vllm.mode generate (a plain "
                    "completion), as in the reference; set mode: chat to use it",
                )
    if prompt_style == "base" and "stop" not in params:
        params["stop"] = None  # no stop sequence unless the config gives one, as in the reference
    options: dict[str, Any] = {
        "temperature": spec["temperature"],
        "max_tokens": spec["max_tokens"],
        "mode": mode,
        "params": params,
    }
    if spec["engine"]:
        options["engine"] = dict(spec["engine"])
    return options


def _generations(
    data: dict[str, Any],
    t: Translation,
    base_dir: Path,
    own_executor: str | None,
    prompts: dict[str, str],
    prompt_paths: dict[str, str],
) -> list[dict[str, Any]]:
    defaults = mapping(data.get("generator_defaults"), "generator_defaults", t)
    refuse_unknown(defaults, LLM_KEYS - {"model"} | {"prompt_style"}, "generator_defaults", t)
    models = data.get("models")
    if models is None:
        return []
    if not isinstance(models, list):
        raise t.error("models", "must be a list of model entries")
    runs, names = [], set()
    for index, entry in enumerate(models):
        where = f"models[{index}]"
        given = entry
        if isinstance(entry, str):
            entry = {"model": entry}
        entry = mapping(entry, where, t)
        refuse_unknown(entry, LLM_KEYS | {"run_name", "prompt_style"}, where, t)
        style = str(entry.get("prompt_style", defaults.get("prompt_style")) or "").strip().lower()
        if style not in ("base", "inst"):
            raise t.error(f"{where}.prompt_style", "is required (base or inst), on the entry or in generator_defaults")
        inherited = {k: v for k, v in defaults.items() if k not in ("prompt_style", "vllm")}
        block = {k: v for k, v in entry.items() if k not in ("run_name", "prompt_style")}
        backend = str(entry.get("backend", defaults.get("backend", "deluge")) or "deluge").strip().lower()
        merged_vllm = _merge_vllm(defaults.get("vllm") if backend == "vllm" else None, entry.get("vllm"))
        if merged_vllm is not None:
            block["vllm"] = merged_vllm
        spec, executor = _spec(
            block, where, t, base_dir, defaults={"max_new_tokens": 4096, **inherited}, own_executor=own_executor
        )
        run_name = entry.get("run_name")
        if run_name is not None and (not isinstance(run_name, str) or not run_name.strip()):
            raise t.error(f"{where}.run_name", "must be a non-empty name")
        name = short_name(run_name or spec["model"])
        if name in names:
            raise t.error(f"{where}.run_name", f"{name!r} names two models; give each its own run_name")
        names.add(name)
        run: dict[str, Any] = {
            "name": name,
            "executor": executor,
            "model": {
                "name": name,
                "role": "generate",
                "model": spec["model"],
                "prompt_style": style,
                "max_tokens": spec["max_tokens"],
            },
            "options": _options(spec, where, t, prompt_style=style),
            # the generator as the reference resolves it (judging/reference_identity.py)
            "reference_settings": generator_settings(given, defaults, prompt_style=style),
        }
        prompt = prompts.get(f"inference_{style}")
        if prompt:
            run["prompt_file"] = prompt
            run["reference_settings"]["prompt_path"] = prompt_paths[f"inference_{style}"]
        runs.append(run)
    return runs


def _judge(
    data: dict[str, Any],
    t: Translation,
    base_dir: Path,
    own_executor: str | None,
    prompts: dict[str, str],
    prompt_paths: dict[str, str],
) -> dict[str, Any]:
    judge: dict[str, Any]
    if data.get("evaluator") is None:
        # The reference's default judge: How2Judge under vLLM (plain completions of the judge
        # prompt, greedy, 4096 new tokens). Here: the how2score_judge role's endpoint, which
        # should serve it (`vllm serve how2everything/how2judge`).
        executor = own_executor if own_executor in ("online", "vllm_offline") else "online"
        judge = {
            "judge": DEFAULT_JUDGE_NAME,
            "role": "how2score_judge",
            "model": "",
            "executor": executor,
            "options": {"temperature": 0.0, "max_tokens": DEFAULT_JUDGE_MAX_TOKENS, "mode": "generate", "params": {}},
        }
    else:
        block = mapping(data["evaluator"], "evaluator", t)
        spec, executor = _spec(
            block, "evaluator", t, base_dir, defaults={"max_new_tokens": 4096}, own_executor=own_executor
        )
        judge = {
            "judge": spec["model"],
            "role": "how2score_judge",
            "model": spec["model"],
            "executor": executor,
            "options": _options(spec, "evaluator", t),
        }
    judge["reference_settings"] = evaluator_settings(
        None if data.get("evaluator") is None else mapping(data["evaluator"], "evaluator", t)
    )
    if prompts.get("judge"):
        judge["prompt_file"] = prompts["judge"]
        judge["reference_settings"]["prompt_path"] = prompt_paths["judge"]
    return judge


def _input_files(inputs: dict[str, Any], t: Translation, base_dir: Path) -> list[str]:
    globs = inputs.get("include_globs") or []
    if not isinstance(globs, list) or not all(isinstance(g, str) for g in globs):
        raise t.error("inputs.include_globs", "must be a list of glob patterns")
    globs = [g.strip() for g in globs if g.strip()]
    if inputs.get("path") is not None:
        root = path_value(inputs["path"], "inputs.path", t, base_dir)
        where = "inputs.path"
    else:
        hf_repo = inputs.get("hf_repo")
        if not isinstance(hf_repo, str) or not hf_repo.strip():
            raise t.error("inputs.hf_repo", "must be a Hugging Face dataset id (or give inputs.path)")
        cache_dir = None
        if inputs.get("hf_cache_dir") is not None:
            cache_dir = path_value(inputs["hf_cache_dir"], "inputs.hf_cache_dir", t, base_dir)
        root = inputs_local_path(hf_repo.strip(), cache_dir=cache_dir, base_dir=base_dir, t=t, where="inputs.hf_repo")
        where = "inputs.hf_repo"
    if root.is_file():
        return [str(root)]
    if not root.is_dir():
        raise t.error(where, f"{root} is neither a file nor a folder")
    if globs:  # the reference matches them in the folder itself
        files = sorted({p for g in globs for p in root.glob(g) if p.is_file()})
    else:
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith(RECORD_SUFFIXES))
        split = str(inputs.get("hf_split") or "train").strip()
        of_split = [p for p in files if p.name.startswith(split) or p.parent.name == split]
        files = of_split or files
    if not files:
        raise t.error("inputs.include_globs" if globs else where, f"no record files in {root}")
    return [str(p) for p in files]


def _inputs(raw: Any, t: Translation, base_dir: Path) -> list[str] | None:
    if raw is None:
        t.note(
            "inputs",
            "omitted: the reference reads how2everything/how2bench from the hub; here the bench split "
            "is used (import the released How2Bench with `import_procedures FILE --split bench`, or "
            "give inputs.path)",
        )
        return None
    inputs = mapping(raw, "inputs", t)
    refuse_unknown(inputs, INPUT_KEYS, "inputs", t)
    kind = str(inputs.get("kind", "auto")).strip().lower() or "auto"
    if kind not in ("auto", "how2mine_export", "bench"):
        raise t.error("inputs.kind", f"must be auto, how2mine_export or bench, got {kind!r}")
    input_format_check(inputs, t)
    if "hf_streaming" in inputs:
        t.note("inputs.hf_streaming", "a local copy is read; nothing is streamed or downloaded")
    if inputs.get("path") is not None and inputs.get("hf_repo") is not None:
        t.note("inputs.hf_repo", "inputs.path is given, so it is read (as in the reference)")
    return _input_files(inputs, t, base_dir)


def _default_prompts(data: dict[str, Any], prompts: dict[str, str], t: Translation, base_dir: Path) -> None:
    """The reference's default prompt files (REFERENCE_DEFAULT_PROMPTS) for the keys the
    prompts block leaves out and the runs use (the judge's, and each listed prompt style's),
    each with a note saying which file is read."""
    raw_defaults = data.get("generator_defaults")
    defaults: dict[str, Any] = raw_defaults if isinstance(raw_defaults, dict) else {}
    styles = set()
    for entry in data.get("models") or []:
        style = entry.get("prompt_style", defaults.get("prompt_style")) if isinstance(entry, dict) else None
        styles.add(str(style or defaults.get("prompt_style") or "").strip().lower())
    used = [f"inference_{style}" for style in ("inst", "base") if style in styles] + ["judge"]
    for key in used:
        if key in prompts:
            continue
        relative = REFERENCE_DEFAULT_PROMPTS[key]
        candidate = base_dir / relative
        if candidate.is_file():
            prompts[key] = str(candidate)
            t.note(f"prompts.{key}", f"omitted: {candidate} is read, the reference's default in the working directory")
        else:
            t.note(
                f"prompts.{key}",
                f"omitted, and no {relative} in the working directory ({base_dir}), where the reference reads "
                "it: the product's prompt is used (PROMPTS_DIR, else the bundled file; the run records which)",
            )


def bench_reference_translate(
    data: dict[str, Any], *, source: str, base_dir: Path | None = None, default_prompts: bool = True
) -> dict[str, Any]:
    """Our generation and judge runs from a reference bench configuration (module docstring).
    ``default_prompts``: read the reference's default prompt files from ``base_dir`` (the
    working directory) for the keys the prompts block leaves out; False where there is no
    user's working directory (a launch through the API)."""
    t = Translation(source)
    base = Path.cwd() if base_dir is None else base_dir
    for key in LEGACY_KEYS:
        if key in data:
            raise t.error(
                key,
                "the reference's older bench shape, which the reference itself no longer reads: "
                "list the generators under models (shared settings in generator_defaults) and use "
                "out_root",
            )
    refuse_unknown(data, REFERENCE_KEYS | OWN_KEYS, "", t)
    out_root = path_value(data.get("out_root"), "out_root", t, base)
    own_executor = data.get("executor")
    if own_executor is not None and own_executor not in EXECUTORS:
        raise t.error("executor", f"must be one of {', '.join(EXECUTORS)}, got {own_executor!r}")
    if data.get("step_parser") is not None and data["step_parser"] not in STEP_PARSER_VALUES:
        raise t.error("step_parser", f"must be {' or '.join(STEP_PARSER_VALUES)}, got {data['step_parser']!r}")
    prompts_raw = mapping(data.get("prompts"), "prompts", t)
    refuse_unknown(prompts_raw, PROMPT_KEYS, "prompts", t)
    prompts = {k: str(path_value(v, f"prompts.{k}", t, base)) for k, v in prompts_raw.items()}
    if default_prompts:
        _default_prompts(data, prompts, t, base)
    # Each prompt file's path as the reference would record it (its judge_id hashes the judge's).
    prompt_paths = {
        key: reference_prompt_path(
            str(prompts_raw[key]).strip() if key in prompts_raw else REFERENCE_DEFAULT_PROMPTS[key], base
        )
        for key in prompts
    }
    paths = mapping(data.get("paths"), "paths", t)
    refuse_unknown(paths, {"generations", "judgments"}, "paths", t)
    generations_file = judgments_file = None
    if paths.get("generations") is not None:
        generations_file = str(path_value(paths["generations"], "paths.generations", t, base))
    if paths.get("judgments") is not None:
        judgments_file = str(path_value(paths["judgments"], "paths.judgments", t, base))
    generations = _generations(data, t, base, own_executor, prompts, prompt_paths)
    if generations_file and generations:
        raise t.error(
            "paths.generations",
            "give either models (generated here) or paths.generations (existing generations to judge), not both",
        )
    if judgments_file and len(generations) > 1:
        raise t.error(
            "paths.judgments",
            "one judgments file cannot hold the judgments of several models; leave it "
            "out (each model's go under out_root)",
        )
    config: dict[str, Any] = {
        "generations": generations,
        "judge": _judge(data, t, base, own_executor, prompts, prompt_paths),
        "own": {key: data[key] for key in OWN_KEYS - {"executor"} if key in data},
        "reference": {
            "out_root": str(out_root),
            "inputs": _inputs(data.get("inputs"), t, base),
            "generations_file": generations_file,
            "judgments_file": judgments_file,
            "imported_run": short_name(out_root.name),
            "notes": t.notes,
        },
    }
    return config
