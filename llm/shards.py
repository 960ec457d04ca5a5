"""A run's job cut into shards that any number of workers execute at once.

A generation, judge or components run, or a goal-step evaluation, owns one LLM job (its
``llm_job``: every request and key, what the run's state is read from). When it has more
than ``LLM_SHARD_REQUESTS`` requests, ``llm_job_shard`` cuts it into child jobs over
consecutive slices of its requests. Each shard is an ordinary LLM job: a task claims it with
the lease every job has (``LLM_JOB_LEASE_SECONDS``, renewed while it runs), executes it with
the job's executor and writes each answer to the ledger; a killed worker's shard is claimed
again once its lease has run out, and the ledger keys make sure nothing answered is sent
again. ``llm_job_execute`` of the parent runs ``llm_job_execute_shards``: claim a free
shard, execute it, repeat; when no shard is left to claim it either waits for the ones
other workers hold or, when every shard has stopped, gives the parent the state they add up
to (``done`` only when every request has an ``ok`` answer, as ``llm_job_finish`` says).
Pause, cancel, resume and *Retry failed* of the parent act on all its shards
(llm/job_lifecycle.py). The execution of one shard is passed in (``execute``: llm/services.py's
``llm_job_execute``), so this module never imports the services that use it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from llm.constants import EXECUTOR_ONLINE
from llm.job_lifecycle import CLAIMED, claim_free, llm_job_finish, llm_job_refresh_counts
from llm.models import LedgerEntry, LLMJob
from llm.run_models import FINISHED, RunStatus

ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING)


def shard_size() -> int:
    return max(1, int(settings.LLM_SHARD_REQUESTS))


@transaction.atomic
def llm_job_shard(job: LLMJob, *, size: int | None = None) -> list[LLMJob]:
    """Cut a run's job into shards of ``size`` requests (default ``LLM_SHARD_REQUESTS``).
    A job of at most one shard's requests, or one not executed online (the Batch API and the
    in-process vLLM engine batch on their own), is left whole. Returns the shards."""
    size = size or shard_size()
    if job.executor != EXECUTOR_ONLINE or len(job.keys) <= size or job.shards.exists():
        return list(job.shards.order_by("shard_index"))
    shards = [
        LLMJob(
            run=job.run,
            role=job.role,
            endpoint_overrides=job.endpoint_overrides,
            endpoint_record_id=job.endpoint_record_id,
            executor=job.executor,
            concurrency=job.concurrency,
            budget_usd=job.budget_usd,
            requests=job.requests[start : start + size],
            keys=job.keys[start : start + size],
            n_total=len(job.keys[start : start + size]),
            parent=job,
            shard_index=index,
        )
        for index, start in enumerate(range(0, len(job.keys), size))
    ]
    return LLMJob.objects.bulk_create(shards)


def llm_job_tasks(job_id: int | None) -> int:
    """How many tasks to hand a run's job to: one per shard still to execute (at least one),
    so that every free worker takes a shard."""
    if job_id is None:
        return 1
    return max(1, LLMJob.objects.filter(parent_id=job_id, status__in=ACTIVE).count())


def _claimable(parent: LLMJob):
    return (
        parent.shards.filter(status__in=ACTIVE)
        .filter(claim_free(timezone.now()))
        .defer("requests")  # the executor loads the claimed shard's requests itself
        .order_by("shard_index")
    )


def _family_stop(parent: LLMJob, status: str, *, reason: str = "", breaker: dict | None = None) -> None:
    """Stop the parent and every shard still at work (their executors see it within a second)."""
    fields: dict[str, Any] = {"status": status}
    if status == RunStatus.PAUSED:
        fields.update(pause_reason=reason[:200], breaker=breaker or {})
    else:
        fields.update(error=reason, finished_at=timezone.now())
    LLMJob.objects.filter(pk=parent.pk, status__in=ACTIVE).update(**fields)
    LLMJob.objects.filter(parent_id=parent.pk, status__in=ACTIVE).update(
        **{k: v for k, v in fields.items() if k != "breaker"}
    )


def _shard_budget(parent: LLMJob, shard: LLMJob) -> None:
    """A shard may spend what the run's budget has left, plus what it spent itself (its
    executor counts its own spending from there)."""
    if parent.budget_usd is None:
        return
    spent = LedgerEntry.objects.filter(run=parent.run).aggregate(total=Sum("cost_usd"))["total"] or Decimal(0)
    own = LedgerEntry.objects.filter(run=parent.run, key__in=shard.keys).aggregate(total=Sum("cost_usd"))[
        "total"
    ] or Decimal(0)
    LLMJob.objects.filter(pk=shard.pk).update(budget_usd=max(Decimal(0), parent.budget_usd - spent + own))


def _parent_counts_from_shards(parent: LLMJob) -> None:
    """The parent's counts while its shards work: the sum of the counts each shard's executor
    keeps (every second, and exactly at its end). Cheap where a recount from the ledger would
    send all the run's keys; the parent is recounted from the ledger when it settles."""
    counts: Counter[str] = Counter()
    n_done, cost = 0, Decimal(0)
    for row in parent.shards.values("outcome_counts", "n_done", "cost_usd"):
        counts.update(row["outcome_counts"] or {})
        n_done += row["n_done"] or 0
        cost += row["cost_usd"] or Decimal(0)
    LLMJob.objects.filter(pk=parent.pk).update(outcome_counts=dict(counts), n_done=n_done, cost_usd=cost)
    parent.outcome_counts, parent.n_done, parent.cost_usd = dict(counts), n_done, cost


def _settle(parent: LLMJob) -> str:
    """Every shard has stopped: the parent takes the state they add up to."""
    shards = list(parent.shards.values("status", "pause_reason", "error", "breaker").order_by("shard_index"))
    statuses = {s["status"] for s in shards}
    if statuses <= set(FINISHED):
        # Each shard was recounted from the ledger as it ended: the sum is the parent's count
        # when no request is in two shards (a recount of every key took a good part of the
        # few tenths of a second a judge run of 7,000 spent settling).
        distinct = len(set(parent.keys)) == len(parent.keys)
        if distinct:
            _parent_counts_from_shards(parent)
        llm_job_finish(parent, counted=distinct)
        return "done"
    llm_job_refresh_counts(parent)
    for status in (RunStatus.PAUSED, RunStatus.FAILED, RunStatus.CANCELLED):
        first = next((s for s in shards if s["status"] == status), None)
        if first is not None:
            reason = first["pause_reason"] if status == RunStatus.PAUSED else first["error"]
            _family_stop(parent, status, reason=reason, breaker=first["breaker"])
            return f"{status}: a shard stopped"
    return "waiting: shards"  # pragma: no cover - a shard still active was counted above


def llm_job_execute_shards(
    *, job_id: int, execute: Callable[..., str], shard_done: Callable[[LLMJob], Any] | None = None
) -> str:
    """One task's part in executing a sharded job: claim a free shard (or one whose holder's
    lease ran out), execute it (``execute(job_id=...)``), hand it to ``shard_done`` (a run
    stores what the shard answered while other shards are still asked), and again, until none
    is left to claim. Returns ``CLAIMED`` while other workers still hold shards (the task comes
    back after a lease, to take over a killed worker's shard), or what the parent became once
    every shard has stopped."""
    parent = LLMJob.objects.defer("requests").filter(pk=job_id).first()  # its shards hold the requests
    if parent is None:
        return "gone"
    if parent.status not in ACTIVE:
        return f"not active ({parent.status})"
    now = timezone.now()
    LLMJob.objects.filter(pk=parent.pk, status__in=ACTIVE).update(
        status=RunStatus.RUNNING, started_at=Coalesce(F("started_at"), Value(now)), updated_at=now
    )
    parent.status = RunStatus.RUNNING
    while True:
        status = LLMJob.objects.filter(pk=parent.pk).values_list("status", flat=True).first()
        if status not in ACTIVE:
            llm_job_refresh_counts(parent)
            return f"not active ({status})"
        shard = _claimable(parent).first()
        if shard is None:
            if parent.shards.filter(status__in=ACTIVE).exists():
                _parent_counts_from_shards(parent)
                return CLAIMED
            return _settle(parent)
        _shard_budget(parent, shard)
        try:
            execute(job_id=shard.pk)
        except Exception as exc:
            _family_stop(
                parent, RunStatus.FAILED, reason=f"shard {shard.shard_index}: {exc.__class__.__name__}: {exc}"[:2000]
            )
            raise
        shard.refresh_from_db(fields=["status", "pause_reason", "breaker"])
        if shard_done is not None:
            shard_done(shard)
        _parent_counts_from_shards(parent)  # what run lists show while the other shards go on
        if shard.status == RunStatus.PAUSED:  # its breaker or the budget: the whole run pauses
            _family_stop(parent, RunStatus.PAUSED, reason=shard.pause_reason, breaker=shard.breaker)


def llm_job_workers(job: LLMJob | None) -> list[dict[str, Any]]:
    """The shards of a run's job as its page shows them: the worker at work on each (host and
    process), requests done of its total, its status and the worker's last heartbeat."""
    if job is None or job.pk is None:
        return []
    now = timezone.now()
    rows = []
    for shard in job.shards.order_by("shard_index").only(
        "shard_index",
        "status",
        "worker",
        "claimed_by",
        "claim_expires",
        "heartbeat_at",
        "n_done",
        "n_total",
        "n_retrying",
        "breaker",
    ):
        heartbeat = shard.heartbeat_at
        rows.append(
            {
                "shard": shard.shard_index,
                "job_id": shard.pk,
                "status": shard.status,
                "worker": shard.worker,
                "at_work": bool(shard.claimed_by) and shard.claim_expires is not None and shard.claim_expires > now,
                "n_done": shard.n_done,
                "n_total": shard.n_total,
                "n_retrying": shard.n_retrying,
                "breaker": shard.breaker,
                "heartbeat": heartbeat,
                "heartbeat_age_s": round((now - heartbeat).total_seconds(), 1) if heartbeat else None,
            }
        )
    return rows
