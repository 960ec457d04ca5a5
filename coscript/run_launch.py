"""Launching a CoScript run from a YAML configuration's text: one service for
``coscript_run start --config`` and the REST API. The keys are the command's options::

    name: plan-1
    model: qwen3-8b          # a registered model, or a mapping that registers or updates it:
                             # {name, base_url, model, api_key_env, prompt_style}
    split: bench             # where the abstract goals come from (default: every procedure)
    limit: 50                # abstract goals drawn with the seed (default: all)
    seed: 0
    k: 2                     # candidate scripts per specific goal
    filter_mode: embedding   # coscript/constants.py FILTER_MODES
    keyword_bonus: 0.5
    screen: true             # the sensitive-domain screen
    executor: online
    concurrency: 16
    budget_usd: 5

``embedding_model`` and ``prompts_dir`` name a model folder or files on the server; a caller
that must not choose the server's files (the API) passes ``server_files=False`` and they are
refused (the settings' embedding model and the bundled prompts are used)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.run_configs import RunConfigError, config_parse
from core.stored_values import max_length_of
from coscript.constants import DEFAULT_FILTER_MODE, DEFAULT_K, FILTER_MODES, MAX_K
from coscript.models import CoScriptRun
from coscript.run_services import coscript_run_create
from judging.models import PromptStyle
from judging.run_launch import language_model_resolve
from llm.constants import EXECUTORS

RUN_KEYS = {
    "name",
    "model",
    "split",
    "limit",
    "seed",
    "k",
    "filter_mode",
    "keyword_bonus",
    "screen",
    "embedding_model",
    "executor",
    "concurrency",
    "budget_usd",
    "prompts_dir",
}
MODEL_KEYS = {"name", "base_url", "model", "api_key_env", "prompt_style"}
SERVER_FILE_KEYS = ("embedding_model", "prompts_dir")
NAME_MAX = max_length_of(CoScriptRun, "name")


def _whole(data: dict[str, Any], key: str, source: str, *, low: int, high: int) -> None:
    value = data.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
        raise RunConfigError(f"{source}: {key} must be a whole number from {low} to {high}, got {value!r}")


def _text(data: dict[str, Any], key: str, source: str, *, max_length: int = 500) -> None:
    value = data.get(key)
    if value is not None and (not isinstance(value, str) or len(value) > max_length):
        raise RunConfigError(f"{source}: {key} must be text of at most {max_length} characters, got {value!r}"[:300])


def coscript_config_parse(text: str, *, source: str) -> dict[str, Any]:
    """The configuration, checked key by key (errors name the source and the key)."""
    data = config_parse(text, source=source, allowed=RUN_KEYS, required={"name", "model"})
    for key in [key for key, value in data.items() if value is None]:
        if key in {"name", "model"}:
            raise RunConfigError(f"{source}: {key} must be given a value")
        del data[key]  # written as null: the default
    if not isinstance(data["name"], str) or not data["name"].strip() or len(data["name"]) > NAME_MAX:
        raise RunConfigError(f"{source}: name must be a non-empty text of at most {NAME_MAX} characters")
    data["name"] = data["name"].strip()
    model = data["model"]
    if isinstance(model, str):
        data["model"] = {"name": model}
    elif isinstance(model, dict):
        unknown = set(model) - MODEL_KEYS
        if unknown:
            raise RunConfigError(
                f"{source}: unknown key(s) under model: {', '.join(sorted(map(str, unknown)))}; "
                f"allowed: {', '.join(sorted(MODEL_KEYS))}"
            )
        for key in MODEL_KEYS:
            _text(model, key, source)
        if not model.get("name"):
            raise RunConfigError(f"{source}: model needs a name")
        if model.get("prompt_style") is not None and model["prompt_style"] not in PromptStyle.values:
            raise RunConfigError(f"{source}: model.prompt_style must be one of {', '.join(PromptStyle.values)}")
    else:
        raise RunConfigError(f"{source}: model must be a registered model's name or a mapping")
    for key in ("split", "embedding_model", "prompts_dir"):
        _text(data, key, source)
    _whole(data, "limit", source, low=1, high=10**9)
    _whole(data, "seed", source, low=0, high=2**32 - 1)
    _whole(data, "k", source, low=1, high=MAX_K)
    _whole(data, "concurrency", source, low=1, high=1024)
    if data.get("filter_mode", DEFAULT_FILTER_MODE) not in FILTER_MODES:
        raise RunConfigError(
            f"{source}: filter_mode must be one of {', '.join(FILTER_MODES)}, got {data['filter_mode']!r}"
        )
    bonus = data.get("keyword_bonus")
    if bonus is not None and (isinstance(bonus, bool) or not isinstance(bonus, (int, float)) or bonus < 0):
        raise RunConfigError(f"{source}: keyword_bonus must be a number of at least 0, got {bonus!r}")
    if not isinstance(data.get("screen", True), bool):
        raise RunConfigError(f"{source}: screen must be true or false, got {data['screen']!r}")
    if data.get("executor", "online") not in EXECUTORS:
        raise RunConfigError(f"{source}: executor must be one of {', '.join(EXECUTORS)}, got {data['executor']!r}")
    return data


def coscript_launch(
    *, config_text: str, source: str, start: bool = True, created_by=None, server_files: bool = True
) -> CoScriptRun:
    """A CoScript run from a configuration's text; a refusal stores nothing (not even the
    model's registration). ``start``: enqueue its Celery task once the transaction commits."""
    return coscript_config_launch(
        config=coscript_config_parse(config_text, source=source),
        source=source,
        start=start,
        created_by=created_by,
        server_files=server_files,
    )


@transaction.atomic
def coscript_config_launch(
    *, config: dict[str, Any], source: str, start: bool = True, created_by=None, server_files: bool = True
) -> CoScriptRun:
    """A CoScript run from a checked configuration (``coscript_config_parse``, or the
    command's options in the same keys)."""
    config = dict(config)
    if not server_files:
        for key in SERVER_FILE_KEYS:
            if config.get(key):
                raise RunConfigError(
                    f"{source}: {key} names a model or files on the server; it is chosen with "
                    "coscript_run on the server (here: the settings' embedding model and the "
                    "bundled prompts)"
                )
    model_spec = dict(config.pop("model"))
    name = model_spec.pop("name")
    model = language_model_resolve(name=name, registering={k: v for k, v in model_spec.items() if v}, source=source)
    return coscript_run_create(
        name=config["name"],
        language_model=model,
        split=config.get("split") or "",
        limit=config.get("limit"),
        seed=config.get("seed", 0),
        k=config.get("k", DEFAULT_K),
        filter_mode=config.get("filter_mode", DEFAULT_FILTER_MODE),
        keyword_bonus=config.get("keyword_bonus"),
        screen=config.get("screen", True),
        embedding_model=config.get("embedding_model"),
        executor=config.get("executor", "online"),
        concurrency=config.get("concurrency", 16),
        budget_usd=config.get("budget_usd"),
        prompts_dir=config.get("prompts_dir"),
        created_by=created_by,
        start=start,
    )
