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
verifier (``judging.metrics.step_format_reward``) checks.

**The reference's parsing** is offered beside ours (``STEP_PARSERS``: a generation run's
``step_parser``), so that a run can give the L2 steps How2Judge's published numbers were
computed with. ``parse_steps_reference`` restates the reference CLI's rule:

1. The completion stripped; nothing when empty.
2. When ``</think>`` occurs, only what follows its last occurrence (stripped).
3. When both ``<answer>`` and ``</answer>`` occur (lower case only), only the text between
   the first ``<answer>`` and the first ``</answer>`` after it (stripped).
4. Every non-empty line (stripped) that starts with a number is a step: the number, then
   optional whitespace, at most one of ``)`` ``.`` ``:`` ``-`` and optional whitespace are
   removed, and the rest is kept when not empty (``1.5 cups`` -> ``5 cups``, ``3-4 eggs``
   -> ``4 eggs``). Lines that do not start with a number are dropped.
5. When no line gave a step, every non-empty line (stripped) is a step (tags included)."""

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
    # One group in the pattern: findall gives the group's text of each block.
    blocks: list[str] = _ANSWER_BLOCK.findall(body)
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


# A line that starts with a number, as the reference reads it (rule 4 of the module
# docstring): the separator is optional, so any leading number is taken for an item's.
_REFERENCE_ITEM = re.compile(r"\d+\s*[).:-]?\s*(.*)")


def parse_steps_reference(completion: str) -> list[str]:
    """The steps of a completion by the reference CLI's rule (module docstring)."""
    if not isinstance(completion, str):
        return []
    text = completion.strip()
    if not text:
        return []
    if _THINK_END in text:
        text = text.rsplit(_THINK_END, 1)[1].strip()
    if "<answer>" in text and "</answer>" in text:
        text = text.split("<answer>", 1)[1].split("</answer>", 1)[0].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    steps = []
    for line in lines:
        match = _REFERENCE_ITEM.match(line)
        if match is not None and match.group(1).strip():
            steps.append(match.group(1).strip())
    return steps or lines


# The step parsers a generation run may use (its ``step_parser``): ours (the default) and
# the reference CLI's; ``file`` is a run imported with the steps its file gave.
STEP_PARSER_PRODUCT = "product"
STEP_PARSER_REFERENCE = "reference"
STEP_PARSER_FILE = "file"
STEP_PARSERS = {STEP_PARSER_PRODUCT: parse_steps, STEP_PARSER_REFERENCE: parse_steps_reference}


def steps_parse(completion: str, *, parser: str = STEP_PARSER_PRODUCT) -> list[str]:
    """The steps of ``completion`` by the named parser (``STEP_PARSERS``)."""
    try:
        parse = STEP_PARSERS[parser]
    except KeyError:
        raise ValueError(f"unknown step parser {parser!r}: {' or '.join(STEP_PARSERS)}") from None
    return parse(completion)
