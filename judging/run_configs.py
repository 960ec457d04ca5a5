"""YAML run configurations for `bench_run`: read, checked key by key, turned into runs."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from core.run_configs import RunConfigError, config_parse, config_read

__all__ = ["RunConfigError", "generation_config_load", "judge_config_load"]

MODEL_KEYS = {"name", "role", "base_url", "model", "api_key_env", "prompt_style", "reasoning", "max_tokens"}
GENERATION_KEYS = {"name", "model", "split", "sample_per_topic", "seed", "prompt_file", "executor", "concurrency", "budget_usd"}
JUDGE_KEYS = {"name", "generation_run", "judge", "role", "base_url", "model", "api_key_env", "prompt_file", "executor",
              "concurrency", "budget_usd", "temperature", "seed"}


def _load(path: str | Path, allowed: set[str], required: set[str]) -> dict[str, Any]:
    return config_parse(config_read(path), source=str(path), allowed=allowed, required=required)


def generation_config_load(path: str | Path) -> dict[str, Any]:
    data = _load(path, GENERATION_KEYS, {"name", "model"})
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
    return _load(path, JUDGE_KEYS, {"name", "generation_run", "judge"})
