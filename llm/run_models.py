"""The run every app drives: its statuses (``RunStatus``), the abstract model of its stored
fields (``Run``: how it executes, its status, why it paused, why it failed; ``PromptedRun``
adds the one prompt file it asks with; ``LiveRunState`` what a worker updates while it
works), and its state machine: which of pause, resume, cancel and *Retry failed* applies in
which state (``run_action_refusal``, the refusal text every page, the API and every command
give), and the status each action leads to (``ACTION_STATUS``).

LLM jobs, generation, judge and components runs, goal-step evaluations, CoScript runs and
mining runs all derive from ``Run``; the actions themselves are ``llm/run_lifecycle.py``."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models

from core.app_errors import Conflict
from llm.constants import EXECUTOR_ONLINE


class RunStatus(models.TextChoices):
    """The states of every run (LLM jobs, mining, generation, judge, components, goal-step
    and CoScript runs). A run is ``done`` only when every request it owns has a usable
    outcome; when it finished with some that have none, it is ``done_with_failures``."""

    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    DONE_WITH_FAILURES = "done_with_failures"
    CANCELLED = "cancelled"
    FAILED = "failed"


FINISHED = (RunStatus.DONE, RunStatus.DONE_WITH_FAILURES)
# A run a worker has to take (pending) or is at work on (running).
ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING)
# A run nothing changes any more, not even a worker that dies (its task never marks it failed).
SETTLED = (*FINISHED, RunStatus.CANCELLED)

# The actions on a run, and the names pages, the API and commands give the one that asks
# failed requests again.
RUN_ACTIONS = ("pause", "resume", "cancel", "retry")
RETRY_ACTIONS = ("retry", "retry-failed", "retry-failures")
# The status each action leads to (resume and retry put the run back in the queue).
ACTION_STATUS = {
    "pause": RunStatus.PAUSED,
    "resume": RunStatus.PENDING,
    "cancel": RunStatus.CANCELLED,
    "retry": RunStatus.PENDING,
}
# The pause reason of a run a user paused.
PAUSED_BY_USER = "paused by a user"


class RunStateConflict(Conflict):
    """An action that does not apply in the state of a run or job (pause a finished run,
    resume a cancelled one, ...): 409 with code ``run_state``, for every kind of run."""

    code = "run_state"


def run_action_refusal(action: str, status: str, *, held: bool = False) -> str | None:
    """Why ``action`` (pause, resume, cancel or a retry) does not apply to a run in
    ``status`` (None: it applies), for the pages and the API alike, so that nothing answers
    "requested" for an action that changes nothing. ``held``: a worker holds the run's job
    now (a live lease); resuming a pending or running run is refused then, and allowed
    otherwise (it re-queues a run whose worker was lost)."""
    retry = action in RETRY_ACTIONS
    if status == RunStatus.CANCELLED:
        return "a cancelled run cannot be resumed, paused or retried (start a new run)"
    if action == "pause" and status not in ACTIVE:
        return "only a pending or running run can be paused"
    if action == "cancel" and status in FINISHED:
        return "a finished run has nothing to cancel"
    if retry and status in ACTIVE:
        return "its failures are retried once it has stopped (pause it, or wait until it finishes)"
    if action == "resume" and status in FINISHED:
        return "a finished run cannot be resumed (Retry failed asks its failed requests again)"
    if action == "resume" and status in ACTIVE and held:
        return "a worker is at work on it; there is nothing to resume"
    return None


class Run(models.Model):
    """What every run stores: how it executes (executor, concurrency, budget), its status,
    why it paused (``pause_reason``: a user, its budget, the circuit breaker, requests
    without a usable answer; empty unless it is paused), why it failed (``error``), and
    when it was created and finished. ``reason`` is what a page or the API says of it."""

    executor = models.CharField(max_length=20, default=EXECUTOR_ONLINE)
    concurrency = models.PositiveIntegerField(default=16)
    budget_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.PENDING, db_index=True)
    pause_reason = models.TextField(
        blank=True, help_text="Why the run paused (a user, its budget, the circuit breaker, failed requests)."
    )
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def reason(self) -> str:
        """Why the run stopped: its pause reason while paused, else its error."""
        return self.pause_reason if self.status == RunStatus.PAUSED else self.error

    def action_refusal(self, action: str, *, held: bool = False) -> str | None:
        """``run_action_refusal`` of this run in its status."""
        return run_action_refusal(action, self.status, held=held)

    # A run meant to own one LLM job (``llm_job``); one without it asked nothing of its own.
    owns_one_job: ClassVar[bool] = False

    def owned_jobs(self) -> list[Any]:
        """The LLM jobs the run owns (``llm.models.LLMJob``): pause and cancel act on all of
        them, resume reopens those with work left. A run with an ``llm_job`` owns that one;
        a run owning several (a CoScript run's phases, a mining run's wave) says which."""
        job = getattr(self, "llm_job", None)
        return [job] if job is not None else []


class PromptedRun(Run):
    """A run that asks every request with one prompt file: its path and SHA-256 (generation,
    judge and components runs, goal-step evaluations)."""

    prompt_file = models.CharField(max_length=500)
    prompt_hash = models.CharField(max_length=64)

    owns_one_job: ClassVar[bool] = True

    class Meta:
        abstract = True


class LiveRunState(models.Model):
    """What a run shows while it works: requests waiting for a retry, the circuit breaker's
    record when the endpoint failed persistently, and its worker's last heartbeat
    (llm/runs.py)."""

    n_retrying = models.PositiveIntegerField(default=0, help_text="requests waiting for a retry right now")
    breaker = models.JSONField(
        default=dict, blank=True, help_text="endpoint, since, last_error, reason: why the run paused itself"
    )
    heartbeat_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a worker last said it is at work on it; a running one without a beat for a lease reads "
        "stalled (llm/runs.py, run_liveness)",
    )

    class Meta:
        abstract = True
