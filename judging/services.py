"""Writes of the judging app: models, generation runs, judge runs (How2Score)."""

from __future__ import annotations

import random
from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.db import transaction

from core.app_errors import Conflict, InvalidInput
from core.bulk_insert import bulk_insert_new
from judging.how2score import JudgeAnswerError, validate_judge_answer
from judging.models import (
    ComponentsRun,
    Generation,
    GenerationRun,
    JudgeRun,
    Judgment,
    LanguageModel,
    PromptStyle,
    StepParser,
)
from judging.prompts import cleaned, prompt_load
from judging.run_requests import generation_request, judge_request, judge_sampling, request_options_check
from judging.steps import STEP_PARSERS, steps_parse
from judging.tokens import procedure_tokens
from llm.endpoint_services import base_url_problem
from llm.key_env import api_key_env_check
from llm.models import LLMJob
from llm.request import LLMRequest
from llm.run_lifecycle import (
    owned_run_cancel,
    owned_run_execute,
    owned_run_job_attach,
    owned_run_pause,
    owned_run_resume,
    owned_run_retry_failed,
)
from llm.selectors import llm_job_results
from llm.services import ledger_entry_reject
from llm.shards import llm_job_tasks
from mining.models import Procedure

DEFAULT_PROMPTS: dict[str, str] = {PromptStyle.BASE: "generate_base.txt", PromptStyle.INST: "generate_inst.txt"}
DEFAULT_JUDGE_PROMPT = "how2score_judge.txt"


@transaction.atomic
def language_model_register(
    *,
    name: str,
    role: str = "generate",
    base_url: str = "",
    model: str = "",
    api_key_env: str = "",
    prompt_style: str = PromptStyle.INST,
    reasoning: bool = False,
    max_tokens: int = 1024,
) -> LanguageModel:
    if prompt_style not in PromptStyle.values:
        raise InvalidInput(f"prompt_style must be one of {', '.join(PromptStyle.values)}")
    problem = base_url_problem(base_url) if base_url else None
    if problem is not None:
        raise InvalidInput(f"base_url {problem}", {"base_url": problem})
    api_key_env_check(api_key_env)
    language_model, _ = LanguageModel.objects.update_or_create(
        name=name,
        defaults=dict(
            role=role,
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            prompt_style=prompt_style,
            reasoning=reasoning,
            max_tokens=max_tokens,
        ),
    )
    return language_model


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


def _engine_check(options: dict, executor: str) -> None:
    if options.get("engine") and executor != "vllm_offline":
        raise InvalidInput(
            "engine options apply only to the vllm_offline executor (an in-process vLLM engine); "
            "a vLLM server takes them when it is started (vllm serve MODEL --revision ...)"
        )


def step_parser_check(step_parser: str) -> None:
    """A generation run's step parser is one of judging/steps.py's ``STEP_PARSERS``."""
    if step_parser not in STEP_PARSERS:
        problem = f"must be one of {', '.join(STEP_PARSERS)}, got {step_parser!r}"
        raise InvalidInput(f"step_parser {problem}", {"step_parser": problem})


def run_name_check(*, run_class: type[GenerationRun] | type[JudgeRun], name: str) -> None:
    """Refuse a run name that is taken, naming the run (a re-run of ``bench_run generate``
    or ``judge`` with the same config is not a resume: ``bench_run retry NAME`` is)."""
    existing = run_class.objects.filter(name=name).values_list("pk", flat=True).first()
    if existing is not None:
        kind = "generation run" if run_class is GenerationRun else "judge run"
        raise InvalidInput(
            f"{kind} {name!r} already exists (id {existing}); choose another name, or see it with "
            f"'bench_run status {name}' and ask its failed requests again with 'bench_run retry {name}'"
        )


@transaction.atomic
def generation_run_create(
    *,
    name: str,
    language_model: LanguageModel,
    split: str = "bench",
    sample_per_topic: int | None = None,
    seed: int = 0,
    prompt_file: str | None = None,
    executor: str = "online",
    concurrency: int = 16,
    budget_usd: Decimal | None = None,
    start: bool = True,
    options: dict | None = None,
    procedure_ids: list[int] | None = None,
    step_parser: str = StepParser.PRODUCT,
) -> GenerationRun:
    """A generation run over a sample of the split's procedures, or over exactly
    ``procedure_ids`` (procedures of the split, e.g. the ones a file just imported).
    ``step_parser``: how its completions' steps are read (judging/steps.py: ``product``,
    ours; ``reference``, the reference CLI's)."""
    run_name_check(run_class=GenerationRun, name=name)
    step_parser_check(step_parser)
    options = request_options_check(options)
    _engine_check(options, executor)
    prompt = prompt_load(prompt_file or DEFAULT_PROMPTS[language_model.prompt_style], kind="generate")
    if procedure_ids is None:
        procedure_ids = sample_procedures(split=split, per_topic=sample_per_topic, seed=seed)
    else:
        procedure_ids = list(dict.fromkeys(procedure_ids))
        found = set(Procedure.objects.filter(pk__in=procedure_ids, split=split).values_list("pk", flat=True))
        missing = [pk for pk in procedure_ids if pk not in found]
        if missing:
            raise InvalidInput(
                f"{len(missing)} of the given procedures are not in split {split!r} (e.g. id {missing[0]})"
            )
    if not procedure_ids:
        raise InvalidInput(f"no procedures in split {split!r} to generate for")
    run = GenerationRun.objects.create(
        name=name,
        language_model=language_model,
        split=split,
        sample_per_topic=sample_per_topic,
        seed=seed,
        prompt_file=prompt.path,
        prompt_hash=prompt.sha256,
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
        procedure_ids=procedure_ids,
        step_parser=step_parser,
    )
    procedures = Procedure.objects.in_bulk(procedure_ids)
    requests = [generation_request(procedures[pk], language_model, prompt, options) for pk in procedure_ids]
    owned_run_job_attach(
        run,
        label="generation-run",
        role=language_model.role,
        requests=requests,
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
        endpoint_overrides=language_model.endpoint_overrides(),
    )
    if start:
        _enqueue("generation", run.pk)
    return run


@transaction.atomic
def judge_run_create(
    *,
    name: str,
    generation_run: GenerationRun,
    judge: str,
    role: str = "how2score_judge",
    base_url: str = "",
    model: str = "",
    api_key_env: str = "",
    prompt_file: str | None = None,
    executor: str = "online",
    concurrency: int = 16,
    budget_usd: Decimal | None = None,
    temperature: float | None = None,
    seed: int | None = None,
    start: bool = True,
    options: dict | None = None,
) -> JudgeRun:
    """Judge every usable generation of a run. A judge name is used once per generation
    run, so re-judging with another judge adds judgments and never overwrites. ``options``:
    see :func:`request_options_check` (``temperature`` is the run's own field). A
    ``temperature`` not given is the role's setting or greedy (llm/sampling.py); the run
    stores the one its requests carry."""
    run_name_check(run_class=JudgeRun, name=name)
    api_key_env_check(api_key_env)
    options = request_options_check(options)
    _engine_check(options, executor)
    if options.get("temperature") is not None:
        temperature = options["temperature"]
    temperature = judge_sampling(role, temperature=temperature, options=options)["temperature"]
    _judge_run_check(generation_run, judge)
    prompt = prompt_load(prompt_file or DEFAULT_JUDGE_PROMPT, kind="how2score_judge")
    run = JudgeRun.objects.create(
        name=name,
        generation_run=generation_run,
        judge=judge,
        role=role,
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
        prompt_file=prompt.path,
        prompt_hash=prompt.sha256,
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
        temperature=temperature,
        seed=seed,
    )
    requests = _judge_requests(generation_run, prompt, temperature=temperature, seed=seed, options=options, role=role)
    owned_run_job_attach(
        run,
        label="judge-run",
        role=role,
        requests=requests,
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
        endpoint_overrides=run.endpoint_overrides(),
    )
    if start:
        _enqueue("judge", run.pk)
    return run


def _judge_run_check(generation_run: GenerationRun, judge: str) -> None:
    """A judge name is used once per generation run, and only a run with a usable generation
    is judged."""
    if JudgeRun.objects.filter(generation_run=generation_run, judge=judge).exists():
        raise Conflict(f"generation run {generation_run.name!r} already has judge {judge!r}; choose another judge name")
    if not generation_run.generations.filter(outcome="ok").exists():
        problem = (
            f"generation run {generation_run.name!r} ({generation_run.status}) has no usable generation to judge; "
            "judge it once it has generated"
        )
        raise InvalidInput(problem, {"generation_run": problem})


def _judge_requests(
    generation_run: GenerationRun,
    prompt: Any,
    *,
    temperature: float | None,
    seed: int | None,
    options: dict,
    role: str,
) -> list[LLMRequest]:
    """One How2Score request per usable generation of the run, in generation order."""
    generations = list(generation_run.generations.filter(outcome="ok").select_related("procedure").order_by("id"))
    return [
        judge_request(
            g.procedure.goal,
            g.procedure.steps,
            g.predicted_steps,
            prompt,
            temperature=temperature,
            seed=seed,
            options=options,
            role=role,
        )
        for g in generations
    ]


def _enqueue(kind: str, run_id: int) -> None:
    """Hand the run to the workers once the transaction commits: one task per shard of its
    job still to execute (llm/shards.py), so every free worker takes part."""
    from judging.tasks import generation_run_execute_task, judge_run_execute_task

    task = generation_run_execute_task if kind == "generation" else judge_run_execute_task
    model = GenerationRun if kind == "generation" else JudgeRun

    def send() -> None:
        job_id = model.objects.filter(pk=run_id).values_list("llm_job_id", flat=True).first()
        for _ in range(llm_job_tasks(job_id)):
            task.delay(run_id)

    transaction.on_commit(send)


def generation_run_execute(*, run_id: int) -> str:
    run = GenerationRun.objects.select_related("llm_job", "language_model").filter(pk=run_id).first()
    return (
        "gone"
        if run is None
        else owned_run_execute(run, collect=generation_run_collect, unusable=generation_run_unusable)
    )


def judge_run_execute(*, run_id: int) -> str:
    run = JudgeRun.objects.filter(pk=run_id).first()
    if run is None:
        return "gone"
    return owned_run_execute(run, collect=judge_run_collect, unusable=judge_run_unusable, collect_shards=True)


def generation_run_collect(run: GenerationRun) -> int:
    """Store a Generation for every finished request (idempotent). Returns how many were new."""
    if run.llm_job is None:  # not launched: nothing has finished
        return 0
    stored = set(run.generations.values_list("procedure_id", flat=True))
    new = []
    for procedure_id, result in zip(run.procedure_ids, llm_job_results(run.llm_job)):
        if result is None or procedure_id in stored or result.outcome == "api_error":
            continue
        steps = steps_parse(result.text, parser=run.step_parser) if result.ok else []
        new.append(
            Generation(
                procedure_id=procedure_id,
                run=run,
                model=run.language_model.name,
                outcome=result.outcome,
                predicted_steps=steps,
                model_completion=result.text,
                gen_tokens=procedure_tokens(steps) if steps else 0,
                provenance={"generation_run": run.pk, "prompt_hash": run.prompt_hash, "ledger_key": result.key},
            )
        )
    bulk_insert_new(Generation, new)
    return len(new)


def judge_run_collect(run: JudgeRun, shard: LLMJob | None = None) -> int:
    """Store a Judgment for every finished judge request (idempotent), or for those of one
    ``shard`` of the run's job (its consecutive slice of the requests, stored as soon as it is
    through). Only what is not stored yet is read: the store after the last shard finds the
    others done. Answers that are not usable verdicts are stored with their outcome and no
    label: never scored. An ``ok`` ledger answer refused here is marked failed in the ledger
    (``ledger_entry_reject``)."""
    job = run.llm_job
    if job is None:  # not launched: nothing has finished
        return 0
    generations = run.generation_run.generations.filter(outcome="ok").order_by("id")
    ids, keys = list(generations.values_list("id", flat=True)), list(job.keys)
    if shard is not None and shard.keys:
        start = keys.index(shard.keys[0])
        ids, keys = ids[start : start + len(shard.keys)], list(shard.keys)
    stored = set(run.judgments.filter(generation_id__in=ids).values_list("generation_id", flat=True))
    todo = [(generation_id, key) for generation_id, key in zip(ids, keys) if generation_id not in stored]
    if not todo:
        return 0
    step_counts = {
        pk: (len(cleaned(reference)), len(cleaned(candidate)))
        for pk, reference, candidate in generations.filter(id__in=[g for g, _ in todo]).values_list(
            "id", "procedure__steps", "predicted_steps"
        )
    }
    new = []
    for (generation_id, _key), result in zip(todo, llm_job_results(job, [key for _, key in todo])):
        if result is None or result.outcome == "api_error":
            continue
        new.append(_judgment(run, job, generation_id, result, step_counts[generation_id]))
    bulk_insert_new(Judgment, new)
    return len(new)


def _judgment(run: JudgeRun, job: LLMJob, generation_id: int, result: Any, step_counts: tuple[int, int]) -> Judgment:
    """The Judgment of one finished judge request."""
    # An answer that is no verdict keeps its reason (e.g. a link to a step that does not exist).
    outcome, label, failures, reasoning = result.outcome, None, [], "" if result.ok else result.error
    if result.ok:
        try:
            # Range-checked here too: a ledger answer from before the bounded schema may
            # link steps that do not exist, and is then no verdict.
            n_l1, n_l2 = step_counts
            answer = validate_judge_answer(result.value, n_l1=n_l1, n_l2=n_l2)
        except JudgeAnswerError as exc:
            outcome, reasoning = "parse_failed", str(exc)
            # No verdict, so no answer: the ledger entry says so, and Retry failed asks it again.
            ledger_entry_reject(key=result.key, reason=reasoning, run=job.run)
        else:
            failures, reasoning = answer["critical_failures"], answer["reasoning"]
            label = bool(failures)
    return Judgment(
        generation_id=generation_id,
        run=run,
        judge=run.judge,
        outcome=outcome,
        has_failure=label,
        critical_failures=failures,
        reasoning=reasoning,
        provenance={"judge_run": run.pk, "prompt_hash": run.prompt_hash, "ledger_key": result.key},
    )


def generation_run_unusable(run: GenerationRun) -> int:
    """Stored generations without a usable completion (truncated, refused, ...)."""
    return run.generations.exclude(outcome="ok").count()


def judge_run_unusable(run: JudgeRun) -> int:
    """Stored judgments without a verdict (the answer failed validation, was cut off, ...)."""
    return run.judgments.exclude(outcome="ok").count()


def _discard_unusable(run: GenerationRun | JudgeRun) -> int:
    """Before *Retry failed*: drop the stored items without a usable outcome, so the new
    answers are stored in their place (usable ones are kept)."""
    items = run.generations if isinstance(run, GenerationRun) else run.judgments
    return items.exclude(outcome="ok").delete()[0]


def _kind(run: GenerationRun | JudgeRun) -> str:
    return "generation" if isinstance(run, GenerationRun) else "judge"


def run_pause(*, run: GenerationRun | JudgeRun | ComponentsRun) -> None:
    owned_run_pause(run)


def run_resume(*, run: GenerationRun | JudgeRun, budget_usd: Decimal | None = None) -> None:
    owned_run_resume(run, budget_usd=budget_usd, enqueue=lambda: _enqueue(_kind(run), run.pk))


def run_cancel(*, run: GenerationRun | JudgeRun | ComponentsRun) -> None:
    owned_run_cancel(run)


def run_retry_failed(*, run: GenerationRun | JudgeRun) -> int:
    """*Retry failed* of a generation or judge run: exactly its requests without an ``ok``
    answer are asked again. Returns how many."""
    return owned_run_retry_failed(run, enqueue=lambda: _enqueue(_kind(run), run.pk), discard_unusable=_discard_unusable)
