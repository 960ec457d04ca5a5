"""Seeding for `load_demo` (and `serve`, which runs it): the environment's LLM endpoints
become the first endpoint records, each created once (llm/endpoint_services.py)."""

from __future__ import annotations


def load() -> str:
    from llm.endpoint_services import endpoint_records_seed_from_env

    created = endpoint_records_seed_from_env()
    if not created:
        return "no new endpoint records (none configured in the environment, or seeded before)"
    return f"{len(created)} endpoint record(s) seeded from the environment: " + ", ".join(r.name for r in created)
