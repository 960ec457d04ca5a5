"""What the mining and bench configurations of the reference CLI (``h2e mine run``,
``h2e bench run``) share, translated into our runs. Pure Python, no Django.

A configuration in the reference's shape is recognised by its keys (``out_root``,
``inputs``, ``llm``, ``prompts``, ``targets``, ``export``, ``models``, ``evaluator``, …).
Every key is either honoured or refused by name with the reason; keys that only
matter to the reference's own machinery are accepted with a *note* that says so, and
the notes are printed by the commands. Shape-specific translation lives in
``mining/reference_configs.py`` and ``judging/reference_configs.py``.

The LLM blocks (``llm``, ``stage_llm_overrides.<stage>``, ``models[i]``, ``evaluator``)
become a *stage spec*: ``model``, ``temperature``, ``max_tokens`` (from
``max_new_tokens``), ``reasoning_effort``, the rate limits, ``mode`` (``chat`` or
``generate``: a plain completion), ``params`` (extra sampling and chat-template options
sent with every request) and ``engine`` (vLLM engine options, used by the in-process
vLLM executor and part of each request's identity)."""

from __future__ import annotations

import os
import re
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from core.run_configs import RunConfigError

__all__ = [
    "Translation",
    "llm_block",
    "vllm_block",
    "inputs_local_path",
    "mapping",
    "path_value",
    "refuse_unknown",
    "short_name",
    "SAMPLING_KWARGS",
]

# vllm.SamplingParams options a request may carry besides temperature and max_tokens;
# vLLM's OpenAI-compatible server accepts the same names in a request body.
SAMPLING_KWARGS = (
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "stop_token_ids",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "min_tokens",
    "ignore_eos",
    "skip_special_tokens",
    "include_stop_str_in_output",
    "spaces_between_special_tokens",
)
VLLM_KEYS = {
    "mode",
    "worker_multiproc_method",
    "hf_token_env",
    "engine_kwargs",
    "sampling_kwargs",
    "chat_template",
    "chat_template_path",
    "chat_template_kwargs",
    "add_generation_prompt",
    "require_guided_json",
}
BACKENDS = ("deluge", "vllm")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")


class Translation:
    """Collects the notes of one translation (keys accepted with no effect here, and why)."""

    def __init__(self, source: str):
        self.source = source
        self.notes: list[str] = []

    def error(self, where: str, message: str) -> RunConfigError:
        return RunConfigError(f"{self.source}: {where}: {message}")

    def note(self, where: str, message: str) -> None:
        self.notes.append(f"{where}: {message}")


def mapping(value: Any, where: str, t: Translation) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise t.error(where, "must be a mapping")
    return value


def refuse_unknown(
    data: dict[str, Any], allowed: set[str], where: str, t: Translation, refused: dict[str, str] | None = None
) -> None:
    """Keys named in ``refused`` are refused with their reason; other unknown keys by name."""
    for key, reason in (refused or {}).items():
        if key in data:
            raise t.error(f"{where}.{key}" if where else key, reason)
    unknown = sorted(map(str, set(data) - allowed))
    if unknown:
        raise t.error(
            where or "top level", f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )


def path_value(value: Any, where: str, t: Translation, base_dir: Path) -> Path:
    """A path as the reference reads it: relative paths are relative to the working directory."""
    if not isinstance(value, str) or not value.strip():
        raise t.error(where, "must be a non-empty path")
    path = Path(value.strip())
    return path if path.is_absolute() else (base_dir / path)


def short_name(text: str) -> str:
    """A file-system and name-safe form of a model id (``Qwen/Qwen3-8B`` → ``Qwen-Qwen3-8B``)."""
    name = "".join(ch if (ch.isalnum() or ch in "._-") else "-" for ch in text.strip()).strip("-")
    return name or "model"


def _number(value: Any, where: str, t: Translation, *, integer: bool, minimum: float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise t.error(where, f"must be {'a whole number' if integer else 'a number'}, got {value!r}")
    if value < minimum:
        raise t.error(where, f"must be at least {minimum:g}, got {value}")
    return value


def vllm_block(
    block: Any, where: str, t: Translation, base_dir: Path, *, in_process: bool
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(mode, params, engine)`` from a ``vllm:`` block. ``in_process``: the requests run
    on the vLLM offline executor (engine options apply); otherwise they go to an
    OpenAI-compatible vLLM server, which was started with its own engine options."""
    block = mapping(block, where, t)
    refuse_unknown(block, VLLM_KEYS, where, t)
    mode = str(block.get("mode", "generate")).strip().lower()
    if mode not in ("generate", "chat"):
        raise t.error(f"{where}.mode", f"must be generate or chat, got {mode!r}")
    params: dict[str, Any] = {}
    sampling = mapping(block.get("sampling_kwargs"), f"{where}.sampling_kwargs", t)
    for key, value in sampling.items():
        if key in ("temperature", "max_tokens"):
            raise t.error(f"{where}.sampling_kwargs.{key}", "set it on the model block (temperature, max_new_tokens)")
        if key not in SAMPLING_KWARGS:
            raise t.error(
                f"{where}.sampling_kwargs.{key}",
                f"not a sampling option we pass on (known: {', '.join(SAMPLING_KWARGS)})",
            )
        params[key] = value
    template_kwargs = mapping(block.get("chat_template_kwargs"), f"{where}.chat_template_kwargs", t)
    if template_kwargs:
        params["chat_template_kwargs"] = dict(template_kwargs)
    if block.get("chat_template") is not None:
        if not isinstance(block["chat_template"], str):
            raise t.error(f"{where}.chat_template", "must be text")
        params["chat_template"] = block["chat_template"]
    if block.get("chat_template_path") is not None:
        path = path_value(block["chat_template_path"], f"{where}.chat_template_path", t, base_dir)
        try:
            params["chat_template"] = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise t.error(f"{where}.chat_template_path", f"cannot read {path} ({exc.strerror or exc})") from exc
    if "add_generation_prompt" in block:
        if not isinstance(block["add_generation_prompt"], bool):
            raise t.error(f"{where}.add_generation_prompt", "must be true or false")
        if block["add_generation_prompt"] is False:
            params["add_generation_prompt"] = False
    if block.get("require_guided_json", True) is not True:
        raise t.error(
            f"{where}.require_guided_json",
            "JSON stages always ask for their schema (structured outputs); only true is supported",
        )
    engine = dict(mapping(block.get("engine_kwargs"), f"{where}.engine_kwargs", t))
    if engine and not in_process:
        raise t.error(
            f"{where}.engine_kwargs",
            "engine options need the in-process vLLM executor (vllm_offline), "
            "not a server (executor: online): start `vllm serve MODEL` with these "
            "options (e.g. --revision) and point the stage's role at it",
        )
    if block.get("worker_multiproc_method") is not None:
        if not isinstance(block["worker_multiproc_method"], str):
            raise t.error(f"{where}.worker_multiproc_method", "must be text")
        if in_process:
            engine["worker_multiproc_method"] = block["worker_multiproc_method"].strip()
        else:
            t.note(f"{where}.worker_multiproc_method", "a setting of the vLLM server you start, not of a request")
    hf_token_env = block.get("hf_token_env", "HF_TOKEN")
    if hf_token_env is not None and not isinstance(hf_token_env, str):
        raise t.error(f"{where}.hf_token_env", "must be the name of an environment variable, or null")
    if in_process and hf_token_env and hf_token_env != "HF_TOKEN":
        engine["hf_token_env"] = hf_token_env.strip()
    elif "hf_token_env" in block and not in_process:
        t.note(f"{where}.hf_token_env", "a setting of the vLLM server you start, not of a request")
    return mode, params, engine


def llm_block(
    block: Any,
    where: str,
    t: Translation,
    base_dir: Path,
    *,
    defaults: dict[str, Any],
    in_process_vllm: bool,
    allowed_extra: AbstractSet[str] = frozenset(),
) -> dict[str, Any]:
    """One LLM block (with inherited ``defaults``) as a stage spec (see the module docstring)."""
    block = mapping(block, where, t)
    allowed = {
        "backend",
        "provider",
        "model",
        "temperature",
        "max_new_tokens",
        "max_requests_per_minute",
        "max_tokens_per_minute",
        "reasoning_effort",
        "vllm",
    } | set(allowed_extra)
    refuse_unknown(block, allowed, where, t)
    merged = {**defaults, **{k: v for k, v in block.items() if v is not None}}
    backend = str(merged.get("backend") or "deluge").strip().lower()
    if backend not in BACKENDS:
        raise t.error(f"{where}.backend", f"must be deluge or vllm, got {backend!r}")
    model = merged.get("model")
    if not isinstance(model, str) or not model.strip():
        raise t.error(f"{where}.model", "must be a non-empty model name")
    provider = merged.get("provider")
    if provider is not None and not isinstance(provider, str):
        raise t.error(f"{where}.provider", "must be text")
    spec: dict[str, Any] = {
        "backend": backend,
        "provider": (provider or ("local" if backend == "vllm" else "")).strip(),
        "model": model.strip(),
        "temperature": float(
            _number(merged.get("temperature", 0.0), f"{where}.temperature", t, integer=False, minimum=0)
        ),
        "max_tokens": _number(
            merged.get("max_new_tokens", defaults.get("max_new_tokens", 2048)),
            f"{where}.max_new_tokens",
            t,
            integer=True,
            minimum=1,
        ),
        "requests_per_minute": _number(
            merged.get("max_requests_per_minute", 1000), f"{where}.max_requests_per_minute", t, integer=True, minimum=0
        ),
        "tokens_per_minute": _number(
            merged.get("max_tokens_per_minute", 100000), f"{where}.max_tokens_per_minute", t, integer=True, minimum=0
        ),
        "mode": "chat",
        "params": {},
        "engine": {},
    }
    effort = merged.get("reasoning_effort")
    if effort is not None:
        effort = str(effort).strip().lower()
        if effort not in REASONING_EFFORTS:
            raise t.error(f"{where}.reasoning_effort", f"must be one of {', '.join(REASONING_EFFORTS)}, got {effort!r}")
        spec["params"]["reasoning_effort"] = effort
    if backend == "deluge":
        if not spec["provider"]:
            raise t.error(f"{where}.provider", "is required when backend is deluge (openai, anthropic, gemini, …)")
        if merged.get("vllm") is not None:
            raise t.error(f"{where}.vllm", "vLLM options apply only with backend: vllm")
    else:
        mode, params, engine = vllm_block(merged.get("vllm"), f"{where}.vllm", t, base_dir, in_process=in_process_vllm)
        spec.update(mode=mode, engine=engine)
        spec["params"].update(params)
    return spec


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


INPUT_FORMATS = {"auto", "jsonl", "csv", "arrow", "parquet"}
INPUT_COMPRESSIONS = {"auto", "none", "zst", "gz", "bz2", "xz"}


def input_format_check(inputs: dict[str, Any], t: Translation) -> None:
    """``inputs.format`` and ``inputs.compression``: one of the reference's values; anything
    but ``auto`` is noted, since files are read by their suffixes here."""
    for key, allowed in (("format", INPUT_FORMATS), ("compression", INPUT_COMPRESSIONS)):
        value = str(inputs.get(key, "auto")).strip() or "auto"
        if value not in allowed:
            raise t.error(f"inputs.{key}", f"must be one of {', '.join(sorted(allowed))}, got {value!r}")
        if value != "auto":
            t.note(
                f"inputs.{key}",
                "files are read by their suffixes (.jsonl, .csv, .arrow, .parquet; .zst, .gz, "
                "…), which must agree with it",
            )


def inputs_local_path(hf_repo: str, *, cache_dir: Path | None, base_dir: Path, t: Translation, where: str) -> Path:
    """The local copy of a Hugging Face dataset: a folder of that name, or the dataset's
    snapshot in the Hugging Face cache (``hf_cache_dir``, ``HF_DATASETS_CACHE``,
    ``HF_HUB_CACHE``, ``HF_HOME``). Nothing is downloaded; no local copy is an error
    that says how to make one."""
    direct = Path(hf_repo)
    if not direct.is_absolute():
        direct = base_dir / direct
    if direct.is_dir():
        return direct
    if not _HUB_ID.match(hf_repo):
        raise t.error(where, f"{hf_repo!r} is neither a folder nor a Hugging Face dataset id")
    roots = [cache_dir] if cache_dir else []
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    for variable in ("HF_HUB_CACHE", "HF_DATASETS_CACHE"):
        if os.environ.get(variable):
            roots.append(Path(os.environ[variable]))
    roots += [home / "hub", home / "datasets"]
    folder = "datasets--" + hf_repo.replace("/", "--")
    for root in roots:
        snapshots = root / folder / "snapshots"
        if snapshots.is_dir():
            found = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
            if found:
                return found[-1]
    raise t.error(
        where,
        f"no local copy of the Hugging Face dataset {hf_repo!r} (looked in "
        f"{', '.join(str(r) for r in roots)}); nothing is downloaded here: fetch it with "
        f"`huggingface-cli download --repo-type dataset {hf_repo} --local-dir DIR` and set "
        "inputs.path: DIR (or inputs.hf_cache_dir)",
    )
