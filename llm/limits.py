"""Limits per endpoint shared by all workers: concurrency, requests/min, tokens/min, and a
pause after a 429 that applies to everyone using the endpoint.

Two backends with one interface: ``InProcessLimits`` (threads of one process; the
embedded default) and ``RedisLimits`` (every process on every machine that shares the
Redis server). ``limits_get()`` picks Redis when LLM_LIMITS_REDIS_URL is set or the Celery
broker is Redis."""
from __future__ import annotations

import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

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

    def __init__(self, per_minute: int):
        self.capacity = float(per_minute)
        self.level = float(per_minute)
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


class InProcessLimits:
    def __init__(self):
        self._lock = threading.Lock()
        self._semaphores: dict[str, threading.Semaphore] = {}
        self._in_flight: dict[str, int] = {}
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._paused_until: dict[str, float] = {}

    @contextmanager
    def slot(self, endpoint: str, limits: EndpointLimits):
        with self._lock:
            semaphore = self._semaphores.setdefault(endpoint, threading.BoundedSemaphore(limits.concurrency))
        semaphore.acquire()
        with self._lock:
            self._in_flight[endpoint] = self._in_flight.get(endpoint, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight[endpoint] -= 1
            semaphore.release()

    def wait_turn(self, endpoint: str, limits: EndpointLimits, tokens: int) -> None:
        """Block until the endpoint is not paused and the rate limits allow one request."""
        while True:
            with self._lock:
                wait = self._paused_until.get(endpoint, 0.0) - time.time()
                if wait <= 0:
                    wait = max(self._take(endpoint, "rpm", limits.requests_per_minute, 1),
                               self._take(endpoint, "tpm", limits.tokens_per_minute, tokens))
            if wait <= 0:
                return
            time.sleep(min(wait, 1.0))

    def _take(self, endpoint: str, kind: str, per_minute: int, amount: float) -> float:
        if per_minute <= 0:
            return 0.0
        bucket = self._buckets.setdefault((endpoint, kind), _Bucket(per_minute))
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


class RedisLimits:
    LEASE_SECONDS = 600  # a slot not released within this time (a killed worker) frees itself

    def __init__(self, url: str, prefix: str = "how2:llm"):
        import redis

        self.redis = redis.Redis.from_url(url)
        self.prefix = prefix
        self._acquire = self.redis.register_script(_ACQUIRE)
        self._bucket = self.redis.register_script(_BUCKET)

    def _key(self, endpoint: str, kind: str) -> str:
        return f"{self.prefix}:{kind}:{endpoint}"

    @contextmanager
    def slot(self, endpoint: str, limits: EndpointLimits):
        holder = uuid.uuid4().hex
        key = self._key(endpoint, "slots")
        delay = 0.002
        while not self._acquire(keys=[key], args=[time.time(), limits.concurrency, self.LEASE_SECONDS, holder]):
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            self.redis.zrem(key, holder)

    def wait_turn(self, endpoint: str, limits: EndpointLimits, tokens: int) -> None:
        while True:
            wait = self.paused_for(endpoint)
            if wait <= 0:
                now = time.time()
                waits = [0.0]
                if limits.requests_per_minute > 0:
                    waits.append(float(self._bucket(keys=[self._key(endpoint, "rpm")], args=[limits.requests_per_minute, now, 1])))
                if limits.tokens_per_minute > 0:
                    waits.append(float(self._bucket(keys=[self._key(endpoint, "tpm")], args=[limits.tokens_per_minute, now, tokens])))
                wait = max(waits)
            if wait <= 0:
                return
            time.sleep(min(wait, 1.0))

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
