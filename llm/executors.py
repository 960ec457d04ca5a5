"""The online executor: many requests in flight from worker threads, each result written
to the ledger as it finishes; pause, cancel and the budget cap are checked as it goes."""
from __future__ import annotations

import threading
import time
from collections import deque
from decimal import Decimal

from django.db import close_old_connections, connections

from llm.client import Interrupted, LLMClient, LLMRequest, finished_keys
from llm.models import LLMJob
from llm.runs import RunWatch
from llm.services import llm_client_for, llm_job_finish, llm_job_heartbeat, llm_job_refresh_counts, llm_job_trip

STATUS_CHECK_SECONDS = 1.0
COUNTS_REFRESH_SECONDS = 5.0  # how often a running job's stored outcome counts (run lists) are brought up to date


class OnlineExecutor:
    def __init__(self, job: LLMJob):
        self.job = job
        self.spent = Decimal(0)
        self.lock = threading.Lock()
        self.watch = RunWatch()

    def run(self) -> str:
        job = self.job
        client = llm_client_for(job)
        try:
            finished = finished_keys(job.keys)
            todo = [i for i, key in enumerate(job.keys) if key not in finished]
            self.spent = Decimal(llm_job_refresh_counts(job)["cost_usd"])
            stopped = self._run_all(client, todo)
        finally:
            client.close()
        if self.watch.tripped is not None:
            llm_job_trip(job, self.watch.tripped)
            llm_job_refresh_counts(job)
            return "paused: circuit breaker"
        if stopped:
            llm_job_refresh_counts(job)
            return stopped
        llm_job_finish(job)
        return "done"

    def _call(self, client: LLMClient, index: int):
        request = LLMRequest.from_dict(self.job.requests[index])
        # run() read the finished keys of the whole job in a few queries just before.
        try:
            result = client.complete(request, run=self.job.run, role=self.job.role, known_unfinished=True,
                                     watch=self.watch)
        except Interrupted:
            return None  # left unfinished: asked again when the job resumes
        if result.cost_usd and not result.cached:
            with self.lock:
                self.spent += result.cost_usd
        return result

    def _stop_reason(self) -> str | None:
        """Paused or cancelled by someone else (a database read, done about once a second)."""
        status = LLMJob.objects.filter(pk=self.job.pk).values_list("status", flat=True).first()
        if status in (LLMJob.Status.PAUSED, LLMJob.Status.CANCELLED, None):
            return status or "gone"
        return None

    def _budget_reached(self) -> str | None:
        """Checked before every submission: no new request once the cap is spent."""
        if self.job.budget_usd is not None and self.spent >= self.job.budget_usd:
            LLMJob.objects.filter(pk=self.job.pk).update(
                status=LLMJob.Status.PAUSED, pause_reason=f"budget of {self.job.budget_usd} USD reached")
            return "budget reached"
        return None

    def _run_all(self, client: LLMClient, todo: list[int]) -> str | None:
        """``concurrency`` threads take the next request from a shared queue until it is
        empty or the job must stop; this thread watches for pause and cancel."""
        queue = deque(todo)
        lock = threading.Lock()
        state: dict[str, object] = {"stop": None, "error": None}

        def work() -> None:
            try:
                while True:
                    with lock:
                        if state["stop"] is None and self.watch.tripped is not None:
                            state["stop"] = "circuit breaker"
                        if state["stop"] is None:
                            state["stop"] = self._budget_reached()
                        if state["stop"] is not None or not queue:
                            return
                        index = queue.popleft()
                    self._call(client, index)
            except BaseException as exc:  # a programming error: stop everyone and re-raise below
                with lock:
                    state["error"] = state["error"] or exc
                    state["stop"] = state["stop"] or "error"
            finally:
                connections.close_all()  # this thread's own database connection

        threads = [threading.Thread(target=work, name=f"llm-job-{self.job.pk}-{n}", daemon=True)
                   for n in range(min(self.job.concurrency, len(todo)))]
        for thread in threads:
            thread.start()
        counted = time.monotonic()
        while any(thread.is_alive() for thread in threads):
            for thread in threads:
                thread.join(timeout=STATUS_CHECK_SECONDS / max(1, len(threads)))
            close_old_connections()
            llm_job_heartbeat(self.job, n_retrying=self.watch.retrying, breaker=self.watch.breaker.streak())
            if time.monotonic() - counted >= COUNTS_REFRESH_SECONDS:
                llm_job_refresh_counts(self.job)
                counted = time.monotonic()
            reason = self._stop_reason()
            if reason is not None:
                with lock:
                    state["stop"] = state["stop"] or reason
            if state["stop"] is not None:
                self.watch.stop()  # calls waiting for a retry give up now
        if state["error"] is not None:
            raise state["error"]  # type: ignore[misc]
        return state["stop"]  # type: ignore[return-value]
