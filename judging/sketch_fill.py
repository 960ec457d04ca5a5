"""Reading and checking the Sketch-and-Fill format (Thoth/SciRecipe §3.2, §3.3.2 Format
Gate, App. L Figure 20). Pure Python, no Django.

A Sketch-and-Fill answer has four sections, in this order::

    <think> reasoning </think>
    <key>
    Step 1: {"action": "centrifuge", "objects": ["cells"], "parameters": ["300xg", "5 min"]}
    ...
    </key>
    <orc>
    Step 1: Centrifuge the cells at 300xg for 5 min.
    ...
    </orc>
    <note> safety notes </note>

``parse_sketch_fill`` reads one and lists every problem it finds, each saying which
section and which step (and on which line of the answer). The format gate passes when
there is no problem. What is checked here, and what is left to the consistency gate
(``judging.score_metric``), is stated in docs/score.md:

* the four sections each appear exactly once, opened and closed, in order; text outside
  them (a ``<question>`` block, blank lines) is ignored; tags are matched in any case;
* ``<key>`` and ``<orc>`` hold at least one step each; a step starts on a line
  ``Step N:`` (optionally after a ``-``/``*`` bullet) and runs until the next such line,
  so a step's JSON or sentence may wrap onto following lines; code-fence lines are
  ignored; other text before the first step is a problem;
* every ``<key>`` step is one double-quoted JSON object with exactly the keys ``action``
  (a non-empty string), ``objects`` and ``parameters`` (lists of non-empty strings), with
  no key repeated and nothing after the object;
* every ``<orc>`` step has a sentence;
* ``<think>`` and ``<note>`` may be empty (a model run with thinking switched off writes
  ``<think></think>``).

Step numbers are read but not checked here: numbering 1..N and the same count in
``<key>`` and ``<orc>`` are the consistency gate's conditions (App. C.1, Eq. (12))."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from judging.components import ComponentsError, StepComponents, components_from_dict
from judging.constants import SKETCH_FILL_TAGS

_TAG = re.compile(r"<(/?)(" + "|".join(SKETCH_FILL_TAGS) + r")\s*>", re.IGNORECASE)
_STEP_LINE = re.compile(r"^\s*(?:[-*\u2022]\s*)?step\s+(\d+)\s*:\s?(.*)$", re.IGNORECASE)
_FENCE_LINE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class SketchFillProblem:
    """One thing wrong with a Sketch-and-Fill answer, and where: the section (``"key"``,
    ``None`` for the whole answer), the step number as written, and the 1-based line."""

    section: str | None
    step: int | None
    line: int | None
    message: str

    def __str__(self) -> str:
        """``<key>, Step 3 (line 7): field 'objects': expected a list of strings, got str``."""
        parts = []
        if self.section is not None:
            parts.append(f"<{self.section}>")
        if self.step is not None:
            parts.append(f"Step {self.step}")
        where = ", ".join(parts)
        if self.line is not None:
            where = f"{where} (line {self.line})" if where else f"line {self.line}"
        return f"{where}: {self.message}" if where else self.message


@dataclass(frozen=True)
class KeyStep:
    """A ``<key>`` step: its number as written, its triple and the line it starts on."""

    number: int
    components: StepComponents
    line: int


@dataclass(frozen=True)
class OrcStep:
    """An ``<orc>`` step: its number as written, its sentence and the line it starts on."""

    number: int
    text: str
    line: int


@dataclass(frozen=True)
class SketchFill:
    """A read Sketch-and-Fill answer. Steps that could not be read are left out of
    ``key_steps`` and described in ``problems``."""

    think: str
    key_steps: tuple[KeyStep, ...]
    orc_steps: tuple[OrcStep, ...]
    note: str
    problems: tuple[SketchFillProblem, ...]

    @property
    def format_ok(self) -> bool:
        """The format gate (§3.3.2): True when nothing is wrong."""
        return not self.problems

    @property
    def actions(self) -> tuple[str, ...]:
        return tuple(step.components.action for step in self.key_steps)


@dataclass(frozen=True)
class _Section:
    name: str
    body: str
    first_line: int  # the line of the answer on which ``body`` starts


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _sections(text: str, problems: list[SketchFillProblem]) -> dict[str, _Section]:
    """The four sections that can be located; every structural problem is recorded."""
    opens: dict[str, list[re.Match[str]]] = {name: [] for name in SKETCH_FILL_TAGS}
    closes: dict[str, list[re.Match[str]]] = {name: [] for name in SKETCH_FILL_TAGS}
    for match in _TAG.finditer(text):
        (closes if match.group(1) else opens)[match.group(2).lower()].append(match)
    found: dict[str, _Section] = {}
    spans: list[tuple[str, int, int]] = []
    for name in SKETCH_FILL_TAGS:
        n_open, n_close = len(opens[name]), len(closes[name])
        if n_open == 0 and n_close == 0:
            problems.append(
                SketchFillProblem(name, None, None, f"missing: the answer has no <{name}>...</{name}> section")
            )
            continue
        if n_open != 1 or n_close != 1:
            line = _line_of(text, (opens[name] or closes[name])[-1].start())
            problems.append(
                SketchFillProblem(
                    name,
                    None,
                    line,
                    f"expected <{name}> and </{name}> once each, found <{name}> {n_open} time(s) and </{name}> {n_close} time(s)",
                )
            )
            continue
        start, end = opens[name][0], closes[name][0]
        if end.start() < start.end():
            problems.append(
                SketchFillProblem(name, None, _line_of(text, end.start()), f"</{name}> comes before <{name}>")
            )
            continue
        body = text[start.end() : end.start()]
        found[name] = _Section(name, body, _line_of(text, start.end()))
        spans.append((name, start.start(), end.end()))
    spans.sort(key=lambda span: span[1])
    order = [name for name, _, _ in spans]
    expected = [name for name in SKETCH_FILL_TAGS if name in order]
    overlapping = any(before[2] > after[1] for before, after in zip(spans, spans[1:]))
    if order != expected or overlapping:
        written = ", ".join(f"<{name}>" for name in order)
        wanted = ", ".join(f"<{name}>" for name in SKETCH_FILL_TAGS)
        problems.append(
            SketchFillProblem(
                None,
                None,
                None,
                f"sections out of order or nested: expected {wanted} one after another, found {written}",
            )
        )
    return found


def _step_blocks(section: _Section, problems: list[SketchFillProblem]) -> list[tuple[int, int, str]]:
    """``(number, line, text)`` of every ``Step N:`` block of a section."""
    blocks: list[tuple[int, int, list[str]]] = []
    for offset, raw in enumerate(section.body.split("\n")):
        line = section.first_line + offset
        if _FENCE_LINE.match(raw):
            continue
        match = _STEP_LINE.match(raw)
        if match:
            blocks.append((int(match.group(1)), line, [match.group(2)]))
        elif blocks:
            blocks[-1][2].append(raw)
        elif raw.strip():
            problems.append(
                SketchFillProblem(
                    section.name,
                    None,
                    line,
                    f"expected a line 'Step N: ...', got {_excerpt(raw.strip())}",
                )
            )
    if not blocks:
        problems.append(
            SketchFillProblem(
                section.name, None, section.first_line, "no steps: expected lines 'Step 1: ...', 'Step 2: ...'"
            )
        )
    return [(number, line, "\n".join(lines).strip()) for number, line, lines in blocks]


def _excerpt(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for name, value in pairs:
        if name in seen:
            raise ComponentsError(name, "repeated key")
        seen[name] = value
    return seen


def _decode_key_step(text: str) -> StepComponents:
    """The triple of one ``<key>`` step's text; ``ComponentsError`` says what is wrong."""
    if not text:
        raise ComponentsError(None, "no JSON object after 'Step N:'")
    if not text.startswith("{"):
        raise ComponentsError(None, f"expected a JSON object starting with '{{', got {_excerpt(text)}")
    try:
        value, end = json.JSONDecoder(object_pairs_hook=_no_repeated_keys).raw_decode(text)
    except json.JSONDecodeError as exc:
        hint = (
            " (single quotes are not JSON: write keys and strings in double quotes)"
            if "'" in text[: exc.pos + 1]
            else ""
        )
        raise ComponentsError(
            None, f"not a double-quoted JSON object: {exc.msg} at character {exc.pos + 1}{hint}"
        ) from exc
    trailing = text[end:].strip()
    if trailing:
        raise ComponentsError(None, f"text after the JSON object: {_excerpt(trailing)} (one JSON object per step)")
    return components_from_dict(value)


def parse_sketch_fill(text: str) -> SketchFill:
    """Read a Sketch-and-Fill answer; ``problems`` lists everything wrong with it."""
    problems: list[SketchFillProblem] = []
    sections = _sections(text, problems)
    key_steps: list[KeyStep] = []
    if "key" in sections:
        for number, line, body in _step_blocks(sections["key"], problems):
            try:
                key_steps.append(KeyStep(number, _decode_key_step(body), line))
            except ComponentsError as exc:
                problems.append(SketchFillProblem("key", number, line, str(exc)))
    orc_steps: list[OrcStep] = []
    if "orc" in sections:
        for number, line, body in _step_blocks(sections["orc"], problems):
            if not body:
                problems.append(SketchFillProblem("orc", number, line, "no sentence after 'Step N:'"))
                continue
            orc_steps.append(OrcStep(number, " ".join(body.split()), line))
    return SketchFill(
        think=sections["think"].body.strip() if "think" in sections else "",
        key_steps=tuple(key_steps),
        orc_steps=tuple(orc_steps),
        note=sections["note"].body.strip() if "note" in sections else "",
        problems=tuple(problems),
    )
