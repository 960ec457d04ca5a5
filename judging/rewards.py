"""RL rewards for a completion (How2Everything §6, App. E.4): the How2Score verdict of the
configured judge, the step-format verifier and the reference-calibrated length reward.

``total`` is their sum, as in the paper's GRPO reward; a missing verdict (the judge gave no
usable answer) contributes 0 to ``total`` and is reported as ``how2score: null`` so a
trainer can drop or down-weight that sample."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.db import connections

from judging.how2score import JudgeAnswerError, validate_judge_answer
from judging.metrics import length_reward, step_format_reward
from judging.prompts import prompt_load
from judging.services import DEFAULT_JUDGE_PROMPT, judge_request
from judging.steps import parse_steps
from judging.tokens import procedure_tokens
from llm.client import LLMClient
from llm.endpoints import endpoint_require

REWARD_RUN = "reward-endpoint"


@dataclass(frozen=True)
class RewardInput:
    goal: str
    resources: list[str]
    reference_steps: list[str]
    completion: str


def _verdict(client: LLMClient, prompt, item: RewardInput, steps: list[str]) -> int | None:
    if not steps:
        return 0  # nothing followable: the procedure cannot achieve the goal
    try:
        result = client.complete(judge_request(item.goal, item.reference_steps, steps, prompt), run=REWARD_RUN,
                                 role="how2score_judge")
        if not result.ok:
            return None
        try:
            answer = validate_judge_answer(result.value)
        except JudgeAnswerError:
            return None
        return 0 if answer["critical_failures"] else 1
    finally:
        connections.close_all()


def rewards_compute(items: list[RewardInput], *, concurrency: int = 16) -> list[dict]:
    """Rewards for each item, judging up to ``concurrency`` items at once."""
    prompt = prompt_load(DEFAULT_JUDGE_PROMPT, kind="how2score_judge")
    client = LLMClient(endpoint_require("how2score_judge"))
    steps = [parse_steps(item.completion) for item in items]
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(items)))) as pool:
            verdicts = list(pool.map(lambda pair: _verdict(client, prompt, *pair), zip(items, steps)))
    finally:
        client.close()
    results = []
    for item, item_steps, verdict in zip(items, steps, verdicts):
        fmt = step_format_reward(item.completion, len(item.reference_steps))
        gen_tokens = procedure_tokens(item_steps) if item_steps else 0
        length = length_reward(gen_tokens, procedure_tokens(item.reference_steps))
        results.append({"how2score": verdict, "format": fmt, "length": length,
                        "total": (verdict or 0) + fmt + length})
    return results
