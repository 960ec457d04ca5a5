"""RL rewards for a batch of completions (How2Everything §6, App. E.4): the How2Score verdict
of the configured judge, the step-format verifier and the reference-calibrated length reward.

``total`` is their sum, as in the paper's GRPO reward, for an item with a verdict. Every item
says how its verdict came about (``status``):

* ``judged``: the judge answered now;
* ``cached``: the ledger already held the judge's ``ok`` answer to the very same request;
* ``no_steps``: the completion has no step to follow, so How2Score is 0 without a judge call
  (a verdict by rule: its ``total`` is the sum);
* ``failed``: no usable verdict (``reason`` says why: the call's outcome and error, what was
  wrong with the answer, or ``deadline``: the judge had not answered when the request's
  deadline came); ``how2score`` is ``null`` and so is ``total``, so a trainer reading only
  ``total`` cannot take a failure for a reward. The caller may ask for the old sum without the
  verdict instead (``total_without_verdict="components"``). A failure is never a silent 0.

A batch costs one ledger query for all its judge requests, which also tells the write which
keys are new (identical requests within the batch are sent once), its uncached requests go to
the judge together (judging/reward_service.py, at most ``REWARD_CONCURRENCY`` in flight, under
the endpoint's shared limits), and their
answers are written to the ledger in one group, under the ledger label ``reward-endpoint``
(a judge run counts only what it asked itself, llm.selectors.ledger_own). The batch is
answered by its deadline (``REWARD_DEADLINE_SECONDS``, or the caller's shorter one); an answer
that arrives later is written to the ledger when it comes (``_write_late``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection

from core.app_errors import InvalidInput
from judging.how2score import JudgeAnswerError, validate_judge_answer
from judging.metrics import length_reward, step_format_reward
from judging.prompts import prompt_load, prompt_path
from judging.reward_service import JUDGE_LOOP, Deadline, DeadlinePassed
from judging.run_requests import judge_request
from judging.score_metric import score_reward
from judging.services import DEFAULT_JUDGE_PROMPT
from judging.steps import parse_steps
from judging.tokens import procedure_tokens
from llm.endpoints import Endpoint, endpoint_require_recent
from llm.ledger import ledger_write, ledger_write_many
from llm.request import LLMRequest, LLMResult
from llm.selectors import ledger_ok_results

if TYPE_CHECKING:
    from llm.client import LLMClient

REWARD_RUN = "reward-endpoint"
JUDGE_ROLE = "how2score_judge"

STATUS_JUDGED = "judged"
STATUS_CACHED = "cached"
STATUS_NO_STEPS = "no_steps"
STATUS_FAILED = "failed"

REASON_DEADLINE = "deadline"  # a failed item's reason when the judge had not answered by the deadline

# What ``total`` is for an item without a verdict (``how2score`` null).
TOTAL_WITHOUT_VERDICT_NULL = "null"  # null: no verdict, no reward (the default)
TOTAL_WITHOUT_VERDICT_COMPONENTS = "components"  # the old sum: format + length (+ score), the verdict as 0
TOTAL_WITHOUT_VERDICT_CHOICES = (TOTAL_WITHOUT_VERDICT_NULL, TOTAL_WITHOUT_VERDICT_COMPONENTS)

logger = logging.getLogger(__name__)

_LOOKUP_CHUNK = 2000  # keys per ledger query (bounded IN lists)


@dataclass(frozen=True)
class RewardInput:
    goal: str
    resources: list[str]
    reference_steps: list[str]
    completion: str
    with_score: bool = False  # add the SCORE term (docs/score.md) to the rewards and the total


@dataclass
class _Verdict:
    how2score: int | None
    status: str
    reason: str = ""


@lru_cache(maxsize=4)
def _judge_client(endpoint: Endpoint) -> LLMClient:
    """One client (and its connection pools) per endpoint for the life of the process:
    the reward endpoint sits inside a training loop and must not reconnect every call.
    The client module is imported here, not at start (issue 29): the web server's WSGI
    module loads it once when a process starts (config/wsgi.py), so no call pays for it."""
    from llm.client import LLMClient

    return LLMClient(endpoint)


@lru_cache(maxsize=4)
def _judge_prompt(path: str, mtime: float):
    return prompt_load(path, kind="how2score_judge")


def _verdict_of(result: LLMResult, *, n_l1: int, n_l2: int, status: str) -> _Verdict:
    if not result.ok:
        detail = f": {result.error}" if result.error else ""
        return _Verdict(None, STATUS_FAILED, f"judge call ended {result.outcome}{detail}")
    try:
        answer = validate_judge_answer(result.value, n_l1=n_l1, n_l2=n_l2)
    except JudgeAnswerError as exc:
        return _Verdict(None, STATUS_FAILED, f"unusable judge answer: {exc}")
    return _Verdict(0 if answer["critical_failures"] else 1, status)


def _write_late(key: str, fields: dict[str, Any]) -> None:
    """What a judge request ended with after its batch's deadline (in a helper thread of the
    judge loop): kept in the ledger like any answer, so an ``ok`` one serves the next
    identical request from the cache (a failure is never reused, only shown on the ledger
    pages under the ``reward-endpoint`` label)."""
    try:
        ledger_write(key, fields)
    except Exception:  # a helper thread: nobody else would hear of it
        logger.exception("could not store a late reward judge answer %s", key)
    finally:
        connection.close()  # this helper thread's own connection


def _verdicts(items: list[RewardInput], steps: list[list[str]], deadline: Deadline) -> list[_Verdict]:
    """Each item's How2Score verdict: from the ledger, from the judge (concurrently, until
    ``deadline``), or 0 for a completion without steps."""
    path = prompt_path(DEFAULT_JUDGE_PROMPT)
    prompt = _judge_prompt(str(path), path.stat().st_mtime)  # a replaced prompt file is picked up
    client = _judge_client(endpoint_require_recent(JUDGE_ROLE, max_age=settings.REWARD_ENDPOINT_CACHE_SECONDS))
    endpoint = client.endpoint
    keys: list[str | None] = []
    requests: dict[str, LLMRequest] = {}  # one per distinct request of the batch
    for item, item_steps in zip(items, steps):
        if not item_steps:
            keys.append(None)
            continue
        request = judge_request(item.goal, item.reference_steps, item_steps, prompt)
        key = request.key_for(endpoint)
        keys.append(key)
        requests.setdefault(key, request)
    present: set[str] = set()  # every key with an entry, ok or failed: the write below needs no lookup
    answered = ledger_ok_results(list(requests), chunk=_LOOKUP_CHUNK, present=present)
    todo = [(key, request) for key, request in requests.items() if key not in answered]
    fresh: dict[str, LLMResult | BaseException] = {}
    written: list[tuple[str, dict[str, Any]]] = []
    concurrency = settings.REWARD_CONCURRENCY
    asked = JUDGE_LOOP.ask(
        client, todo, concurrency=concurrency, run=REWARD_RUN, role=JUDGE_ROLE, deadline=deadline, late=_write_late
    )
    for (key, _request), answer in zip(todo, asked):
        if isinstance(answer, BaseException):
            fresh[key] = answer
        else:
            fresh[key] = answer[0]
            written.append((key, answer[1]))
    ledger_write_many(written, present=present)
    verdicts = []
    for item, item_steps, item_key in zip(items, steps, keys):
        if item_key is None:
            verdicts.append(_Verdict(0, STATUS_NO_STEPS))
            continue
        n_l1, n_l2 = len(item.reference_steps), len(item_steps)
        if item_key in answered:
            verdicts.append(_verdict_of(answered[item_key], n_l1=n_l1, n_l2=n_l2, status=STATUS_CACHED))
            continue
        result = fresh[item_key]
        if isinstance(result, DeadlinePassed):
            verdicts.append(_Verdict(None, STATUS_FAILED, REASON_DEADLINE))
        elif isinstance(result, BaseException):
            verdicts.append(
                _Verdict(None, STATUS_FAILED, f"judge call raised {result.__class__.__name__}: {result}"[:500])
            )
        else:
            verdicts.append(_verdict_of(result, n_l1=n_l1, n_l2=n_l2, status=STATUS_JUDGED))
    return verdicts


def rewards_compute(
    items: list[RewardInput],
    *,
    deadline_seconds: float | None = None,
    total_without_verdict: str = TOTAL_WITHOUT_VERDICT_NULL,
) -> list[dict[str, Any]]:
    """Rewards for each item, in order: ``how2score``, ``format``, ``length``, ``total``
    (and ``score`` with ``with_score``), its ``status`` and, for a failed verdict, its ``reason``.

    ``deadline_seconds``: how long the judge may take (default ``REWARD_DEADLINE_SECONDS``);
    the items it has not answered by then are failed with reason ``deadline``.
    ``total_without_verdict``: ``total`` of an item without a verdict, null (``"null"``) or
    the sum of the other terms (``"components"``)."""
    if total_without_verdict not in TOTAL_WITHOUT_VERDICT_CHOICES:
        raise InvalidInput(fields={"total_without_verdict": f"must be one of {TOTAL_WITHOUT_VERDICT_CHOICES}"})
    deadline = Deadline(settings.REWARD_DEADLINE_SECONDS if deadline_seconds is None else deadline_seconds)
    steps = [parse_steps(item.completion) for item in items]
    verdicts = _verdicts(items, steps, deadline)
    results = []
    for item, item_steps, verdict in zip(items, steps, verdicts):
        fmt = step_format_reward(item.completion, len(item.reference_steps))
        gen_tokens = procedure_tokens(item_steps) if item_steps else 0
        length = length_reward(gen_tokens, procedure_tokens(item.reference_steps))
        total = (verdict.how2score or 0) + fmt + length
        result: dict[str, Any] = {"how2score": verdict.how2score, "format": fmt, "length": length, "total": total}
        if item.with_score:
            result["score"] = score_reward(item.reference_steps, item.completion)
            result["total"] += result["score"] or 0
        if verdict.how2score is None and total_without_verdict == TOTAL_WITHOUT_VERDICT_NULL:
            result["total"] = None  # no verdict, no reward: never a number a trainer could take for one
        result["status"] = verdict.status
        if verdict.reason:
            result["reason"] = verdict.reason
        results.append(result)
    return results
