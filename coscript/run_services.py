"""A CoScript run's life outside its phases: its prompts and requests (``stage_prompt``), creating it from abstract procedures and queueing it (``coscript_run_create``: the first phase's LLM job), and the controls on it (``coscript_run_pause``, ``_cancel``, ``_resume``, ``_retry_failed``), which act on the LLM job of the run's current phase."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from core.app_errors import Conflict, InvalidInput
from coscript.constants import (
    CONSTRAINT_DEFINITIONS,
    CONSTRAINT_TYPES,
    FILTER_KEYWORD,
    FILTER_MODES,
    GOAL_EXAMPLES,
    GOALS_MAX_TOKENS,
    GOALS_TEMPERATURE,
    MAX_K,
)
from coscript.models import CoScriptRun, Phase
from coscript.parsing import goal_examples_block
from judging.constants import BASE_STOP
from judging.models import LanguageModel, PromptStyle
from llm.models import LLMJob
from llm.prompts import Prompt, prompt_read
from llm.request import LLMRequest
from llm.run_lifecycle import owned_run_cancel, owned_run_pause, owned_run_resume, owned_run_retry_failed
from llm.run_models import ACTIVE, FINISHED, PAUSED_BY_USER, RunStateConflict
from llm.sampling import sampling_params
from llm.services import llm_job_create, llm_job_failed_count, llm_job_resume
from mining.embeddings import configured_model_name
from mining.models import Procedure, Split

PROMPTS_DIR = Path(__file__).with_name("prompts")


# Each stage's prompt file and the placeholders it must use.
STAGE_GOALS, STAGE_SCREEN, STAGE_SCRIPTS = "coscript_specific_goals", "coscript_sensitive_screen", "coscript_script"


PROMPT_FILES = {STAGE_GOALS: "specific_goals.txt", STAGE_SCREEN: "sensitive_screen.txt", STAGE_SCRIPTS: "script.txt"}


PLACEHOLDERS = {
    STAGE_GOALS: {"constraint_type", "definition", "examples", "abstract_goal"},
    STAGE_SCREEN: {"goal"},
    STAGE_SCRIPTS: {"abstract_goal", "examples", "constraint", "specific_goal"},
}


def stage_prompt(stage: str, prompts_dir: str | Path | None = None) -> Prompt:
    folder = Path(prompts_dir) if prompts_dir else PROMPTS_DIR
    return prompt_read(folder / PROMPT_FILES[stage], expected=PLACEHOLDERS[stage], kind=stage)


def _run_prompts(run: CoScriptRun) -> dict[str, Prompt]:
    """The prompts a run recorded, checked against their hashes (a changed file is an error,
    not a silent change of protocol halfway through a run)."""
    prompts = {}
    for stage, recorded in run.prompts.items():
        prompt = prompt_read(recorded["path"], expected=PLACEHOLDERS[stage], kind=stage)
        if prompt.sha256 != recorded["sha256"]:
            raise Conflict(
                f"{recorded['path']}: the prompt changed since run {run.pk} started "
                f"(sha256 {recorded['sha256'][:12]} -> {prompt.sha256[:12]}); start a new run"
            )
        prompts[stage] = prompt
    return prompts


def _sampling(language_model: LanguageModel, *, temperature: float, max_tokens: int) -> dict[str, Any]:
    """A CoScript request's ``temperature`` and ``max_tokens`` (llm/sampling.py). A CoScript
    run has no sampling options of its own and each phase has its own budget (the
    registered model's ``max_tokens`` is not used), so: the model's role's
    ``<PREFIX>_TEMPERATURE`` / ``<PREFIX>_MAX_TOKENS`` (or ``LLM_*``) over the phase's
    constants (coscript/constants.py; App. C.1, Table 11 for the scripts)."""
    return sampling_params(language_model.role, built_in={"temperature": temperature, "max_tokens": max_tokens})


def _request(
    stage: str, text: str, language_model: LanguageModel, params: dict[str, Any], *, completion_cue: str = ""
) -> LLMRequest:
    """A chat request, or for a base model the prompt as a plain completion that stops at the
    blank line (``BASE_STOP``, as generation runs do): every prompt's examples are blocks
    separated by a blank line, and a base model left without a stop goes on writing blocks
    of its own (``Abstract Goal: …``, ``Goal: …``) until it is cut off, so every answer would
    be ``truncated``."""
    if language_model.prompt_style == PromptStyle.BASE:
        return LLMRequest(
            stage=stage,
            messages=[],
            prompt=text.rstrip("\n") + completion_cue,
            params={**params, "stop": list(BASE_STOP)},
        )
    return LLMRequest(stage=stage, messages=[{"role": "user", "content": text}], params=params)


def abstract_procedures(*, split: str, limit: int | None, seed: int) -> list[int]:
    """Procedure ids whose goals are the abstract goals: a split (or every procedure but the
    constrained ones), ``limit`` of them drawn with ``seed``, in id order."""
    queryset = Procedure.objects.exclude(split=Split.CONSTRAINED)
    if split:
        queryset = queryset.filter(split=split)
    ids = list(queryset.order_by("id").values_list("id", flat=True))
    if limit is not None and limit < len(ids):
        ids = sorted(random.Random(seed).sample(ids, limit))
    return ids


def _create_job(run: CoScriptRun, phase: str, requests: list[LLMRequest]) -> LLMJob:
    model = run.language_model
    return llm_job_create(
        run=f"coscript:{run.pk}:{phase}",
        role=model.role,
        requests=requests,
        executor=run.executor,
        concurrency=run.concurrency,
        budget_usd=run.budget_usd,
        endpoint_overrides=model.endpoint_overrides(),
        start=False,
    )


@transaction.atomic
def coscript_run_create(
    *,
    name: str,
    language_model: LanguageModel,
    split: str = "",
    limit: int | None = None,
    seed: int = 0,
    k: int = 2,
    filter_mode: str = FILTER_MODES[0],
    keyword_bonus: float | None = None,
    screen: bool = True,
    embedding_model: str | None = None,
    executor: str = "online",
    concurrency: int = 16,
    budget_usd: Decimal | None = None,
    prompts_dir: str | Path | None = None,
    created_by=None,
    start: bool = True,
) -> CoScriptRun:
    """Create a run and its first job (three specific-goal requests per abstract goal, one per
    constraint type, §4.2) and, by default, enqueue it once the transaction commits."""
    if not name.strip():
        raise InvalidInput("a run needs a name")
    if CoScriptRun.objects.filter(name=name).exists():
        raise Conflict(f"a CoScript run named {name!r} exists; choose another name")
    if not 1 <= k <= MAX_K:
        raise InvalidInput(f"k must be between 1 and {MAX_K}")
    if filter_mode not in FILTER_MODES:
        raise InvalidInput(f"filter mode must be one of {', '.join(FILTER_MODES)}")
    if limit is not None and limit < 1:
        raise InvalidInput("limit must be at least 1")
    if keyword_bonus is not None and keyword_bonus < 0:
        raise InvalidInput("the keyword bonus must not be negative")
    prompts = {stage: stage_prompt(stage, prompts_dir) for stage in PROMPT_FILES}
    abstract_ids = abstract_procedures(split=split, limit=limit, seed=seed)
    if not abstract_ids:
        where = f"split {split!r}" if split else "the procedure pool"
        raise InvalidInput(f"no procedures in {where} to take abstract goals from")
    run = CoScriptRun.objects.create(
        name=name,
        language_model=language_model,
        split=split,
        limit=limit,
        seed=seed,
        k=k,
        filter_mode=filter_mode,
        keyword_bonus=CoScriptRun._meta.get_field("keyword_bonus").default if keyword_bonus is None else keyword_bonus,
        screen=screen,
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
        embedding_model=""
        if filter_mode == FILTER_KEYWORD
        else configured_model_name(embedding_model or getattr(settings, "EMBEDDING_MODEL", "")),
        prompts={stage: {"path": p.path, "sha256": p.sha256} for stage, p in prompts.items()},
        abstract_ids=abstract_ids,
        created_by=created_by,
    )
    goals = dict(Procedure.objects.filter(pk__in=abstract_ids).values_list("id", "goal"))
    params = _sampling(language_model, temperature=GOALS_TEMPERATURE, max_tokens=GOALS_MAX_TOKENS)
    requests = [
        _request(
            STAGE_GOALS,
            prompts[STAGE_GOALS].render(
                constraint_type=constraint_type.capitalize(),
                definition=CONSTRAINT_DEFINITIONS[constraint_type],
                examples=goal_examples_block(GOAL_EXAMPLES[constraint_type]),
                abstract_goal=goals[pk],
            ),
            language_model,
            params,
        )
        for pk in abstract_ids
        for constraint_type in CONSTRAINT_TYPES
    ]
    run.goals_job = _create_job(run, Phase.GOALS, requests)
    run.save(update_fields=["goals_job"])
    if start:
        _enqueue(run)
    return run


def _enqueue(run: CoScriptRun) -> None:
    from coscript.tasks import coscript_run_execute_task

    transaction.on_commit(lambda: coscript_run_execute_task.delay(run.pk))


def _phase_job(run: CoScriptRun) -> LLMJob | None:
    """The LLM job of the run's phase (goals, screen or scripts); None in other phases."""
    jobs: dict[str, LLMJob | None] = {
        Phase.GOALS: run.goals_job,
        Phase.SCREEN: run.screen_job,
        Phase.SCRIPTS: run.scripts_job,
    }
    return jobs.get(run.phase)


def coscript_run_pause(*, run: CoScriptRun, reason: str = PAUSED_BY_USER) -> None:
    """Pause a pending or running run: its phase's job stops within seconds and keeps what
    was answered; *Resume* continues the phase. The filter has no model calls and runs in one
    step, so a run filtering cannot be paused."""
    run = CoScriptRun.objects.get(pk=run.pk)
    if run.status in ACTIVE and run.phase in (Phase.FILTER, Phase.DONE):
        raise RunStateConflict(f"run {run.pk} is filtering (no model calls, one step); it cannot be paused")
    owned_run_pause(run, reason=reason)


def coscript_run_cancel(*, run: CoScriptRun) -> None:
    owned_run_cancel(run)


def _phase_reopen(run: CoScriptRun, *, without_errors: bool = False) -> None:
    """What a resume puts back in the queue: the job of the run's phase, when it paused,
    failed, or finished with requests without an ``ok`` answer (unless the phase goes on
    without them); the jobs of phases already through stay as they are."""
    job = _phase_job(run)
    if without_errors:
        report = {**run.report, "accepted_errors": sorted({*run.report.get("accepted_errors", []), run.phase})}
        CoScriptRun.objects.filter(pk=run.pk).update(report=report)
    if job is not None and (
        job.status in (LLMJob.Status.PAUSED, LLMJob.Status.FAILED)
        or (job.status == LLMJob.Status.DONE_WITH_FAILURES and not without_errors)
    ):
        llm_job_resume(job=job, enqueue=False)  # its requests without an ok answer are asked again


def coscript_run_resume(*, run: CoScriptRun, without_errors: bool = False, enqueue: bool = True) -> CoScriptRun:
    """Put a paused, failed or interrupted run back in the queue; finished requests are not
    sent again. Requests that ended in API errors are sent again, or, with
    ``without_errors``, the phase goes on without them (counted in the report)."""
    owned_run_resume(
        run,
        enqueue=(lambda: _enqueue(run)) if enqueue else (lambda: None),
        reopen=lambda stored: _phase_reopen(stored, without_errors=without_errors),
    )
    return CoScriptRun.objects.get(pk=run.pk)


def coscript_run_retry_failed(*, run: CoScriptRun, enqueue: bool = True) -> int:
    """*Retry failed*: a run stopped at a phase whose requests have no usable answer asks
    exactly those again. Returns how many. A finished run's accepted failures stay in its
    report (start a new run to ask them: the ledger re-asks only what failed)."""
    status = CoScriptRun.objects.values_list("status", flat=True).get(pk=run.pk)
    if status in FINISHED:
        raise RunStateConflict(
            f"{run} is {status}; its accepted failures stay in its report (start a new run to ask them)"
        )

    def failures(stored: CoScriptRun) -> int:
        job = _phase_job(stored)
        return llm_job_failed_count(job) if job is not None else 0

    return owned_run_retry_failed(
        run,
        enqueue=(lambda: _enqueue(run)) if enqueue else (lambda: None),
        failures=failures,
        reopen=_phase_reopen,
    )
