"""The machinery of the online executor: one event loop that keeps a job's requests in
flight, and the thread that owns the database.

* **The request loop** runs in a helper thread on its own asyncio event loop: ``concurrency``
  coroutines take the next request from one queue and send it through the client's
  asynchronous path (``LLMClient.complete(..., asynchronous=True)``: one ``AsyncOpenAI`` connection
  pool, the same attempt loop, limits and watch as the blocking client). No coroutine touches
  the database: each finished request's ledger fields go into a hand-over queue.
* **The calling thread** (the Celery task's) owns the database connection and supervises the
  helper thread as the worker pool every long job uses (llm/worker_pool.py). It writes the
  handed-over results in groups (``ledger_write_many``: every ``FLUSH_RESULTS`` results or
  ``FLUSH_SECONDS``, whichever comes first, and always before it returns), and about once a
  second renews the claim, stores the live fields, refreshes the counts and reads whether
  someone paused or cancelled the job.

The job's own rules (budget, breaker, pause and cancel, what "done" means) stay in
``llm/executors.py``; this module only moves requests and results between the two threads."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from llm.call_watch import Interrupted
from llm.client import LLMClient
from llm.ledger import ledger_write_many
from llm.limits import limits_get
from llm.request import LLMRequest, LLMResult
from llm.run_watch import RunWatch
from llm.worker_pool import WorkerPool

FLUSH_RESULTS = 64  # finished results written to the ledger in one group ...
FLUSH_SECONDS = 0.1  # ... or after this long, whichever comes first (a killed worker re-asks at most these)


class RequestLoop:
    """Sends ``requests`` (index -> request dict) with ``concurrency`` in flight on an event
    loop in a helper thread; ``drive`` runs in the calling thread until every request is
    finished or the loop was told to stop, writing results to the ledger as it goes.

    ``may_start()`` is asked before each request is taken (None: go on; a reason: stop
    taking requests); ``on_result(result)`` hears every finished result in the loop's thread;
    ``every_second()`` runs in the calling thread and returns a reason to stop, or None."""

    def __init__(
        self,
        *,
        client: LLMClient,
        requests: list[dict[str, Any]],
        todo: list[int],
        concurrency: int,
        run: str,
        role: str,
        watch: RunWatch,
        may_start: Callable[[], str | None],
        on_result: Callable[[LLMResult], None],
        every_second: Callable[[], str | None],
        status_seconds: float = 1.0,
    ):
        self.client = client
        self.requests = requests
        self.todo = deque(todo)
        self.concurrency = max(1, min(concurrency, len(todo)))
        self.run_label, self.role = run, role
        self.watch = watch
        self.may_start, self.on_result, self.every_second = may_start, on_result, every_second
        self.status_seconds = status_seconds
        self.finished: deque[tuple[str, dict[str, Any]]] = deque()  # handed over to the calling thread
        # One worker (the event loop's thread); the calling thread ticks every FLUSH_SECONDS.
        self.pool = WorkerPool(
            size=1, name=f"llm-loop-{run}", tick_seconds=FLUSH_SECONDS, on_halt=lambda reason: self.watch.stop()
        )
        self._flushed = self._checked = 0.0

    @property
    def stop(self) -> str | None:
        return self.pool.stop

    # -- the calling thread ------------------------------------------------------------

    def drive(self) -> str | None:
        """Run everything; returns why it stopped early (None: every request was asked)."""
        if not self.todo:
            return None
        self._flushed = self._checked = time.monotonic()
        try:
            return self.pool.run(self._thread, tick=self._tick)
        finally:
            self.flush()  # before anyone reads the job's state: a resumed job sends nothing twice

    def _tick(self) -> str | None:
        now = time.monotonic()
        if len(self.finished) >= FLUSH_RESULTS or now - self._flushed >= FLUSH_SECONDS:
            self.flush()
            self._flushed = now
        if now - self._checked >= self.status_seconds:
            self._checked = now
            return self.every_second()
        return None

    def halt(self, reason: str) -> None:
        """Take no new request; requests waiting for a retry give up (left unfinished)."""
        self.pool.halt(reason)

    def flush(self) -> None:
        items = []
        while self.finished:
            items.append(self.finished.popleft())
        ledger_write_many(items)

    # -- the loop's thread -------------------------------------------------------------

    def _hand_over(self, key: str, fields: dict[str, Any]) -> None:
        self.finished.append((key, fields))
        if len(self.finished) >= FLUSH_RESULTS:
            self.pool.wake()

    def _thread(self) -> None:
        asyncio.run(self._main())  # an error of the loop itself is kept by the pool and raised by drive()

    async def _main(self) -> None:
        try:
            await asyncio.gather(*(self._worker() for _ in range(self.concurrency)))
        finally:
            await self.client.aclose()
            await limits_get().aclose()

    async def _worker(self) -> None:
        try:
            while True:
                if self.stop is None:
                    reason = self.may_start()
                    if reason is not None:
                        self.halt(reason)
                if self.stop is not None or not self.todo:
                    return
                request = LLMRequest.from_dict(self.requests[self.todo.popleft()])
                try:
                    # run() read the finished keys of the whole job in a few queries just before.
                    result = await self.client.complete(
                        request,
                        run=self.run_label,
                        role=self.role,
                        known_unfinished=True,
                        watch=self.watch,
                        asynchronous=True,
                        record=self._hand_over,
                    )
                except Interrupted:
                    continue  # left unfinished: asked again when the job resumes
                self.on_result(result)
        except BaseException as exc:  # a programming error: stop everyone; drive() re-raises it
            self.pool.fail(exc)
