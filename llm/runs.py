"""The one mechanism behind every run's state (LLM jobs, mining, generation, judge,
components, goal-step and CoScript runs).

* What a run learns from its calls as they happen — requests waiting for a retry, and an
  endpoint that fails persistently, which pauses the run with the reason (endpoint, since
  when, last error) — is ``llm/run_watch.py`` (``CircuitBreaker``, ``RunWatch``), below the
  executors that feed it.
* ``run_state``: what a page, the API or a command says about a run — its status, the
  count of requests per outcome (plus pending and retrying), the most frequent errors and
  the breaker's record — read from the ledger, the source of truth.
* ``run_liveness``: whether a worker is at work on a running run — its heartbeat (an LLM
  job's claim renewed about once a second, a mining run's tick) came within a lease,
  ``LLM_JOB_LEASE_SECONDS`` — or the run is ``stalled``: its worker stopped beating (killed,
  its machine lost) and the run may be resumed at once. Stalled is derived, never stored:
  the stored status stays ``running`` (what a worker that was only slow finds when it beats
  again), and ``run_state`` shows ``stalled`` with the time of the last beat, for every
  page, API response and command alike.
* How a run is paused, resumed, cancelled and retried, and how the jobs it owns are driven
  through it, is ``llm/run_lifecycle.py``; the state machine (which action applies in which
  state) is ``llm/run_models.py``.

The statuses themselves are ``llm.run_models.RunStatus``; docs/llm.md ("Run states")
describes them for users."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from llm.constants import EXECUTOR_BATCH, OUTCOME_OK, OUTCOMES
from llm.ledger_totals import ledger_run_totals
from llm.models import LLMJob
from llm.run_models import ACTIVE, FINISHED, RunStatus
from llm.run_watch import ERROR_CHARS
from llm.selectors import ledger_run_outcomes
from llm.shards import llm_job_workers

TOP_ERRORS = 5  # the most frequent error messages shown for a run


# -- a run's worker: at work, or stalled ---------------------------------------------

# The status a run shows (never stores) when it says ``running`` but its worker stopped beating.
STALLED = "stalled"
# Every status a page, the API or a command may show: the stored ones and ``stalled``.
STATUSES_SHOWN = (*RunStatus.values, STALLED)


@dataclass(frozen=True)
class Liveness:
    """What is known of the worker of an active run: ``last_beat`` (None: no worker has
    beaten yet), ``held`` (a worker is at work on it now: a beat within the lease, or a live
    claim; resuming it is refused) and ``stalled`` (it says ``running`` and no worker has
    beaten for a lease: resuming it is allowed at once)."""

    last_beat: datetime | None = None
    held: bool = False
    stalled: bool = False


def run_liveness(
    *,
    status: str,
    last_beat: datetime | None,
    claimed: bool = False,
    silent_seconds: float = 0.0,
    now: datetime | None = None,
    lease_seconds: float | None = None,
) -> Liveness:
    """The one rule: a run whose stored status is ``running`` is ``stalled`` when its last
    beat is older than the lease (``LLM_JOB_LEASE_SECONDS``) plus ``silent_seconds`` (how long
    its worker is silent on purpose: a Batch API job's task comes back after
    ``LLM_BATCH_POLL_SECONDS``) and no claim on it is live (``claimed``). A run that has
    never beaten is not stalled (nothing is known of a worker yet)."""
    now = now or timezone.now()
    lease = settings.LLM_JOB_LEASE_SECONDS if lease_seconds is None else lease_seconds
    fresh = last_beat is not None and now - last_beat <= timedelta(seconds=lease + silent_seconds)
    held = claimed or fresh
    stalled = status == RunStatus.RUNNING and last_beat is not None and not held
    return Liveness(last_beat=last_beat, held=held, stalled=stalled)


def jobs_liveness(
    jobs: Iterable[LLMJob | None],
    *,
    status: str,
    beats: Iterable[datetime | None] = (),
    claimed: Callable[[], bool] | None = None,
) -> Liveness:
    """``run_liveness`` of a run from the LLM jobs it owns (with their shards), in one query:
    the newest beat of any of them (and of ``beats``, the run's own, such as a mining run's
    tick), whether a claim on one is live (or ``claimed()`` says the run's own claims are),
    and whether one is a Batch API job still active (its task is silent between polls).
    Asks nothing of a run that is not active."""
    known: list[datetime] = [beat for beat in beats if beat is not None]
    last: datetime | None = max(known) if known else None
    if status not in ACTIVE:
        return Liveness(last_beat=last)
    ids = [job.pk for job in jobs if job is not None and job.pk is not None]
    batch = False
    held_elsewhere = bool(claimed and claimed())
    if ids:
        now = timezone.now()
        found = LLMJob.objects.filter(models.Q(pk__in=ids) | models.Q(parent_id__in=ids)).aggregate(
            last=models.Max("heartbeat_at"),
            claimed=models.Count("pk", filter=~models.Q(claimed_by="") & models.Q(claim_expires__gt=now)),
            batch=models.Count("pk", filter=models.Q(executor=EXECUTOR_BATCH, status__in=ACTIVE)),
        )
        if found["last"] is not None:
            last = max(last, found["last"]) if last is not None else found["last"]
        held_elsewhere, batch = held_elsewhere or bool(found["claimed"]), bool(found["batch"])
    silent = settings.LLM_BATCH_POLL_SECONDS if batch else 0.0
    return run_liveness(status=status, last_beat=last, claimed=held_elsewhere, silent_seconds=silent)


def stalled_message(last_beat: datetime | None) -> str:
    """What a page says of a stalled run, and what the API's reason adds."""
    when = timezone.localtime(last_beat).strftime("%Y-%m-%d %H:%M:%S %Z") if last_beat else "an unknown time"
    return (
        f"its worker stopped beating (last heartbeat {when}): it was killed or its machine was lost. "
        "Resume puts the run back in the queue; answers already in the ledger are not asked again."
    )


# -- reading a run's state ----------------------------------------------------------


def outcome_counts(keys: Iterable[str], *, run: str, chunk: int = 2000) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """For the request keys of the run labelled ``run``: how many ended in each outcome
    (``pending``: none yet for this run), and the most frequent error messages of those that
    did not end ``ok``. Only what the run asked counts, besides ``ok`` answers it found in
    the ledger (``llm.selectors.ledger_own``): a failure another caller (the reward endpoint,
    another run) wrote under the same key is not this run's."""
    keys = list(keys)
    counts: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    found = ledger_run_outcomes(keys, run=run, chunk=chunk)
    for outcome, error in found.values():
        counts[outcome] += 1
        if outcome != OUTCOME_OK:
            errors[f"{outcome}: {(error or '').strip()[:ERROR_CHARS]}"] += 1
    counts["pending"] = len(set(keys)) - len(found)
    return _ordered(counts), [{"error": e, "n": n} for e, n in errors.most_common(TOP_ERRORS)]


def ledger_run_counts(run_label: str) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The same counts for the ledger entries a run paid for (mining asks as it goes, so
    its requests are found by the run's ledger label rather than a fixed list of keys),
    read from the label's kept totals (llm/ledger_totals.py: a few rows, where a
    100,000-document mining run has 500,000 entries). Errors with equal counts are listed
    the most recently written first."""
    counts: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for total in ledger_run_totals(run_label):  # the most recently counted first
        counts[total.outcome] += total.n
        if total.outcome != OUTCOME_OK:
            errors[f"{total.outcome}: {total.error}"] += total.n
    return _ordered(counts), [{"error": e, "n": n} for e, n in errors.most_common(TOP_ERRORS)]


def _ordered(counts: Counter[str]) -> dict[str, int]:
    result = {outcome: counts.get(outcome, 0) for outcome in OUTCOMES}
    result["pending"] = counts.get("pending", 0)
    return result


def jobs_state(jobs: Iterable[LLMJob | None], *, live: bool = True) -> dict[str, Any]:
    """Outcomes, errors, retrying, breaker and workers (the shards of a job cut into shards,
    each with the worker at work on it) of one or more jobs (a CoScript run owns one per
    phase). ``live``: counted from the ledger now; otherwise from the counts the job stored
    when it last stopped (for long lists of runs)."""
    outcomes: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    retrying = 0
    breaker: dict[str, Any] = {}
    n_total = 0
    workers: list[dict[str, Any]] = []
    for job in jobs:
        if job is None:
            continue
        if live:
            counts, top = outcome_counts(job.keys, run=job.run)
        else:
            stored = dict(job.outcome_counts or {})
            counts = {**stored, "pending": max(0, len(set(job.keys)) - sum(stored.values()))}
            top = []
        outcomes.update(counts)
        errors.update({row["error"]: row["n"] for row in top})
        n_total += len(set(job.keys))
        # A job cut into shards (llm/shards.py): its workers retry and watch the endpoint.
        shards = llm_job_workers(job) if live else []
        workers += shards
        if job.status in (RunStatus.PENDING, RunStatus.RUNNING):
            retrying += job.n_retrying + sum(row["n_retrying"] for row in shards if row["at_work"])
        breaker = (
            job.breaker
            or next((row["breaker"] for row in shards if row["at_work"] and row["breaker"]), None)
            or breaker
        )
    ordered = _ordered(outcomes)
    ordered["retrying"] = min(retrying, ordered["pending"])
    return {
        "outcomes": ordered,
        "top_errors": [{"error": e, "n": n} for e, n in errors.most_common(TOP_ERRORS)],
        "n_total": n_total,
        "breaker": breaker,
        "workers": workers,
    }


def run_state(
    *,
    status: str,
    jobs: Iterable[LLMJob | None] = (),
    reason: str = "",
    live: bool = True,
    counts: tuple[dict[str, int], list[dict[str, Any]]] | None = None,
    retrying: int = 0,
    breaker: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    liveness: Liveness | None = None,
) -> dict[str, Any]:
    """What every page, API response and command shows about a run. ``jobs``: the LLM jobs
    it owns; or ``counts`` (from ``ledger_run_counts``) for a run that asks as it goes.
    ``status`` is the stored one; the state's ``status`` is ``stalled`` instead of ``running``
    when the run's worker stopped beating (``liveness``: read from ``jobs`` when not given)."""
    jobs = list(jobs)
    if liveness is None:
        liveness = jobs_liveness(jobs, status=status)
    state: dict[str, Any]
    if counts is not None:
        outcomes, top = counts
        outcomes = {**outcomes, "retrying": retrying}
        state = {
            "outcomes": outcomes,
            "top_errors": top,
            "n_total": sum(outcomes[o] for o in OUTCOMES) + outcomes["pending"],
            "breaker": breaker or {},
            "workers": [],
        }
    else:
        state = jobs_state(jobs, live=live)
        if breaker:
            state["breaker"] = breaker
    outcomes = state["outcomes"]
    if status == RunStatus.CANCELLED and outcomes.get("pending"):
        # Nothing will ask them any more: they are not pending but left unasked.
        outcomes = state["outcomes"] = {**outcomes, "not_asked": outcomes["pending"], "pending": 0, "retrying": 0}
    n_failed = sum(outcomes[o] for o in OUTCOMES if o != OUTCOME_OK)
    if liveness.stalled:
        reason = f"{reason} — {stalled_message(liveness.last_beat)}" if reason else stalled_message(liveness.last_beat)
    state.update(
        {
            "status": STALLED if liveness.stalled else status,
            "stored_status": status,
            "stalled": liveness.stalled,
            "held": liveness.held,
            "last_heartbeat": liveness.last_beat,
            "can_resume": liveness.stalled or status in (RunStatus.PAUSED, RunStatus.FAILED),
            "reason": reason,
            "n_failed": n_failed,
            "n_ok": outcomes[OUTCOME_OK],
            # (outcome, count) of each failed outcome that occurred, for one-line summaries.
            "failed_by_outcome": [(o, outcomes[o]) for o in OUTCOMES if o != OUTCOME_OK and outcomes[o]],
            "finished": status in FINISHED,
            "has_failures": n_failed > 0,
            "can_retry_failed": status in (*FINISHED, RunStatus.PAUSED, RunStatus.FAILED) and n_failed > 0,
            **(extra or {}),
        }
    )
    return state


# -- driving a run: which action applies in which state ------------------------------


def llm_job_held(job: LLMJob | None) -> bool:
    """Whether a worker is at work on ``job`` or one of its shards now: a live claim, or a
    beat within the lease (the run's own step after its job, ``run_liveness``)."""
    if job is None or job.pk is None:
        return False
    return jobs_liveness([job], status=RunStatus.RUNNING).held


def retried_phrase(n: int) -> str:
    """What a retry did, in the words every page and the API use: the requests without an
    ``ok`` answer (failed, or never answered because the run stopped first) are asked again."""
    return f"{n} request{'s' if n != 1 else ''} without an ok answer will be asked again"


def run_state_json(state: dict[str, Any]) -> dict[str, Any]:
    """The part of a run's state that commands print and the API returns (keys ``status``
    and ``outcomes`` first)."""
    beat = state.get("last_heartbeat")
    return {
        "status": state["status"],
        "outcomes": state["outcomes"],
        "n_failed": state["n_failed"],
        "top_errors": state["top_errors"],
        "reason": state["reason"],
        "breaker": state["breaker"],
        "last_heartbeat": beat.isoformat() if beat else None,
    }


# -- a run that owns LLM jobs: its lifecycle is llm/run_lifecycle.py (imported from here too) --


def owned_run_state(run, *, live: bool = True, **extra: Any) -> dict[str, Any]:
    """The state of a run that owns one LLM job, as every page, API and command shows it."""
    return run_state(status=run.status, jobs=[run.llm_job], reason=run.reason, live=live, extra=extra)
