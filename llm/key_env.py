"""Which environment variables an LLM endpoint's key may be read from (``api_key_env``).

An endpoint record, a registered model or a run configuration may name the environment
variable that holds its API key. The value of that variable is sent as ``Authorization:
Bearer ...`` to the endpoint's base URL, so a name is a way to send any of the server's
variables to any address: ``api_key_env: SECRET_KEY`` would deliver the key that signs
sessions and encrypts the stored keys. So a name is taken only when

* it matches one of the patterns of ``LLM_API_KEY_ENV_ALLOWED`` (comma-separated shell-style
  patterns, case-sensitive; default ``*_API_KEY``: ``OPENAI_API_KEY``, ``VLLM_API_KEY``,
  ``LLM_API_KEY``, ``JUDGE_API_KEY``, ...), and
* it is not one of the variables the product's own settings read as a secret or a connection
  string (``SECRET_KEY``, ``DATABASE_URL``, the broker, cache and Redis URLs,
  ``PROLIFIC_API_TOKEN``), whatever the patterns say.

The check runs where a name is written (a 400 naming ``api_key_env``) and again where a key
is read (``api_key_from_env``), so a record stored before the rule, or edited in the
database, cannot read a variable the rule refuses."""

from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase

from config.env import env_str
from core.app_errors import InvalidInput

#: The environment variables the settings read as secrets or as addresses with credentials
#: (config/settings/): never an API key's source.
SETTINGS_SECRETS = frozenset(
    {
        "SECRET_KEY",
        "DATABASE_URL",
        "TEST_DATABASE_URL",
        "CELERY_BROKER_URL",
        "CELERY_RESULT_BACKEND",
        "CACHE_URL",
        "LLM_LIMITS_REDIS_URL",
        "PROLIFIC_API_TOKEN",
    }
)
DEFAULT_ALLOWED = "*_API_KEY"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def allowed_patterns(setting: str | None = None) -> list[str]:
    """The patterns of ``LLM_API_KEY_ENV_ALLOWED`` (read now, as the key itself is; or of
    ``setting``), blanks dropped."""
    if setting is None:
        setting = env_str("LLM_API_KEY_ENV_ALLOWED", DEFAULT_ALLOWED)
    return [p.strip() for p in (setting or "").split(",") if p.strip()]


def api_key_env_problem(name: str, patterns: list[str] | None = None) -> str | None:
    """Why ``name`` cannot be an API key's variable, or None when it can ("" always can:
    no variable)."""
    if not name:
        return None
    if not _NAME.match(name):
        return "must be an environment variable name: letters, digits and _, not starting with a digit"
    if name in SETTINGS_SECRETS:
        return f"{name} holds one of the server's own secrets and is never sent to an endpoint"
    patterns = allowed_patterns() if patterns is None else patterns
    if not any(fnmatchcase(name, pattern) for pattern in patterns):
        listed = ", ".join(patterns) or "(none)"
        return (
            f"{name} is not a variable an API key may be read from: allowed are names matching {listed} "
            "(LLM_API_KEY_ENV_ALLOWED)"
        )
    return None


def api_key_from_env(name: str, *, field: str = "api_key_env") -> str:
    """The key held by the environment variable ``name`` ("" when it is unset), refusing a
    name the rule does not allow (``InvalidInput`` naming ``field``)."""
    problem = api_key_env_problem(name)
    if problem is not None:
        raise InvalidInput(fields={field: problem})
    return os.environ.get(name, "")


def api_key_env_check(name: str, *, field: str = "api_key_env") -> None:
    """Refuse a name the rule does not allow (``InvalidInput`` naming ``field``): for the
    services that store one."""
    problem = api_key_env_problem(name)
    if problem is not None:
        raise InvalidInput(f"{field} {problem}", {field: problem})
