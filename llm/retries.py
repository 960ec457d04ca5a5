"""When a failed call is asked again, and after how long.

429, 5xx, 409, connection errors and malformed answers are retried with exponential backoff and
full jitter, or after the wait the server asks for (``retry-after-ms``, ``retry-after``,
capped); a 429 pauses the endpoint for every worker. A wait before a retry counts as retrying
and ends as soon as the run stops (``Interrupted``). A greedy request cut off at a budget is
remembered (per process, seeded from the ledger), so it is asked again only with a larger one."""

from __future__ import annotations

import asyncio
import json
import math
import random
import threading
import time
from collections import OrderedDict

import openai
from django.conf import settings

from llm.call_watch import CallWatch, Interrupted
from llm.completions import MalformedResponse
from llm.constants import OUTCOME_TRUNCATED
from llm.limits import limits_get
from llm.models import LedgerEntry
from llm.outbound import target_words
from llm.request import LLMRequest

RETRY_SLEEP_SLICE_SECONDS = 0.25  # how often a waiting retry checks that its run still wants it


def _header_seconds(value: str | None, scale: float = 1.0) -> float | None:
    """A finite, non-negative number of seconds from a header value, or None (absent,
    negative, ``nan``, ``inf``, an HTTP date or anything else unreadable)."""
    if not value:
        return None
    try:
        seconds = float(value) * scale
    except (TypeError, ValueError):
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def _retry_after_seconds(error: openai.APIStatusError) -> float | None:
    """The wait an error asks for (``retry-after-ms`` or ``retry-after``), capped at
    LLM_RETRY_AFTER_MAX_SECONDS so that one odd header cannot stall an endpoint for hours;
    None when the header is absent or unreadable (the client's own backoff applies)."""
    headers = error.response.headers if error.response is not None else {}
    seconds = _header_seconds(headers.get("retry-after-ms"), 0.001)
    if seconds is None:
        seconds = _header_seconds(headers.get("retry-after"))
    if seconds is None:
        return None
    return min(seconds, settings.LLM_RETRY_AFTER_MAX_SECONDS)


# The failures worth asking again: the server was busy, broken or unreachable, or answered garbage.
RETRYABLE_ERRORS = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APIConnectionError,
    openai.ConflictError,
    MalformedResponse,
)


def backoff_seconds(failures: int) -> float:
    """Exponential backoff with full jitter."""
    ceiling = min(settings.LLM_BACKOFF_MAX_SECONDS, settings.LLM_BACKOFF_BASE_SECONDS * (2 ** (failures - 1)))
    return random.uniform(0, ceiling)


def retry_wait(exc: Exception, failures: int, endpoint_id: str) -> float:
    """How long to wait before asking again after ``failures`` failed attempts: the backoff,
    or the wait the server asked for; a 429 pauses the endpoint for every worker as long."""
    wait = backoff_seconds(failures)
    if isinstance(exc, openai.APIStatusError):
        retry_after = _retry_after_seconds(exc)
        if retry_after is not None:
            wait = retry_after
        if isinstance(exc, openai.RateLimitError):
            limits_get().pause(endpoint_id, wait)
    return wait


def retry_sleep(seconds: float, watch: CallWatch) -> None:
    """Wait before a retry, counted as retrying, and give up waiting as soon as the run stops."""
    watch.waiting(+1)
    try:
        deadline = time.monotonic() + seconds
        while True:
            if watch.should_stop():
                raise Interrupted("the run stopped while a request waited for a retry")
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, RETRY_SLEEP_SLICE_SECONDS))
    finally:
        watch.waiting(-1)


async def retry_sleep_async(seconds: float, watch: CallWatch) -> None:
    watch.waiting(+1)
    try:
        deadline = time.monotonic() + seconds
        while True:
            if watch.should_stop():
                raise Interrupted("the run stopped while a request waited for a retry")
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(left, RETRY_SLEEP_SLICE_SECONDS))
    finally:
        watch.waiting(-1)


_CUT_OFF_LIMIT = 20_000  # greedy requests remembered as cut off, per process
_cut_off: OrderedDict[str, int] = OrderedDict()
_cut_off_lock = threading.Lock()


def is_greedy(request: LLMRequest) -> bool:
    """Temperature 0: the same request gives the same answer, so resending it changes nothing."""
    temperature = request.params.get("temperature")
    return temperature is not None and not isinstance(temperature, bool) and float(temperature) == 0.0


def note_cut_off(key: str, budget: int) -> None:
    """Remember that the greedy request ``key`` was cut off at ``budget`` tokens."""
    with _cut_off_lock:
        _cut_off[key] = max(budget, _cut_off.get(key, 0))
        _cut_off.move_to_end(key)
        while len(_cut_off) > _CUT_OFF_LIMIT:
            _cut_off.popitem(last=False)


def cut_off_budget(key: str) -> int | None:
    with _cut_off_lock:
        return _cut_off.get(key)


def cut_off_seed(keys: list[str], chunk: int = 2000) -> None:
    """Learn from the ledger which of ``keys`` ended truncated, and at what budget (the answer's
    length when cut off): a resumed job or *Retry failed* in a new process knows it too."""
    for start in range(0, len(keys), chunk):
        for key, response in LedgerEntry.objects.filter(
            key__in=keys[start : start + chunk], outcome=OUTCOME_TRUNCATED
        ).values_list("key", "response"):
            usage = (response or {}).get("usage") if isinstance(response, dict) else None
            tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
                note_cut_off(key, tokens)


def _describe(exc: Exception, *, timeout: float = 0.0) -> str:
    if isinstance(exc, MalformedResponse):
        return f"malformed response: {exc}"
    if isinstance(exc, openai.APIStatusError):
        return f"{exc.status_code}: {target_words(exc.message)}"  # bounded, no markup (llm/outbound.py)
    if isinstance(exc, openai.APITimeoutError) and timeout:
        return f"no answer within {timeout:.3g} s (timed out; the endpoint accepted the request)"
    return f"{exc.__class__.__name__}: {exc}"


def _error_words(exc: openai.APIStatusError) -> str:
    """What a rejection says: the error's message and the body it came in (servers put the
    reason in different fields: OpenAI's error.message, FastAPI's detail, plain text)."""
    parts = [str(exc.message or "")]
    body = exc.body
    if body is not None:
        parts.append(body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)[:2000])
    elif exc.response is not None:
        try:
            parts.append(exc.response.text[:2000])
        except Exception:
            pass
    return " ".join(p for p in parts if p)
