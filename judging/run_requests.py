"""The requests of generation and judge runs: a model's decoding parameters (App. D.1), a
run's request options, the generation request and the How2Score request (judge runs, the
reward endpoint and distillation data alike)."""

from __future__ import annotations

from typing import Any

from core.app_errors import InvalidInput
from judging.constants import BASE_STOP, GREEDY_TEMPERATURE, JUDGE_MAX_TOKENS, REASONING_TEMPERATURE
from judging.how2score import judge_schema
from judging.models import LanguageModel, PromptStyle
from judging.prompts import JUDGE_SUFFIX, cleaned, generation_values, judge_values
from llm.request import LLMRequest
from llm.sampling import sampling_params
from mining.models import Procedure


def language_model_max_tokens_default() -> int:
    """The ``max_tokens`` a model is registered with when none is given (the field's default,
    1024): a built-in, not a person's choice, so the role's setting wins over it."""
    return LanguageModel._meta.get_field("max_tokens").get_default()


def decoding_params(language_model: LanguageModel, options: dict | None = None) -> dict:
    """How2Everything App. D.1: greedy decoding for non-reasoning endpoints, with the stop
    sequence "\\n\\n" for base models; temperature 0.6 for reasoning endpoints.

    ``temperature`` and ``max_tokens`` (llm/sampling.py): the run's ``options`` over the
    model's ``max_tokens`` (when it is not the field's default) over the model's role's
    ``<PREFIX>_TEMPERATURE`` / ``<PREFIX>_MAX_TOKENS`` (or ``LLM_*``) over these constants."""
    options = options or {}
    registered = language_model.max_tokens
    explicit = {
        "temperature": options.get("temperature"),
        "max_tokens": options.get("max_tokens")
        if options.get("max_tokens") is not None
        else (registered if registered != language_model_max_tokens_default() else None),
    }
    built_in = {
        "temperature": REASONING_TEMPERATURE if language_model.reasoning else GREEDY_TEMPERATURE,
        "max_tokens": language_model_max_tokens_default(),
    }
    params: dict[str, Any] = sampling_params(language_model.role, explicit=explicit, built_in=built_in)
    if not language_model.reasoning and language_model.prompt_style == PromptStyle.BASE:
        params["stop"] = list(BASE_STOP)
    return params


REQUEST_MODES = ("chat", "generate")


def request_options_check(options: dict | None) -> dict:
    """Request options of a generation or judge run (docs/how2bench.md, *Request options*):
    ``temperature``, ``max_tokens``, ``mode`` (``chat``: one user message; ``generate``: the
    prompt as a plain completion), ``params`` (sent with every request: ``top_p``,
    ``reasoning_effort``, ``chat_template_kwargs``, ...; a ``None`` value removes a default
    such as the base models' stop) and ``engine`` (options of the in-process vLLM engine,
    executor ``vllm_offline`` only)."""
    options = dict(options or {})
    unknown = set(options) - {"temperature", "max_tokens", "mode", "params", "engine"}
    if unknown:
        raise InvalidInput(f"unknown request option(s) {', '.join(sorted(map(str, unknown)))}")
    if options.get("mode") is not None and options["mode"] not in REQUEST_MODES:
        raise InvalidInput("mode must be chat or generate (a plain completion)")
    for key in ("params", "engine"):
        if not isinstance(options.get(key) or {}, dict):
            raise InvalidInput(f"{key} must be a mapping")
    return options


def generation_request(
    procedure: Procedure, language_model: LanguageModel, prompt, options: dict | None = None
) -> LLMRequest:
    text = prompt.render(**generation_values(procedure.goal, procedure.steps, procedure.resources))
    options = options or {}
    params = decoding_params(language_model, options)
    params.update(options.get("params") or {})
    mode = options.get("mode") or ("generate" if language_model.prompt_style == PromptStyle.BASE else "chat")
    engine = options.get("engine") or None
    if mode == "generate":
        return LLMRequest(stage="generate", messages=[], prompt=text, params=params, engine=engine)
    return LLMRequest(stage="generate", messages=[{"role": "user", "content": text}], params=params, engine=engine)


def judge_request(
    goal: str,
    reference_steps: list[str],
    steps: list[str],
    prompt,
    *,
    temperature: float | None = None,
    seed: int | None = None,
    options: dict | None = None,
    role: str = "how2score_judge",
) -> LLMRequest:
    """One How2Score request (judge runs, the reward endpoint, distillation data). Its
    ``temperature`` and ``max_tokens``: see :func:`judge_sampling`."""
    # Filled and ended as the reference CLI's judge requests are (judging/prompts.py).
    text = prompt.render(**judge_values(goal, reference_steps, steps)) + JUDGE_SUFFIX
    reference_steps, steps = cleaned(reference_steps), cleaned(steps)  # the lists the judge sees
    options = options or {}
    params: dict[str, Any] = judge_sampling(role, temperature=temperature, options=options)
    if seed is not None:
        params["seed"] = seed
    params.update(options.get("params") or {})
    # Links may only name steps that exist (the schema bounds them; see judge_schema).
    schema = judge_schema(n_l1=len(reference_steps), n_l2=len(steps))
    engine = options.get("engine") or None
    if options.get("mode") == "generate":  # the prompt as a plain completion (vLLM's mode: generate)
        return LLMRequest(
            stage="how2score_judge", messages=[], prompt=text, params=params, schema=schema, engine=engine
        )
    return LLMRequest(
        stage="how2score_judge",
        messages=[{"role": "user", "content": text}],
        params=params,
        schema=schema,
        engine=engine,
    )


def judge_sampling(role: str, *, temperature: float | None, options: dict) -> dict[str, Any]:
    """A judge request's ``temperature`` and ``max_tokens`` (llm/sampling.py): the run's
    (its ``temperature``, ``options.max_tokens``) over the role's ``JUDGE_TEMPERATURE`` /
    ``JUDGE_MAX_TOKENS`` (or ``LLM_*``) over greedy and JUDGE_MAX_TOKENS."""
    return sampling_params(
        role,
        explicit={"temperature": temperature, "max_tokens": options.get("max_tokens") or None},
        built_in={"temperature": GREEDY_TEMPERATURE, "max_tokens": JUDGE_MAX_TOKENS},
    )
