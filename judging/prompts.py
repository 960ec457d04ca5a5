"""Prompt files of generation and judge runs: replaceable text files rendered with
Python's ``str.format`` (so the paper's released prompt files can be dropped in as they
are), identified by the SHA-256 of their text, which every run records."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings

from llm.prompts import Prompt, PromptError, prompt_read
# The same renderings as the mining prompts: steps one per line "1. …", resources "[a, b, c]".
from mining.stages import bracketed as resource_list, numbered_steps as numbered

__all__ = ["PLACEHOLDERS", "Prompt", "PromptError", "prompt_path", "prompt_load", "numbered", "resource_list"]

# Placeholders each kind of prompt is rendered with.
PLACEHOLDERS = {
    "generate": {"goal", "resources", "n"},
    "how2score_judge": {"goal", "reference_steps", "steps"},
    "extract_components": {"steps"},
}


def prompt_path(name_or_path: str) -> Path:
    """A bare file name is looked up in JUDGING_PROMPTS_DIR; anything else is a path."""
    path = Path(name_or_path)
    if not path.is_absolute() and path.parent == Path("."):
        path = Path(settings.JUDGING_PROMPTS_DIR) / path
    return path


def prompt_load(name_or_path: str, *, kind: str) -> Prompt:
    return prompt_read(prompt_path(name_or_path), expected=PLACEHOLDERS[kind], kind=kind)
