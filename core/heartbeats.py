"""Heartbeats of work that runs inside one long transaction (a corpus or study import), so
that a page can tell a worker at work from one that was killed.

An import writes everything in one transaction, so nothing it does is visible until it
commits, and a worker killed with ``kill -9`` (or a lost machine) leaves its row ``running``
for ever. ``heartbeat(key)`` keeps a key in the shared cache (config/settings/cache.py: the
file cache of the machine, or Redis) fresh from a thread while the work runs, and deletes it
at the end. The key is set before the row says ``running`` and deleted only after the row says
how it ended, so a ``running`` row without a fresh key means the worker is gone: the row is
settled ``failed`` by ``stalled_settle`` (its transaction stored nothing, and the file is kept).

A heartbeat is seen only where the cache is shared between the worker and the web process.
With ``CACHE_URL=locmem://`` (one process's memory) nothing is ever settled."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db.models import Model
from django.utils import timezone

M = TypeVar("M", bound=Model)

# How often a heartbeat is renewed, and how long it lives unrenewed (a worker is taken for
# gone HEARTBEAT_TTL_SECONDS after its last beat).
HEARTBEAT_SECONDS = 10
HEARTBEAT_TTL_SECONDS = 45

STALLED_MESSAGE = (
    "The worker stopped (killed or restarted) in the middle of the import; its transaction stored nothing. "
    "The uploaded file is kept: upload it again to retry."
)


def _cache_key(key: str) -> str:
    return f"heartbeat:{key}"


def heartbeats_visible() -> bool:
    """Whether a heartbeat of a worker process can be seen here (the cache is shared)."""
    return "LocMemCache" not in settings.CACHES["default"]["BACKEND"]


@contextmanager
def heartbeat(key: str, *, every: float = HEARTBEAT_SECONDS, ttl: float = HEARTBEAT_TTL_SECONDS) -> Iterator[None]:
    """Keep ``key`` alive in the shared cache while the block runs."""
    name = _cache_key(key)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            try:
                cache.set(name, time.time(), timeout=ttl)
            except Exception:  # noqa: BLE001 - a missed beat must not stop the work
                continue

    cache.set(name, time.time(), timeout=ttl)
    thread = threading.Thread(target=beat, name=f"heartbeat {key}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
        cache.delete(name)


def heartbeat_alive(key: str) -> bool:
    return cache.get(_cache_key(key)) is not None


def import_run(model: type[M], pk: int, work: Callable[[M], None], *, key_prefix: str) -> M:
    """Run ``work`` on the row ``pk`` of an import ``model`` (``status``) under a heartbeat
    that is set before the row says ``running`` and gone only after ``work`` wrote the outcome."""
    manager = model._default_manager
    job = manager.get(pk=pk)
    with heartbeat(f"{key_prefix}:{job.pk}"):
        manager.filter(pk=job.pk).update(status="running")
        work(job)
    job.refresh_from_db()
    return job


def stalled_settle(model: type[Model], *, key_prefix: str, message: str = STALLED_MESSAGE) -> int:
    """Settle ``failed`` every ``running`` row of ``model`` (an import: ``status``, ``error``,
    ``finished_at``) whose worker's heartbeat (``<key_prefix>:<pk>``) is gone. Returns how many."""
    if not heartbeats_visible():
        return 0
    manager = model._default_manager
    running = list(manager.filter(status="running").values_list("pk", flat=True))
    gone = [pk for pk in running if not heartbeat_alive(f"{key_prefix}:{pk}")]
    if not gone:
        return 0
    return manager.filter(pk__in=gone, status="running").update(
        status="failed", error=message, finished_at=timezone.now()
    )
