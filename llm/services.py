"""Writes of the LLM layer: jobs (create, execute, pause, resume, cancel, *Retry failed*)
and the ledger entries a run refuses.

A job's state changes live in llm/job_lifecycle.py and its executors in llm/executors.py
(a table from executor name to class); this module uses both and neither imports it. The
lifecycle names other apps call (pause, cancel, counts, the endpoint, the task's countdown)
are part of this module's interface too (``__all__``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.db import transaction

from core.app_errors import InvalidInput
from llm.constants import EXECUTOR_ONLINE, EXECUTORS, OUTCOME_OK, OUTCOME_PARSE_FAILED
from llm.job_lifecycle import (
    CLAIMED,
    job_endpoint,
    llm_job_cancel,
    llm_job_claim,
    llm_job_failed_count,
    llm_job_pause,
    llm_job_recount,
    llm_job_release,
    llm_job_reopen,
    poll_countdown,
)
from llm.ledger_totals import difference, entry_totals, ledger_totals_add, stored_fields
from llm.models import LedgerEntry, LLMJob
from llm.request import LLMRequest
from llm.run_models import ACTIVE
from llm.shards import llm_job_execute_shards

__all__ = [
    "ACTIVE",
    "CLAIMED",
    "job_endpoint",
    "ledger_entry_reject",
    "llm_job_cancel",
    "llm_job_create",
    "llm_job_execute",
    "llm_job_failed_count",
    "llm_job_pause",
    "llm_job_recount",
    "llm_job_resume",
    "llm_job_retry_failed",
    "poll_countdown",
]


@transaction.atomic
def llm_job_create(
    *,
    run: str,
    role: str,
    requests: list[LLMRequest],
    executor: str = EXECUTOR_ONLINE,
    concurrency: int = 16,
    budget_usd: Decimal | None = None,
    endpoint_overrides: dict[str, str] | None = None,
    start: bool = True,
) -> LLMJob:
    """Create a job for ``requests`` and (by default) enqueue it once the transaction commits."""
    if executor not in EXECUTORS:
        raise InvalidInput(
            f"executor must be one of {', '.join(EXECUTORS)}", {"executor": f"one of {', '.join(EXECUTORS)}"}
        )
    if concurrency < 1:
        raise InvalidInput("concurrency must be at least 1", {"concurrency": "at least 1"})
    job = LLMJob(
        run=run,
        role=role,
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
        endpoint_overrides=endpoint_overrides or {},
        requests=[r.to_dict() for r in requests],
        n_total=len(requests),
    )
    endpoint = job_endpoint(job)  # fails early and clearly when nothing is configured
    job.endpoint_record_id = endpoint.record_id
    job.keys = [r.key_for(endpoint) for r in requests]
    job.save()
    if start:
        _enqueue(job)
    return job


def _enqueue(job: LLMJob) -> None:
    from llm.tasks import llm_job_execute_task

    transaction.on_commit(lambda: llm_job_execute_task.delay(job.pk))


@transaction.atomic
def llm_job_resume(*, job: LLMJob, budget_usd: Decimal | None = None, enqueue: bool = True) -> LLMJob:
    """Put a paused, failed, interrupted or finished-with-failures job back in the queue.
    Only requests with an ``ok`` ledger entry are skipped: every other one is asked again."""
    job = llm_job_reopen(LLMJob.objects.select_for_update().get(pk=job.pk), budget_usd=budget_usd)
    if enqueue:  # a run that owns the job enqueues its own task instead
        _enqueue(job)
    return job


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
    answer arrives. Returns whether an entry changed. The refusal is ``run``'s outcome: the
    entry takes its label (an answer another caller paid for, such as the reward endpoint's,
    becomes the failure of the run that refused it, and counts in that run, ``ledger_own``)."""
    where = f" by {run}" if run else ""
    relabel = {"run": run} if run else {}
    changes = {"outcome": OUTCOME_PARSE_FAILED, "error": f"refused when stored{where}: {reason}"[:5000], **relabel}
    with transaction.atomic():  # the entry locked, its run's totals moved with it (llm/ledger_totals.py)
        entry = LedgerEntry.objects.select_for_update().filter(key=key, outcome=OUTCOME_OK).first()
        if entry is None:
            return False
        LedgerEntry.objects.filter(pk=entry.pk).update(parsed=None, **changes)
        before = stored_fields(entry)
        ledger_totals_add(difference(entry_totals({**before, **changes}), entry_totals(before)))
    return True


def llm_job_execute(*, job_id: int, shard_done: Callable[[LLMJob], Any] | None = None) -> str:
    """Run a job to completion with its executor (``llm.executors.EXECUTORS``). Returns what
    happened (for the task log). One task at a time: the job is claimed first, and a task
    that finds it claimed returns. A job cut into shards is executed shard by shard, by as
    many tasks as take part (llm/shards.py), each executed shard handed to ``shard_done``."""
    if LLMJob.objects.filter(parent_id=job_id).exists():
        return llm_job_execute_shards(job_id=job_id, execute=llm_job_execute, shard_done=shard_done)
    token = uuid.uuid4().hex
    if not llm_job_claim(job_id, token):
        status = LLMJob.objects.filter(pk=job_id).values_list("status", flat=True).first()
        if status is None:
            return "gone"
        if status not in ACTIVE:
            return f"not active ({status})"
        return CLAIMED
    job = LLMJob.objects.get(pk=job_id)
    job.claim_token = token
    # Imported here: the executors bring the HTTP client and the openai SDK, which a process
    # that only serves pages or lists commands never needs (issue 29).
    from llm.executors import executor_for

    try:
        outcome = executor_for(job).run()
    except Exception as exc:  # never leave a job "running" behind a task that died on an error
        LLMJob.objects.filter(pk=job_id, status=LLMJob.Status.RUNNING).update(
            status=LLMJob.Status.FAILED, error=f"{exc.__class__.__name__}: {exc}"[:2000]
        )
        raise
    finally:
        llm_job_release(job_id, token)
    return outcome
