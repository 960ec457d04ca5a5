"""What a command says when a run it executed in its own process (``--wait``) has stopped.

The run's status is the one the database holds, read through the run's state selector
(llm/runs.py ``run_state``: ``owned_run_state``, ``mining_run_state``, ``coscript_run_state``,
``task_evaluation_state``), never what the executor returned; the line gives its requests
without an ``ok`` answer by outcome and, when it stopped short, why. A command that waited
for runs exits non-zero (``CommandError``, as every refusal of the commands does) unless each
of them ended ``done`` (docs/commands.md, "Waiting for a run")."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.management.base import CommandError

from llm.run_models import RunStatus


def run_finished_line(state: dict[str, Any], *, name: str = "") -> str:
    """``finished: <status>`` (``<name> finished: …`` for one of several runs), then the
    failed requests by outcome, what is left pending or unasked, and the reason, e.g.
    ``finished: done_with_failures; 6 of 40 requests failed (api_error 3, parse_failed 2,
    truncated 1)``."""
    parts = [f"{name} finished: {state['status']}" if name else f"finished: {state['status']}"]
    if state["n_failed"]:
        by_outcome = ", ".join(f"{outcome} {n}" for outcome, n in state["failed_by_outcome"])
        parts.append(f"{state['n_failed']} of {state['n_total']} requests failed ({by_outcome})")
    if state.get("n_failed_documents"):  # a mining run's documents without a usable outcome
        parts.append(f"{state['n_failed_documents']} documents failed")
    outcomes = state["outcomes"]
    for left in ("pending", "not_asked"):
        if outcomes.get(left):
            parts.append(f"{outcomes[left]} {left.replace('_', ' ')}")
    if state["status"] != RunStatus.DONE and state["reason"]:
        parts.append(f"reason: {state['reason']}")
    return "; ".join(parts)


def runs_done_check(finished: Iterable[tuple[str, dict[str, Any]]]) -> None:
    """Raise ``CommandError`` (exit status 1) naming each run, given as (what it is, its
    state), that did not end ``done``."""
    short = [
        f"{what} ended {state['status']}, not done" + (f" ({state['reason']})" if state["reason"] else "")
        for what, state in finished
        if state["status"] != RunStatus.DONE
    ]
    if short:
        raise CommandError("; ".join(short))
