"""LLM endpoints: one default endpoint, overridable per role, plus retry, limit and price settings.

``LLM_BASE_URL``, ``LLM_API_KEY`` and ``LLM_MODEL`` set the default for every role;
``<ROLE>_BASE_URL``, ``<ROLE>_API_KEY``, ``<ROLE>_MODEL``, ``<ROLE>_TEMPERATURE`` and
``<ROLE>_MAX_TOKENS`` (for example ``JUDGE_MODEL``) override it for one role. Nothing is
configured until the user points at an endpoint: an empty base URL means "no LLM".
Endpoint records assigned to a role on the LLM pages win over these variables, which also
seed the first records (llm/endpoints.py, docs/llm.md)."""

from typing import Any

from config.env import BASE_DIR, env_float, env_int, env_list, env_str

# Roles and the environment prefix of their overrides. Each How2Mine stage, the
# generation stage and the How2Score judge resolve to one of these.
LLM_ROLE_PREFIXES = {
    "extract_procedure": "EXTRACT",
    "llm_filter": "FILTER",
    "rewrite": "REWRITE",
    "extract_resources": "RESOURCES",
    "final_validation": "VALIDATION",
    "generate": "GENERATE",
    "how2score_judge": "JUDGE",
    "extract_components": "COMPONENTS",
}


def _optional_float(name: str) -> float | None:
    value = env_str(name, "")
    return float(value) if value else None


def _optional_int(name: str) -> int | None:
    value = env_str(name, "")
    return int(value) if value else None


def llm_settings() -> dict:
    default = _default_endpoint()
    return {
        "LLM_DEFAULT_ENDPOINT": default,
        "LLM_ROLES": {role: _role_endpoint(prefix, default) for role, prefix in LLM_ROLE_PREFIXES.items()},
        "LLM_ROLE_PREFIXES": dict(LLM_ROLE_PREFIXES),
        **_request_settings(),
        **_run_settings(),
    }


def _default_endpoint() -> dict[str, Any]:
    """The endpoint of every role without overrides (``LLM_*``)."""
    return {
        "base_url": env_str("LLM_BASE_URL", "") or "",
        "api_key": env_str("LLM_API_KEY", "") or "",
        "model": env_str("LLM_MODEL", "") or "",
        "temperature": _optional_float("LLM_TEMPERATURE"),
        "max_tokens": _optional_int("LLM_MAX_TOKENS"),
        # What the endpoint cannot tell: its context in tokens (vLLM's /models says it; other
        # servers only in their errors), a per-request timeout, and a hybrid reasoning model
        # to be run non-thinking (docs/llm.md, "What the product learns of an endpoint").
        "context_length": _optional_int("LLM_CONTEXT_LENGTH"),
        "timeout_seconds": _optional_float("LLM_REQUEST_TIMEOUT_SECONDS"),
        "disable_thinking": env_str("LLM_DISABLE_THINKING", "") in ("1", "true", "yes"),
    }


def _role_endpoint(prefix: str, default: dict[str, Any]) -> dict[str, Any]:
    """One role's endpoint: ``<PREFIX>_*`` where set, else the default's."""
    return {
        "base_url": env_str(f"{prefix}_BASE_URL", default["base_url"]) or "",
        "api_key": env_str(f"{prefix}_API_KEY", default["api_key"]) or "",
        "model": env_str(f"{prefix}_MODEL", default["model"]) or "",
        "temperature": _optional_float(f"{prefix}_TEMPERATURE")
        if env_str(f"{prefix}_TEMPERATURE")
        else default["temperature"],
        "max_tokens": _optional_int(f"{prefix}_MAX_TOKENS")
        if env_str(f"{prefix}_MAX_TOKENS")
        else default["max_tokens"],
        "context_length": _optional_int(f"{prefix}_CONTEXT_LENGTH")
        if env_str(f"{prefix}_CONTEXT_LENGTH")
        else default["context_length"],
        "timeout_seconds": _optional_float(f"{prefix}_REQUEST_TIMEOUT_SECONDS")
        if env_str(f"{prefix}_REQUEST_TIMEOUT_SECONDS")
        else default["timeout_seconds"],
        "disable_thinking": env_str(f"{prefix}_DISABLE_THINKING", "") in ("1", "true", "yes")
        if env_str(f"{prefix}_DISABLE_THINKING")
        else default["disable_thinking"],
    }


def _request_settings() -> dict[str, Any]:
    """One request's timeouts, its fitting to the context, and its retries."""
    return {
        # How long the Test button of an endpoint record waits for the answer.
        "LLM_ENDPOINT_TEST_TIMEOUT_SECONDS": env_float("LLM_ENDPOINT_TEST_TIMEOUT_SECONDS", 20.0),
        "LLM_TIMEOUT_SECONDS": env_float("LLM_TIMEOUT_SECONDS", 120.0),
        # A slow endpoint's timeout grows (twice after each timeout, and with its observed
        # seconds per token) up to this many seconds (llm/capabilities.py).
        "LLM_TIMEOUT_MAX_SECONDS": env_float("LLM_TIMEOUT_MAX_SECONDS", 3600.0),
        # What is learned of an endpoint (structured-output support, context length, token
        # ratio, speed: llm/capabilities.py) is kept this long, then learned again.
        "LLM_CAPABILITY_TTL_SECONDS": env_int("LLM_CAPABILITY_TTL_SECONDS", 24 * 3600),
        # Tokens kept free of a request's budget beside the prompt (the estimate's error).
        "LLM_CONTEXT_MARGIN_TOKENS": env_int("LLM_CONTEXT_MARGIN_TOKENS", 64),
        # A prompt that leaves fewer tokens than this for the answer is too_long, not sent.
        "LLM_MIN_ANSWER_TOKENS": env_int("LLM_MIN_ANSWER_TOKENS", 16),
        # Retries: attempts for 429/5xx/connection errors, re-asks after an unparseable
        # answer, retries with a larger budget after a truncated one.
        "LLM_MAX_ATTEMPTS": env_int("LLM_MAX_ATTEMPTS", 6),
        "LLM_PARSE_REASKS": env_int("LLM_PARSE_REASKS", 2),
        "LLM_TRUNCATION_RETRIES": env_int("LLM_TRUNCATION_RETRIES", 1),
        "LLM_TRUNCATION_TOKEN_FACTOR": env_float("LLM_TRUNCATION_TOKEN_FACTOR", 2.0),
        "LLM_DEFAULT_MAX_TOKENS": env_int("LLM_DEFAULT_MAX_TOKENS", 4096),
        "LLM_BACKOFF_BASE_SECONDS": env_float("LLM_BACKOFF_BASE_SECONDS", 1.0),
        "LLM_BACKOFF_MAX_SECONDS": env_float("LLM_BACKOFF_MAX_SECONDS", 60.0),
        # A retry-after (or retry-after-ms) header is obeyed up to this many seconds; a
        # larger, negative or unreadable value cannot stall an endpoint for hours.
        "LLM_RETRY_AFTER_MAX_SECONDS": env_float("LLM_RETRY_AFTER_MAX_SECONDS", 60.0),
    }


def _run_settings() -> dict[str, Any]:
    """A run's circuit breaker, claims and shards, the limits per endpoint, prices, the Batch
    API, and where requests may go."""
    return {
        # The circuit breaker: a run pauses itself (and says why) after this many failed
        # attempts in a row at its endpoint, or when more than LLM_BREAKER_WINDOW_FAILURES
        # of the last LLM_BREAKER_WINDOW attempts failed (docs/llm.md, "Run states").
        "LLM_BREAKER_CONSECUTIVE": env_int("LLM_BREAKER_CONSECUTIVE", 20),
        "LLM_BREAKER_WINDOW": env_int("LLM_BREAKER_WINDOW", 50),
        "LLM_BREAKER_WINDOW_FAILURES": env_float("LLM_BREAKER_WINDOW_FAILURES", 0.5),
        # A job is executed by one task at a time: the task holds a claim renewed every few
        # seconds; a claim not renewed for this long (a killed worker) can be taken over.
        "LLM_JOB_LEASE_SECONDS": env_float("LLM_JOB_LEASE_SECONDS", 60.0),
        # A generation, judge, components run or goal-step evaluation with more requests than
        # this is cut into shards of this many, which any number of workers claim (llm/shards.py).
        # Each shard's start and drain cost its worker part of its capacity: a 7,000-request
        # judge run with 2 workers ran its shards at 0.85 of C / L with 500, 0.89 with 1,000 and
        # 0.90 with 1,750 (docs/benchmarks.md); 1,000 still gives 7 workers a shard each.
        "LLM_SHARD_REQUESTS": env_int("LLM_SHARD_REQUESTS", 1000),
        # Limits per endpoint (base URL + model), shared by every worker process when
        # LLM_LIMITS_REDIS_URL (default: the broker URL, if it is Redis) is set.
        "LLM_MAX_CONCURRENCY": env_int("LLM_MAX_CONCURRENCY", 16),
        "LLM_REQUESTS_PER_MINUTE": env_int("LLM_REQUESTS_PER_MINUTE", 0),
        "LLM_TOKENS_PER_MINUTE": env_int("LLM_TOKENS_PER_MINUTE", 0),
        "LLM_LIMITS_REDIS_URL": env_str("LLM_LIMITS_REDIS_URL", "") or "",
        "LLM_PRICES_FILE": env_str("LLM_PRICES_FILE", str(BASE_DIR / "config" / "llm_prices.json")),
        "LLM_BATCH_POLL_SECONDS": env_float("LLM_BATCH_POLL_SECONDS", 60.0),
        "LLM_BATCH_MAX_RESUBMITS": env_int("LLM_BATCH_MAX_RESUBMITS", 2),
        # Hosts (or host:port) on loopback or private networks that LLM requests may go to;
        # every other such address is refused (llm/outbound.py). A local vLLM: 127.0.0.1:8000.
        "OUTBOUND_ALLOWED_HOSTS": env_list("OUTBOUND_ALLOWED_HOSTS", []),
    }


def judging_settings() -> dict:
    return {
        # One folder of prompt files for every stage, mining and bench alike: a bare prompt
        # name is looked for here first, under the product's name or the reference CLI's
        # (extract_procedures.txt, filter.txt, ..., judge.txt); empty: the bundled prompts.
        "PROMPTS_DIR": env_str("PROMPTS_DIR", "") or "",
        # Where bare prompt file names (generate_inst.txt, how2score_judge.txt, ...) are found.
        "JUDGING_PROMPTS_DIR": env_str("JUDGING_PROMPTS_DIR", str(BASE_DIR / "judging" / "prompts")),
    }


def mining_settings() -> dict:
    return {
        # Sentence-embedding model of the train/bench dedup: empty for the bundled
        # all-MiniLM-L6-v2, or a local folder (e.g. a downloaded Qwen3-Embedding-0.6B).
        "EMBEDDING_MODEL": env_str("EMBEDDING_MODEL", "") or "",
    }
