"""Limits per endpoint shared by all workers: concurrency, requests/min, tokens/min, and a
pause after a 429 that applies to everyone using the endpoint.

Two backends with one interface: ``InProcessLimits`` (threads of one process; the
embedded default) and ``RedisLimits`` (every process on every machine that shares the
Redis server). ``limits_get()`` picks Redis when LLM_LIMITS_REDIS_URL is set or the Celery
broker is Redis."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import deque
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings


@dataclass(frozen=True)
class EndpointLimits:
    concurrency: int
    requests_per_minute: int = 0  # 0 = unlimited
    tokens_per_minute: int = 0


def endpoint_limits_default() -> EndpointLimits:
    return EndpointLimits(
        concurrency=settings.LLM_MAX_CONCURRENCY,
        requests_per_minute=settings.LLM_REQUESTS_PER_MINUTE,
        tokens_per_minute=settings.LLM_TOKENS_PER_MINUTE,
    )


class _Bucket:
    """Token bucket refilled continuously at ``per_minute / 60`` per second."""

    def __init__(self, per_minute: int, level: float | None = None):
        self.capacity = float(per_minute)
        self.level = float(per_minute) if level is None else min(level, float(per_minute))
        self.rate = per_minute / 60.0
        self.stamp = time.monotonic()

    def take(self, amount: float) -> float:
        """Take ``amount`` if available and return 0, else return seconds to wait."""
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        amount = min(amount, self.capacity)
        if self.level >= amount:
            self.level -= amount
            return 0.0
        return (amount - self.level) / self.rate


class _FreedSlots:
    """How the requests of one event loop wait for a full endpoint's slot. A request that
    frees a slot wakes one waiter at once (``freed``). A slot freed by another process can
    only be found by asking the backend again, and one waiter at a time does that (the
    *poller*, backing off between tries); the others wait to be woken, so a loop with many
    requests waiting sends one poll, not one per request. ``count`` tells a waiter whether
    a slot was freed since it last looked."""

    def __init__(self) -> None:
        self.count = 0
        self.polling = False
        self._waiters: deque[asyncio.Future[None]] = deque()

    def freed(self) -> None:
        self.count += 1
        self.wake()

    def wake(self) -> None:
        """Wake the longest-waiting request (it tries for a slot, and polls if none is free)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def wait(self, seen: int, timeout: float) -> None:
        """Return when woken, when a slot was freed after ``seen``, or after ``timeout`` seconds."""
        if self.count != seen:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            pass
        finally:
            if not waiter.done():
                waiter.cancel()


@dataclass(frozen=True)
class Paused:
    """The endpoint is paused (a 429's ``retry-after``) for ``seconds`` more: no slot taken."""

    seconds: float


class _Waits:
    """How a backend's decisions are waited for, once for both kinds of caller: the
    blocking ``wait_turn`` / ``slot`` of threads, and ``wait_turn_async`` / ``slot_async``
    of the asynchronous executor, which wait with ``asyncio.sleep`` so one event loop keeps
    every other request moving. A backend only says whether a request may go now
    (``_turn``: 0, or the seconds to wait) and takes or frees a slot (``_take_slot``)."""

    SLOT_POLL_MIN, SLOT_POLL_MAX = 0.002, 0.05  # seconds between tries for a full endpoint's slot
    SLOT_WAIT_MAX = 1.0  # a waiting request that is not the poller tries again at least this often
    _freed_by_loop: tuple[asyncio.AbstractEventLoop, dict[str, _FreedSlots]] | None = None

    def wait_turn(self, endpoint: str, limits: EndpointLimits, tokens: int) -> None:
        """Block until the endpoint is not paused and the rate limits allow one request."""
        while True:
            wait = self._turn(endpoint, limits, tokens)
            if wait <= 0:
                return
            time.sleep(min(wait, 1.0))

    async def wait_turn_async(self, endpoint: str, limits: EndpointLimits, tokens: int) -> None:
        while True:
            wait = await self._turn_async(endpoint, limits, tokens)
            if wait <= 0:
                return
            await asyncio.sleep(min(wait, 1.0))

    @contextmanager
    def slot(self, endpoint: str, limits: EndpointLimits):
        delay = self.SLOT_POLL_MIN
        while True:
            holder = self._take_slot(endpoint, limits, block=True)
            if isinstance(holder, Paused):  # a 429's pause began since this request's turn
                time.sleep(min(holder.seconds, 1.0))
            elif holder is not None:
                break
            else:
                time.sleep(delay)
                delay = min(delay * 2, self.SLOT_POLL_MAX)
        try:
            yield
        finally:
            self._free_slot(endpoint, holder)

    @asynccontextmanager
    async def slot_async(self, endpoint: str, limits: EndpointLimits):
        freed = self._freed_slots(endpoint)
        delay = self.SLOT_POLL_MIN
        polling = False
        try:
            while True:
                seen = freed.count
                holder = await self._take_slot_async(endpoint, limits)
                if isinstance(holder, Paused):  # a 429's pause began since this request's turn
                    await asyncio.sleep(min(holder.seconds, 1.0))
                    continue
                if holder is not None:
                    break
                if not freed.polling:
                    freed.polling = polling = True
                if polling:
                    await freed.wait(seen, delay)
                    delay = min(delay * 2, self.SLOT_POLL_MAX)
                else:
                    await freed.wait(seen, self.SLOT_WAIT_MAX)
        finally:
            if polling:  # got a slot (or gave up): another waiter takes over the polling
                freed.polling = False
                freed.wake()
        try:
            yield
        finally:
            await self._free_slot_async(endpoint, holder)
            freed.freed()

    def _freed_slots(self, endpoint: str) -> _FreedSlots:
        """The running event loop's wake-ups for ``endpoint`` (a finished loop's go with it)."""
        loop = asyncio.get_running_loop()
        found = self._freed_by_loop
        if found is None or found[0] is not loop:
            found = self._freed_by_loop = (loop, {})
        return found[1].setdefault(endpoint, _FreedSlots())

    # What a backend decides. The in-process backend never waits on I/O, so its
    # asynchronous forms are the plain ones.
    def _turn(self, endpoint: str, limits: EndpointLimits, tokens: int) -> float:
        """0 when one request may go now, else the seconds to wait."""
        raise NotImplementedError

    def _take_slot(self, endpoint: str, limits: EndpointLimits, *, block: bool) -> Any:
        """A holder of one of the endpoint's slots (what ``_free_slot`` gives back), None
        when every slot is taken, or ``Paused`` when the endpoint is paused (a backend that
        checks the pause with the slot, in the same round trip)."""
        raise NotImplementedError

    def _free_slot(self, endpoint: str, holder: Any) -> None:
        """Give back the slot ``holder`` holds."""
        raise NotImplementedError

    async def _turn_async(self, endpoint: str, limits: EndpointLimits, tokens: int) -> float:
        return self._turn(endpoint, limits, tokens)

    async def _take_slot_async(self, endpoint: str, limits: EndpointLimits):
        return self._take_slot(endpoint, limits, block=False)

    async def _free_slot_async(self, endpoint: str, holder) -> None:
        self._free_slot(endpoint, holder)

    async def aclose(self) -> None:
        """Release what the running event loop holds (nothing, for the in-process backend)."""


class InProcessLimits(_Waits):
    """Counts under one lock. The cap is compared at each request, as the Redis script does,
    so a limit changed on an endpoint (an admin's edit, or a new server on a port an earlier
    one used) holds for the next request."""

    def __init__(self):
        self._lock = threading.Condition()
        self._in_flight: dict[str, int] = {}
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._paused_until: dict[str, float] = {}

    def _take_slot(self, endpoint: str, limits: EndpointLimits, *, block: bool):
        """A thread waits on the lock's condition; the event loop only tries."""
        with self._lock:
            while self._in_flight.get(endpoint, 0) >= limits.concurrency:
                if not block:
                    return None
                self._lock.wait()
            self._in_flight[endpoint] = self._in_flight.get(endpoint, 0) + 1
        return endpoint

    def _free_slot(self, endpoint: str, holder) -> None:
        with self._lock:
            self._in_flight[endpoint] -= 1
            self._lock.notify_all()

    def _turn(self, endpoint: str, limits: EndpointLimits, tokens: int) -> float:
        with self._lock:
            wait = self._paused_until.get(endpoint, 0.0) - time.time()
            if wait <= 0:
                wait = max(
                    self._take(endpoint, "rpm", limits.requests_per_minute, 1),
                    self._take(endpoint, "tpm", limits.tokens_per_minute, tokens),
                )
        return wait

    def _take(self, endpoint: str, kind: str, per_minute: int, amount: float) -> float:
        if per_minute <= 0:
            return 0.0
        bucket = self._buckets.get((endpoint, kind))
        if bucket is None or bucket.capacity != per_minute:  # new, or the limit was changed
            bucket = self._buckets[(endpoint, kind)] = _Bucket(per_minute, level=bucket.level if bucket else None)
        return bucket.take(amount)

    def pause(self, endpoint: str, seconds: float) -> None:
        with self._lock:
            until = time.time() + seconds
            self._paused_until[endpoint] = max(self._paused_until.get(endpoint, 0.0), until)

    def paused_for(self, endpoint: str) -> float:
        return max(0.0, self._paused_until.get(endpoint, 0.0) - time.time())

    def in_flight(self, endpoint: str) -> int:
        return self._in_flight.get(endpoint, 0)


# Redis scripts. Concurrency: a sorted set of holders scored by lease expiry, so a slot
# held by a killed process frees itself. Rates: a token bucket stored as a hash.
_ACQUIRE = """
local now = tonumber(ARGV[1])
local paused = tonumber(redis.call('GET', KEYS[2]) or '0')
if paused > now then return tostring(paused - now) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[4])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) + 60)
  return 1
end
return 0
"""
_BUCKET = """
local capacity = tonumber(ARGV[1])
local rate = capacity / 60.0
local now = tonumber(ARGV[2])
local amount = math.min(tonumber(ARGV[3]), capacity)
local level = tonumber(redis.call('HGET', KEYS[1], 'level') or capacity)
local stamp = tonumber(redis.call('HGET', KEYS[1], 'stamp') or now)
level = math.min(capacity, level + (now - stamp) * rate)
local wait = 0
if level >= amount then level = level - amount else wait = (amount - level) / rate end
redis.call('HSET', KEYS[1], 'level', level, 'stamp', now)
redis.call('EXPIRE', KEYS[1], 120)
return tostring(wait)
"""


class RedisLimits(_Waits):
    LEASE_SECONDS = 600  # a slot not released within this time (a killed worker) frees itself
    ASYNC_CONNECTIONS = 16  # Redis connections of one event loop

    def __init__(self, url: str, prefix: str = "how2:llm"):
        import redis

        self.url = url
        self.redis = redis.Redis.from_url(url)
        self.prefix = prefix
        self._acquire = self.redis.register_script(_ACQUIRE)
        self._bucket = self.redis.register_script(_BUCKET)
        self._async: dict[int, tuple] = {}  # event loop id -> (client, acquire script, bucket script)

    def _key(self, endpoint: str, kind: str) -> str:
        return f"{self.prefix}:{kind}:{endpoint}"

    # The same scripts run through a blocking client (threads) or an asyncio client (one
    # per event loop, so the loop never stalls on a round trip to Redis).
    def _take_slot(self, endpoint: str, limits: EndpointLimits, *, block: bool):
        holder = uuid.uuid4().hex
        args: list[str | float] = [time.time(), limits.concurrency, self.LEASE_SECONDS, holder]
        return _held(self._acquire(keys=self._slot_keys(endpoint), args=args), holder)

    def _slot_keys(self, endpoint: str) -> list[str]:
        """The slot script's keys: the holders, and the pause it checks first."""
        return [self._key(endpoint, "slots"), self._key(endpoint, "paused")]

    def _free_slot(self, endpoint: str, holder) -> None:
        self.redis.zrem(self._key(endpoint, "slots"), holder)

    def _turn(self, endpoint: str, limits: EndpointLimits, tokens: int) -> float:
        wait = self.paused_for(endpoint)
        if wait > 0:
            return wait
        return max(
            [
                0.0,
                *(float(self._bucket(keys=keys, args=args)) for keys, args in self._buckets(endpoint, limits, tokens)),
            ]
        )

    def _buckets(self, endpoint: str, limits: EndpointLimits, tokens: int) -> list[tuple[list, list]]:
        now = time.time()
        calls = []
        if limits.requests_per_minute > 0:
            calls.append(([self._key(endpoint, "rpm")], [limits.requests_per_minute, now, 1]))
        if limits.tokens_per_minute > 0:
            calls.append(([self._key(endpoint, "tpm")], [limits.tokens_per_minute, now, tokens]))
        return calls

    def _async_client(self):
        loop = asyncio.get_running_loop()
        found = self._async.get(id(loop))
        if found is None or found[0] is not loop:
            import redis.asyncio

            # A bounded pool that makes callers wait for a free connection: with hundreds of
            # requests in flight, an unbounded burst would open a connection each.
            client = redis.asyncio.Redis(
                connection_pool=redis.asyncio.BlockingConnectionPool.from_url(
                    self.url, max_connections=self.ASYNC_CONNECTIONS, timeout=None
                )
            )
            found = (loop, client, client.register_script(_ACQUIRE), client.register_script(_BUCKET))
            self._async = {id(loop): found}  # a finished loop's client goes with it
        return found[1:]

    async def _take_slot_async(self, endpoint: str, limits: EndpointLimits):
        _client, acquire, _bucket = self._async_client()
        holder = uuid.uuid4().hex
        args = [time.time(), limits.concurrency, self.LEASE_SECONDS, holder]
        return _held(await acquire(keys=self._slot_keys(endpoint), args=args), holder)

    async def _free_slot_async(self, endpoint: str, holder) -> None:
        client, _acquire, _bucket = self._async_client()
        await client.zrem(self._key(endpoint, "slots"), holder)

    async def _turn_async(self, endpoint: str, limits: EndpointLimits, tokens: int) -> float:
        buckets = self._buckets(endpoint, limits, tokens)
        if not buckets:  # no rate limits: the slot's script checks the pause (one round trip less)
            return 0.0
        client, _acquire, bucket = self._async_client()
        value = await client.get(self._key(endpoint, "paused"))
        wait = max(0.0, float(value) - time.time()) if value else 0.0
        if wait > 0:
            return wait
        waits = [0.0]
        for keys, args in buckets:
            waits.append(float(await bucket(keys=keys, args=args)))
        return max(waits)

    async def aclose(self) -> None:
        """Close the asyncio client of the running loop (the executor calls it before its loop ends)."""
        loop = asyncio.get_running_loop()
        found = self._async.pop(id(loop), None)
        if found is not None:
            await found[1].aclose()

    def pause(self, endpoint: str, seconds: float) -> None:
        key = self._key(endpoint, "paused")
        until = time.time() + seconds
        current = self.redis.get(key)
        if current is None or float(current) < until:
            self.redis.set(key, until, px=max(1, int(seconds * 1000)))

    def paused_for(self, endpoint: str) -> float:
        value = self.redis.get(self._key(endpoint, "paused"))
        return max(0.0, float(value) - time.time()) if value else 0.0

    def in_flight(self, endpoint: str) -> int:
        key = self._key(endpoint, "slots")
        self.redis.zremrangebyscore(key, "-inf", time.time())
        return int(self.redis.zcard(key))


def _held(answer: Any, holder: str) -> str | Paused | None:
    """What the slot script answered: 1 (the slot is ``holder``'s), 0 (every slot taken) or
    the seconds the endpoint stays paused."""
    if isinstance(answer, bytes):
        return Paused(float(answer))
    return holder if answer else None


def limits_redis_url() -> str:
    if settings.LLM_LIMITS_REDIS_URL:
        return settings.LLM_LIMITS_REDIS_URL
    broker = settings.CELERY_BROKER_URL
    return broker if broker.startswith(("redis://", "rediss://")) else ""


@lru_cache(maxsize=4)
def _limits_for(url: str):
    return RedisLimits(url) if url else InProcessLimits()


def limits_get():
    return _limits_for(limits_redis_url())
