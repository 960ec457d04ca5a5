"""The executors of LLM jobs, chosen by name from one table (``EXECUTOR_CLASSES``: online,
Batch API, in-process vLLM); each is a class built with the job whose ``run()`` asks what
the job still needs and returns what happened.

The online executor is here: many requests in flight on one event loop
(llm/async_executor.py), their results written to the ledger in groups; pause, cancel, the
budget cap and the circuit breaker are checked as it goes. Executors change a job's state
through llm/job_lifecycle.py, never through llm/services.py (which chooses them)."""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Protocol

from django.db import close_old_connections

from llm.async_executor import RequestLoop
from llm.batch import BatchExecutor
from llm.constants import EXECUTOR_BATCH, EXECUTOR_ONLINE, EXECUTOR_VLLM_OFFLINE
from llm.job_lifecycle import llm_client_for, llm_job_finish, llm_job_heartbeat, llm_job_refresh_counts
from llm.ledger import finished_keys
from llm.models import LLMJob
from llm.request import LLMResult
from llm.retries import cut_off_seed
from llm.run_models import ACTIVE
from llm.run_watch import RunWatch, breaker_message
from llm.vllm_offline import VLLMOfflineExecutor

STATUS_CHECK_SECONDS = 1.0
COUNTS_REFRESH_SECONDS = 5.0  # how often a running job's stored outcome counts (run lists) are brought up to date
BUDGET_REACHED = "budget reached"


class OnlineExecutor:
    def __init__(self, job: LLMJob):
        self.job = job
        self.spent = Decimal(0)
        self.watch = RunWatch()
        self._counted = time.monotonic()

    def run(self) -> str:
        job = self.job
        client = llm_client_for(job)
        try:
            # The finished keys of the whole job in a few queries: those are never sent again.
            finished = finished_keys(job.keys)
            todo = [i for i, key in enumerate(job.keys) if key not in finished]
            cut_off_seed([job.keys[i] for i in todo])  # greedy answers cut off before: not resent as they were
            self.spent = Decimal(llm_job_refresh_counts(job)["cost_usd"])
            loop = RequestLoop(
                client=client,
                requests=job.requests,
                todo=todo,
                concurrency=job.concurrency,
                run=job.run,
                role=job.role,
                watch=self.watch,
                may_start=self._may_start,
                on_result=self._on_result,
                every_second=self._every_second,
                status_seconds=STATUS_CHECK_SECONDS,
            )
            stopped = loop.drive()
        finally:
            client.close()
        if stopped == BUDGET_REACHED:
            LLMJob.objects.filter(pk=job.pk).update(
                status=LLMJob.Status.PAUSED, pause_reason=f"budget of {job.budget_usd} USD reached"
            )
        if self.watch.tripped is not None:
            self._trip(self.watch.tripped)
            llm_job_refresh_counts(job)
            return "paused: circuit breaker"
        if stopped:
            llm_job_refresh_counts(job)
            return stopped
        llm_job_finish(job)
        return "done"

    def _trip(self, record: dict[str, Any]) -> None:
        """The circuit breaker tripped: the job pauses itself and says why."""
        LLMJob.objects.filter(pk=self.job.pk, status__in=ACTIVE).update(
            status=LLMJob.Status.PAUSED, pause_reason=breaker_message(record)[:200], breaker=record, n_retrying=0
        )

    # -- asked by the request loop, in its thread (no database) ----------------------

    def _may_start(self) -> str | None:
        """Before every submission: no new request once the breaker tripped or the budget cap is spent."""
        if self.watch.tripped is not None:
            return "circuit breaker"
        if self.job.budget_usd is not None and self.spent >= self.job.budget_usd:
            return BUDGET_REACHED
        return None

    def _on_result(self, result: LLMResult) -> None:
        if result.cost_usd and not result.cached:
            self.spent += result.cost_usd

    # -- about once a second, in the thread that owns the database --------------------

    def _every_second(self) -> str | None:
        close_old_connections()
        llm_job_heartbeat(self.job, n_retrying=self.watch.retrying, breaker=self.watch.breaker.streak())
        if time.monotonic() - self._counted >= COUNTS_REFRESH_SECONDS:
            llm_job_refresh_counts(self.job)
            self._counted = time.monotonic()
        return self._stop_reason()

    def _stop_reason(self) -> str | None:
        """Paused or cancelled by someone else (a database read)."""
        status = LLMJob.objects.filter(pk=self.job.pk).values_list("status", flat=True).first()
        if status in (LLMJob.Status.PAUSED, LLMJob.Status.CANCELLED, None):
            return status or "gone"
        return None


# -- the table ---------------------------------------------------------------------------


class Executor(Protocol):
    def run(self) -> str: ...


# Executor name (``LLMJob.executor``, llm.constants.EXECUTORS) -> the class that executes the job.
EXECUTOR_CLASSES: dict[str, Callable[[LLMJob], Executor]] = {
    EXECUTOR_ONLINE: OnlineExecutor,
    EXECUTOR_BATCH: BatchExecutor,
    EXECUTOR_VLLM_OFFLINE: VLLMOfflineExecutor,
}


def executor_for(job: LLMJob) -> Executor:
    """The executor of ``job``, built (a Batch API client, the job's endpoint) and ready to run."""
    try:
        cls = EXECUTOR_CLASSES[job.executor]
    except KeyError:  # validated on creation
        raise ValueError(f"unknown executor {job.executor!r}") from None
    return cls(job)
