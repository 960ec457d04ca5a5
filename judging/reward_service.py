"""The judge side of the reward endpoint: one event loop per web process that keeps every
caller's judge requests in flight together.

A web worker serves many reward requests at once (one per thread); each brings a batch of
completions whose uncached judge requests must go to the judge concurrently. Rather than a
thread per request, every thread of the process hands its batch to one asyncio event loop
running in a helper thread. On that loop a fixed set of worker tasks per endpoint (as many as
the endpoint's concurrency) takes requests from one queue and sends them through the client's
asynchronous path (``LLMClient.complete(..., asynchronous=True)``: the same attempt loop,
retries and re-asks as every other call, over connection pools that each long-lived task
keeps). Two bounds apply:

* per batch, at most ``REWARD_CONCURRENCY`` of its requests queued or in flight;
* per endpoint, the shared limits of llm/limits.py (concurrency, requests and tokens per
  minute, the pause after a 429), taken by the client for every attempt: across the threads
  of this process, and across processes and machines when the limits live in Redis.

**The deadline** (``Deadline``, REWARD_DEADLINE_SECONDS or the caller's shorter one): ``ask``
returns when every request is answered or when the deadline comes, whichever is first; the
requests not answered by then are ``DeadlinePassed``. The deadline is the client's watch
(``llm.call_watch.CallWatch``), so a request that has not been sent yet is never sent and one
waiting for a retry stops between attempts (``Interrupted``: nothing recorded). A request
already on the wire cannot be called back: it runs to its answer or its HTTP timeout, and
what it ends with is handed to ``late`` (rewards.py writes it to the ledger, so an ``ok``
answer serves the next identical request from the cache).

Nothing here touches the database: the caller's thread, which owns its connection, reads the
ledger before and writes the results after (judging/rewards.py); ``late`` runs in a helper
thread of the loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm.call_watch import CallWatch, Interrupted
from llm.request import LLMRequest, LLMResult

if TYPE_CHECKING:
    from llm.client import LLMClient

Answer = tuple[LLMResult, dict[str, Any]]
Late = Callable[[str, dict[str, Any]], None]  # (key, ledger fields) of an answer past its deadline

# The caller's own wait lasts this much longer than the deadline, in case the loop is slow to
# return at it (it normally returns at the deadline itself).
DEADLINE_MARGIN_SECONDS = 2.0


class DeadlinePassed(Exception):
    """A request of the batch had no answer when the batch's deadline came."""


class Deadline(CallWatch):
    """A batch's deadline, as the watch of each of its calls: past it, a call stops between
    attempts (``Interrupted``, nothing recorded) and a call not yet sent is never sent."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def should_stop(self) -> bool:
        return time.monotonic() >= self.at


@dataclass
class _Ticket:
    key: str
    request: LLMRequest
    run: str
    role: str
    deadline: Deadline
    late: Late | None
    answer: asyncio.Future


class JudgeLoop:
    """One event loop in a daemon thread, started on first use (after a fork, a new one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._queues: dict[int, tuple[LLMClient, asyncio.Queue]] = {}  # per client, on the loop

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            alive = self._thread is not None and self._thread.is_alive() and self._pid == os.getpid()
            if not alive:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="reward-judge-loop", daemon=True)
                thread.start()
                self._loop, self._thread, self._pid, self._queues = loop, thread, os.getpid(), {}
            assert self._loop is not None
            return self._loop

    def ask(
        self,
        client: LLMClient,
        requests: list[tuple[str, LLMRequest]],
        *,
        concurrency: int,
        run: str,
        role: str,
        deadline: Deadline,
        late: Late | None = None,
    ) -> list[Answer | BaseException]:
        """Send ``requests`` (key, request) with at most ``concurrency`` of them queued or in
        flight; blocks the calling thread until all are finished or ``deadline`` comes. Each
        answer is (result, ledger fields), the exception that one request raised (the others
        go on), or ``DeadlinePassed``; ``late`` receives what a request still on the wire at
        the deadline ends with (key, ledger fields), in a helper thread."""
        if not requests:
            return []
        future = asyncio.run_coroutine_threadsafe(
            self._ask_all(client, requests, concurrency=concurrency, run=run, role=role, deadline=deadline, late=late),
            self._running(),
        )
        try:
            return future.result(timeout=deadline.left() + DEADLINE_MARGIN_SECONDS)
        except concurrent.futures.TimeoutError:  # the loop did not return at the deadline
            future.cancel()
            return [DeadlinePassed() for _ in requests]

    def _queue_of(self, client: LLMClient) -> asyncio.Queue:
        """The client's request queue, and its worker tasks on first use (on the loop)."""
        found = self._queues.get(id(client))
        if found is not None and found[0] is client:
            return found[1]
        queue: asyncio.Queue = asyncio.Queue()
        self._queues[id(client)] = (client, queue)
        for _ in range(max(1, client.limits.concurrency)):
            asyncio.get_running_loop().create_task(self._worker(client, queue))
        return queue

    async def _ask_all(
        self,
        client: LLMClient,
        requests: list[tuple[str, LLMRequest]],
        *,
        concurrency: int,
        run: str,
        role: str,
        deadline: Deadline,
        late: Late | None,
    ) -> list[Answer | BaseException]:
        queue = self._queue_of(client)
        gate = asyncio.Semaphore(max(1, concurrency))
        loop = asyncio.get_running_loop()
        answers = [loop.create_future() for _ in requests]

        async def feed() -> None:
            for (key, request), answer in zip(requests, answers):
                await gate.acquire()
                answer.add_done_callback(lambda _answer: gate.release())
                queue.put_nowait(_Ticket(key, request, run, role, deadline, late, answer))

        feeder = loop.create_task(feed())
        try:
            await asyncio.wait(answers, timeout=deadline.left())
        finally:
            feeder.cancel()
            for answer in answers:  # past the deadline: its worker hands a late answer to ``late``
                if not answer.done():
                    answer.cancel()
        return [_outcome(answer) for answer in answers]

    @staticmethod
    async def _worker(client: LLMClient, queue: asyncio.Queue) -> None:
        loop = asyncio.get_running_loop()
        while True:
            ticket: _Ticket = await queue.get()
            answer = ticket.answer
            if answer.done():  # its batch's deadline came before it was sent: never sent
                continue
            recorded: dict[str, Any] = {}
            try:
                result = await client.complete(
                    ticket.request,
                    run=ticket.run,
                    role=ticket.role,
                    known_unfinished=True,
                    watch=ticket.deadline,
                    asynchronous=True,
                    record=lambda _key, fields: recorded.update(fields),  # noqa: B023 (awaited in this iteration)
                )
            except asyncio.CancelledError:
                if not answer.done():
                    answer.cancel()
                raise
            except BaseException as exc:  # this request's answer; the worker goes on
                if not answer.done():
                    answer.set_exception(exc)
            else:
                if not answer.done():
                    answer.set_result((result, recorded))
                elif ticket.late is not None and recorded:  # answered after its batch's deadline
                    loop.run_in_executor(None, ticket.late, ticket.key, recorded)


def _outcome(answer: asyncio.Future) -> Answer | BaseException:
    if answer.cancelled():
        return DeadlinePassed()
    exc = answer.exception()
    if isinstance(exc, Interrupted):  # stopped between attempts by the deadline
        return DeadlinePassed()
    return exc if exc is not None else answer.result()


JUDGE_LOOP = JudgeLoop()
