"""Writes of the LLM layer: jobs (create, execute, pause, resume, cancel)."""
from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from llm.client import LLMClient, LLMRequest
from llm.constants import (
    EXECUTOR_BATCH, EXECUTOR_ONLINE, EXECUTOR_VLLM_OFFLINE, EXECUTORS, OUTCOME_OK, OUTCOME_PARSE_FAILED,
)
from llm.endpoints import Endpoint, EndpointNotConfigured, endpoint_from_overrides, endpoint_get
from llm.models import FINISHED, BatchJob, LedgerEntry, LLMJob

ACTIVE = (LLMJob.Status.PENDING, LLMJob.Status.RUNNING)
# What a task finds when another task holds the job: it comes back after a lease, when a
# killed holder's claim has run out (and finds the job finished if the holder was alive).
CLAIMED = "waiting: claimed by another worker"


def poll_countdown(outcome: str) -> float | None:
    """Seconds after which a run's task should come back, or None when it is finished:
    a Batch API job still running, or a job another task holds."""
    from django.conf import settings

    if outcome == CLAIMED:
        return settings.LLM_JOB_LEASE_SECONDS
    if outcome.startswith("waiting"):
        return settings.LLM_BATCH_POLL_SECONDS
    return None


def job_endpoint(job: LLMJob) -> Endpoint:
    if job.executor == EXECUTOR_VLLM_OFFLINE:  # a local engine: only the model matters
        overrides = job.endpoint_overrides or {}
        endpoint = endpoint_get(job.role, base_url=overrides.get("base_url"), model=overrides.get("model"))
        if not endpoint.model:
            raise EndpointNotConfigured(f"no model for role {job.role!r}: set LLM_MODEL or the role's *_MODEL variable")
        return endpoint
    return endpoint_from_overrides(job.role, job.endpoint_overrides)


@transaction.atomic
def llm_job_create(
    *, run: str, role: str, requests: list[LLMRequest], executor: str = EXECUTOR_ONLINE, concurrency: int = 16,
    budget_usd: Decimal | None = None, endpoint_overrides: dict[str, str] | None = None, start: bool = True,
) -> LLMJob:
    """Create a job for ``requests`` and (by default) enqueue it once the transaction commits."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    job = LLMJob(run=run, role=role, executor=executor, concurrency=concurrency, budget_usd=budget_usd,
                 endpoint_overrides=endpoint_overrides or {}, requests=[r.to_dict() for r in requests],
                 n_total=len(requests))
    endpoint = job_endpoint(job)  # fails early and clearly when nothing is configured
    job.keys = [r.key_for(endpoint) for r in requests]
    job.save()
    if start:
        _enqueue(job)
    return job


def _enqueue(job: LLMJob) -> None:
    from llm.tasks import llm_job_execute_task

    transaction.on_commit(lambda: llm_job_execute_task.delay(job.pk))


def llm_job_pause(*, job: LLMJob, reason: str = "paused by a user") -> None:
    LLMJob.objects.filter(pk=job.pk, status__in=ACTIVE).update(status=LLMJob.Status.PAUSED, pause_reason=reason)


def llm_job_cancel(*, job: LLMJob) -> None:
    LLMJob.objects.filter(pk=job.pk).exclude(status__in=FINISHED).update(
        status=LLMJob.Status.CANCELLED, finished_at=timezone.now())


@transaction.atomic
def llm_job_resume(*, job: LLMJob, budget_usd: Decimal | None = None, enqueue: bool = True) -> LLMJob:
    """Put a paused, failed, interrupted or finished-with-failures job back in the queue.
    Only requests with an ``ok`` ledger entry are skipped: every other one is asked again."""
    job = LLMJob.objects.select_for_update().get(pk=job.pk)
    # A done job whose answer a run refused when storing it (ledger_entry_reject) has a failure again.
    if job.status == LLMJob.Status.CANCELLED or (job.status == LLMJob.Status.DONE and not llm_job_failed_count(job)):
        raise ValueError(f"job {job.pk} is {job.status}; it cannot be resumed")
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
    if enqueue:  # a run that owns the job enqueues its own task instead
        _enqueue(job)
    return job


def llm_job_failed_count(job: LLMJob) -> int:
    """How many of the job's requests have no ``ok`` answer (what *Retry failed* re-asks)."""
    keys = set(job.keys)
    ok = LedgerEntry.objects.filter(key__in=keys, outcome=OUTCOME_OK).count()
    return len(keys) - ok


@transaction.atomic
def llm_job_retry_failed(*, job: LLMJob, enqueue: bool = False) -> int:
    """*Retry failed*: put a job that finished with failures (or stopped) back in the queue;
    exactly its requests without an ``ok`` answer are sent again. Returns how many."""
    job = LLMJob.objects.select_for_update().get(pk=job.pk)
    if job.status in (LLMJob.Status.PENDING, LLMJob.Status.RUNNING, LLMJob.Status.CANCELLED):
        return 0
    failed = llm_job_failed_count(job)
    if not failed:
        return 0
    llm_job_resume(job=job, enqueue=enqueue)
    return failed


def ledger_entry_reject(*, key: str, reason: str, run: str = "") -> bool:
    """A run could not use an ``ok`` answer when storing it (a judge's link to a step that
    does not exist, components with the wrong number of steps: answers from a ledger written
    before the request's schema bounded them). The entry becomes ``parse_failed`` with the
    reason, so *Retry failed*, a resumed run and a new run ask it again; the refused answer
    stays in the entry (``response_text``) and moves into its ``history`` when the new
    answer arrives. Returns whether an entry changed."""
    where = f" by {run}" if run else ""
    return bool(LedgerEntry.objects.filter(key=key, outcome=OUTCOME_OK).update(
        outcome=OUTCOME_PARSE_FAILED, parsed=None, error=f"refused when stored{where}: {reason}"[:5000]))


def llm_job_recount(job: LLMJob) -> None:
    """After a run stored a finished job's answers: recount them, and a ``done`` job whose
    answer the run refused (``ledger_entry_reject``) becomes ``done_with_failures``."""
    llm_job_refresh_counts(job)
    if job.status == LLMJob.Status.DONE and llm_job_failed_count(job):
        LLMJob.objects.filter(pk=job.pk, status=LLMJob.Status.DONE).update(status=LLMJob.Status.DONE_WITH_FAILURES)
        job.status = LLMJob.Status.DONE_WITH_FAILURES


def llm_job_refresh_counts(job: LLMJob) -> dict[str, Any]:
    """Recount finished requests from the ledger (the source of truth)."""
    entries = LedgerEntry.objects.filter(key__in=job.keys)
    counts = Counter(entries.values_list("outcome", flat=True))
    cost = LedgerEntry.objects.filter(key__in=job.keys, run=job.run).aggregate(total=Sum("cost_usd"))["total"] or Decimal(0)
    fields = {"outcome_counts": dict(counts), "n_done": sum(counts.values()), "cost_usd": cost}
    LLMJob.objects.filter(pk=job.pk).update(**fields)
    for name, value in fields.items():
        setattr(job, name, value)
    return fields


def _claim(job_id: int, token: str) -> bool:
    """Take the job for this task: nobody holds it, or the holder's lease ran out (a killed
    worker). A redelivered task finds a live claim and leaves the job alone."""
    now = timezone.now()
    lease = timedelta(seconds=settings.LLM_JOB_LEASE_SECONDS)
    return bool(LLMJob.objects.filter(pk=job_id, status__in=ACTIVE).filter(
        Q(claimed_by="") | Q(claim_expires__isnull=True) | Q(claim_expires__lt=now)
    ).update(claimed_by=token, claim_expires=now + lease, status=LLMJob.Status.RUNNING,
             started_at=Coalesce(F("started_at"), Value(now)), updated_at=now))


def llm_job_heartbeat(job: LLMJob, **fields: Any) -> None:
    """Renew the executing task's claim (and store live fields such as ``n_retrying``)."""
    token = getattr(job, "claim_token", "")
    lease = timedelta(seconds=settings.LLM_JOB_LEASE_SECONDS)
    LLMJob.objects.filter(pk=job.pk, claimed_by=token).update(claim_expires=timezone.now() + lease, **fields)


def llm_job_trip(job: LLMJob, record: dict[str, Any]) -> None:
    """The circuit breaker tripped: the job pauses itself and says why."""
    from llm.runs import breaker_message

    LLMJob.objects.filter(pk=job.pk, status__in=ACTIVE).update(
        status=LLMJob.Status.PAUSED, pause_reason=breaker_message(record)[:200], breaker=record, n_retrying=0)


def llm_job_execute(*, job_id: int) -> str:
    """Run a job to completion with its executor. Returns what happened (for the task log).
    One task at a time: the job is claimed first, and a task that finds it claimed returns."""
    token = uuid.uuid4().hex
    if not _claim(job_id, token):
        status = LLMJob.objects.filter(pk=job_id).values_list("status", flat=True).first()
        if status is None:
            return "gone"
        if status not in ACTIVE:
            return f"not active ({status})"
        return CLAIMED
    job = LLMJob.objects.get(pk=job_id)
    job.claim_token = token
    try:
        if job.executor == EXECUTOR_ONLINE:
            from llm.executors import OnlineExecutor

            outcome = OnlineExecutor(job).run()
        elif job.executor == EXECUTOR_BATCH:
            from llm.batch import BatchExecutor

            outcome = BatchExecutor(job).run()
        elif job.executor == EXECUTOR_VLLM_OFFLINE:
            from llm.vllm_offline import VLLMOfflineExecutor

            outcome = VLLMOfflineExecutor(job).run()
        else:  # pragma: no cover - validated on creation
            raise ValueError(job.executor)
    except Exception as exc:  # never leave a job "running" behind a task that died on an error
        LLMJob.objects.filter(pk=job_id, status=LLMJob.Status.RUNNING).update(
            status=LLMJob.Status.FAILED, error=f"{exc.__class__.__name__}: {exc}"[:2000])
        raise
    finally:
        LLMJob.objects.filter(pk=job_id, claimed_by=token).update(claimed_by="", claim_expires=None, n_retrying=0)
        # The failures seen while it ran are history now; a breaker's record stays with the pause it caused.
        LLMJob.objects.filter(pk=job_id).exclude(status=LLMJob.Status.PAUSED).update(breaker={})
    return outcome


def llm_job_finish(job: LLMJob) -> None:
    """The executor asked everything: ``done`` when every request has an ``ok`` answer,
    otherwise ``done_with_failures`` (the counts per outcome say what failed)."""
    llm_job_refresh_counts(job)
    status = LLMJob.Status.DONE if llm_job_failed_count(job) == 0 else LLMJob.Status.DONE_WITH_FAILURES
    LLMJob.objects.filter(pk=job.pk, status=LLMJob.Status.RUNNING).update(status=status, finished_at=timezone.now())


def llm_client_for(job: LLMJob) -> LLMClient:
    return LLMClient(job_endpoint(job), executor=job.executor)
