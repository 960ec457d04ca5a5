"""Mining run configurations (``mine_run --config FILE.yaml`` and the launch form): read,
checked key by key, and completed with defaults. Pure Python, no Django imports.

```yaml
name: web-2026-11            # required, unique
corpus: web                  # optional here; --corpus names it on the command line
topics: [food-dining, Health]   # names or slugs; "all" (default): every topic of the corpus
candidates_per_topic: 200    # required: most documents sampled per topic (the budget)
desired_valid_per_topic: 50  # optional: stop sampling a topic once it has this many procedures
extract_batch_size: 25       # documents sampled per topic at a time (with desired_valid_per_topic)
seed: 0
min_steps: 5
max_steps: 15
executor: online             # or batch (OpenAI Batch API)
concurrency: 16              # requests in flight
workers: 1                   # Celery tasks working on the run at once
budget_usd: 10               # optional cap; the run pauses when it is spent
failure_retries: 1           # automatic retries of failed stage calls
stages:                      # optional, per LLM stage
  extract_procedure: {role: extract_procedure, prompt_file: extract_procedure.txt, model: gpt-4.1,
                      base_url: "https://api.openai.com/v1", api_key_env: OPENAI_API_KEY,
                      temperature: 0, max_tokens: 4096}
  # A stage may have its own executor: online, batch or vllm_offline (the model in-process
  # on this machine's GPU, with vllm.LLM(**engine)); the run's executor is the default.
  # llm_filter: {model: Qwen/Qwen3-8B, executor: vllm_offline, engine: {revision: main}}
```"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.run_configs import RunConfigError, config_parse
from llm.key_env import api_key_env_problem
from llm.prompts import prompt_locate
from mining.constants import MAX_STEPS, MIN_STEPS
from mining.reference_configs import OWN_KEYS, REFERENCE_KEYS, is_reference_shape, mining_reference_translate
from mining.stages import LLM_STAGES

RUN_KEYS = {
    "name",
    "corpus",
    "topics",
    "candidates_per_topic",
    "desired_valid_per_topic",
    "extract_batch_size",
    "seed",
    "min_steps",
    "max_steps",
    "executor",
    "concurrency",
    "workers",
    "budget_usd",
    "failure_retries",
    "stages",
}
STAGE_KEYS = {
    "role",
    "prompt_file",
    "base_url",
    "model",
    "api_key_env",
    "temperature",
    "max_tokens",
    "reasoning_effort",
    "mode",
    "params",
    "requests_per_minute",
    "tokens_per_minute",
    "executor",
    "engine",
}
STAGE_MODES = ("chat", "generate")
EXECUTORS = ("online", "batch")
# A stage's own executor (stages.<stage>.executor); vllm_offline runs the model in-process.
STAGE_EXECUTORS = ("online", "batch", "vllm_offline")
PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"

__all__ = ["RunConfigError", "mining_config_parse", "stage_prompt_path", "PROMPTS_DIR"]


def stage_prompt_path(name_or_path: str, prompts_dir: str | Path | None = None) -> Path:
    """A bare file name is looked for in ``prompts_dir`` (the PROMPTS_DIR setting, also under
    the reference CLI's name for it) and then in the mining prompts folder; anything else is
    a path (llm/prompts.py, ``prompt_locate``)."""
    return prompt_locate(name_or_path, bundled_dir=PROMPTS_DIR, prompts_dir=prompts_dir)


def _int(data: dict[str, Any], key: str, source: str, *, default: int | None, minimum: int) -> int | None:
    value = data.get(key)
    if value is None:  # absent, or written as null: the default
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise RunConfigError(f"{source}: {key} must be a whole number, got {value!r}")
    if value < minimum:
        raise RunConfigError(f"{source}: {key} must be at least {minimum}, got {value}")
    return value


def _stage_spec(stage: str, given: Any, source: str) -> dict[str, Any]:
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise RunConfigError(f"{source}: stages.{stage} must be a mapping of settings")
    unknown = set(given) - STAGE_KEYS
    if unknown:
        raise RunConfigError(
            f"{source}: unknown key(s) under stages.{stage}: {', '.join(sorted(map(str, unknown)))}; "
            f"allowed: {', '.join(sorted(STAGE_KEYS))}"
        )
    spec = {
        "role": str(given.get("role") or stage),
        "prompt_file": str(given.get("prompt_file") or f"{stage}.txt"),
        "base_url": str(given.get("base_url") or ""),
        "model": str(given.get("model") or ""),
        "api_key_env": str(given.get("api_key_env") or ""),
        "temperature": given.get("temperature"),
        "max_tokens": given.get("max_tokens"),
    }
    problem = api_key_env_problem(str(spec["api_key_env"]))
    if problem is not None:
        raise RunConfigError(f"{source}: stages.{stage}.api_key_env: {problem}"[:300])
    if spec["temperature"] is not None and (
        isinstance(spec["temperature"], bool) or not isinstance(spec["temperature"], (int, float))
    ):
        raise RunConfigError(f"{source}: stages.{stage}.temperature must be a number")
    _int(spec, "max_tokens", f"{source}: stages.{stage}", default=None, minimum=1)
    # Options of the reference configurations, usable in ours too (docs/reference-cli.md).
    params = dict(given.get("params") or {})
    if not isinstance(given.get("params") or {}, dict):
        raise RunConfigError(f"{source}: stages.{stage}.params must be a mapping of request options")
    if given.get("reasoning_effort") is not None:
        params["reasoning_effort"] = str(given["reasoning_effort"])
    if params:
        spec["params"] = params
    mode = given.get("mode", "chat")
    if mode not in STAGE_MODES:
        raise RunConfigError(f"{source}: stages.{stage}.mode must be chat or generate (a plain completion)")
    if mode != "chat":
        spec["mode"] = mode
    for key in ("requests_per_minute", "tokens_per_minute"):
        if _int(given, key, f"{source}: stages.{stage}", default=None, minimum=0) is not None:
            spec[key] = given[key]
    executor = given.get("executor")
    if executor is not None:
        if executor not in STAGE_EXECUTORS:
            raise RunConfigError(
                f"{source}: stages.{stage}.executor must be one of {', '.join(STAGE_EXECUTORS)}, got {executor!r}"
            )
        spec["executor"] = executor
    engine = given.get("engine")
    if engine is not None and not isinstance(engine, dict):
        raise RunConfigError(f"{source}: stages.{stage}.engine must be a mapping of vLLM engine options")
    if engine:
        if executor != "vllm_offline":
            raise RunConfigError(
                f"{source}: stages.{stage}.engine: engine options apply only to executor "
                "vllm_offline (an in-process vLLM engine); a vLLM server takes them on its command "
                "line (`vllm serve MODEL --revision ...`)"
            )
        spec["engine"] = dict(engine)
    return spec


def mining_config_parse(text: str, *, source: str) -> dict[str, Any]:
    """The configuration with every default filled in. Errors name the source and the key."""
    data = config_parse(text, source=source, allowed=RUN_KEYS | REFERENCE_KEYS | {"stages"} | OWN_KEYS, required=set())
    reference = None
    if is_reference_shape(data):  # the reference CLI's shape (mining/reference_configs.py)
        data = mining_reference_translate(data, source=source)
        reference = data.pop("reference")
    unknown = set(data) - RUN_KEYS
    if unknown:
        raise RunConfigError(
            f"{source}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; allowed: {', '.join(sorted(RUN_KEYS))}"
        )
    missing = {"name", "candidates_per_topic"} - set(data)
    if missing:
        raise RunConfigError(f"{source}: missing key(s) {', '.join(sorted(missing))}")
    name = str(data["name"] or "").strip()
    if not name:
        raise RunConfigError(f"{source}: name must not be empty")
    config: dict[str, Any] = {"name": name, "corpus": str(data.get("corpus") or "")}
    topics = data.get("topics", "all")
    if topics in (None, "all"):
        config["topics"] = "all"
    elif isinstance(topics, list) and topics and all(isinstance(t, str) and t.strip() for t in topics):
        config["topics"] = [t.strip() for t in topics]
    else:
        raise RunConfigError(f'{source}: topics must be "all" or a list of topic names or slugs')
    config["candidates_per_topic"] = _int(data, "candidates_per_topic", source, default=None, minimum=1)
    config["desired_valid_per_topic"] = _int(data, "desired_valid_per_topic", source, default=None, minimum=1)
    config["extract_batch_size"] = _int(data, "extract_batch_size", source, default=0, minimum=0)
    if config["desired_valid_per_topic"] and not config["extract_batch_size"]:
        raise RunConfigError(
            f"{source}: desired_valid_per_topic needs extract_batch_size (documents sampled per "
            "topic at a time until the target is met or candidates_per_topic are spent)"
        )
    config["seed"] = _int(data, "seed", source, default=0, minimum=-(2**62))
    # How2Everything App. B.3: 5 to 15 steps by default.
    config["min_steps"] = _int(data, "min_steps", source, default=MIN_STEPS, minimum=1)
    config["max_steps"] = _int(data, "max_steps", source, default=MAX_STEPS, minimum=1)
    if config["min_steps"] > config["max_steps"]:
        raise RunConfigError(f"{source}: min_steps ({config['min_steps']}) is above max_steps ({config['max_steps']})")
    executor = data.get("executor", "online")
    if executor not in EXECUTORS:
        raise RunConfigError(f"{source}: executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    config["executor"] = executor
    config["concurrency"] = _int(data, "concurrency", source, default=16, minimum=1)
    config["workers"] = _int(data, "workers", source, default=1, minimum=1)
    config["failure_retries"] = _int(data, "failure_retries", source, default=1, minimum=0)
    config["budget_usd"] = data.get("budget_usd")
    stages = data.get("stages") or {}
    if not isinstance(stages, dict):
        raise RunConfigError(f"{source}: stages must be a mapping from stage name to settings")
    unknown = set(stages) - set(LLM_STAGES)
    if unknown:
        raise RunConfigError(
            f"{source}: unknown stage(s) {', '.join(sorted(map(str, unknown)))}; "
            f"the LLM stages are {', '.join(LLM_STAGES)}"
        )
    # A stage's temperature and max_tokens left out (None) are resolved when the run is
    # created: the role's setting, else MINING_TEMPERATURE and MINING_STAGE_MAX_TOKENS
    # (mining/stage_plans.py stage_sampling, llm/sampling.py).
    config["stages"] = {stage: _stage_spec(stage, stages.get(stage), source) for stage in LLM_STAGES}
    if reference is not None:
        config["reference"] = reference
    return config
