"""YAML run configurations for `bench_run`: read, checked key by key, turned into runs."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from core.reference_configs import REASONING_EFFORTS
from core.run_configs import RunConfigError, config_parse, config_read
from judging.reference_configs import LEGACY_KEYS, OWN_KEYS, REFERENCE_KEYS, bench_reference_translate, is_bench_reference_shape

__all__ = ["RunConfigError", "generation_config_load", "judge_config_load", "reference_bench_config_load"]

MODEL_KEYS = {"name", "role", "base_url", "model", "api_key_env", "prompt_style", "reasoning", "max_tokens"}
# Request options (judging/services.py request_options_check), in our shape too.
OPTION_KEYS = {"top_p", "reasoning_effort", "params", "mode", "engine"}
GENERATION_KEYS = {"name", "model", "split", "sample_per_topic", "seed", "prompt_file", "executor", "concurrency",
                   "budget_usd", "temperature"} | OPTION_KEYS
JUDGE_KEYS = {"name", "generation_run", "judge", "role", "base_url", "model", "api_key_env", "prompt_file", "executor",
              "concurrency", "budget_usd", "temperature", "seed", "max_tokens"} | OPTION_KEYS


def _load(path: str | Path, allowed: set[str], required: set[str]) -> dict[str, Any]:
    return config_parse(config_read(path), source=str(path), allowed=allowed, required=required)


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
    """The translation of a bench configuration in the reference CLI's shape
    (judging/reference_configs.py), or None when the file is in our shape."""
    data = config_parse(config_read(path), source=str(path), required=set(),
                        allowed=GENERATION_KEYS | JUDGE_KEYS | REFERENCE_KEYS | OWN_KEYS | set(LEGACY_KEYS))
    if not is_bench_reference_shape(data):
        return None
    return bench_reference_translate(data, source=str(path))


def generation_config_load(path: str | Path) -> dict[str, Any]:
    data = _load(path, GENERATION_KEYS, {"name", "model"})
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
            raise RunConfigError(f"{path}: unknown key(s) under model: {', '.join(sorted(unknown))}; "
                                 f"allowed: {', '.join(sorted(MODEL_KEYS))}")
        if "name" not in model:
            raise RunConfigError(f"{path}: model needs a name")
    else:
        raise RunConfigError(f"{path}: model must be a name or a mapping")
    return data


def judge_config_load(path: str | Path) -> dict[str, Any]:
    data = _load(path, JUDGE_KEYS, {"name", "generation_run", "judge"})
    options = _options(data, path)
    if data.get("max_tokens") is not None:
        options["max_tokens"] = data["max_tokens"]
    data.pop("max_tokens", None)
    if options:
        data["options"] = options
    return data
