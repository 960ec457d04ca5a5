"""What a run learns from its calls as they happen (used by every executor and by mining's
walk): ``CircuitBreaker`` trips when an endpoint fails persistently, ``RunWatch`` counts the
requests waiting for a retry, feeds the breaker and tells every call to stop once the run
stops (pause, cancel, breaker); ``breaker_message`` is the sentence a paused run shows.

Below the run lifecycle (llm/runs.py) and the executors, so that both can use it."""

from __future__ import annotations

import threading
from collections import deque
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from llm.call_watch import CallWatch

ERROR_CHARS = 300  # of one error message, as grouped and shown


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class CircuitBreaker:
    """Trips after ``consecutive`` failed attempts in a row, or when more than
    ``window_failures`` (a share) of the last ``window`` attempts failed. Thread-safe.
    Pure: no Django, no I/O."""

    def __init__(self, *, consecutive: int, window: int, window_failures: float):
        self.consecutive = consecutive
        self.window = window
        self.window_failures = window_failures
        self._recent: deque[bool] = deque(maxlen=max(1, window))
        self._streak = 0
        self._streak_since: str | None = None
        self._lock = threading.Lock()
        self._last_error = ""
        self._endpoint = ""
        self._streak_slow = 0  # failures of the streak that were timeouts on a connected endpoint
        self.tripped: dict[str, Any] | None = None

    def streak(self) -> dict[str, Any]:
        """The failures happening now (before any trip): endpoint, since, last error and how
        many in a row; {} while the last attempt succeeded."""
        with self._lock:
            if not self._streak:
                return {}
            return {
                "endpoint": self._endpoint,
                "since": self._streak_since,
                "last_error": self._last_error,
                "failed_in_a_row": self._streak,
            }

    def record(self, ok: bool, *, error: str = "", endpoint: str = "", slow: bool = False) -> dict[str, Any] | None:
        """Record one attempt. Returns the breaker's record the moment it trips (once).
        ``slow``: the failure was a timeout on an endpoint that accepted the request."""
        with self._lock:
            self._recent.append(ok)
            if ok:
                self._streak, self._streak_since, self._streak_slow = 0, None, 0
                return None
            self._streak += 1
            self._streak_slow += 1 if slow else 0
            self._streak_since = self._streak_since or _now_iso()
            self._last_error, self._endpoint = error[:ERROR_CHARS], endpoint
            if self.tripped is not None:
                return None
            failed = self._recent.count(False)
            reason = None
            if self.consecutive > 0 and self._streak >= self.consecutive:
                reason = f"{self._streak} failed attempts in a row"
            elif len(self._recent) >= self.window and failed > self.window_failures * self.window:
                reason = f"{failed} of the last {self.window} attempts failed"
            if reason is None:
                return None
            self.tripped = {
                "endpoint": endpoint,
                "since": self._streak_since,
                "tripped_at": _now_iso(),
                "last_error": error[:ERROR_CHARS],
                "reason": reason,
                # slow: every failure of the streak was a timeout (the endpoint takes requests
                # and works, late); down: it refuses, errs or cannot be reached.
                "diagnosis": "slow" if self._streak_slow == self._streak else "down",
            }
            return self.tripped


def breaker_default() -> CircuitBreaker:
    return CircuitBreaker(
        consecutive=settings.LLM_BREAKER_CONSECUTIVE,
        window=settings.LLM_BREAKER_WINDOW,
        window_failures=settings.LLM_BREAKER_WINDOW_FAILURES,
    )


def breaker_message(record: dict[str, Any]) -> str:
    """The sentence a paused run shows in its banner."""
    last_error = str(record.get("last_error") or "").rstrip(". ")  # "Connection error." ends in its own stop
    if record.get("diagnosis") == "slow":
        return (
            f"paused by the circuit breaker: the endpoint {record.get('endpoint') or '(unknown)'} is slow, not down "
            f"({record.get('reason')}, all timeouts, since {record.get('since')}); last error: {last_error}. "
            f"Raise the endpoint's timeout or lower its concurrency (LLM page, endpoint record), then resume."
        )
    return (
        f"paused by the circuit breaker: the endpoint {record.get('endpoint') or '(unknown)'} is failing "
        f"({record.get('reason')}, since {record.get('since')}); last error: {last_error}. "
        f"Resume when it answers again."
    )


class RunWatch(CallWatch):
    """Watches one run's calls: counts requests waiting for a retry, feeds the breaker,
    and tells every call to stop once the run stops (pause, cancel, breaker)."""

    def __init__(self, breaker: CircuitBreaker | None = None):
        self.breaker = breaker or breaker_default()
        self.retrying = 0
        self.tripped: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def attempt_failed(self, error: str, endpoint: str = "", *, slow: bool = False) -> None:
        record = self.breaker.record(False, error=error, endpoint=endpoint, slow=slow)
        if record is not None:
            self.tripped = record
            self._stop.set()

    def attempt_succeeded(self) -> None:
        self.breaker.record(True)

    def waiting(self, delta: int) -> None:
        with self._lock:
            self.retrying = max(0, self.retrying + delta)

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
