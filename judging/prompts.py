"""Prompt files of generation and judge runs: replaceable text files rendered with
Python's ``str.format`` (so the paper's released prompt files can be dropped in as they
are), identified by the SHA-256 of their text, which every run records."""
from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

# Placeholders each kind of prompt is rendered with.
PLACEHOLDERS = {
    "generate": {"goal", "resources", "n"},
    "how2score_judge": {"goal", "reference_steps", "steps"},
}


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


def prompt_path(name_or_path: str) -> Path:
    """A bare file name is looked up in JUDGING_PROMPTS_DIR; anything else is a path."""
    path = Path(name_or_path)
    if not path.is_absolute() and path.parent == Path("."):
        path = Path(settings.JUDGING_PROMPTS_DIR) / path
    return path


def prompt_load(name_or_path: str, *, kind: str) -> Prompt:
    path = prompt_path(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(f"{path}: cannot read the prompt file ({exc.strerror or exc})") from exc
    used = {field for _, field, _, _ in string.Formatter().parse(text) if field}
    expected = PLACEHOLDERS[kind]
    unknown = used - expected
    if unknown:
        raise PromptError(f"{path}: unknown placeholder(s) {', '.join(sorted(unknown))}; "
                          f"a {kind} prompt may use {', '.join(sorted(expected))} (write literal braces as {{{{ }}}})")
    missing = expected - used
    if missing:
        raise PromptError(f"{path}: the prompt never uses {', '.join(sorted(missing))}")
    return Prompt(path=str(path), text=text, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())


def numbered(steps: list[str]) -> str:
    return "\n".join(f"{n}. {step}" for n, step in enumerate(steps, start=1))


def resource_list(resources: list[str]) -> str:
    """Resources as the paper's prompts show them: ``[a, b, c]``."""
    return "[" + ", ".join(resources) + "]"
