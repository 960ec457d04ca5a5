"""Writes of the LLM layer: jobs (create, execute, pause, resume, cancel)."""
from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from llm.client import LLMClient, LLMRequest
from llm.constants import EXECUTOR_BATCH, EXECUTOR_ONLINE, EXECUTOR_VLLM_OFFLINE, EXECUTORS, OUTCOME_API_ERROR
from llm.endpoints import Endpoint, EndpointNotConfigured, endpoint_from_overrides, endpoint_get
from llm.models import LedgerEntry, LLMJob

ACTIVE = (LLMJob.Status.PENDING, LLMJob.Status.RUNNING)


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
    job.keys = [r.key(endpoint.model) for r in requests]
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
    LLMJob.objects.filter(pk=job.pk).exclude(status=LLMJob.Status.DONE).update(
        status=LLMJob.Status.CANCELLED, finished_at=timezone.now())


@transaction.atomic
def llm_job_resume(*, job: LLMJob, budget_usd: Decimal | None = None, enqueue: bool = True) -> LLMJob:
    """Put a paused, failed or interrupted job back in the queue. Requests with a finished
    ledger entry are not sent again."""
    job = LLMJob.objects.select_for_update().get(pk=job.pk)
    if job.status in (LLMJob.Status.DONE, LLMJob.Status.CANCELLED):
        raise ValueError(f"job {job.pk} is {job.status}; it cannot be resumed")
    if budget_usd is not None:
        job.budget_usd = budget_usd
    job.status = LLMJob.Status.PENDING
    job.pause_reason = ""
    job.error = ""
    job.save(update_fields=["status", "pause_reason", "error", "budget_usd", "updated_at"])
    if enqueue:  # a run that owns the job enqueues its own task instead
        _enqueue(job)
    return job


@transaction.atomic
def llm_job_retry_errors(*, job: LLMJob, enqueue: bool = False) -> int:
    """Put a finished job whose ledger holds API errors back in the queue: only those
    requests are sent again (finished ones are skipped). Returns how many will be re-sent."""
    job = LLMJob.objects.select_for_update().get(pk=job.pk)
    errors = LedgerEntry.objects.filter(key__in=job.keys, outcome=OUTCOME_API_ERROR).count()
    if job.status != LLMJob.Status.DONE or not errors:
        return 0
    job.status, job.finished_at, job.error = LLMJob.Status.PENDING, None, ""
    job.save(update_fields=["status", "finished_at", "error", "updated_at"])
    if enqueue:
        _enqueue(job)
    return errors


def llm_job_refresh_counts(job: LLMJob) -> dict[str, Any]:
    """Recount finished requests from the ledger (the source of truth)."""
    entries = LedgerEntry.objects.filter(key__in=job.keys)
    counts = Counter(entries.values_list("outcome", flat=True))
    cost = LedgerEntry.objects.filter(key__in=job.keys, run=job.run).aggregate(total=Sum("cost_usd"))["total"] or Decimal(0)
    fields = {"outcome_counts": dict(counts), "n_done": sum(n for o, n in counts.items() if o != "api_error"),
              "cost_usd": cost}
    LLMJob.objects.filter(pk=job.pk).update(**fields)
    for name, value in fields.items():
        setattr(job, name, value)
    return fields


def llm_job_execute(*, job_id: int) -> str:
    """Run a job to completion with its executor. Returns what happened (for the task log)."""
    with transaction.atomic():
        job = LLMJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            return "gone"
        if job.status not in ACTIVE:
            return f"not active ({job.status})"
        job.status = LLMJob.Status.RUNNING
        job.started_at = job.started_at or timezone.now()
        job.save(update_fields=["status", "started_at", "updated_at"])
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
    return outcome


def llm_job_finish(job: LLMJob) -> None:
    llm_job_refresh_counts(job)
    LLMJob.objects.filter(pk=job.pk, status=LLMJob.Status.RUNNING).update(
        status=LLMJob.Status.DONE, finished_at=timezone.now())


def llm_client_for(job: LLMJob) -> LLMClient:
    return LLMClient(job_endpoint(job), executor=job.executor)
