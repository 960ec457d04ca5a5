"""The online executor: many requests in flight from a thread pool, each result written
to the ledger as it finishes; pause, cancel and the budget cap are checked as it goes."""
from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from decimal import Decimal

from django.db import close_old_connections, connections

from llm.client import LLMClient, LLMRequest, finished_keys
from llm.models import LLMJob
from llm.services import llm_client_for, llm_job_finish, llm_job_refresh_counts

STATUS_CHECK_SECONDS = 1.0


class OnlineExecutor:
    def __init__(self, job: LLMJob):
        self.job = job
        self.spent = Decimal(0)
        self.lock = threading.Lock()

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
        if stopped:
            llm_job_refresh_counts(job)
            return stopped
        llm_job_finish(job)
        return "done"

    def _call(self, client: LLMClient, index: int):
        request = LLMRequest.from_dict(self.job.requests[index])
        result = client.complete(request, run=self.job.run, role=self.job.role)
        if result.cost_usd and not result.cached:
            with self.lock:
                self.spent += result.cost_usd
        return result

    @staticmethod
    def _close_thread_connections() -> None:
        connections.close_all()

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
        in_flight: set[Future] = set()
        pending = iter(todo)
        last_check = 0.0
        stop: str | None = None
        with ThreadPoolExecutor(max_workers=self.job.concurrency, thread_name_prefix=f"llm-job-{self.job.pk}") as pool:
            while True:
                now = time.monotonic()
                if now - last_check >= STATUS_CHECK_SECONDS:
                    close_old_connections()
                    stop = stop or self._stop_reason()
                    last_check = now
                stop = stop or self._budget_reached()
                while stop is None and len(in_flight) < self.job.concurrency * 2:
                    index = next(pending, None)
                    if index is None:
                        break
                    in_flight.add(pool.submit(self._call, client, index))
                    stop = self._budget_reached()
                if not in_flight:
                    # Each pool thread opened its own database connection: close them all.
                    for _ in range(self.job.concurrency):
                        pool.submit(self._close_thread_connections)
                    return stop
                done, in_flight = wait(in_flight, timeout=STATUS_CHECK_SECONDS, return_when=FIRST_COMPLETED)
                for future in done:
                    future.result()  # surface programming errors; call failures are outcomes
