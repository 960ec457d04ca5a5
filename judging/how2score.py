"""How2Score: reading a judge's answer and aggregating verdicts. Pure Python, no Django.

The judge answers (How2Everything App. H.3) with one JSON object::

    {"reasoning": "<string>",
     "critical_failures": [{"failure": "<string>", "L1_steps": [<int>], "L2_steps": [<int>]}]}

``has_failure`` is true when the list holds at least one critical failure (§4.2). How2Score
of a set of generations is 100 x (number labelled no_failure) / (number judged), overall and
per topic. An answer that cannot be read is neither a pass nor a fail: it is left out of
the score and counted in ``n_unusable`` (``n_parse_failed`` in files). Every score comes
with its 95 % Wilson interval and its coverage (``how2score_estimate``).

One scale rule for every machine output (API, commands, exports), the reference CLI's: a
score or interval field without a suffix is on 0-1 (``how2score``, ``ci95``,
``difference``), the same field with ``_percent`` is the same number on 0-100
(``how2score_percent``, ``ci95_percent``, ``difference_percent``). ``score_forms`` and
``percent_forms`` are the only places the two forms are made; pages show the ``_percent``
forms."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypedDict

from core.intervals import WILSON, wilson_interval
from core.record_files import RecordError
from judging.constants import HOW2SCORE_SCALE
from judging.metrics import example_identity
from llm.json_extract import JSONExtractError, extract_json_object

FAILURE_FIELDS = ("failure", "L1_steps", "L2_steps")


class JudgeAnswerError(ValueError):
    """A judge's answer is not a How2Score answer; the message names the wrong field."""

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        self.detail = message
        super().__init__(f"field '{field}': {message}" if field else message)


def _step_list(value: Any, field: str, limit: int | None, *, imported: bool = False) -> list[int]:
    if not isinstance(value, list):
        raise JudgeAnswerError(f"expected a list of step numbers, got {type(value).__name__}", field)
    steps = []
    list_name = field.rsplit(".", 1)[-1].split("_")[0]  # "L1" or "L2"
    for index, item in enumerate(value):
        if imported and item == 0 and not isinstance(item, bool):
            continue  # a file's step 0 links no step: kept in the record, not stored as a link
        # bool is an int subclass in Python; true/false are not step numbers.
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise JudgeAnswerError(f"expected a step number (an integer >= 1), got {item!r}", f"{field}[{index}]")
        if limit is not None and item > limit:
            raise JudgeAnswerError(
                f"step {item} does not exist: {list_name} has steps 1 to {limit}", f"{field}[{index}]"
            )
        steps.append(item)
    return steps


def validate_judge_answer(
    value: Any, *, n_l1: int | None = None, n_l2: int | None = None, imported: bool = False
) -> dict[str, Any]:
    """Check the shape of a decoded answer and return it with only the known fields.

    With ``n_l1`` and ``n_l2`` (the step counts of the reference and of the candidate), a
    failure may only link steps 1..n_l1 of L1 and 1..n_l2 of L2, as an annotator's may.

    ``imported``: the failures of a judgment file, which records what a judge wrote
    (a How2Bench judgment file keeps the judge's failures unchecked): a failure's text may
    be empty and a step 0 names no step (left out of the returned links); a step beyond
    the list, a negative step or a non-integer is still refused.

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
        if not isinstance(text, str) or not (text.strip() or imported):
            raise JudgeAnswerError(f"expected a non-empty string, got {text!r}", f"{where}.failure")
        failures.append(
            {
                "failure": text,
                "L1_steps": _step_list(raw["L1_steps"], f"{where}.L1_steps", n_l1, imported=imported),
                "L2_steps": _step_list(raw["L2_steps"], f"{where}.L2_steps", n_l2, imported=imported),
            }
        )
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
    """(number of no_failure) / (number judged), on 0-1; None when nothing was judged."""
    labels = list(has_failure_labels)
    return score_forms(sum(1 for label in labels if not label), len(labels))["how2score"]


def _percent(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [HOW2SCORE_SCALE * x for x in value]
    return HOW2SCORE_SCALE * value


def percent_forms(values: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """``values`` with ``<field>_percent`` (the 0-100 form) beside each of ``fields`` (on
    0-1: a number, an interval ``[low, high]`` or None, which stays None)."""
    return {**values, **{f"{field}_percent": _percent(values[field]) for field in fields}}


class ScoreForms(TypedDict):
    """How2Score on 0-1 and on 0-100 (None both when nothing was judged)."""

    how2score: float | None
    how2score_percent: float | None


def score_forms(n_no_failure: int, n_judged: int) -> ScoreForms:
    """``how2score`` = n_no_failure / n_judged on 0-1 and ``how2score_percent`` on 0-100;
    both None when nothing was judged (the one rule for a slice or topic with nothing
    scored, in every output)."""
    score = n_no_failure / n_judged if n_judged else None
    return {"how2score": score, "how2score_percent": HOW2SCORE_SCALE * score if score is not None else None}


def how2score_estimate(
    n_no_failure: int,
    n_judged: int,
    *,
    n_unusable: int = 0,
    n_items: int | None = None,
    n_items_judged: int | None = None,
) -> dict[str, Any]:
    """How2Score with its uncertainty and its coverage: the one shape every page, export and
    API answer gives a score in.

    ``how2score`` = n_no_failure / n_judged on 0-1 and ``how2score_percent`` on 0-100 (the
    names of the reference's summary.json; both None when nothing was judged: the one rule
    for a slice or topic with nothing scored, everywhere); ``ci95`` its 95 % Wilson score
    interval on 0-1 and ``ci95_percent`` on 0-100 (``interval`` names it); ``n_judged``
    the generations with a usable verdict; ``n_unusable`` those whose judge answer was not
    usable (never scored); ``coverage`` = n_items_judged / n_items, the share of the slice's
    items (procedures) with at least one usable verdict (None when ``n_items`` is unknown)."""
    interval = wilson_interval(n_no_failure, n_judged)
    return {
        **score_forms(n_no_failure, n_judged),
        **percent_forms({"ci95": list(interval) if interval else None}, ["ci95"]),
        "interval": WILSON,
        "n_judged": n_judged,
        "n_unusable": n_unusable,
        "n_items": n_items,
        "n_items_judged": n_items_judged,
        "coverage": n_items_judged / n_items if n_items and n_items_judged is not None else None,
    }


# The score fields of every How2Score: both scales of the score and of its interval.
SCORE_FIELDS = ("how2score", "how2score_percent", "ci95", "ci95_percent")


class How2ScoreTally:
    """Counts verdicts as they come, overall and per topic.

    ``add(topic, None)`` records an answer that could not be used: counted in ``n`` and
    ``n_unusable``, left out of every score and of ``n_judged``. ``item`` names what was
    judged (a procedure); without it every verdict is its own item."""

    def __init__(self) -> None:
        self.n = 0
        self.n_parse_failed = 0
        self._scored = 0
        self._passed = 0
        self._topics: dict[str, list[int]] = {}  # topic -> [n_scored, n_no_failure, n_unusable, n_failures]
        self._failures = 0  # critical failures listed by the scored verdicts
        self._items: set[Any] = set()
        self._items_judged: set[Any] = set()

    @property
    def n_unusable(self) -> int:
        return self.n_parse_failed

    def add(self, topic: str, has_failure_label: bool | None, item: Any = None, n_failures: int = 0) -> None:
        key = ("verdict", self.n) if item is None else ("item", item)
        self.n += 1
        self._items.add(key)
        counts = self._topics.setdefault(topic, [0, 0, 0, 0])
        if has_failure_label is None:
            self.n_parse_failed += 1
            counts[2] += 1
            return
        self._items_judged.add(key)
        self._scored += 1
        self._failures += n_failures
        counts[0] += 1
        counts[3] += n_failures
        if not has_failure_label:
            self._passed += 1
            counts[1] += 1

    def result(self, n_items: int | None = None) -> dict[str, Any]:
        """``how2score_estimate`` over everything added (``coverage`` against ``n_items``
        when given, else against the items seen), with ``n``, ``n_scored`` and
        ``n_parse_failed`` (the names of files written before: the same counts as
        ``n_judged`` and ``n_unusable``) and ``by_topic``.

        ``by_topic`` has every topic seen, sorted by name, each ``{"how2score",
        "how2score_percent", "ci95", "ci95_percent", "n_judged", "n_scored", "n_unusable"}``
        (``n_scored`` = ``n_judged``); a score is None where nothing was scored."""
        estimate = how2score_estimate(
            self._passed,
            self._scored,
            n_unusable=self.n_parse_failed,
            n_items=len(self._items) if n_items is None else n_items,
            n_items_judged=len(self._items_judged),
        )
        by_topic = {}
        for topic, (scored, passed, unusable, _) in sorted(self._topics.items()):
            topic_estimate = how2score_estimate(passed, scored)
            by_topic[topic] = {key: topic_estimate[key] for key in SCORE_FIELDS} | {
                "n_judged": scored,
                "n_scored": scored,
                "n_unusable": unusable,
            }
        return {
            **estimate,
            "n": self.n,
            "n_scored": self._scored,
            "n_parse_failed": self.n_parse_failed,
            "by_topic": by_topic,
        }

    def reference_result(self) -> dict[str, Any]:
        """``result()`` with the fields of a How2Bench aggregate (``summary.json`` and
        ``by_topic.csv`` of the reference CLI), computed by the same rule: a record marked
        ``parse_failed`` is left out of scoring and counted in ``n_parse_failed``.

        ``how2score`` is there on 0-1 and ``how2score_percent`` on 0-100; ``n_examples``
        (= ``n_judged``), ``n_with_failures``, ``failure_rate`` and
        ``avg_failures_per_example`` (``n_failures`` summed over the scored records, divided
        by their number). Per topic the same, plus ``topic`` and ``n_judged``. Where nothing
        was scored every score and rate is None (the product's one rule; the reference
        writes 0.0 there beside its n of 0). ``ci95`` on 0-1 and ``ci95_percent`` on 0-100."""
        result = self.result()

        def forms(scored: int, passed: int, failures: int) -> dict[str, Any]:
            return {
                **score_forms(passed, scored),
                "n_examples": scored,
                "n_with_failures": scored - passed,
                "failure_rate": (scored - passed) / scored if scored else None,
                "avg_failures_per_example": failures / scored if scored else None,
            }

        summary = forms(self._scored, self._passed, self._failures)
        by_topic = {}
        for topic, (scored, passed, unusable, failures) in sorted(self._topics.items()):
            row = forms(scored, passed, failures)
            del row["n_examples"]
            by_topic[topic] = {
                "topic": topic,
                "n_judged": scored,
                **row,
                "n_parse_failed": unusable,
                "ci95": result["by_topic"][topic]["ci95"],
                "ci95_percent": result["by_topic"][topic]["ci95_percent"],
                "n_scored": scored,
                "n_unusable": unusable,
            }
        return {
            **summary,
            **{k: v for k, v in result.items() if k not in summary and k != "by_topic"},
            "by_topic": by_topic,
        }


def how2score_aggregate(verdicts: Iterable[tuple[str, bool | None]]) -> dict[str, Any]:
    """``How2ScoreTally`` over ``(topic, has_failure or None for unreadable)`` pairs."""
    tally = How2ScoreTally()
    for topic, label in verdicts:
        tally.add(topic, label)
    return tally.result()


# How2Everything §4.2: a generation "has_failure" when at least one critical failure is
# identified. Said in every refusal of a record whose label contradicts its failures.
HAS_FAILURE_RULE = (
    "How2Everything §4.2 defines has_failure as 'at least one critical failure is identified' "
    "(a judge answer that could not be read is marked parse_failed: true)"
)


def check_has_failure_agrees(record: dict[str, Any]) -> None:
    """Refuse a judgment record whose ``has_failure`` contradicts its own failures.

    Compared, where the record gives them: ``critical_failures`` (a list), ``n_failures``
    (a count; it must also equal the list's length) and a readable ``judge_completion``.
    A record without any of them is a plain label and has nothing to contradict. A record
    with ``parse_failed: true`` is not checked: the reference CLI (``how2bench`` judge)
    writes its unreadable answers as ``has_failure: true`` with no failures and its
    aggregate leaves every ``parse_failed`` record out of the score, and so do we. Type
    errors of the fields are left to the caller. Raises ``RecordError`` without file and
    line (the caller places it), naming ``has_failure`` or ``n_failures``."""
    if record.get("parse_failed") is True:
        return
    label = record.get("has_failure")
    if not isinstance(label, bool):
        return
    said = f"has_failure is {'true' if label else 'false'}"
    failures = record.get("critical_failures")
    count = record.get("n_failures")
    if isinstance(count, bool) or not isinstance(count, int):
        count = None
    if isinstance(failures, list):
        if count is not None and count != len(failures):
            raise RecordError(
                None, None, "n_failures", f"n_failures is {count} but critical_failures lists {len(failures)}"
            )
        if label and not failures:
            raise RecordError(None, None, "has_failure", f"{said} but critical_failures is empty; {HAS_FAILURE_RULE}")
        if not label and failures:
            listed = f"{len(failures)} critical failure{'s are' if len(failures) > 1 else ' is'} listed"
            raise RecordError(None, None, "has_failure", f"{said} but {listed}; {HAS_FAILURE_RULE}")
    elif count is not None and label != (count > 0):
        raise RecordError(None, None, "has_failure", f"{said} but n_failures is {count}; {HAS_FAILURE_RULE}")
    completion = record.get("judge_completion")
    if isinstance(completion, str):
        try:
            answer = parse_judge_answer(completion)
        except JudgeAnswerError:
            return  # an unreadable answer says nothing to compare with
        listed_n = len(answer["critical_failures"])
        if label != (listed_n > 0):
            raise RecordError(
                None,
                None,
                "has_failure",
                f"{said} but judge_completion lists {listed_n or 'none'}; {HAS_FAILURE_RULE}",
            )


@dataclass(frozen=True)
class JudgmentRecord:
    """One input line of ``bench_aggregate``: a verdict, or an answer that was unreadable."""

    source_example_id: str | int
    topic: str
    has_failure: bool | None
    """None when ``judge_completion`` could not be read as a How2Score answer, or the
    record says ``parse_failed: true``."""
    parse_error: str | None
    n_failures: int = 0


def judgment_record(record: dict[str, Any]) -> JudgmentRecord:
    """Check one ``bench_aggregate`` input record and read its verdict.

    Required: ``source_example_id`` and either ``has_failure`` (true/false) or
    ``judge_completion`` (the judge's raw answer text, read with ``parse_judge_answer``);
    ``topic`` empty or absent is the ``none`` topic (a file made without topics).
    When both are given they must agree, as must ``critical_failures`` and ``n_failures``
    (``check_has_failure_agrees``). A record with ``parse_failed: true`` (a
    How2Bench judgment file's mark of an answer its judge could not read; it also says
    ``has_failure: true``) and an unreadable ``judge_completion`` are not errors of the
    record: they become ``has_failure=None`` with the reason in ``parse_error``.
    ``n_failures`` (default: the length of ``critical_failures``) feeds the average number
    of failures. Raises ``RecordError`` for a malformed record."""
    example_id, topic = example_identity(record)
    parse_failed = record.get("parse_failed", False)
    if not isinstance(parse_failed, bool):
        raise RecordError(None, None, "parse_failed", f"expected true or false, got {parse_failed!r}")
    if parse_failed:
        return JudgmentRecord(example_id, topic, None, "the file marks it parse_failed")
    failures = record.get("critical_failures")
    n_failures = record.get("n_failures", len(failures) if isinstance(failures, list) else 0)
    if isinstance(n_failures, bool) or not isinstance(n_failures, int) or n_failures < 0:
        raise RecordError(None, None, "n_failures", f"expected a count (an integer >= 0), got {n_failures!r}")
    label = record.get("has_failure")
    if label is not None:
        if not isinstance(label, bool):
            raise RecordError(None, None, "has_failure", f"expected true or false, got {label!r}")
        check_has_failure_agrees(record)
        return JudgmentRecord(example_id, topic, label, None, n_failures)
    if record.get("judge_completion") is None:
        raise RecordError(None, None, "has_failure", "missing: give has_failure or judge_completion")
    completion = record["judge_completion"]
    if not isinstance(completion, str):
        raise RecordError(None, None, "judge_completion", f"expected a string, got {type(completion).__name__}")
    try:
        answer = parse_judge_answer(completion)
    except JudgeAnswerError as exc:
        return JudgmentRecord(example_id, topic, None, str(exc))
    return JudgmentRecord(example_id, topic, has_failure(answer), None, len(answer["critical_failures"]))


def judgments_tally(
    records: Iterable[tuple[Any, dict[str, Any]]],
    *,
    unscored: Callable[[Any, dict[str, Any], JudgmentRecord], None] | None = None,
) -> How2ScoreTally:
    """The How2Score tally of a judgments file: ``(position, record)`` pairs as a record
    reader gives them, each read by ``judgment_record`` and added by topic, procedure and
    number of failures. The one way a file of judgments becomes numbers: ``bench_aggregate``
    prints its ``reference_result()`` and a reference bench run writes its ``aggregate/``
    files from it (judging/reference_outputs.py). ``unscored`` is told of each record left
    out of the score. Raises ``RecordError`` placed at the record's position."""
    tally = How2ScoreTally()
    for position, raw in records:
        try:
            judgment = judgment_record(raw)
        except RecordError as exc:
            raise RecordError(None, position, exc.field, exc.message) from exc
        tally.add(judgment.topic, judgment.has_failure, item=judgment.source_example_id, n_failures=judgment.n_failures)
        if judgment.parse_error is not None and unscored is not None:
            unscored(position, raw, judgment)
    return tally


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
