"""Writes of the judging app: models, generation runs, judge runs (How2Score)."""
from __future__ import annotations

import random
from collections import defaultdict
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from judging.constants import GREEDY_TEMPERATURE, JUDGE_MAX_TOKENS, REASONING_TEMPERATURE, BASE_STOP
from judging.how2score import JudgeAnswerError, judge_schema, validate_judge_answer
from judging.models import Generation, GenerationRun, Judgment, JudgeRun, LanguageModel, PromptStyle, RunStatus
from judging.prompts import numbered, prompt_load, resource_list
from judging.steps import parse_steps
from judging.tokens import procedure_tokens
from llm.client import LLMRequest
from llm.models import LLMJob
from llm.selectors import llm_job_results
from llm.services import llm_job_cancel, llm_job_create, llm_job_execute, llm_job_pause, llm_job_resume
from mining.models import Procedure

DEFAULT_PROMPTS = {PromptStyle.BASE: "generate_base.txt", PromptStyle.INST: "generate_inst.txt"}
DEFAULT_JUDGE_PROMPT = "how2score_judge.txt"


@transaction.atomic
def language_model_register(
    *, name: str, role: str = "generate", base_url: str = "", model: str = "", api_key_env: str = "",
    prompt_style: str = PromptStyle.INST, reasoning: bool = False, max_tokens: int = 1024,
) -> LanguageModel:
    if prompt_style not in PromptStyle.values:
        raise ValueError(f"prompt_style must be one of {', '.join(PromptStyle.values)}")
    language_model, _ = LanguageModel.objects.update_or_create(
        name=name, defaults=dict(role=role, base_url=base_url, model=model, api_key_env=api_key_env,
                                 prompt_style=prompt_style, reasoning=reasoning, max_tokens=max_tokens))
    return language_model


def decoding_params(language_model: LanguageModel) -> dict:
    """How2Everything App. D.1: greedy decoding for non-reasoning endpoints, with the stop
    sequence "\\n\\n" for base models; temperature 0.6 for reasoning endpoints."""
    if language_model.reasoning:
        return {"temperature": REASONING_TEMPERATURE, "max_tokens": language_model.max_tokens}
    params = {"temperature": GREEDY_TEMPERATURE, "max_tokens": language_model.max_tokens}
    if language_model.prompt_style == PromptStyle.BASE:
        params["stop"] = list(BASE_STOP)
    return params


def sample_procedures(*, split: str, per_topic: int | None, seed: int) -> list[int]:
    """Procedure ids of a split, or ``per_topic`` of them per topic drawn with ``seed``."""
    by_topic: dict[int, list[int]] = defaultdict(list)
    for pk, topic_id in Procedure.objects.filter(split=split).order_by("id").values_list("id", "topic_id"):
        by_topic[topic_id].append(pk)
    chosen: list[int] = []
    rng = random.Random(seed)
    for topic_id in sorted(by_topic):
        ids = by_topic[topic_id]
        chosen += sorted(rng.sample(ids, per_topic)) if per_topic is not None and per_topic < len(ids) else ids
    return chosen


def generation_request(procedure: Procedure, language_model: LanguageModel, prompt) -> LLMRequest:
    text = prompt.render(goal=procedure.goal, resources=resource_list(procedure.resources), n=len(procedure.steps))
    params = decoding_params(language_model)
    if language_model.prompt_style == PromptStyle.BASE:
        return LLMRequest(stage="generate", messages=[], prompt=text, params=params)
    return LLMRequest(stage="generate", messages=[{"role": "user", "content": text}], params=params)


@transaction.atomic
def generation_run_create(
    *, name: str, language_model: LanguageModel, split: str = "bench", sample_per_topic: int | None = None,
    seed: int = 0, prompt_file: str | None = None, executor: str = "online", concurrency: int = 16,
    budget_usd: Decimal | None = None, start: bool = True,
) -> GenerationRun:
    prompt = prompt_load(prompt_file or DEFAULT_PROMPTS[language_model.prompt_style], kind="generate")
    procedure_ids = sample_procedures(split=split, per_topic=sample_per_topic, seed=seed)
    if not procedure_ids:
        raise ValueError(f"no procedures in split {split!r} to generate for")
    run = GenerationRun.objects.create(
        name=name, language_model=language_model, split=split, sample_per_topic=sample_per_topic, seed=seed,
        prompt_file=prompt.path, prompt_hash=prompt.sha256, executor=executor, concurrency=concurrency,
        budget_usd=budget_usd, procedure_ids=procedure_ids)
    procedures = Procedure.objects.in_bulk(procedure_ids)
    requests = [generation_request(procedures[pk], language_model, prompt) for pk in procedure_ids]
    run.llm_job = llm_job_create(run=f"generation-run:{run.pk}", role=language_model.role, requests=requests,
                                 executor=executor, concurrency=concurrency, budget_usd=budget_usd,
                                 endpoint_overrides=language_model.endpoint_overrides(), start=False)
    run.save(update_fields=["llm_job"])
    if start:
        _enqueue("generation", run.pk)
    return run


@transaction.atomic
def judge_run_create(
    *, name: str, generation_run: GenerationRun, judge: str, role: str = "how2score_judge", base_url: str = "",
    model: str = "", api_key_env: str = "", prompt_file: str | None = None, executor: str = "online",
    concurrency: int = 16, budget_usd: Decimal | None = None, temperature: float = GREEDY_TEMPERATURE,
    seed: int | None = None, start: bool = True,
) -> JudgeRun:
    """Judge every usable generation of a run. A judge name is used once per generation
    run, so re-judging with another judge adds judgments and never overwrites."""
    if JudgeRun.objects.filter(generation_run=generation_run, judge=judge).exists():
        raise ValueError(f"generation run {generation_run.name!r} already has judge {judge!r}; choose another judge name")
    prompt = prompt_load(prompt_file or DEFAULT_JUDGE_PROMPT, kind="how2score_judge")
    run = JudgeRun.objects.create(
        name=name, generation_run=generation_run, judge=judge, role=role, base_url=base_url, model=model,
        api_key_env=api_key_env, prompt_file=prompt.path, prompt_hash=prompt.sha256, executor=executor,
        concurrency=concurrency, budget_usd=budget_usd, temperature=temperature, seed=seed)
    generations = list(generation_run.generations.filter(outcome="ok").select_related("procedure").order_by("id"))
    requests = [judge_request(g.procedure.goal, g.procedure.steps, g.predicted_steps, prompt,
                              temperature=temperature, seed=seed) for g in generations]
    run.llm_job = llm_job_create(run=f"judge-run:{run.pk}", role=role, requests=requests, executor=executor,
                                 concurrency=concurrency, budget_usd=budget_usd,
                                 endpoint_overrides=run.endpoint_overrides(), start=False)
    run.save(update_fields=["llm_job"])
    if start:
        _enqueue("judge", run.pk)
    return run


def judge_request(goal: str, reference_steps: list[str], steps: list[str], prompt, *,
                  temperature: float = GREEDY_TEMPERATURE, seed: int | None = None) -> LLMRequest:
    text = prompt.render(goal=goal, reference_steps=numbered(reference_steps), steps=numbered(steps))
    params = {"temperature": temperature, "max_tokens": JUDGE_MAX_TOKENS}
    if seed is not None:
        params["seed"] = seed
    # Links may only name steps that exist (the schema bounds them; see judge_schema).
    return LLMRequest(stage="how2score_judge", messages=[{"role": "user", "content": text}], params=params,
                      schema=judge_schema(n_l1=len(reference_steps), n_l2=len(steps)))


def _enqueue(kind: str, run_id: int) -> None:
    from judging.tasks import generation_run_execute_task, judge_run_execute_task

    task = generation_run_execute_task if kind == "generation" else judge_run_execute_task
    transaction.on_commit(lambda: task.delay(run_id))


def _run_execute(run: GenerationRun | JudgeRun, collect) -> str:
    """Execute a run's LLM job, then store its results. Returns what happened."""
    if run.status in (RunStatus.DONE, RunStatus.CANCELLED):
        return f"not active ({run.status})"
    type(run).objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    job = run.llm_job
    outcome = "done" if job.status == LLMJob.Status.DONE else llm_job_execute(job_id=job.pk)
    job.refresh_from_db()
    collect(run)  # what finished so far is stored even when the job paused
    if job.status == LLMJob.Status.DONE:
        type(run).objects.filter(pk=run.pk).update(status=RunStatus.DONE, finished_at=timezone.now())
    elif job.status == LLMJob.Status.PAUSED:
        type(run).objects.filter(pk=run.pk).update(status=RunStatus.PAUSED, error=job.pause_reason)
    elif job.status in (LLMJob.Status.CANCELLED, LLMJob.Status.FAILED):
        type(run).objects.filter(pk=run.pk).update(status=job.status, error=job.error)
    return outcome


def generation_run_execute(*, run_id: int) -> str:
    run = GenerationRun.objects.select_related("llm_job", "language_model").filter(pk=run_id).first()
    return "gone" if run is None else _run_execute(run, generation_run_collect)


def judge_run_execute(*, run_id: int) -> str:
    run = JudgeRun.objects.select_related("llm_job").filter(pk=run_id).first()
    return "gone" if run is None else _run_execute(run, judge_run_collect)


def generation_run_collect(run: GenerationRun) -> int:
    """Store a Generation for every finished request (idempotent). Returns how many were new."""
    stored = set(run.generations.values_list("procedure_id", flat=True))
    new = []
    for procedure_id, result in zip(run.procedure_ids, llm_job_results(run.llm_job)):
        if result is None or procedure_id in stored or result.outcome == "api_error":
            continue
        steps = parse_steps(result.text) if result.ok else []
        new.append(Generation(
            procedure_id=procedure_id, run=run, model=run.language_model.name, outcome=result.outcome,
            predicted_steps=steps, model_completion=result.text, gen_tokens=procedure_tokens(steps) if steps else 0,
            provenance={"generation_run": run.pk, "prompt_hash": run.prompt_hash, "ledger_key": result.key}))
    Generation.objects.bulk_create(new, ignore_conflicts=True)
    return len(new)


def judge_run_collect(run: JudgeRun) -> int:
    """Store a Judgment for every finished judge request (idempotent). Answers that are not
    usable verdicts are stored with their outcome and no label: never scored."""
    rows = run.generation_run.generations.filter(outcome="ok").order_by("id").values_list(
        "id", "procedure__steps", "predicted_steps")
    step_counts = {pk: (len(reference), len(candidate)) for pk, reference, candidate in rows}
    generations = list(step_counts)
    stored = set(run.judgments.values_list("generation_id", flat=True))
    new = []
    for generation_id, result in zip(generations, llm_job_results(run.llm_job)):
        if result is None or generation_id in stored or result.outcome == "api_error":
            continue
        # An answer that is no verdict keeps its reason (e.g. a link to a step that does not exist).
        outcome, label, failures, reasoning = result.outcome, None, [], "" if result.ok else result.error
        if result.ok:
            try:
                # Range-checked here too: a ledger answer from before the bounded schema may
                # link steps that do not exist, and is then no verdict.
                n_l1, n_l2 = step_counts[generation_id]
                answer = validate_judge_answer(result.value, n_l1=n_l1, n_l2=n_l2)
            except JudgeAnswerError as exc:
                outcome, reasoning = "parse_failed", str(exc)
            else:
                failures, reasoning = answer["critical_failures"], answer["reasoning"]
                label = bool(failures)
        new.append(Judgment(generation_id=generation_id, run=run, judge=run.judge, outcome=outcome, has_failure=label,
                            critical_failures=failures, reasoning=reasoning,
                            provenance={"judge_run": run.pk, "prompt_hash": run.prompt_hash, "ledger_key": result.key}))
    Judgment.objects.bulk_create(new, ignore_conflicts=True)
    return len(new)


def run_pause(*, run: GenerationRun | JudgeRun) -> None:
    llm_job_pause(job=run.llm_job)
    type(run).objects.filter(pk=run.pk, status__in=[RunStatus.PENDING, RunStatus.RUNNING]).update(status=RunStatus.PAUSED)


def run_resume(*, run: GenerationRun | JudgeRun, budget_usd: Decimal | None = None) -> None:
    llm_job_resume(job=run.llm_job, budget_usd=budget_usd, enqueue=False)
    type(run).objects.filter(pk=run.pk).update(status=RunStatus.PENDING, error="")
    _enqueue("generation" if isinstance(run, GenerationRun) else "judge", run.pk)


def run_cancel(*, run: GenerationRun | JudgeRun) -> None:
    llm_job_cancel(job=run.llm_job)
    type(run).objects.filter(pk=run.pk).exclude(status=RunStatus.DONE).update(status=RunStatus.CANCELLED)
