"""Step parsing of a model's completion into a procedure's steps. Pure Python, no Django.

The rules (How2Bench generation runs, How2Everything §5 and App. H.2):

1. Drop everything up to and including the last ``</think>`` (a reasoning trace).
2. If an ``<answer>…</answer>`` block is present, keep only its inside (the last block
   when there are several). An ``<answer>`` that is never closed (a cut-off answer)
   keeps everything after it.
3. Lines that are numbered items are the steps, with the number removed. A numbered item
   is optional leading whitespace, a number (decimal digits, any script), optional
   whitespace, one of ``.`` ``)`` ``:`` ``-``, then the step's text after optional
   whitespace: ``1. Mix``, ``  2) Stir``, ``3: Bake``, ``4 - Serve``, ``5.Rest``,
   ``6 . Cut``. When no whitespace follows the separator the text must not start with a
   digit, so ``1.5 cups``, ``3-4 eggs`` or ``10:30`` at the start of a line are text, not
   items. Text before, between or after the items is ignored.
4. If no line is a numbered item, every non-empty line (stripped) is a step.

These rules agree with the reference CLI's step extraction except where it reads a line
that merely starts with a number as an item (``2 eggs.`` -> ``eggs.``, ``1.5 cups`` ->
``5 cups``), takes the first rather than the last ``<answer>`` block, matches the tags
in lower case only, and keeps the whole text (tag included) when ``</answer>`` is
missing; docs/how2bench.md lists each difference and tests/test_reference_step_parsing.py
proves them.

``parse_completion`` also returns the item numbers as written, which the step-format
verifier (``judging.metrics.step_format_reward``) checks."""

from __future__ import annotations

import re
from dataclasses import dataclass

_THINK_END = "</think>"
_ANSWER_OPEN = "<answer>"
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
# A number, optional spaces, ".", ")", ":" or "-", then some text: after whitespace, or
# directly when it does not start with a digit ("1.Mix" is item 1; "1.5 cups" or "3-4
# eggs" at the start of a line are not items).
_NUMBERED_ITEM = re.compile(r"^\s*(\d+)\s*[.):-](?:\s+|(?=[^\d\s]))(\S.*)$")


@dataclass(frozen=True)
class ParsedCompletion:
    """What step parsing found in one completion."""

    answer: str
    """The text the steps were read from: reasoning removed, ``<answer>`` inside kept."""
    steps: tuple[str, ...]
    """The steps, in order, numbers removed and whitespace stripped."""
    numbers: tuple[int, ...]
    """The item numbers as written, in order; empty when no line was a numbered item."""

    @property
    def numbered(self) -> bool:
        """True when the steps came from numbered items, False when from plain lines."""
        return bool(self.numbers)


def strip_reasoning(text: str) -> str:
    """Drop everything up to and including the last ``</think>``."""
    marker = text.rfind(_THINK_END)
    return text[marker + len(_THINK_END) :] if marker >= 0 else text


def answer_text(completion: str) -> str:
    """The final answer of a completion: reasoning removed and, when the answer is wrapped
    in ``<answer>`` tags, only the inside of the (last) block."""
    body = strip_reasoning(completion)
    blocks = _ANSWER_BLOCK.findall(body)
    if blocks:
        return blocks[-1]
    opening = body.lower().rfind(_ANSWER_OPEN)
    if opening >= 0:
        return body[opening + len(_ANSWER_OPEN) :]
    return body


def numbered_item(line: str) -> tuple[int, str] | None:
    """``(number, text)`` when ``line`` is a numbered item, else None."""
    match = _NUMBERED_ITEM.match(line)
    if match is None:
        return None
    return int(match.group(1)), match.group(2).strip()


def parse_completion(completion: str) -> ParsedCompletion:
    """Parse a completion into steps by the rules in this module's docstring."""
    if not isinstance(completion, str):
        raise TypeError(f"a completion must be a string, got {type(completion).__name__}")
    answer = answer_text(completion)
    lines = answer.splitlines()
    items = [item for item in (numbered_item(line) for line in lines) if item is not None]
    if items:
        return ParsedCompletion(
            answer=answer,
            steps=tuple(text for _, text in items),
            numbers=tuple(number for number, _ in items),
        )
    plain = tuple(line.strip() for line in lines if line.strip())
    return ParsedCompletion(answer=answer, steps=plain, numbers=())


def parse_steps(completion: str) -> list[str]:
    """Just the steps of ``parse_completion``."""
    return list(parse_completion(completion).steps)
