"""What one endpoint (base URL + model) supports, learned from what it answers.

Servers differ: OpenAI and vLLM follow ``response_format: json_schema``; llama.cpp's Python
server answers it with HTTP 500 and ``Input should be 'text' or 'json_object'``; others take
only plain text. A status code says little (vLLM also answers 400 to a prompt longer than its
context), so a rejection is classified by its body (:func:`rejection_kind`), and only a
rejection *of the format* changes the format an endpoint is asked in. Context overflows,
validation and auth errors never do.

What is learned is kept per endpoint in the shared cache (every worker sees it) with an expiry
(``LLM_CAPABILITY_TTL_SECONDS``), and per process for a few seconds so that a busy worker
does not read the cache on every request:

* ``unsupported``: the structured-output paths the endpoint rejected, with the server's words;
* ``context_length``: the model's context in tokens, from the endpoint record, from the
  server's ``/models`` (vLLM's ``max_model_len``) or from a context-overflow message;
* ``token_ratio``: the server's prompt tokens per estimated token (the estimate is
  characters / 4), the largest seen, so that budgets fit the server's own tokenizer;
* ``seconds_per_token``: the slowest wall time per answer token seen (queueing included), so
  that a slow endpoint's requests get the time they need (``EndpointFit.timeout``, llm/fitting.py);
* ``timeout_floor``: after a timeout on an endpoint that took the request, the next requests
  wait twice as long (up to LLM_TIMEOUT_MAX_SECONDS): a server that answers one request at a
  time is slow, not down, and its queue is not abandoned at a fixed 120 s.

The classification functions are pure; the store reads and writes Django's cache."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache

# How a rejection reads (rejection_kind).
REJECTION_FORMAT = "format_unsupported"
REJECTION_CONTEXT = "context_overflow"
REJECTION_BUDGET = "max_tokens_too_large"
REJECTION_AUTH = "auth"
REJECTION_NOT_FOUND = "not_found"
REJECTION_OTHER = "other"

_CONTEXT_WORDS = re.compile(
    r"maximum context length|context[_ ]length[_ ]exceeded|context window|exceeds? (?:the )?(?:model'?s? )?context"
    r"|prompt is too long|too many (?:input )?tokens|parameter=input_tokens|exceed_context_size",
    re.IGNORECASE,
)
_BUDGET_WORDS = re.compile(
    r"max_tokens=?\s*\d+\s*cannot be greater|max_tokens is too large|maximum value for [`']?max_tokens", re.IGNORECASE
)
_FORMAT_WORDS = re.compile(
    r"response_format|json_schema|json_object|Input should be 'text'|structured output|guided_(?:json|decoding)"
    r"|grammar",
    re.IGNORECASE,
)
_CONTEXT_NUMBER = re.compile(
    r"(?:maximum context length is|max_model_len\s*=?|context (?:length|size|window) (?:of|is)?)\s*(\d{3,7})",
    re.IGNORECASE,
)
_PROMPT_NUMBERS = (  # the most specific first: OpenAI's message also says "you requested N tokens"
    re.compile(r"(\d{1,7}) in the messages", re.IGNORECASE),  # OpenAI: "(P in the messages, C in the completion)"
    re.compile(r"requested tokens \((\d{1,7})\)", re.IGNORECASE),  # llama.cpp's Python server
    re.compile(r"(?:at least|contains|requested|prompt (?:has|of))\s*(\d{1,7})\s*(?:input )?tokens", re.IGNORECASE),
)

CHARS_PER_ESTIMATED_TOKEN = 4  # the estimate every budget starts from: characters / 4
# Before an endpoint has reported a long prompt's count: characters / 4 as it is (right for
# English to within a few per cent with the common tokenizers; the margin takes the rest, and a
# server that finds the budget too large says so and is asked again with one that fits).
FIRST_TOKEN_RATIO = 1.0
MESSAGE_OVERHEAD_TOKENS = 8  # the chat template's tokens around each message
MAX_TOKEN_RATIO = 4.0  # a ratio above this is a broken usage report, not a tokenizer
# The ratio is learned only from prompts of at least this many estimated tokens: a short
# prompt's count is mostly the chat template's own text (SmolLM2's adds a system prompt of ~30
# tokens to "Say hi"), which would make every long prompt look several times its size.
RATIO_MIN_ESTIMATE = 256


def rejection_kind(status: int, message: str) -> str:
    """What a non-2xx answer rejects, from its status and the words of its body."""
    text = message or ""
    if status in (401, 403):
        return REJECTION_AUTH
    if status == 404 and not _FORMAT_WORDS.search(text):
        return REJECTION_NOT_FOUND
    if _CONTEXT_WORDS.search(text):
        return REJECTION_CONTEXT
    if _BUDGET_WORDS.search(text):
        return REJECTION_BUDGET
    if status in (400, 415, 422, 500, 501) and _FORMAT_WORDS.search(text):
        return REJECTION_FORMAT
    return REJECTION_OTHER


def context_numbers(message: str) -> tuple[int | None, int | None]:
    """(context length, prompt tokens) named by a context-overflow or max_tokens message."""
    context = _CONTEXT_NUMBER.search(message or "")
    prompt_tokens = None
    for pattern in _PROMPT_NUMBERS:
        found = pattern.search(message or "")
        if found:
            prompt_tokens = int(found.group(1))
            break
    return (int(context.group(1)) if context else None, prompt_tokens)


def estimated_tokens(chars: int, messages: int) -> int:
    """The raw estimate of a prompt's tokens (before the endpoint's ratio)."""
    return -(-chars // CHARS_PER_ESTIMATED_TOKEN) + MESSAGE_OVERHEAD_TOKENS * messages


@dataclass
class Capabilities:
    """What is known of one endpoint now (see the module's docstring)."""

    unsupported: dict[str, str] = field(default_factory=dict)  # path -> the server's words
    context_length: int | None = None
    context_source: str = ""  # "endpoint record", "/models", "server error"
    token_ratio: float | None = None
    seconds_per_token: float | None = None  # wall time per answer token, queueing included
    timeout_floor: float | None = None  # seconds: doubled after each timeout on a connected endpoint
    probed_at: float = 0.0  # when /models was last asked (0: never)
    learned_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "unsupported": dict(self.unsupported),
            "context_length": self.context_length,
            "context_source": self.context_source,
            "token_ratio": self.token_ratio,
            "seconds_per_token": self.seconds_per_token,
            "timeout_floor": self.timeout_floor,
            "probed_at": self.probed_at,
            "learned_at": self.learned_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Capabilities:
        data = data or {}
        return cls(
            unsupported=dict(data.get("unsupported") or {}),
            context_length=data.get("context_length"),
            context_source=data.get("context_source") or "",
            token_ratio=data.get("token_ratio"),
            seconds_per_token=data.get("seconds_per_token"),
            timeout_floor=data.get("timeout_floor"),
            probed_at=float(data.get("probed_at") or 0.0),
            learned_at=float(data.get("learned_at") or 0.0),
        )

    def prompt_tokens(self, chars: int, messages: int) -> int:
        """The prompt's tokens as this endpoint counts them (estimated; see token_ratio)."""
        return int(estimated_tokens(chars, messages) * (self.token_ratio or FIRST_TOKEN_RATIO)) + 1

    @property
    def structured_output(self) -> str:
        """The best structured-output path not known to be rejected."""
        for path in ("json_schema", "json_object"):
            if path not in self.unsupported:
                return path
        return "text"


def _cache_key(endpoint_id: str) -> str:
    import hashlib

    return "llm-capabilities:" + hashlib.sha256(endpoint_id.encode("utf-8")).hexdigest()


class CapabilityStore:
    """The shared cache behind a per-process memo of a few seconds."""

    MEMO_SECONDS = 5.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._memo: dict[str, tuple[float, Capabilities]] = {}

    def get(self, endpoint_id: str) -> Capabilities:
        now = time.monotonic()
        with self._lock:
            memo = self._memo.get(endpoint_id)
            if memo is not None and now - memo[0] < self.MEMO_SECONDS:
                return memo[1]
        try:
            found = Capabilities.from_dict(cache.get(_cache_key(endpoint_id)))
        except Exception:  # an unreachable cache must not stop a request: start from nothing
            found = Capabilities()
        with self._lock:
            self._memo[endpoint_id] = (now, found)
        return found

    def update(self, endpoint_id: str, change) -> Capabilities:
        """Apply ``change(capabilities)`` and store the result for every worker."""
        current = self.get(endpoint_id)
        updated = Capabilities.from_dict(current.to_dict())
        change(updated)
        updated.learned_at = time.time()
        try:
            cache.set(_cache_key(endpoint_id), updated.to_dict(), timeout=settings.LLM_CAPABILITY_TTL_SECONDS)
        except Exception:
            pass
        with self._lock:
            self._memo[endpoint_id] = (time.monotonic(), updated)
        return updated

    def forget_all_memos(self) -> None:
        """Drop this process's memo (the shared cache was cleared, as between tests)."""
        with self._lock:
            self._memo.clear()

    def forget(self, endpoint_id: str) -> None:
        """Learn the endpoint anew (its record changed, or an admin asked)."""
        try:
            cache.delete(_cache_key(endpoint_id))
        except Exception:
            pass
        with self._lock:
            self._memo.pop(endpoint_id, None)


_store = CapabilityStore()


def capabilities_store() -> CapabilityStore:
    return _store


def endpoint_key(base_url: str, model: str) -> str:
    """The one name of an endpoint in the store and the limits: base URL (no trailing /) | model."""
    return f"{(base_url or '').strip().rstrip('/')}|{model}"


def capabilities_get(base_url: str, model: str) -> Capabilities:
    return _store.get(endpoint_key(base_url, model))


def capabilities_forget(base_url: str, model: str) -> None:
    _store.forget(endpoint_key(base_url, model))


def learn_rejected_path(endpoint_id: str, path: str, message: str) -> Capabilities:
    def change(caps: Capabilities) -> None:
        caps.unsupported[path] = (message or "")[:300]

    return _store.update(endpoint_id, change)


def learn_context(endpoint_id: str, context_length: int, source: str) -> Capabilities:
    def change(caps: Capabilities) -> None:
        caps.context_length = context_length
        caps.context_source = source

    return _store.update(endpoint_id, change)


def learn_usage(endpoint_id: str, *, chars: int, messages: int, prompt_tokens: int) -> None:
    """Keep the largest ratio of the server's prompt tokens to the raw estimate (only when it
    grows, so that a busy endpoint writes the cache rarely)."""
    estimate = estimated_tokens(chars, messages)
    if prompt_tokens <= 0 or estimate < RATIO_MIN_ESTIMATE:
        return
    ratio = min(prompt_tokens / estimate, MAX_TOKEN_RATIO)
    known = _store.get(endpoint_id).token_ratio
    if known is not None and ratio <= known * 1.02:
        return

    def change(caps: Capabilities) -> None:
        caps.token_ratio = max(ratio, caps.token_ratio or 0.0)

    _store.update(endpoint_id, change)


def served_context_length(models_body: Any, model: str) -> int | None:
    """The context length ``/models`` reports for ``model`` (vLLM: ``max_model_len``; llama.cpp's
    Python server: ``meta.n_ctx_train`` is the training context, not the served one, so unused)."""
    if not isinstance(models_body, dict) or not isinstance(models_body.get("data"), list):
        return None
    for item in models_body["data"]:
        if not isinstance(item, dict) or item.get("id") != model:
            continue
        value = item.get("max_model_len")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def learn_speed(endpoint_id: str, *, seconds: float, tokens_out: int) -> None:
    """Keep the slowest wall time per answer token seen (written only when it grows by a tenth)."""
    if tokens_out <= 0 or seconds <= 0:
        return
    per_token = seconds / tokens_out
    known = _store.get(endpoint_id).seconds_per_token
    if known is not None and per_token <= known * 1.1:
        return

    def change(caps: Capabilities) -> None:
        caps.seconds_per_token = max(per_token, caps.seconds_per_token or 0.0)

    _store.update(endpoint_id, change)


def learn_timeout(endpoint_id: str, timed_out_after: float, maximum: float) -> float:
    """After a timeout: the next requests wait twice as long (at most ``maximum``)."""
    longer = min(maximum, 2 * timed_out_after)

    def change(caps: Capabilities) -> None:
        caps.timeout_floor = max(longer, caps.timeout_floor or 0.0)

    return _store.update(endpoint_id, change).timeout_floor or longer


def learn_probe(endpoint_id: str, context_length: int | None) -> None:
    """What ``/models`` said on first use (vLLM: the served context), and that it was asked."""

    def change(caps: Capabilities) -> None:
        caps.probed_at = time.time()
        if context_length and not caps.context_length:
            caps.context_length = context_length
            caps.context_source = "/models"

    _store.update(endpoint_id, change)
