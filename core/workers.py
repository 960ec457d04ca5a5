"""Which queues have a worker: the System page's check, one ping per queue.

Work goes to queues by kind (config/settings/celery.py ``TASK_KINDS``, CELERY_QUEUE_<KIND>);
on one machine every kind uses the queue ``celery`` and the one worker of ``make run``
consumes it. A cluster gives a kind its own queue and workers, and a queue nobody consumes
leaves its work queued for ever: the check says which kinds would wait, and why."""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings

from config.settings.celery import DEFAULT_QUEUE


@dataclass(frozen=True)
class QueueCheck:
    queue: str
    kinds: tuple[str, ...]  # the kinds of work sent there (empty: the default queue alone)
    pid: int | None = None
    hostname: str = ""
    error: str = ""  # why no worker answered (no pid then)

    @property
    def answered(self) -> bool:
        return self.pid is not None


def queues_by_name() -> dict[str, tuple[str, ...]]:
    """Every queue work can be sent to, with the kinds that go there, the default queue first."""
    found: dict[str, list[str]] = {DEFAULT_QUEUE: []}
    for kind, queue in settings.TASK_QUEUES.items():
        found.setdefault(queue, []).append(kind.lower())
    return {queue: tuple(kinds) for queue, kinds in found.items()}


def workers_check(timeout: float | None = None) -> list[QueueCheck]:
    """Ping every queue at once and wait up to ``timeout`` (WORKER_PING_TIMEOUT_SECONDS) in all.
    A ping nobody picked up in time expires, so a worker that starts later discards it."""
    from core.tasks import ping

    timeout = settings.WORKER_PING_TIMEOUT_SECONDS if timeout is None else timeout
    queues = queues_by_name()
    sent = {}
    checks: list[QueueCheck] = []
    for queue, kinds in queues.items():
        try:
            sent[queue] = ping.apply_async(queue=queue, expires=timeout)
        except Exception as exc:  # the broker is down or refuses the message
            checks.append(QueueCheck(queue, kinds, error=f"{exc.__class__.__name__}: {exc}"))
    deadline = time.monotonic() + timeout
    for queue, result in sent.items():
        try:
            answer = result.get(timeout=max(0.1, deadline - time.monotonic()))
        except Exception as exc:  # no worker on that queue, or one too slow to answer
            checks.append(QueueCheck(queue, queues[queue], error=f"{exc.__class__.__name__}: {exc}"))
        else:
            checks.append(QueueCheck(queue, queues[queue], pid=answer["pid"], hostname=answer["hostname"]))
    order = list(queues)
    return sorted(checks, key=lambda check: order.index(check.queue))
