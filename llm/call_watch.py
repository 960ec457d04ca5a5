"""How a run hears of its calls while they happen, and stops them between attempts."""

from __future__ import annotations


class Interrupted(Exception):
    """The caller's run was paused or cancelled while the request waited for a retry: it
    is left unfinished (no ledger entry), to be asked when the run resumes."""


class CallWatch:
    """What a run learns from its calls while they happen, and how it stops them. The
    default watches nothing; ``llm.runs.RunWatch`` counts retries and trips the breaker."""

    def attempt_failed(self, error: str, endpoint: str = "", *, slow: bool = False) -> None:
        """``slow``: the attempt timed out on a connected endpoint (it is working, late)."""

    def attempt_succeeded(self) -> None:
        pass

    def waiting(self, delta: int) -> None:
        """+1 when a request starts waiting for a retry, -1 when it stops waiting."""

    def should_stop(self) -> bool:
        return False
