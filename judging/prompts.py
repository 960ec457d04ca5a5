"""Prompt files of generation and judge runs: replaceable text files rendered with
Python's ``str.format`` (so the paper's released prompt files can be dropped in as they
are), identified by the SHA-256 of their text, which every run records.

The values are filled in as the reference CLI fills them, so that with its prompt files
every request is the reference's, byte for byte (docs/how2bench.md, "Prompt files"):
goal stripped; steps and resources stripped with empty ones dropped; steps one per line
``1. …``; resources (generation) as a JSON list (``[]`` when empty); the judge's prompt
followed by a blank line and ``Return only valid json.``."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings

from llm.prompts import Prompt, PromptError, prompt_locate, prompt_read, prompts_dir_setting

# Steps are shown as in the mining prompts: one per line "1. …".
from mining.stages import numbered_steps

__all__ = [
    "PLACEHOLDERS",
    "Prompt",
    "PromptError",
    "prompt_path",
    "prompt_load",
    "numbered_steps",
    "resource_list",
    "cleaned",
    "generation_values",
    "judge_values",
    "JUDGE_SUFFIX",
]

# Appended to every judge prompt, as the reference CLI does (JSON mode of OpenAI-compatible
# servers wants the word "json" in the prompt).
JUDGE_SUFFIX = "\n\nReturn only valid json."


def cleaned(items: Iterable) -> list[str]:
    """Items stripped, empty ones dropped (None is no item)."""
    return [text for text in (str(item).strip() for item in items if item is not None) if text]


def resource_list(items: Iterable[str]) -> str:
    """Resources as the generation prompt shows them: a JSON list, letters beyond ASCII as
    they are (``["oil, olive or canola", "pan"]``; ``[]`` when empty)."""
    items = list(items)
    return json.dumps(items, ensure_ascii=False) if items else "[]"


def generation_values(goal: str, steps: Iterable[str], resources: Iterable[str]) -> dict[str, object]:
    """The placeholders of a generation prompt for one procedure; ``n`` is its step count."""
    return {"goal": goal.strip(), "resources": resource_list(cleaned(resources)), "n": len(cleaned(steps))}


def judge_values(goal: str, reference_steps: Iterable[str], steps: Iterable[str]) -> dict[str, str]:
    """The placeholders of a judge prompt: L1 (the reference) and L2 (the candidate)."""
    return {
        "goal": goal.strip(),
        "reference_steps": numbered_steps(cleaned(reference_steps)),
        "steps": numbered_steps(cleaned(steps)),
    }


# Placeholders each kind of prompt is rendered with.
PLACEHOLDERS = {
    "generate": {"goal", "resources", "n"},
    "how2score_judge": {"goal", "reference_steps", "steps"},
    "extract_components": {"steps"},
}


def prompt_path(name_or_path: str) -> Path:
    """A bare file name is looked for in PROMPTS_DIR (also under the reference CLI's name:
    inference_inst.txt, inference_base.txt, judge.txt), then in JUDGING_PROMPTS_DIR;
    anything else is a path."""
    return prompt_locate(name_or_path, bundled_dir=settings.JUDGING_PROMPTS_DIR, prompts_dir=prompts_dir_setting())


def prompt_load(name_or_path: str, *, kind: str, placeholders: Iterable[str] | None = None) -> Prompt:
    """The prompt file checked for the placeholders of its ``kind``: those of
    :data:`PLACEHOLDERS`, or ``placeholders`` for a kind this module does not know (an app
    above judging passes its own, e.g. goal-step answers)."""
    expected = set(placeholders) if placeholders is not None else PLACEHOLDERS[kind]
    return prompt_read(prompt_path(name_or_path), expected=expected, kind=kind)
