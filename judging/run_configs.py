"""YAML run configurations for `bench_run`: read, checked key by key, turned into runs."""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml

MODEL_KEYS = {"name", "role", "base_url", "model", "api_key_env", "prompt_style", "reasoning", "max_tokens"}
GENERATION_KEYS = {"name", "model", "split", "sample_per_topic", "seed", "prompt_file", "executor", "concurrency", "budget_usd"}
JUDGE_KEYS = {"name", "generation_run", "judge", "role", "base_url", "model", "api_key_env", "prompt_file", "executor",
              "concurrency", "budget_usd", "temperature", "seed"}


class RunConfigError(ValueError):
    pass


def _load(path: str | Path, allowed: set[str], required: set[str]) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise RunConfigError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark else ""
        raise RunConfigError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from exc
    if not isinstance(data, dict):
        raise RunConfigError(f"{path}: expected a mapping of settings at the top level")
    unknown = set(data) - allowed
    if unknown:
        raise RunConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(allowed))}")
    missing = required - set(data)
    if missing:
        raise RunConfigError(f"{path}: missing key(s) {', '.join(sorted(missing))}")
    if "budget_usd" in data and data["budget_usd"] is not None:
        try:
            data["budget_usd"] = Decimal(str(data["budget_usd"]))
        except InvalidOperation as exc:
            raise RunConfigError(f"{path}: budget_usd must be a number") from exc
    return data


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
