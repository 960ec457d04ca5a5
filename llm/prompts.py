"""Prompt files: replaceable text files rendered with Python's ``str.format``, checked for
their placeholders when loaded, and identified by the SHA-256 of their text, which every
run that uses one records. Mining stages, generation and the How2Score judge all load
their prompts through :func:`prompt_read`, and find them through :func:`prompt_locate`:
one folder (the ``PROMPTS_DIR`` setting) can hold every stage's prompt, under the
product's file name or under the reference CLI's (``REFERENCE_PROMPT_NAMES``)."""

from __future__ import annotations

import hashlib
import string
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from core.app_errors import InvalidInput

# The reference CLI's file name of each prompt the product ships (its prompts/ folder):
# a folder of the reference's prompts is used as it is, file for file.
REFERENCE_PROMPT_NAMES: dict[str, str] = {
    "extract_procedure.txt": "extract_procedures.txt",
    "llm_filter.txt": "filter.txt",
    "rewrite.txt": "postprocess.txt",
    "extract_resources.txt": "extract_resources.txt",
    "final_validation.txt": "final_filter.txt",
    "generate_base.txt": "inference_base.txt",
    "generate_inst.txt": "inference_inst.txt",
    "how2score_judge.txt": "judge.txt",
}


def prompt_locate(name_or_path: str | Path, *, bundled_dir: str | Path, prompts_dir: str | Path | None = None) -> Path:
    """Where a prompt file is. A path (absolute, or naming a folder) is used as given. A
    bare file name is looked for in ``prompts_dir`` (the ``PROMPTS_DIR`` setting), first
    under that name, then under the reference CLI's name for it; when it is in neither, or
    no folder is set, it is the app's own file in ``bundled_dir``."""
    path = Path(name_or_path)
    if path.is_absolute() or path.parent != Path("."):
        return path
    if prompts_dir:
        folder = Path(prompts_dir)
        for name in (path.name, REFERENCE_PROMPT_NAMES.get(path.name)):
            if name and (folder / name).is_file():
                return folder / name
    return Path(bundled_dir) / path


def prompts_dir_setting() -> str:
    """The ``PROMPTS_DIR`` setting (empty: every stage uses its app's own prompts)."""
    from django.conf import settings

    return getattr(settings, "PROMPTS_DIR", "") or ""


class PromptError(InvalidInput):
    """A prompt file cannot be used; the message names the file and the problem (400: a run's
    configuration names the file)."""


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
        raise PromptError(
            f"{path}: unknown placeholder(s) {', '.join(sorted(unknown))}; "
            f"a {kind} prompt may use {', '.join(sorted(expected))} (write literal braces as {{{{ }}}})"
        )
    missing = expected - used
    if missing:
        raise PromptError(f"{path}: the prompt never uses {', '.join(sorted(missing))}")
    return Prompt(path=str(path), text=text, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())
