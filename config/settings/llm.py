"""LLM endpoints: one default endpoint, overridable per role.

``LLM_BASE_URL``, ``LLM_API_KEY`` and ``LLM_MODEL`` set the default for every role;
``<ROLE>_BASE_URL``, ``<ROLE>_API_KEY`` and ``<ROLE>_MODEL`` (for example
``JUDGE_MODEL``) override it for one role. Nothing is configured until the user
points at an endpoint: an empty base URL means "no LLM configured".
"""
from config.env import env_float, env_int, env_str

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
}


def llm_settings() -> dict:
    default = {
        "base_url": env_str("LLM_BASE_URL", "") or "",
        "api_key": env_str("LLM_API_KEY", "") or "",
        "model": env_str("LLM_MODEL", "") or "",
    }
    roles = {}
    for role, prefix in LLM_ROLE_PREFIXES.items():
        roles[role] = {
            "base_url": env_str(f"{prefix}_BASE_URL", default["base_url"]) or "",
            "api_key": env_str(f"{prefix}_API_KEY", default["api_key"]) or "",
            "model": env_str(f"{prefix}_MODEL", default["model"]) or "",
        }
    return {
        "LLM_DEFAULT_ENDPOINT": default,
        "LLM_ROLES": roles,
        "LLM_TIMEOUT_SECONDS": env_float("LLM_TIMEOUT_SECONDS", 120.0),
        "LLM_MAX_CONCURRENCY": env_int("LLM_MAX_CONCURRENCY", 16),
    }
