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
* ``job_owner_register``: a run that owns LLM jobs registers how they are paused,
  resumed, cancelled and retried, so a job is only ever driven through its run (the LLM
  pages and API call the owner, ``llm_job_control``).

The statuses themselves are ``llm.models.RunStatus``; docs/llm.md ("Run states")
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

from core.app_errors import InvalidInput
from llm.constants import EXECUTOR_BATCH, OUTCOME_OK, OUTCOMES
from llm.job_lifecycle import (
    CLAIMED,
    RunStateConflict,
    llm_job_cancel,
    llm_job_failed_count,
    llm_job_pause,
    llm_job_recount,
)
from llm.models import FINISHED, LedgerEntry, LLMJob, RunStatus
from llm.run_watch import ERROR_CHARS
from llm.selectors import ledger_run_outcomes
from llm.services import llm_job_create, llm_job_execute, llm_job_resume, llm_job_retry_failed
from llm.shards import llm_job_shard, llm_job_workers

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
    its requests are found by the run's ledger label rather than a fixed list of keys)."""
    # Counted in the database, one group per outcome and error (a 100,000-document mining run
    # has 500,000 entries, nearly all in the one group of ok answers without an error).
    counts: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for outcome, error, n, _last in (  # the latest first, as ties are listed
        LedgerEntry.objects.filter(run=run_label)
        .values_list("outcome", "error")
        .annotate(n=models.Count("id"), last=models.Max("id"))
        .order_by("-last")
    ):
        counts[outcome] += n
        if outcome != OUTCOME_OK:
            errors[f"{outcome}: {(error or '').strip()[:ERROR_CHARS]}"] += n
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

ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING)
# The names pages, the API and commands give the action that asks failed requests again.
RETRY_ACTIONS = ("retry", "retry-failed", "retry-failures")


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


# -- who owns a job -------------------------------------------------------------------


@dataclass(frozen=True)
class JobOwner:
    """How the run that owns a job (its ``run`` label starts with ``prefix``) pauses,
    resumes, cancels it and retries its failed requests: through the run, so the run's own
    step (storing judgments, moving to the next phase) is never skipped and the run's state
    never parts from its job's (a cancelled job under a paused run could never resume)."""

    prefix: str
    resume: Callable[[LLMJob], Any]
    retry_failed: Callable[[LLMJob], int]
    describe: Callable[[LLMJob], str]
    pause: Callable[[LLMJob], Any]
    cancel: Callable[[LLMJob], Any]


_OWNERS: list[JobOwner] = []


def job_owner(
    prefix: str,
    model: type[models.Model],
    *,
    resume: Callable[[Any], Any],
    retry_failed: Callable[[Any], int],
    pause: Callable[[Any], Any],
    cancel: Callable[[Any], Any],
    noun: str,
) -> JobOwner:
    """An owner whose jobs are labelled ``<prefix><run id>[:...]``, runs of ``model``; each
    callable takes the run."""

    def run_of(job: LLMJob):
        return model._default_manager.get(pk=int(job.run[len(prefix) :].split(":")[0]))

    return JobOwner(
        prefix=prefix,
        resume=lambda job: resume(run_of(job)),
        retry_failed=lambda job: retry_failed(run_of(job)),
        describe=lambda job: f"{noun} {run_of(job)}",
        pause=lambda job: pause(run_of(job)),
        cancel=lambda job: cancel(run_of(job)),
    )


def job_owner_register(owner: JobOwner) -> None:
    """Called from an app's ``AppConfig.ready``; registering a prefix twice keeps the last."""
    _OWNERS[:] = [o for o in _OWNERS if o.prefix != owner.prefix] + [owner]


def job_owner_for(job: LLMJob) -> JobOwner | None:
    for owner in _OWNERS:
        if job.run.startswith(owner.prefix):
            return owner
    return None


def llm_job_control(*, job: LLMJob, action: str) -> int:
    """Pause, resume, cancel or *Retry failed* one LLM job (``action``: pause, resume,
    cancel, retry). A job owned by a run is driven through its run for every action, so the
    run's own step is never skipped and the run's state follows. Returns how many requests
    a retry re-asks."""
    owner = job_owner_for(job)
    if action == "pause":
        owner.pause(job) if owner else llm_job_pause(job=job)
    elif action == "cancel":
        owner.cancel(job) if owner else llm_job_cancel(job=job)
    elif action == "resume":
        owner.resume(job) if owner else llm_job_resume(job=job)
    elif action == "retry":
        return owner.retry_failed(job) if owner else llm_job_retry_failed(job=job, enqueue=True)
    else:
        raise InvalidInput(fields={"action": f"unknown action {action!r}: pause, resume, cancel or retry"})
    return 0


# -- runs that own one LLM job (generation, judge, components, goal-step evaluations) ----


def _update(run, **fields: Any) -> None:
    type(run).objects.filter(pk=run.pk).update(**fields)
    for name, value in fields.items():
        setattr(run, name, value)


def owned_run_job_attach(
    run,
    *,
    label: str,
    role: str,
    requests: list,
    executor: str,
    concurrency: int,
    budget_usd=None,
    endpoint_overrides: dict[str, str] | None = None,
) -> None:
    """Give a new run its LLM job over ``requests`` (named ``label:<run id>``, not started), cut
    into shards that any number of workers share, and store it on the run."""
    run.llm_job = llm_job_create(
        run=f"{label}:{run.pk}",
        role=role,
        requests=requests,
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
        endpoint_overrides=endpoint_overrides,
        start=False,
    )
    llm_job_shard(run.llm_job)
    run.save(update_fields=["llm_job"])


def owned_run_execute(run, *, collect: Callable[[Any], Any], unusable: Callable[[Any], int] | None = None) -> str:
    """Execute a run's LLM job, store what it answered (``collect``, idempotent), and give
    the run the state that is true: ``done`` only when every request has an ``ok`` answer
    and nothing stored is unusable (``unusable`` counts the run's stored items without a
    usable outcome, such as judge answers that failed validation); ``done_with_failures``
    otherwise; paused (with the job's reason, e.g. the breaker's), cancelled or failed as
    the job is. Returns what happened, for the task log."""
    if run.status in (*FINISHED, RunStatus.CANCELLED):
        return f"not active ({run.status})"
    # The job without its requests (a judge run's are ~14 kB each, thousands of them): this
    # task only needs its state and keys; the executor reads each shard's own requests.
    job = run.llm_job = LLMJob.objects.defer("requests").get(pk=run.llm_job_id)
    _update(run, status=RunStatus.RUNNING)
    outcome = None
    try:
        outcome = "done" if job.status in FINISHED else llm_job_execute(job_id=job.pk)
    finally:  # what finished so far is stored even when the job paused or failed
        job.refresh_from_db()
        if outcome != CLAIMED:  # (while other workers hold shards, the last one to stop stores)
            collect(run)
    if job.status in FINISHED:
        llm_job_recount(job)  # collect may have refused an ok answer (ledger_entry_reject)
        failed = job.status == RunStatus.DONE_WITH_FAILURES or bool(unusable and unusable(run))
        _update(
            run, status=RunStatus.DONE_WITH_FAILURES if failed else RunStatus.DONE, error="", finished_at=timezone.now()
        )
    elif job.status == RunStatus.PAUSED:
        _update(run, status=RunStatus.PAUSED, error=job.pause_reason)
    elif job.status in (RunStatus.CANCELLED, RunStatus.FAILED):
        _update(run, status=job.status, error=job.error)
    return outcome


def _owned_job(run, action: str) -> LLMJob:
    """The run's LLM job; a run without one (outputs filed from elsewhere, such as the demo's
    runs of the paper's examples) asked nothing, so there is nothing to ``action`` (409)."""
    if run.llm_job is None:
        raise RunStateConflict(
            f"{run} asked no requests of its own (its outputs were filed, not generated here): there is "
            f"nothing to {action}"
        )
    job: LLMJob = run.llm_job
    return job


def owned_run_pause(run) -> None:
    llm_job_pause(job=_owned_job(run, "pause"))
    type(run).objects.filter(pk=run.pk, status__in=[RunStatus.PENDING, RunStatus.RUNNING]).update(
        status=RunStatus.PAUSED, error="paused by a user"
    )


def owned_run_resume(run, *, enqueue: Callable[[], None], budget_usd=None) -> None:
    """Continue a paused, failed or interrupted run: every request without an ``ok``
    answer is asked again, then the run stores the answers (never the job alone)."""
    refusal = run_action_refusal("resume", run.status)
    if refusal is not None:
        raise RunStateConflict(f"{run} is {run.status}; {refusal}")
    job = _owned_job(run, "resume")
    job.refresh_from_db(fields=["status"])
    if not (job.status == RunStatus.DONE and not llm_job_failed_count(job)):
        llm_job_resume(job=job, budget_usd=budget_usd, enqueue=False)
    # (A job done with every answer ok, whose worker died storing them: the run's task stores them.)
    _update(run, status=RunStatus.PENDING, error="", finished_at=None)
    enqueue()


def owned_run_cancel(run) -> None:
    llm_job_cancel(job=_owned_job(run, "cancel"))
    type(run).objects.filter(pk=run.pk).exclude(status__in=FINISHED).update(status=RunStatus.CANCELLED)


def owned_run_retry_failed(
    run, *, enqueue: Callable[[], None], discard_unusable: Callable[[Any], int] | None = None
) -> int:
    """*Retry failed*: ask exactly the run's requests without an ``ok`` answer again, and
    store their new answers in place of the unusable ones. Returns how many are re-asked."""
    refusal = run_action_refusal("retry", run.status)
    if refusal is not None:
        raise RunStateConflict(f"{run} is {run.status}; {refusal}")
    job = _owned_job(run, "retry")
    failed = llm_job_failed_count(job)
    if discard_unusable is not None:
        discard_unusable(run)
    if not failed and run.status == RunStatus.DONE:
        return 0
    if job.status != RunStatus.DONE or failed:
        llm_job_resume(job=job, enqueue=False)
    _update(run, status=RunStatus.PENDING, error="", finished_at=None)
    enqueue()
    return failed


def owned_run_state(run, *, live: bool = True, **extra: Any) -> dict[str, Any]:
    """The state of a run that owns one LLM job, as every page, API and command shows it."""
    return run_state(status=run.status, jobs=[run.llm_job], reason=run.error, live=live, extra=extra)
