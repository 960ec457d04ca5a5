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

Nothing here touches the database: the caller's thread, which owns its connection, reads the
ledger before and writes the results after (judging/rewards.py)."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from llm.client import LLMClient, LLMRequest, LLMResult

Answer = tuple[LLMResult, dict[str, Any]]


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
        self, client: LLMClient, requests: list[tuple[str, LLMRequest]], *, concurrency: int, run: str, role: str
    ) -> list[Answer | BaseException]:
        """Send ``requests`` (key, request) with at most ``concurrency`` of them queued or in
        flight; blocks the calling thread until all are finished. Each answer is (result,
        ledger fields), or the exception that one request raised (the others go on)."""
        if not requests:
            return []
        future = asyncio.run_coroutine_threadsafe(
            self._ask_all(client, requests, concurrency=concurrency, run=run, role=role), self._running()
        )
        return future.result()

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
        self, client: LLMClient, requests: list[tuple[str, LLMRequest]], *, concurrency: int, run: str, role: str
    ) -> list[Answer | BaseException]:
        queue = self._queue_of(client)
        gate = asyncio.Semaphore(max(1, concurrency))
        loop = asyncio.get_running_loop()
        answers = []
        for key, request in requests:
            await gate.acquire()
            answer = loop.create_future()
            answer.add_done_callback(lambda _answer: gate.release())
            queue.put_nowait((key, request, run, role, answer))
            answers.append(answer)
        return await asyncio.gather(*answers, return_exceptions=True)

    @staticmethod
    async def _worker(client: LLMClient, queue: asyncio.Queue) -> None:
        while True:
            key, request, run, role, answer = await queue.get()
            recorded: dict[str, Any] = {}
            try:
                result = await client.complete(
                    request,
                    run=run,
                    role=role,
                    known_unfinished=True,
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


JUDGE_LOOP = JudgeLoop()
