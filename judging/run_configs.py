"""YAML run configurations for `bench_run`: read, checked key by key, turned into runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.reference_configs import REASONING_EFFORTS
from core.run_configs import RunConfigError, config_parse, config_read
from judging.reference_configs import (
    LEGACY_KEYS,
    OWN_KEYS,
    REFERENCE_KEYS,
    bench_reference_translate,
    is_bench_reference_shape,
)
from llm.constants import EXECUTORS
from llm.key_env import api_key_env_problem

__all__ = [
    "RunConfigError",
    "generation_config_load",
    "generation_config_parse",
    "judge_config_load",
    "judge_config_parse",
    "reference_bench_config_load",
    "reference_bench_config_parse",
]

MODEL_KEYS = {"name", "role", "base_url", "model", "api_key_env", "prompt_style", "reasoning", "max_tokens"}
# Request options (judging/run_requests.py request_options_check), in our shape too.
OPTION_KEYS = {"top_p", "reasoning_effort", "params", "mode", "engine"}
GENERATION_KEYS = {
    "name",
    "model",
    "split",
    "sample_per_topic",
    "seed",
    "prompt_file",
    "executor",
    "concurrency",
    "budget_usd",
    "temperature",
    "step_parser",
} | OPTION_KEYS
JUDGE_KEYS = {
    "name",
    "generation_run",
    "judge",
    "role",
    "base_url",
    "model",
    "api_key_env",
    "prompt_file",
    "executor",
    "concurrency",
    "budget_usd",
    "temperature",
    "seed",
    "max_tokens",
} | OPTION_KEYS


# Settings of our shape checked for their type here (the run services check what they mean).
WHOLE_NUMBERS = {"sample_per_topic": (1, 10**9), "seed": (0, 2**32 - 1), "concurrency": (1, 1024)}
TEXTS = (
    "name",
    "split",
    "prompt_file",
    "generation_run",
    "judge",
    "role",
    "base_url",
    "model",
    "api_key_env",
    "step_parser",
)
TEXT_MAX = 1000


def _parse(text: str, source: str, allowed: set[str], required: set[str]) -> dict[str, Any]:
    data = config_parse(text, source=source, allowed=allowed, required=required)
    for key, (low, high) in WHOLE_NUMBERS.items():
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
            raise RunConfigError(f"{source}: {key} must be a whole number from {low} to {high}, got {value!r}"[:300])
    for key in TEXTS:
        value = data.get(key)
        if key == "model" and isinstance(value, dict):
            continue  # a model to register: checked below
        if value is not None and (not isinstance(value, str) or len(value) > TEXT_MAX):
            raise RunConfigError(f"{source}: {key} must be text of at most {TEXT_MAX} characters, got {value!r}"[:300])
    if isinstance(data.get("api_key_env"), str) and (problem := api_key_env_problem(data["api_key_env"])):
        raise RunConfigError(f"{source}: api_key_env: {problem}"[:300])
    if data.get("executor") is not None and data["executor"] not in EXECUTORS:
        raise RunConfigError(
            f"{source}: executor must be one of {', '.join(EXECUTORS)}, got {data['executor']!r}"[:300]
        )
    for key in [key for key, value in data.items() if value is None]:
        if key in required:
            raise RunConfigError(f"{source}: {key} must be given a value")
        del data[key]  # written as null: the default
    return data


def _options(data: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """Pop our shape's request options into ``options`` (checked by the run services)."""
    options: dict[str, Any] = {}
    params = data.pop("params", None) or {}
    if not isinstance(params, dict):
        raise RunConfigError(f"{path}: params must be a mapping of request options")
    params = dict(params)
    for key in ("top_p", "reasoning_effort"):
        if data.get(key) is not None:
            params[key] = data.pop(key)
        data.pop(key, None)
    if params.get("reasoning_effort") is not None and params["reasoning_effort"] not in REASONING_EFFORTS:
        raise RunConfigError(f"{path}: reasoning_effort must be one of {', '.join(REASONING_EFFORTS)}")
    for key in ("temperature", "max_tokens"):
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            raise RunConfigError(f"{path}: {key} must be a number of at least 0, got {value!r}")
    if data.get("mode") not in (None, "chat", "generate"):
        raise RunConfigError(f"{path}: mode must be chat or generate (a plain completion)")
    if data.get("mode") is not None:
        options["mode"] = data.pop("mode")
    data.pop("mode", None)
    engine = data.pop("engine", None)
    if engine is not None:
        if not isinstance(engine, dict):
            raise RunConfigError(f"{path}: engine must be a mapping of vLLM engine options")
        options["engine"] = engine
    if params:
        options["params"] = params
    return options


def reference_bench_config_load(path: str | Path) -> dict[str, Any] | None:
    """The translation of a bench configuration file in the reference CLI's shape
    (judging/reference_configs.py), or None when the file is in our shape."""
    return reference_bench_config_parse(config_read(path), source=str(path))


# Keys of the reference shape that name files the translation looks at and the launch reads.
SERVER_FILE_KEYS = ("inputs", "paths.generations")


def reference_bench_config_parse(
    text: str, *, source: str, base_dir: Path | None = None, server_files: bool = True
) -> dict[str, Any] | None:
    """``reference_bench_config_load`` of a configuration's text (a file, a form, the API);
    relative paths in it are taken from ``base_dir`` (default: the working directory).
    ``server_files=False`` (the API): ``inputs`` and ``paths.generations``, which name files
    or folders on the server that the translation walks and the launch reads, are refused
    before anything is looked at."""
    data = config_parse(
        text,
        source=source,
        required=set(),
        allowed=GENERATION_KEYS | JUDGE_KEYS | REFERENCE_KEYS | OWN_KEYS | set(LEGACY_KEYS),
    )
    if not is_bench_reference_shape(data):
        return None
    if not server_files:
        paths = data.get("paths")
        named = [
            key
            for key in SERVER_FILE_KEYS
            if (
                data.get(key) is not None
                if key == "inputs"
                else isinstance(paths, dict) and paths.get("generations") is not None
            )
        ]
        if named:
            raise RunConfigError(
                f"{source}: {named[0]} names files on the server, which only bench_run reads there; "
                "import them on the server first (import_procedures, or bench_run) and launch "
                "without it"
            )
    # Without server files (the API) there is no user's working directory to find the
    # reference's default prompt files in: the product's prompts, or the prompts block's.
    return bench_reference_translate(data, source=source, base_dir=base_dir, default_prompts=server_files)


def generation_config_load(path: str | Path) -> dict[str, Any]:
    return generation_config_parse(config_read(path), source=str(path))


def generation_config_parse(text: str, *, source: str) -> dict[str, Any]:
    """A generation run's configuration in our shape (``bench_run generate``, the API)."""
    path = source
    data = _parse(text, source, GENERATION_KEYS, {"name", "model"})
    options = _options(data, path)
    if data.get("temperature") is not None:
        options["temperature"] = data.pop("temperature")
    data.pop("temperature", None)
    if options:
        data["options"] = options
    model = data["model"]
    if isinstance(model, str):
        data["model"] = {"name": model}
    elif isinstance(model, dict):
        unknown = set(model) - MODEL_KEYS
        if unknown:
            raise RunConfigError(
                f"{path}: unknown key(s) under model: {', '.join(sorted(unknown))}; "
                f"allowed: {', '.join(sorted(MODEL_KEYS))}"
            )
        if "name" not in model:
            raise RunConfigError(f"{path}: model needs a name")
        for key, value in model.items():
            wanted = bool if key == "reasoning" else int if key == "max_tokens" else str
            if value is not None and (
                not isinstance(value, wanted)
                or (wanted is int and isinstance(value, bool))
                or (isinstance(value, str) and len(value) > TEXT_MAX)
            ):
                raise RunConfigError(f"{path}: model.{key} must be {wanted.__name__}, got {value!r}"[:300])
    else:
        raise RunConfigError(f"{path}: model must be a name or a mapping")
    return data


def judge_config_load(path: str | Path) -> dict[str, Any]:
    return judge_config_parse(config_read(path), source=str(path))


def judge_config_parse(text: str, *, source: str) -> dict[str, Any]:
    """A judge run's configuration in our shape (``bench_run judge``, the API)."""
    path = source
    data = _parse(text, source, JUDGE_KEYS, {"name", "generation_run", "judge"})
    options = _options(data, path)
    if data.get("max_tokens") is not None:
        options["max_tokens"] = data["max_tokens"]
    data.pop("max_tokens", None)
    if options:
        data["options"] = options
    return data
