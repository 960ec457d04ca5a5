"""The online execution of a mining run: each worker task runs ``concurrency`` threads
(``llm/worker_pool.py``), each taking one claimed document through all its stages before
the next, so the stages overlap and at most ``concurrency`` requests are in flight per
worker. Claims come in chunks (``mining/run_claims.py``); the thread that owns the run
checks about once a second whether it was paused or cancelled and beats its heartbeat."""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque

from django.db import close_old_connections, connections
from django.utils import timezone

from llm.run_models import FINISHED
from llm.run_watch import breaker_message
from llm.worker_pool import WorkerPool
from mining.constants import MINING_CLAIM_FACTOR, MINING_STATUS_CHECK_SECONDS
from mining.models import CandidateStatus, MiningCandidate, MiningRun, MiningRunStatus
from mining.run_claims import (
    WorkItem,
    candidates_claim,
    candidates_release,
    candidates_sample,
    chunk_load,
    run_finish_if_complete,
    run_pause,
    run_status,
)
from mining.run_counters import Budget
from mining.walker import Walker


class OnlineRunner:
    """One worker's share of a run: ``concurrency`` threads walking claimed documents. The
    documents are claimed in chunks (``concurrency × MINING_CLAIM_FACTOR`` at a time), each
    read with its stage results and the chunk's ledger lookup; a thread that sees fewer
    than ``concurrency`` documents left claims the next chunk before the others run dry."""

    def __init__(self, run: MiningRun):
        self.run = run
        self.token = uuid.uuid4().hex
        self.budget = Budget(run)
        self.walker = Walker(run, budget=self.budget)
        self.queue: deque[WorkItem] = deque()
        self.lock = threading.Lock()
        self.claim_lock = threading.Lock()
        self.dry_until = 0.0  # after a claim that found nothing free, no claim ahead before this

    def _refill(self) -> int:
        """Claim (or sample, then claim) the next chunk into the local queue. Called with
        ``claim_lock`` held; returns how many documents it added."""
        size = self.run.concurrency * MINING_CLAIM_FACTOR
        ids = candidates_claim(self.run, self.token, size)
        if not ids and candidates_sample(self.run):
            ids = candidates_claim(self.run, self.token, size)
        items = chunk_load(self.walker, self.token, ids) if ids else []
        if not items:
            self.dry_until = time.monotonic() + 0.5
            return 0
        with self.lock:
            self.queue.extend(items)
        return len(items)

    def next_item(self) -> WorkItem | None:
        """The next claimed candidate; claims more (or samples more) when the local queue
        runs low. None when there is no more work for this worker."""
        while True:
            if self.walker.stop_reason is not None:
                return None
            with self.lock:
                item = self.queue.popleft() if self.queue else None
                low = len(self.queue) < self.run.concurrency
            if item is not None:
                if low and time.monotonic() >= self.dry_until and self.claim_lock.acquire(blocking=False):
                    try:  # claim ahead, so the other threads never wait for a claim
                        self._refill()
                    finally:
                        self.claim_lock.release()
                return item
            with self.claim_lock:
                with self.lock:
                    if self.queue:
                        continue
                if self._refill():
                    continue
                # Nothing free: others still hold pending documents (a topic waits for its
                # batch to finish before it is sampled again), or the run is complete.
                if not MiningCandidate.objects.filter(run=self.run, status=CandidateStatus.PENDING).exists():
                    return None
            time.sleep(0.2)

    def work(self) -> None:
        """One thread of the pool: walk claimed documents until none is left or the run stops."""
        try:
            while True:
                item = self.next_item()
                if item is None:
                    return
                if (
                    self.walker.walk(
                        item.candidate, stored=item.stored, ledger=item.ledger, overhead_ms=item.overhead_ms
                    )
                    == "stopped"
                ):
                    return
        finally:
            connections.close_all()

    def _halt(self, reason: str) -> None:
        self.walker.stop_reason = self.walker.stop_reason or reason
        self.walker.watch.stop()  # calls waiting for a retry give up now

    def _tick(self) -> str | None:
        """About once a second, in the thread that owns the run: whether someone paused or
        cancelled it, the live fields of its page, what it has spent."""
        close_old_connections()
        status = run_status(self.run.pk)
        MiningRun.objects.filter(pk=self.run.pk).update(  # the worker's heartbeat (llm/runs.py, run_liveness)
            n_retrying=self.walker.watch.retrying,
            breaker=self.walker.watch.breaker.streak(),
            heartbeat_at=timezone.now(),
        )
        self.budget.refresh()
        if status != MiningRunStatus.RUNNING:
            return status or "gone"
        return self.walker.stop_reason  # the walk's own (budget, breaker): the pool halts with it

    def run_all(self) -> str:
        """``concurrency`` threads walking documents (llm/worker_pool.py), supervised by this one."""
        pool = WorkerPool(
            size=self.run.concurrency,
            name=f"mining-{self.run.pk}",
            tick_seconds=MINING_STATUS_CHECK_SECONDS,
            on_halt=self._halt,
        )
        try:
            pool.run(self.work, tick=self._tick)
        finally:
            candidates_release(self.token)
            self.walker.close()
        return self.walker.stop_reason or "done"


def mining_run_work(run: MiningRun) -> str:
    """Execute one worker's share of an online run; the last worker to find nothing left
    marks the run done. Returns what happened."""
    runner = OnlineRunner(run)
    outcome = runner.run_all()
    MiningRun.objects.filter(pk=run.pk).update(n_retrying=0, breaker={})
    if runner.walker.watch.tripped is not None:
        record = runner.walker.watch.tripped
        MiningRun.objects.filter(pk=run.pk, status=MiningRunStatus.RUNNING).update(breaker=record)
        return run_pause(run, breaker_message(record))
    if outcome.startswith("budget"):
        return run_pause(run, outcome)
    if outcome != "done":
        return outcome
    return "done" if run_finish_if_complete(run) or run_status(run.pk) in FINISHED else "waiting for other workers"


# -- execution in waves (Batch API, in-process vLLM) ------------------------------------
