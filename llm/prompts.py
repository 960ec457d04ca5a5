"""Prompt files: replaceable text files rendered with Python's ``str.format``, checked for
their placeholders when loaded, and identified by the SHA-256 of their text, which every
run that uses one records. Mining stages, generation and the How2Score judge all load
their prompts through :func:`prompt_read`."""
from __future__ import annotations

import hashlib
import string
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


class PromptError(ValueError):
    """A prompt file cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Prompt:
    path: str
    text: str
    sha256: str

    def render(self, **values: object) -> str:
        try:
            return self.text.format(**values)
        except (KeyError, IndexError, ValueError) as exc:
            raise PromptError(f"{self.path}: cannot fill the prompt ({exc.__class__.__name__}: {exc})") from exc


def prompt_read(path: str | Path, *, expected: Iterable[str], kind: str) -> Prompt:
    """Read a prompt file that must use exactly the placeholders ``expected``."""
    expected = set(expected)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(f"{path}: cannot read the prompt file ({exc.strerror or exc})") from exc
    try:
        used = {field for _, field, _, _ in string.Formatter().parse(text) if field}
    except ValueError as exc:
        raise PromptError(f"{path}: not a valid template ({exc}; write literal braces as {{{{ }}}})") from exc
    unknown = used - expected
    if unknown:
        raise PromptError(f"{path}: unknown placeholder(s) {', '.join(sorted(unknown))}; "
                          f"a {kind} prompt may use {', '.join(sorted(expected))} (write literal braces as {{{{ }}}})")
    missing = expected - used
    if missing:
        raise PromptError(f"{path}: the prompt never uses {', '.join(sorted(missing))}")
    return Prompt(path=str(path), text=text, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())
