"""The state of an LLM job as it goes through its life: its endpoint and client, the claim
a task holds on it (and the heartbeat that renews it), its counts from the ledger, how it
finishes, and pause, cancel and reopening (for a resume) of the job with its shards.

Executors (llm/executors.py, llm/batch.py, llm/vllm_offline.py), shards (llm/shards.py)
and the services that create and execute jobs (llm/services.py) all use these; this module
imports none of them, so the executors never import the services that choose them."""

from __future__ import annotations

import os
import socket
from collections import Counter
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import Count, F, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from llm.constants import EXECUTOR_VLLM_OFFLINE, OUTCOME_OK
from llm.endpoints import Endpoint, EndpointNotConfigured, endpoint_from_overrides, endpoint_from_record, endpoint_get
from llm.models import BatchJob, LedgerEntry, LLMJob
from llm.run_models import ACTIVE, FINISHED, PAUSED_BY_USER, RunStateConflict
from llm.selectors import ledger_own, ledger_replaced_own

if TYPE_CHECKING:
    from llm.client import LLMClient

# What a task finds when another task holds the job: it comes back after a lease, when a
# killed holder's claim has run out (and finds the job finished if the holder was alive).
CLAIMED = "waiting: claimed by another worker"


def poll_countdown(outcome: str) -> float | None:
    """Seconds after which a run's task should come back, or None when it is finished:
    a Batch API job still running, or a job another task holds."""
    if outcome == CLAIMED:
        return settings.LLM_JOB_LEASE_SECONDS
    if outcome.startswith("waiting"):
        return settings.LLM_BATCH_POLL_SECONDS
    return None


# -- endpoint and client ------------------------------------------------------------


def job_endpoint(job: LLMJob) -> Endpoint:
    """The job's endpoint. A job created with an endpoint record keeps it (its ledger keys
    name that endpoint), even after the role was reassigned or the record retired."""
    record = job.endpoint_record if job.endpoint_record_id else None
    if job.executor == EXECUTOR_VLLM_OFFLINE:  # a local engine: only the model matters
        overrides = job.endpoint_overrides or {}
        if record is not None:
            endpoint = endpoint_from_record(
                job.role, record, base_url=overrides.get("base_url"), model=overrides.get("model")
            )
        else:
            endpoint = endpoint_get(job.role, base_url=overrides.get("base_url"), model=overrides.get("model"))
        if not endpoint.model:
            raise EndpointNotConfigured(f"no model for role {job.role!r}: set LLM_MODEL or the role's *_MODEL variable")
        return endpoint
    return endpoint_from_overrides(job.role, job.endpoint_overrides, record=record)


def llm_client_for(job: LLMJob) -> LLMClient:
    # Imported here: the client brings the openai SDK (half a second), and every process
    # reaches this module at start through the apps' run registrations (issue 29).
    from llm.client import LLMClient

    return LLMClient(job_endpoint(job), executor=job.executor)


# -- counts and the end of a job ----------------------------------------------------


def llm_job_refresh_counts(job: LLMJob) -> dict[str, Any]:
    """Recount finished requests from the ledger (the source of truth), in one statement (and
    one more that usually finds nothing): what the job's run asked, besides the ``ok`` answers
    it found there (``llm.selectors.ledger_own``; another caller's failure is not the run's)."""
    counts: Counter[str] = Counter()
    cost = Decimal(0)
    rows = (
        LedgerEntry.objects.filter(ledger_own(job.run), key__in=job.keys)
        .values("outcome")
        .annotate(n=Count("pk"), cost=Sum("cost_usd", filter=Q(run=job.run)))
        .order_by()
    )
    for row in rows:
        counts[row["outcome"]] += row["n"]
        cost += row["cost"] or Decimal(0)
    counts.update(outcome for outcome, _error in ledger_replaced_own(list(job.keys), run=job.run).values())
    fields = {"outcome_counts": dict(counts), "n_done": sum(counts.values()), "cost_usd": cost}
    LLMJob.objects.filter(pk=job.pk).update(**fields)
    for name, value in fields.items():
        setattr(job, name, value)
    return fields


def llm_job_failed_count(job: LLMJob) -> int:
    """How many of the job's requests have no ``ok`` answer (what *Retry failed* re-asks)."""
    keys = set(job.keys)
    ok = LedgerEntry.objects.filter(key__in=keys, outcome=OUTCOME_OK).count()
    return len(keys) - ok


def _failed_of(job: LLMJob, counts: dict[str, Any]) -> int:
    """``llm_job_failed_count`` from counts just taken (the ledger holds one entry per key)."""
    return len(set(job.keys)) - counts["outcome_counts"].get(OUTCOME_OK, 0)


def llm_job_finish(job: LLMJob, *, counted: bool = False) -> None:
    """The executor asked everything: ``done`` when every request has an ``ok`` answer,
    otherwise ``done_with_failures`` (the counts per outcome say what failed). ``counted``:
    the job's counts are already exact (a sharded job's, each shard recounted from the ledger
    at its end), so they are not taken again."""
    counts = (
        {"outcome_counts": job.outcome_counts or {}, "n_done": job.n_done, "cost_usd": job.cost_usd}
        if counted
        else llm_job_refresh_counts(job)
    )
    status = LLMJob.Status.DONE if _failed_of(job, counts) == 0 else LLMJob.Status.DONE_WITH_FAILURES
    LLMJob.objects.filter(pk=job.pk, status=LLMJob.Status.RUNNING).update(status=status, finished_at=timezone.now())


def llm_job_recount(job: LLMJob) -> None:
    """After a run stored a finished job's answers: recount them, and a ``done`` job whose
    answer the run refused (``ledger_entry_reject``) becomes ``done_with_failures``."""
    counts = llm_job_refresh_counts(job)
    if job.status == LLMJob.Status.DONE and _failed_of(job, counts):
        LLMJob.objects.filter(pk=job.pk, status=LLMJob.Status.DONE).update(status=LLMJob.Status.DONE_WITH_FAILURES)
        job.status = LLMJob.Status.DONE_WITH_FAILURES


# -- the claim of the task executing a job -------------------------------------------


def claim_free(now) -> Q:
    """Jobs nobody holds, or whose holder's lease ran out (a killed worker)."""
    return Q(claimed_by="") | Q(claim_expires__isnull=True) | Q(claim_expires__lt=now)


def worker_name() -> str:
    """The worker a claim names on the run's page: the Celery worker's name (or the host)
    and the process id."""
    from celery import current_task

    request = getattr(current_task, "request", None) if current_task else None
    return f"{getattr(request, 'hostname', None) or socket.gethostname()} pid {os.getpid()}"[:200]


def llm_job_claim(job_id: int, token: str) -> bool:
    """Take the job for this task: nobody holds it, or the holder's lease ran out (a killed
    worker). A redelivered task finds a live claim and leaves the job alone."""
    now = timezone.now()
    lease = timedelta(seconds=settings.LLM_JOB_LEASE_SECONDS)
    return bool(
        LLMJob.objects.filter(pk=job_id, status__in=ACTIVE)
        .filter(claim_free(now))
        .update(
            claimed_by=token,
            claim_expires=now + lease,
            heartbeat_at=now,
            status=LLMJob.Status.RUNNING,
            worker=worker_name(),
            started_at=Coalesce(F("started_at"), Value(now)),
            updated_at=now,
        )
    )


def llm_job_release(job_id: int, token: str) -> None:
    """The task is through with the job: its claim ends, and the failures seen while it ran
    are history (a breaker's record stays with the pause it caused). The release is the
    task's last beat: the run's own step (storing the answers) follows in the same worker."""
    LLMJob.objects.filter(pk=job_id, claimed_by=token).update(
        claimed_by="", claim_expires=None, n_retrying=0, heartbeat_at=timezone.now()
    )
    LLMJob.objects.filter(pk=job_id).exclude(status=LLMJob.Status.PAUSED).update(breaker={})


def llm_job_heartbeat(job: LLMJob, **fields: Any) -> None:
    """Renew the executing task's claim (and store live fields such as ``n_retrying``). A
    worker that stops beating (killed, its machine lost) leaves the claim to run out: the run
    then reads ``stalled`` and may be resumed (llm/runs.py, ``run_liveness``)."""
    token = job.claim_token
    now = timezone.now()
    lease = timedelta(seconds=settings.LLM_JOB_LEASE_SECONDS)
    LLMJob.objects.filter(pk=job.pk, claimed_by=token).update(claim_expires=now + lease, heartbeat_at=now, **fields)


# -- pause, cancel, reopen: the job and its shards (llm/shards.py) -------------------


def _family(job: LLMJob) -> Q:
    """The job and its shards: pause and cancel act on all of them."""
    return Q(pk=job.pk) | Q(parent_id=job.pk)


def llm_job_pause(*, job: LLMJob, reason: str = PAUSED_BY_USER) -> None:
    LLMJob.objects.filter(_family(job), status__in=ACTIVE).update(status=LLMJob.Status.PAUSED, pause_reason=reason)


def llm_job_cancel(*, job: LLMJob) -> None:
    LLMJob.objects.filter(_family(job)).exclude(status__in=FINISHED).update(
        status=LLMJob.Status.CANCELLED, finished_at=timezone.now()
    )


def llm_job_shards_resume(job: LLMJob, *, budget_usd: Decimal | None = None) -> int:
    """The parent was put back in the queue: so is every shard that has a request without an
    ``ok`` answer (a shard done with all of them ``ok`` stays done). Returns how many."""
    reopened = []
    for shard in job.shards.exclude(status=LLMJob.Status.CANCELLED).only("pk", "status", "keys"):
        if shard.status == LLMJob.Status.DONE and not llm_job_failed_count(shard):
            continue
        reopened.append(shard.pk)
    fields: dict[str, Any] = {
        "status": LLMJob.Status.PENDING,
        "pause_reason": "",
        "error": "",
        "breaker": {},
        "finished_at": None,
    }
    if budget_usd is not None:
        fields["budget_usd"] = budget_usd
    return LLMJob.objects.filter(pk__in=reopened).update(**fields)


def llm_job_reopen(job: LLMJob, *, budget_usd: Decimal | None = None) -> LLMJob:
    """Put a paused, failed, interrupted or finished-with-failures job (read for update by
    the caller's transaction) back to ``pending``. Only requests with an ``ok`` ledger entry
    will be skipped: every other one is asked again."""
    # A done job whose answer a run refused when storing it (ledger_entry_reject) has a failure again.
    if job.status == LLMJob.Status.CANCELLED or (job.status == LLMJob.Status.DONE and not llm_job_failed_count(job)):
        raise RunStateConflict(f"job {job.pk} is {job.status}; it cannot be resumed")
    if budget_usd is not None:
        job.budget_usd = budget_usd
    job.status = LLMJob.Status.PENDING
    job.pause_reason = ""
    job.error = ""
    job.breaker = {}
    job.finished_at = None
    job.save(update_fields=["status", "pause_reason", "error", "breaker", "finished_at", "budget_usd", "updated_at"])
    # Batch API: requests of closed batches that have no ok answer go into new batches.
    job.batches.exclude(status=BatchJob.Status.SUBMITTED).update(status=BatchJob.Status.SUPERSEDED)
    llm_job_shards_resume(job, budget_usd=budget_usd)  # a sharded job's shards with work left
    return job
