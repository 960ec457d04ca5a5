"""Reading what the model wrote in CoScript's stages, and the prompts' example blocks.
Pure Python, no Django.

Specific-goal completions (§4.2, Table 2 I) are lines of ``Constraint: <c>; Specific Goal:
<g>`` (the two parts may also stand on two lines, and a line may carry a bullet or a
number). Reading stops where the model starts a new ``Abstract Goal:`` of its own. A pair is
dropped, with its reason counted, when a part is empty, when the specific goal is the
abstract goal itself, when it is longer than :data:`MAX_GOAL_CHARS`, or when it repeats a
specific goal already read for the same abstract goal (the paper de-duplicates, §5.1).
An answer from which no pair at all can be read (prose, a lone ``Constraint:`` line, an
empty completion) gives nothing: :data:`ANSWER_NO_PAIR`, counted per answer by the run.

Screen answers (App. C.2, Table 12) are ``Yes`` or ``No``; anything else is unreadable and
the goal goes to the review list, because a screen that cannot answer has not cleared it."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from judging.steps import strip_reasoning
from mining.words import normalise_text

MAX_GOAL_CHARS = 300
MAX_CONSTRAINT_CHARS = 150

_PAIR_ONE_LINE = re.compile(r"constraint\s*:\s*(?P<c>.*?)\s*[;|]\s*specific\s+goal\s*:\s*(?P<g>.*)$", re.IGNORECASE)
_CONSTRAINT_ONLY = re.compile(r"constraint\s*:\s*(?P<c>.*)$", re.IGNORECASE)
_GOAL_ONLY = re.compile(r"specific\s+goal\s*:\s*(?P<g>.*)$", re.IGNORECASE)
_ABSTRACT = re.compile(r"abstract\s+goal\s*:", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|\(\d+\))\s*")

# Why a specific goal read from a completion was not kept.
DROP_EMPTY = "empty"
DROP_SAME_AS_ABSTRACT = "same_as_abstract_goal"
DROP_TOO_LONG = "too_long"
DROP_DUPLICATE = "duplicate"

# Why an answer (one completion: an abstract goal and a constraint type, §4.2) gave the run
# no specific goal: no pair could be read from it at all, or every pair it had was dropped
# (each pair's reason counted above).
ANSWER_NO_PAIR = "no_constraint_pair"
ANSWER_PAIRS_DROPPED = "pairs_dropped"


@dataclass(frozen=True)
class ConstrainedGoal:
    constraint: str
    specific_goal: str


@dataclass
class GoalsReading:
    """The pairs kept, the pairs dropped by reason, and how many pairs were read at all
    (``pairs_read`` 0: an answer without a constraint pair)."""

    goals: list[ConstrainedGoal] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)
    pairs_read: int = 0


def _clean(text: str) -> str:
    return " ".join(text.strip().strip("\"'*").split()).rstrip(".").strip()


def _raw_pairs(completion: str) -> Iterable[tuple[str, str]]:
    pending: str | None = None
    for raw in completion.splitlines():
        line = _BULLET.sub("", raw.strip())
        if not line:
            continue
        if _ABSTRACT.match(line):
            break  # the model went on to an abstract goal of its own
        pair = _PAIR_ONE_LINE.match(line)
        if pair:
            pending = None
            yield pair["c"], pair["g"]
            continue
        goal = _GOAL_ONLY.match(line)
        if goal and pending is not None:
            yield pending, goal["g"]
            pending = None
            continue
        constraint = _CONSTRAINT_ONLY.match(line)
        if constraint:
            pending = constraint["c"]


def parse_specific_goals(completion: str, *, abstract_goal: str, seen: set[str] | None = None) -> GoalsReading:
    """The (constraint, specific goal) pairs of one completion. ``seen`` holds the normalised
    specific goals already kept for the same abstract goal and is updated in place."""
    seen = set() if seen is None else seen
    reading = GoalsReading()
    abstract = normalise_text(abstract_goal)
    for raw_constraint, raw_goal in _raw_pairs(completion):
        reading.pairs_read += 1
        constraint, goal = _clean(raw_constraint), _clean(raw_goal)
        key = normalise_text(goal)
        if not constraint or not key:
            reading.dropped[DROP_EMPTY] += 1
        elif key == abstract:
            reading.dropped[DROP_SAME_AS_ABSTRACT] += 1
        elif len(goal) > MAX_GOAL_CHARS or len(constraint) > MAX_CONSTRAINT_CHARS:
            reading.dropped[DROP_TOO_LONG] += 1
        elif key in seen:
            reading.dropped[DROP_DUPLICATE] += 1
        else:
            seen.add(key)
            reading.goals.append(ConstrainedGoal(constraint=constraint, specific_goal=goal))
    return reading


def parse_screen_answer(completion: str) -> bool | None:
    """True for Yes (a sensitive domain), False for No, None when the answer says neither."""
    text = re.sub(r"^\W*answer\s*:", "", strip_reasoning(completion).strip(), flags=re.IGNORECASE)
    match = re.search(r"[A-Za-z]+", text)
    if not match:
        return None
    word = match.group(0).casefold()
    return True if word == "yes" else False if word == "no" else None


def goal_examples_block(examples: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> str:
    """Table 13's examples as the prompt shows them (Table 2 I)."""
    parts = []
    for abstract, pairs in examples:
        lines = [f"Abstract Goal: {abstract}"]
        lines += [f"Constraint: {constraint}; Specific Goal: {goal}" for constraint, goal in pairs]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def script_examples_block(examples: Sequence[tuple[str, Sequence[str]]]) -> str:
    """Retrieved goals with their numbered steps (Table 2 II)."""
    parts = []
    for goal, steps in examples:
        numbered = "\n".join(f"{n}. {step}" for n, step in enumerate(steps, start=1))
        parts.append(f"Goal: {goal}\nSteps:\n{numbered}")
    return "\n\n".join(parts)
