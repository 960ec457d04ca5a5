"""The reward endpoint for RL trainers (POST /api/reward, docs/how2bench.md "Rewards for RL").

* ``REWARD_MAX_BATCH`` (256): completions one request may carry; a larger batch is a 400
  that names the limit (split it, or raise the setting).
* ``REWARD_CONCURRENCY`` (64): judge requests of one batch in flight at once. The judge
  endpoint's own limits (``LLM_MAX_CONCURRENCY``, requests and tokens per minute; shared by
  every process when they live in Redis, docs/llm.md) bound all callers together.
* ``REWARD_DEADLINE_SECONDS`` (300): how long one request may wait for the judge, and the
  most a caller may ask for (``?deadline_seconds=``, shorter only). The items the judge has
  not answered by then are ``failed`` with reason ``deadline``, and the response comes by
  then (plus a margin of about 2 s). Keep it below the trainer's own request timeout and
  that of any proxy in front of the server.
* ``REWARD_ENDPOINT_CACHE_SECONDS`` (2): how long a web process reuses the judge endpoint it
  resolved (the role's record or variables: two queries a call otherwise). A record or role
  assignment saved through the product is seen at once by the process that saved it, and by
  the others within this many seconds; 0 resolves it on every call."""

from __future__ import annotations

from config.env import ImproperlyConfiguredEnv, env_int, env_positive_int


def _not_negative(name: str, default: int) -> int:
    value = env_int(name, default)
    if value < 0:
        raise ImproperlyConfiguredEnv(f"{name}={value} must be 0 or more")
    return value


def reward_settings() -> dict:
    return {
        "REWARD_MAX_BATCH": env_positive_int("REWARD_MAX_BATCH", 256),
        "REWARD_CONCURRENCY": env_positive_int("REWARD_CONCURRENCY", 64),
        "REWARD_DEADLINE_SECONDS": env_positive_int("REWARD_DEADLINE_SECONDS", 300),
        "REWARD_ENDPOINT_CACHE_SECONDS": _not_negative("REWARD_ENDPOINT_CACHE_SECONDS", 2),
    }
