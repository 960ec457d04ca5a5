"""One worker pool for the long jobs that keep many things in flight: the online LLM
executor (its request loop, llm/async_executor.py) and a mining run's walk
(mining/runner.py).

``size`` workers run the same function in threads (``concurrent.futures``'
``ThreadPoolExecutor``) while the calling thread, the one that owns the database
connection, supervises: it wakes every ``tick_seconds`` (sooner when a worker ends or
someone calls ``wake``) and asks ``tick()`` whether to stop. The pool stops taking work
once it is halted, by ``tick``, by a worker (``halt``) or by an error:

* **Bounded concurrency.** Exactly ``size`` workers; each loops over its own work and
  returns when there is none left or ``stopped`` says so.
* **Stop reasons.** The first reason wins (``stop``); ``on_halt(reason)`` runs every time a
  reason is given, so the owner can tell calls waiting for a retry to give up.
* **Errors.** An exception in a worker (or reported with ``fail`` by work the pool does not
  run itself, such as a coroutine) is kept, halts everyone with ``"error"`` and is raised by
  ``run`` once every worker has ended; an exception in the supervising thread halts the
  workers, waits for them and propagates.

Pure: no Django, no I/O."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

ERROR = "error"


class WorkerPool:
    def __init__(self, *, size: int, name: str, tick_seconds: float, on_halt: Callable[[str], None] | None = None):
        self.size = max(1, size)
        self.name = name
        self.tick_seconds = tick_seconds
        self.on_halt = on_halt
        self.stop: str | None = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()

    @property
    def stopped(self) -> bool:
        return self.stop is not None

    def halt(self, reason: str) -> None:
        """Take no new work; the first reason is the one ``run`` returns."""
        with self._lock:
            self.stop = self.stop or reason
        if self.on_halt is not None:
            self.on_halt(reason)

    def fail(self, exc: BaseException) -> None:
        """A worker's error: kept (the first one) and raised by ``run``; everyone stops."""
        with self._lock:
            self.error = self.error or exc
        self.halt(ERROR)

    def wake(self) -> None:
        """Let the supervising thread tick now rather than at the end of its wait."""
        self._wake.set()

    def _guarded(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:  # a programming error: stop everyone, raised by run()
            self.fail(exc)

    def run(self, work: Callable[[], None], *, tick: Callable[[], str | None]) -> str | None:
        """Run ``work`` in ``size`` threads until every one has returned, calling ``tick``
        in this thread as they go and once after the last one ended. Returns the stop
        reason (None: the workers ran out of work), or raises the first worker's error."""
        executor = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix=self.name)
        futures: list[Future[None]] = []
        try:
            futures = [executor.submit(self._guarded, work) for _ in range(self.size)]
            for future in futures:  # called once the future is done: the loop below sees it so
                future.add_done_callback(lambda _: self._wake.set())
            while not all(f.done() for f in futures):
                self._wake.wait(timeout=self.tick_seconds)
                self._wake.clear()
                reason = tick()
                if reason is not None:
                    self.halt(reason)
        except BaseException:
            self.halt(ERROR)
            wait(futures)
            raise
        finally:
            executor.shutdown(wait=True)
        if self.error is not None:
            raise self.error
        return self.stop
