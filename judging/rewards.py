"""RL rewards for a completion (How2Everything §6, App. E.4): the How2Score verdict of the
configured judge, the step-format verifier and the reference-calibrated length reward.

``total`` is their sum, as in the paper's GRPO reward; a missing verdict (the judge gave no
usable answer) contributes 0 to ``total`` and is reported as ``how2score: null`` so a
trainer can drop or down-weight that sample."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache

from django.db import connections

from judging.how2score import JudgeAnswerError, validate_judge_answer
from judging.metrics import length_reward, step_format_reward
from judging.prompts import prompt_load, prompt_path
from judging.score_metric import score_reward
from judging.services import DEFAULT_JUDGE_PROMPT, judge_request
from judging.steps import parse_steps
from judging.tokens import procedure_tokens
from llm.client import LLMClient
from llm.endpoints import Endpoint, endpoint_require

REWARD_RUN = "reward-endpoint"


@dataclass(frozen=True)
class RewardInput:
    goal: str
    resources: list[str]
    reference_steps: list[str]
    completion: str
    with_score: bool = False  # add the SCORE term (docs/score.md) to the rewards and the total


def _verdict(client: LLMClient, prompt, item: RewardInput, steps: list[str], close: bool = True) -> int | None:
    if not steps:
        return 0  # nothing followable: the procedure cannot achieve the goal
    try:
        result = client.complete(judge_request(item.goal, item.reference_steps, steps, prompt), run=REWARD_RUN,
                                 role="how2score_judge")
        if not result.ok:
            return None
        try:
            answer = validate_judge_answer(result.value, n_l1=len(item.reference_steps), n_l2=len(steps))
        except JudgeAnswerError:
            return None
        return 0 if answer["critical_failures"] else 1
    finally:
        if close:  # a pool thread's own database connection
            connections.close_all()


@lru_cache(maxsize=4)
def _judge_client(endpoint: Endpoint) -> LLMClient:
    """One client (and its connection pool) per endpoint for the life of the process:
    the reward endpoint sits inside a training loop and must not reconnect every call."""
    return LLMClient(endpoint)


@lru_cache(maxsize=4)
def _judge_prompt(path: str, mtime: float):
    return prompt_load(path, kind="how2score_judge")


def rewards_compute(items: list[RewardInput], *, concurrency: int = 16) -> list[dict]:
    """Rewards for each item, judging up to ``concurrency`` items at once."""
    path = prompt_path(DEFAULT_JUDGE_PROMPT)
    prompt = _judge_prompt(str(path), path.stat().st_mtime)  # a replaced prompt file is picked up
    client = _judge_client(endpoint_require("how2score_judge"))
    steps = [parse_steps(item.completion) for item in items]
    if len(items) == 1:
        verdicts = [_verdict(client, prompt, items[0], steps[0], close=False)]
    else:
        with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(items)))) as pool:
            verdicts = list(pool.map(lambda pair: _verdict(client, prompt, *pair), zip(items, steps)))
    results = []
    for item, item_steps, verdict in zip(items, steps, verdicts):
        fmt = step_format_reward(item.completion, len(item.reference_steps))
        gen_tokens = procedure_tokens(item_steps) if item_steps else 0
        length = length_reward(gen_tokens, procedure_tokens(item.reference_steps))
        result = {"how2score": verdict, "format": fmt, "length": length, "total": (verdict or 0) + fmt + length}
        if item.with_score:
            result["score"] = score_reward(item.reference_steps, item.completion)
            result["total"] += result["score"] or 0
        results.append(result)
    return results
