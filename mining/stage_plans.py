"""How each LLM stage of a mining run is asked (its ``StagePlan``): the prompt, the endpoint,
the sampling parameters, the rate limits and the executor, from the run's configuration
(``MiningRun.stages``) and the settings. Read by the run's page and services as well as by
the walk, so it imports nothing that sends requests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm.constants import EXECUTOR_ONLINE, EXECUTOR_VLLM_OFFLINE
from llm.endpoints import Endpoint, endpoint_from_overrides
from llm.limits import EndpointLimits, endpoint_limits_default
from llm.models import LLMJob
from llm.prompts import Prompt, prompt_read, prompts_dir_setting
from llm.request import LLMRequest
from llm.sampling import sampling_params
from mining.constants import MINING_STAGE_MAX_TOKENS, MINING_TEMPERATURE
from mining.models import MiningRun
from mining.run_configs import stage_prompt_path
from mining.stage_schemas import PROMPT_PLACEHOLDERS, stage_schema
from mining.stages import LLM_STAGE_CLASSES, PASSED, REJECTED, Draft, LLMStage

GENUINE = (PASSED, REJECTED)  # stage outcomes; everything else is a failed call


@dataclass
class StagePlan:
    """How one LLM stage is asked in this run."""

    stage: LLMStage
    prompt: Prompt
    endpoint: Endpoint
    params: dict[str, Any]
    overrides: dict[str, str]
    mode: str = "chat"  # or "generate": the prompt as a plain completion (a reference config's vLLM mode)
    limits: EndpointLimits | None = None
    executor: str = EXECUTOR_ONLINE  # the stage's own, or the run's
    engine: dict[str, Any] | None = None  # vllm_offline: the options of vllm.LLM(...)

    def request(self, draft: Draft) -> LLMRequest:
        text = self.prompt.render(**self.stage.prompt_values(draft))
        schema = stage_schema(self.stage.name, self.prompt.text)  # the fields this prompt asks for
        engine = (self.engine or None) if self.executor == EXECUTOR_VLLM_OFFLINE else None
        if self.mode == "generate":
            return LLMRequest(
                stage=self.stage.name, messages=[], prompt=text, params=self.params, schema=schema, engine=engine
            )
        return LLMRequest(
            stage=self.stage.name,
            messages=[{"role": "user", "content": text}],
            params=self.params,
            schema=schema,
            engine=engine,
        )


def stage_overrides(spec: dict[str, Any]) -> dict[str, str]:
    return {k: spec[k] for k in ("base_url", "model", "api_key_env") if spec.get(k)}


def stage_endpoint(spec: dict[str, Any]) -> Endpoint:
    """The stage's endpoint; for an in-process vLLM stage the one its LLM jobs resolve (only
    the model is needed), so that the walk and the job key a request alike."""
    if spec.get("executor") == EXECUTOR_VLLM_OFFLINE:
        from llm.job_lifecycle import job_endpoint

        return job_endpoint(
            LLMJob(role=spec["role"], executor=EXECUTOR_VLLM_OFFLINE, endpoint_overrides=stage_overrides(spec))
        )
    return endpoint_from_overrides(spec["role"], stage_overrides(spec))


def stage_executor(run: MiningRun, spec: dict[str, Any]) -> str:
    """A stage's executor: its own (``stages.<stage>.executor``) or the run's."""
    return spec.get("executor") or run.executor


def run_uses_waves(run: MiningRun) -> bool:
    """Whether the run is executed in waves of LLM jobs (any stage not asked online)
    rather than by the threaded walk."""
    return any(stage_executor(run, run.stages[name]) != EXECUTOR_ONLINE for name in LLM_STAGE_CLASSES)


def stage_prompt(stage: str, spec: dict[str, Any]) -> Prompt:
    return prompt_read(
        stage_prompt_path(spec["prompt_file"], prompts_dir_setting()), expected=PROMPT_PLACEHOLDERS[stage], kind=stage
    )


def stage_sampling(stage: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A stage's ``temperature`` and ``max_tokens`` (llm/sampling.py): the configuration's
    ``stages.<stage>.temperature`` / ``max_tokens`` (a reference configuration always gives
    both) over the stage role's ``<PREFIX>_TEMPERATURE`` / ``<PREFIX>_MAX_TOKENS`` (or
    ``LLM_*``) over MINING_TEMPERATURE and the stage's MINING_STAGE_MAX_TOKENS. Resolved
    when the run is created or its stages change, and stored in its stage spec."""
    return sampling_params(
        spec.get("role") or stage,
        explicit={"temperature": spec.get("temperature"), "max_tokens": spec.get("max_tokens")},
        built_in={"temperature": MINING_TEMPERATURE, "max_tokens": MINING_STAGE_MAX_TOKENS[stage]},
    )


def stage_limits(spec: dict[str, Any]) -> EndpointLimits | None:
    """A stage's own requests and tokens per minute (a reference config's rate limits), if any."""
    if spec.get("requests_per_minute") is None and spec.get("tokens_per_minute") is None:
        return None
    default = endpoint_limits_default()
    return EndpointLimits(
        concurrency=default.concurrency,
        requests_per_minute=spec.get("requests_per_minute", default.requests_per_minute),
        tokens_per_minute=spec.get("tokens_per_minute", default.tokens_per_minute),
    )


def stage_plans(run: MiningRun) -> dict[str, StagePlan]:
    plans = {}
    for name, cls in LLM_STAGE_CLASSES.items():
        spec = run.stages[name]
        params = {**(spec.get("params") or {}), **stage_sampling(name, spec)}
        plans[name] = StagePlan(
            stage=cls(),
            prompt=stage_prompt(name, spec),
            endpoint=stage_endpoint(spec),
            params={k: v for k, v in params.items() if v is not None},
            overrides=stage_overrides(spec),
            mode=spec.get("mode") or "chat",
            limits=stage_limits(spec),
            executor=stage_executor(run, spec),
            engine=spec.get("engine") or None,
        )
    return plans
