"""A sliding-window rate limit over Django's cache (shared by every web process when the cache
is: the file cache of config/settings/cache.py on one machine, Redis across machines).

Two fixed windows are kept per key, the current and the previous one; the count of the sliding
window ending now is the current count plus the previous count weighted by the share of the
previous window still inside it. A hit is counted only when it is allowed, so refused requests
never extend a lockout. Counters are incremented with ``cache.incr`` (atomic on Redis; on the
file cache two simultaneous hits may count as one, which can let one extra request through)."""

from __future__ import annotations

import hashlib
import ipaddress
import time

from django.core.cache import cache


def address_key(address: str | None) -> str:
    """A short cache-safe key for a client address; an IPv6 address counts for its /64 network
    (one client usually holds a whole /64)."""
    text = (address or "unknown").strip()
    try:
        parsed = ipaddress.ip_address(text)
    except ValueError:
        parsed = None
    if parsed is not None and parsed.version == 6 and parsed.ipv4_mapped is None:
        text = str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    elif parsed is not None and parsed.version == 6:
        text = str(parsed.ipv4_mapped)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def _keys(name: str, window: int, now: float) -> tuple[str, str, float]:
    bucket = int(now // window)
    elapsed = (now - bucket * window) / window
    return f"ratelimit:{name}:{window}:{bucket}", f"ratelimit:{name}:{window}:{bucket - 1}", elapsed


def count(name: str, *, window: int, now: float | None = None) -> float:
    """The hits of ``name`` in the sliding window ending ``now``."""
    now = time.time() if now is None else now
    current, previous, elapsed = _keys(name, window, now)
    values = cache.get_many([current, previous])
    return values.get(current, 0) + values.get(previous, 0) * (1.0 - elapsed)


def hit(name: str, *, limit: int, window: int, now: float | None = None) -> bool:
    """Count one hit of ``name`` if fewer than ``limit`` happened in the last ``window``
    seconds and say whether it was allowed. ``limit`` 0 means no limit."""
    if limit <= 0:
        return True
    now = time.time() if now is None else now
    if count(name, window=window, now=now) >= limit:
        return False
    current, _, _ = _keys(name, window, now)
    cache.add(current, 0, timeout=2 * window + 60)
    try:
        cache.incr(current)
    except ValueError:  # evicted between add and incr
        cache.set(current, 1, timeout=2 * window + 60)
    return True
