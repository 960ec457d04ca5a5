"""A mining run executed in waves (Batch API, in-process vLLM): each step walks every
pending document as far as the ledger answers, sends what the documents need next as one
LLM job per stage with that stage's executor, and walks again when the answers are in."""

from __future__ import annotations

import json
import time
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from llm.models import LLMJob
from llm.request import LLMRequest
from llm.run_models import FINISHED
from mining.models import CandidateStatus, MiningCandidate, MiningRun, MiningRunStatus
from mining.run_claims import candidates_sample, run_finish_if_complete, run_pause, run_status
from mining.run_counters import Budget
from mining.walk_stages import NeedsRequest
from mining.walker import Walker


def _wave_job_execute(run: MiningRun, job_id: int) -> str | None:
    """Execute one job of the wave. Returns what the step returns when the run cannot go
    on (``waiting…`` while a batch is out; ``paused: …`` when the job paused, failed, or
    its executor cannot run here), or None when the job is through."""
    from llm.services import llm_job_execute
    from llm.vllm_offline import ExecutorUnavailable

    try:
        outcome = llm_job_execute(job_id=job_id)
    except ExecutorUnavailable as exc:  # e.g. no vLLM on this machine: the job is failed with it
        return run_pause(run, str(exc))
    if outcome.startswith("waiting"):
        return outcome
    job = LLMJob.objects.filter(pk=job_id).first()
    if job is not None and job.status == LLMJob.Status.PAUSED:
        return run_pause(run, job.pause_reason or "an LLM job of the run paused")
    if job is not None and job.status == LLMJob.Status.FAILED:
        return run_pause(run, f"LLM job {job.pk} failed: {job.error}")
    return None


class _Beat:
    """The heartbeat of a walk between waves (the wave's jobs beat on their own): the run's
    ``heartbeat_at``, renewed every few seconds (llm/runs.py, ``run_liveness``)."""

    def __init__(self, run: MiningRun):
        self.run_id = run.pk
        self.every = min(5.0, settings.LLM_JOB_LEASE_SECONDS / 4)
        self.last = time.monotonic()

    def __call__(self) -> None:
        if time.monotonic() - self.last >= self.every:
            MiningRun.objects.filter(pk=self.run_id).update(heartbeat_at=timezone.now())
            self.last = time.monotonic()


def mining_run_batch_step(run: MiningRun) -> str:
    """One step of a run executed in waves: wait for the current jobs; when they are done,
    walk every pending document as far as the ledger answers, and send what they need
    next as new jobs, one per stage with the stage's executor (``batch``, ``vllm_offline``
    with its engine options, ``online``). Returns ``waiting…`` while batches are out,
    ``paused: …`` when a job cannot go on, ``done`` at the end."""
    from llm.services import llm_job_create

    for job_id in run.batch_job_ids:
        job = LLMJob.objects.filter(pk=job_id).first()
        if job is None or job.status in (*FINISHED, LLMJob.Status.CANCELLED, LLMJob.Status.FAILED):
            continue
        if job.status == LLMJob.Status.PAUSED:
            return run_pause(run, job.pause_reason)
        stop = _wave_job_execute(run, job.pk)
        if stop is not None:
            return stop
    budget = Budget(run)
    walker = Walker(run, budget=budget)
    beat = _Beat(run)
    try:
        while True:
            needed: dict[tuple[str, str], list[LLMRequest]] = {}
            seen: set[str] = set()
            candidates_sample(run)
            for candidate in (
                MiningCandidate.objects.filter(run=run, status=CandidateStatus.PENDING)
                .select_related("document", "document__corpus")
                .iterator(chunk_size=500)
            ):
                if run_status(run.pk) != MiningRunStatus.RUNNING:
                    return "stopped"
                beat()
                outcome = walker.walk(candidate, collect=True)
                if isinstance(outcome, NeedsRequest):
                    plan = walker.plans[outcome.stage]
                    key = outcome.request.key_for(plan.endpoint)
                    if key not in seen:
                        seen.add(key)
                        group = (outcome.stage, json.dumps(plan.overrides, sort_keys=True))
                        needed.setdefault(group, []).append(outcome.request)
                elif outcome == "stopped":
                    return run_pause(run, walker.stop_reason or "stopped")
            if needed:
                remaining = None if run.budget_usd is None else max(Decimal(0), run.budget_usd - budget.spent)
                job_ids = []
                for (stage, _), requests in needed.items():
                    plan = walker.plans[stage]
                    job = llm_job_create(
                        run=run.ledger_run,
                        role=plan.endpoint.role,
                        requests=requests,
                        executor=plan.executor,
                        budget_usd=remaining,
                        concurrency=run.concurrency,
                        endpoint_overrides=plan.overrides,
                        start=False,
                    )
                    job_ids.append(job.pk)
                MiningRun.objects.filter(pk=run.pk).update(batch_job_ids=job_ids)
                run.batch_job_ids = job_ids
                for job_id in job_ids:
                    stop = _wave_job_execute(run, job_id)
                    if stop is not None:
                        return stop
                continue  # every job answered at once: walk again
            if run_finish_if_complete(run):
                return "done"
            if not MiningCandidate.objects.filter(run=run, status=CandidateStatus.PENDING).exists():
                return "done"
    finally:
        walker.close()
