"""How2Score: reading a judge's answer and aggregating verdicts. Pure Python, no Django.

The judge answers (How2Everything App. H.3) with one JSON object::

    {"reasoning": "<string>",
     "critical_failures": [{"failure": "<string>", "L1_steps": [<int>], "L2_steps": [<int>]}]}

``has_failure`` is true when the list holds at least one critical failure (§4.2). How2Score
of a set of generations is 100 x (number labelled no_failure) / (number judged), overall and
per topic. An answer that cannot be read is neither a pass nor a fail: it is left out of
the score and counted in ``n_parse_failed``."""
from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from judging.constants import HOW2SCORE_SCALE
from judging.metrics import RecordFieldError, example_identity
from llm.json_extract import JSONExtractError, extract_json_object

FAILURE_FIELDS = ("failure", "L1_steps", "L2_steps")


class JudgeAnswerError(ValueError):
    """A judge's answer is not a How2Score answer; the message names the wrong field."""

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        self.detail = message
        super().__init__(f"field '{field}': {message}" if field else message)


def _step_list(value: Any, field: str, limit: int | None) -> list[int]:
    if not isinstance(value, list):
        raise JudgeAnswerError(f"expected a list of step numbers, got {type(value).__name__}", field)
    steps = []
    list_name = field.rsplit(".", 1)[-1].split("_")[0]  # "L1" or "L2"
    for index, item in enumerate(value):
        # bool is an int subclass in Python; true/false are not step numbers.
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise JudgeAnswerError(f"expected a step number (an integer >= 1), got {item!r}", f"{field}[{index}]")
        if limit is not None and item > limit:
            raise JudgeAnswerError(f"step {item} does not exist: {list_name} has steps 1 to {limit}", f"{field}[{index}]")
        steps.append(item)
    return steps


def validate_judge_answer(value: Any, *, n_l1: int | None = None, n_l2: int | None = None) -> dict[str, Any]:
    """Check the shape of a decoded answer and return it with only the known fields.

    With ``n_l1`` and ``n_l2`` (the step counts of the reference and of the candidate), a
    failure may only link steps 1..n_l1 of L1 and 1..n_l2 of L2, as an annotator's may.

    Raises ``JudgeAnswerError`` naming the first wrong field, e.g.
    ``critical_failures[1].L2_steps[0]``."""
    if not isinstance(value, dict):
        raise JudgeAnswerError(f"expected a JSON object, got {type(value).__name__}")
    if "reasoning" not in value:
        raise JudgeAnswerError("missing", "reasoning")
    reasoning = value["reasoning"]
    if not isinstance(reasoning, str):
        raise JudgeAnswerError(f"expected a string, got {type(reasoning).__name__}", "reasoning")
    if "critical_failures" not in value:
        raise JudgeAnswerError("missing", "critical_failures")
    raw_failures = value["critical_failures"]
    if not isinstance(raw_failures, list):
        raise JudgeAnswerError(f"expected a list, got {type(raw_failures).__name__}", "critical_failures")
    failures = []
    for index, raw in enumerate(raw_failures):
        where = f"critical_failures[{index}]"
        if not isinstance(raw, dict):
            raise JudgeAnswerError(f"expected an object, got {type(raw).__name__}", where)
        for name in FAILURE_FIELDS:
            if name not in raw:
                raise JudgeAnswerError("missing", f"{where}.{name}")
        text = raw["failure"]
        if not isinstance(text, str) or not text.strip():
            raise JudgeAnswerError(f"expected a non-empty string, got {text!r}", f"{where}.failure")
        failures.append({
            "failure": text,
            "L1_steps": _step_list(raw["L1_steps"], f"{where}.L1_steps", n_l1),
            "L2_steps": _step_list(raw["L2_steps"], f"{where}.L2_steps", n_l2),
        })
    return {"reasoning": reasoning, "critical_failures": failures}


def parse_judge_answer(text: str) -> dict[str, Any]:
    """Read a judge's raw answer text (reasoning traces, code fences and surrounding prose
    are tolerated) and validate it. Raises ``JudgeAnswerError`` when it cannot be read."""
    if not isinstance(text, str):
        raise JudgeAnswerError(f"expected the answer as text, got {type(text).__name__}")
    try:
        value = extract_json_object(text)
    except JSONExtractError as exc:
        raise JudgeAnswerError(str(exc)) from exc
    return validate_judge_answer(value)


def has_failure(answer: dict[str, Any]) -> bool:
    """True when the (validated) answer lists at least one critical failure."""
    return len(answer["critical_failures"]) > 0


def how2score(has_failure_labels: Iterable[bool]) -> float | None:
    """100 x (number of no_failure) / (number judged); None when nothing was judged."""
    labels = list(has_failure_labels)
    if not labels:
        return None
    return HOW2SCORE_SCALE * sum(1 for label in labels if not label) / len(labels)


class How2ScoreTally:
    """Counts verdicts as they come, overall and per topic.

    ``add(topic, None)`` records an answer that could not be read: counted in ``n`` and
    ``n_parse_failed``, left out of every score and of ``n_scored``."""

    def __init__(self) -> None:
        self.n = 0
        self.n_parse_failed = 0
        self._scored = 0
        self._passed = 0
        self._topics: dict[str, list[int]] = {}  # topic -> [n_scored, n_no_failure]

    def add(self, topic: str, has_failure_label: bool | None) -> None:
        self.n += 1
        counts = self._topics.setdefault(topic, [0, 0])
        if has_failure_label is None:
            self.n_parse_failed += 1
            return
        self._scored += 1
        counts[0] += 1
        if not has_failure_label:
            self._passed += 1
            counts[1] += 1

    @staticmethod
    def _score(passed: int, scored: int) -> float | None:
        return HOW2SCORE_SCALE * passed / scored if scored else None

    def result(self) -> dict[str, Any]:
        """``{"how2score", "n", "n_scored", "n_parse_failed", "by_topic"}``.

        ``by_topic`` has every topic seen, sorted by name, each ``{"how2score",
        "n_scored"}``; a score is None where nothing was scored."""
        return {
            "how2score": self._score(self._passed, self._scored),
            "n": self.n,
            "n_scored": self._scored,
            "n_parse_failed": self.n_parse_failed,
            "by_topic": {
                topic: {"how2score": self._score(passed, scored), "n_scored": scored}
                for topic, (scored, passed) in sorted(self._topics.items())
            },
        }


def how2score_aggregate(verdicts: Iterable[tuple[str, bool | None]]) -> dict[str, Any]:
    """``How2ScoreTally`` over ``(topic, has_failure or None for unreadable)`` pairs."""
    tally = How2ScoreTally()
    for topic, label in verdicts:
        tally.add(topic, label)
    return tally.result()


@dataclass(frozen=True)
class JudgmentRecord:
    """One input line of ``bench_aggregate``: a verdict, or an answer that was unreadable."""

    source_example_id: str | int
    topic: str
    has_failure: bool | None
    """None when ``judge_completion`` could not be read as a How2Score answer."""
    parse_error: str | None


def judgment_record(record: dict[str, Any]) -> JudgmentRecord:
    """Check one ``bench_aggregate`` input record and read its verdict.

    Required: ``source_example_id``, ``topic`` and either ``has_failure`` (true/false) or
    ``judge_completion`` (the judge's raw answer text, read with ``parse_judge_answer``).
    ``has_failure`` wins when both are given. An unreadable ``judge_completion`` is not an
    error of the record: it becomes ``has_failure=None`` with the reason in
    ``parse_error``. Raises ``RecordFieldError`` for a malformed record."""
    example_id, topic = example_identity(record)
    label = record.get("has_failure")
    if label is not None:
        if not isinstance(label, bool):
            raise RecordFieldError("has_failure", f"expected true or false, got {label!r}")
        return JudgmentRecord(example_id, topic, label, None)
    if record.get("judge_completion") is None:
        raise RecordFieldError("has_failure", "missing: give has_failure or judge_completion")
    completion = record["judge_completion"]
    if not isinstance(completion, str):
        raise RecordFieldError("judge_completion", f"expected a string, got {type(completion).__name__}")
    try:
        answer = parse_judge_answer(completion)
    except JudgeAnswerError as exc:
        return JudgmentRecord(example_id, topic, None, str(exc))
    return JudgmentRecord(example_id, topic, has_failure(answer), None)


# The judge's answer as a JSON schema (How2Everything App. H.3, Figure 22), sent as the
# structured output of the how2score_judge stage.
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "critical_failures": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "failure": {"type": "string"},
                    "L1_steps": {"type": "array", "items": {"type": "integer"}},
                    "L2_steps": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["failure", "L1_steps", "L2_steps"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["reasoning", "critical_failures"],
    "additionalProperties": False,
}


def judge_schema(*, n_l1: int, n_l2: int) -> dict[str, Any]:
    """``JUDGE_SCHEMA`` for one pair of step lists: L1 links are integers in 1..n_l1 and L2
    links in 1..n_l2. A server that enforces the schema cannot link a missing step; the
    client's own validation of the answer (llm/client.py) turns one that does into
    ``parse_failed`` and re-asks with the validation message, which names the field.
    Servers that refuse ``minimum``/``maximum`` fall back to JSON mode, where the same
    validation applies."""
    schema = copy.deepcopy(JUDGE_SCHEMA)
    links = schema["properties"]["critical_failures"]["items"]["properties"]
    links["L1_steps"]["items"].update(minimum=1, maximum=n_l1)
    links["L2_steps"]["items"].update(minimum=1, maximum=n_l2)
    return schema
