"""Writes of constrained planning (CoScript, Yuan et al. 2023, Figure 2): a run creates its
specific goals (§4.2), screens them for sensitive domains (App. C.2), over-generates K
scripts per goal (§4.3) and filters them; then researchers review flagged goals, export the
result for annotation, and add it to the benchmark as the "constrained" split.

A run moves through its phases one LLM job at a time; every job goes through the LLM layer
(ledger, retries, limits), so a re-run resumes where the last one stopped and a finished
request is never sent again."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.app_errors import Conflict, InvalidInput
from core.record_files import atomic_output
from coscript.constants import (
    CONSTRAINT_DEFINITIONS,
    CONSTRAINT_TYPES,
    FILTER_KEYWORD,
    FILTER_MODES,
    GOAL_EXAMPLES,
    GOALS_MAX_TOKENS,
    GOALS_TEMPERATURE,
    MAX_K,
    N_SCRIPT_EXAMPLES,
    SCREEN_MAX_TOKENS,
    SCREEN_TEMPERATURE,
    SCRIPT_FREQUENCY_PENALTY,
    SCRIPT_MAX_TOKENS,
    SCRIPT_PRESENCE_PENALTY,
    SCRIPT_TEMPERATURE,
    SCRIPT_TOP_P,
)
from coscript.filtering import FilterCandidate, FilterGoal, filter_candidates, filter_report, select_scripts
from coscript.models import CandidateScript, CoScriptRun, Phase, Review, SpecificGoal
from coscript.parsing import (
    ANSWER_NO_PAIR,
    ANSWER_PAIRS_DROPPED,
    goal_examples_block,
    parse_screen_answer,
    parse_specific_goals,
    script_examples_block,
)
from coscript.retrieval import ExampleIndex
from judging.constants import BASE_STOP
from judging.models import LanguageModel, PromptStyle, RunStatus
from judging.steps import parse_steps
from llm.client import LLMRequest
from llm.job_lifecycle import RunStateConflict
from llm.models import FINISHED, LLMJob
from llm.prompts import Prompt, prompt_read
from llm.sampling import sampling_params
from llm.selectors import llm_job_results
from llm.services import (
    llm_job_cancel,
    llm_job_create,
    llm_job_execute,
    llm_job_failed_count,
    llm_job_pause,
    llm_job_resume,
)
from mining.embeddings import Embed, configured_model_name, embed_texts
from mining.models import Procedure, Split, Topic
from mining.words import normalise_text

PROMPTS_DIR = Path(__file__).with_name("prompts")
# Each stage's prompt file and the placeholders it must use.
STAGE_GOALS, STAGE_SCREEN, STAGE_SCRIPTS = "coscript_specific_goals", "coscript_sensitive_screen", "coscript_script"
PROMPT_FILES = {STAGE_GOALS: "specific_goals.txt", STAGE_SCREEN: "sensitive_screen.txt", STAGE_SCRIPTS: "script.txt"}
PLACEHOLDERS = {
    STAGE_GOALS: {"constraint_type", "definition", "examples", "abstract_goal"},
    STAGE_SCREEN: {"goal"},
    STAGE_SCRIPTS: {"abstract_goal", "examples", "constraint", "specific_goal"},
}
EXPORT_CHOICES = ("selected", "kept", "all")
ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING)


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


# ----------------------------------------------------------------------------- executing


def _set(run: CoScriptRun, **fields: Any) -> None:
    for name, value in fields.items():
        setattr(run, name, value)
    CoScriptRun.objects.filter(pk=run.pk).update(**fields)


def _phase_job(run: CoScriptRun) -> LLMJob | None:
    """The LLM job of the run's phase (goals, screen or scripts); None in other phases."""
    jobs: dict[str, LLMJob | None] = {
        Phase.GOALS: run.goals_job,
        Phase.SCREEN: run.screen_job,
        Phase.SCRIPTS: run.scripts_job,
    }
    return jobs.get(run.phase)


def _job_required(job: LLMJob | None, phase: str) -> LLMJob:
    if job is None:
        raise Conflict(f"the {phase} phase has no LLM job")
    return job


def _run_job(run: CoScriptRun, job: LLMJob) -> str | None:
    """Execute a phase's job. None when it is done; otherwise what happened, with the run's
    status following the job's (paused, cancelled, failed, or waiting for a Batch API)."""
    outcome = "done" if job.status in FINISHED else llm_job_execute(job_id=job.pk)
    job.refresh_from_db()
    if job.status in FINISHED:
        return None
    if job.status == LLMJob.Status.PAUSED:
        _set(run, status=RunStatus.PAUSED, error=job.pause_reason)
    elif job.status in (LLMJob.Status.CANCELLED, LLMJob.Status.FAILED):
        _set(run, status=job.status, error=job.error)
    return outcome


def coscript_run_execute(*, run_id: int, embed: Embed | None = None) -> str:
    """Advance a run through its remaining phases. Returns what happened (for the task log)."""
    run = CoScriptRun.objects.select_related("language_model").filter(pk=run_id).first()
    if run is None:
        return "gone"
    if run.status not in ACTIVE:
        return f"not active ({run.status})"
    _set(run, status=RunStatus.RUNNING, error="")
    prompts = _run_prompts(run)
    while run.phase != Phase.DONE:
        if run.phase == Phase.FILTER:
            coscript_run_filter(run=run, embed=embed)
            break
        job = _job_required(_phase_job(run), run.phase)
        stored = CoScriptRun.objects.filter(pk=run.pk).values_list("status", flat=True).first()
        if stored not in ACTIVE:  # paused or cancelled between two phases: the next phase waits
            return f"not active ({stored})"
        outcome = _run_job(run, job)
        if outcome is not None:
            return outcome
        failed = llm_job_failed_count(job) if job.status == RunStatus.DONE_WITH_FAILURES else 0
        if failed and run.phase not in run.report.get("accepted_errors", []):
            counts = ", ".join(f"{o} {n}" for o, n in sorted(job.outcome_counts.items()) if o != "ok" and n)
            _set(
                run,
                status=RunStatus.PAUSED,
                error=(
                    f"{failed} of {job.n_total} {Phase(run.phase).label} requests have no usable answer ({counts}; "
                    f"LLM job {job.pk}); Retry failed sends exactly those again, or resume without them"
                ),
            )
            return f"paused: {failed} failed requests"
        with transaction.atomic():
            # One worker moves a run to its next phase: another that finished the same job
            # at the same time finds the phase already changed and follows it.
            locked = CoScriptRun.objects.select_for_update().get(pk=run.pk)
            if locked.phase != run.phase:
                run.refresh_from_db()
                continue
            if run.phase == Phase.GOALS:
                _collect_goals(run)
                if not run.goals.exists():  # nothing to screen or script: an empty filter report ends the run
                    _set(run, phase=Phase.FILTER)
                    continue
                if run.screen:
                    _set(
                        run,
                        screen_job=_create_job(run, Phase.SCREEN, _screen_requests(run, prompts)),
                        phase=Phase.SCREEN,
                    )
                    continue
                run.phase = Phase.SCREEN  # fall through to scripts below
            if run.phase == Phase.SCREEN:
                if run.screen:
                    _collect_screen(run)
                _set(
                    run,
                    scripts_job=_create_job(run, Phase.SCRIPTS, _script_requests(run, prompts)),
                    phase=Phase.SCRIPTS,
                )
            elif run.phase == Phase.SCRIPTS:
                _collect_scripts(run)
                _set(run, phase=Phase.FILTER)
    final = RunStatus.DONE_WITH_FAILURES if run.report.get("accepted_errors") else RunStatus.DONE
    _set(run, status=final, finished_at=timezone.now())
    return final


def _goal_key(text: str) -> str:
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


def _collect_goals(run: CoScriptRun) -> None:
    """Store the specific goals (de-duplicated within each abstract goal and across the run).
    The report counts the requests by outcome, the pairs dropped by reason (``dropped``) and
    the ``ok`` answers that gave no specific goal by reason (``answers_dropped``: no pair
    could be read from them, or every pair they had was dropped)."""
    if run.goals.exists():
        return
    procedures = Procedure.objects.select_related("topic").in_bulk(run.abstract_ids)
    results = iter(llm_job_results(_job_required(run.goals_job, Phase.GOALS)))
    run_keys: set[str] = set()
    rows: list[SpecificGoal] = []
    dropped: Counter[str] = Counter()
    answers_dropped: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for pk in run.abstract_ids:
        procedure = procedures.get(pk)
        seen: set[str] = set()
        for constraint_type in CONSTRAINT_TYPES:
            result = next(results)
            outcomes[result.outcome if result else "missing"] += 1
            if procedure is None or result is None or not result.ok:
                continue
            reading = parse_specific_goals(result.text, abstract_goal=procedure.goal, seen=seen)
            dropped.update(reading.dropped)
            kept_before = len(rows)
            for goal in reading.goals:
                key = _goal_key(goal.specific_goal)
                if key in run_keys:  # the same specific goal from two abstract goals
                    dropped["duplicate"] += 1
                    continue
                run_keys.add(key)
                rows.append(
                    SpecificGoal(
                        run=run,
                        abstract_procedure=procedure,
                        abstract_goal=procedure.goal,
                        topic=procedure.topic.name,
                        constraint_type=constraint_type,
                        constraint=goal.constraint,
                        specific_goal=goal.specific_goal,
                        goal_key=key,
                        provenance={"ledger_key": result.key, "prompt_hash": run.prompts[STAGE_GOALS]["sha256"]},
                    )
                )
            if not reading.pairs_read:
                answers_dropped[ANSWER_NO_PAIR] += 1
            elif len(rows) == kept_before:
                answers_dropped[ANSWER_PAIRS_DROPPED] += 1
    SpecificGoal.objects.bulk_create(rows, batch_size=2000)
    by_type = Counter(row.constraint_type for row in rows)
    _set(
        run,
        report={
            **run.report,
            "goals": {
                "abstract_goals": len(run.abstract_ids),
                "requests": dict(outcomes),
                "specific_goals": len(rows),
                "by_type": {t: by_type[t] for t in CONSTRAINT_TYPES},
                "dropped": dict(dropped),
                "answers_dropped": dict(sorted(answers_dropped.items())),
            },
        },
    )


def _screen_requests(run: CoScriptRun, prompts: dict[str, Prompt]) -> list[LLMRequest]:
    params = _sampling(run.language_model, temperature=SCREEN_TEMPERATURE, max_tokens=SCREEN_MAX_TOKENS)
    return [
        _request(STAGE_SCREEN, prompts[STAGE_SCREEN].render(goal=goal), run.language_model, params)
        for goal in run.goals.order_by("id").values_list("specific_goal", flat=True)
    ]


def _collect_screen(run: CoScriptRun) -> None:
    """Record the screen's answers; a Yes, or an answer that is neither Yes nor No, puts the
    goal on the review list."""
    goals = list(run.goals.order_by("id"))
    counts: Counter = Counter()
    for goal, result in zip(goals, llm_job_results(_job_required(run.screen_job, Phase.SCREEN))):
        answer = parse_screen_answer(result.text) if result is not None and result.ok else None
        goal.sensitive = answer
        goal.review = Review.NOT_NEEDED if answer is False else Review.PENDING
        goal.provenance = {
            **goal.provenance,
            "screen_ledger_key": result.key if result else None,
            "screen_answer": (result.text if result else "")[:200],
        }
        counts["sensitive" if answer else "cleared" if answer is False else "unreadable"] += 1
    SpecificGoal.objects.bulk_update(goals, ["sensitive", "review", "provenance"], batch_size=2000)
    _set(run, report={**run.report, "screen": {**dict(counts), "flagged": counts["sensitive"] + counts["unreadable"]}})


def _script_requests(run: CoScriptRun, prompts: dict[str, Prompt]) -> list[LLMRequest]:
    """K requests per specific goal, each with its own seed (so each is its own ledger entry),
    with two retrieved procedures as examples (§4.3, Table 11)."""
    pool = list(Procedure.objects.exclude(split=Split.CONSTRAINED).order_by("id").values_list("goal", "steps"))
    index = ExampleIndex([goal for goal, _ in pool])
    examples: dict[str, str] = {}
    requests = []
    sampling = _sampling(run.language_model, temperature=SCRIPT_TEMPERATURE, max_tokens=SCRIPT_MAX_TOKENS)
    for goal in run.goals.order_by("id"):
        if goal.abstract_goal not in examples:
            chosen = [pool[i] for i in index.similar(goal.abstract_goal, n=N_SCRIPT_EXAMPLES)]
            examples[goal.abstract_goal] = script_examples_block(chosen)
        text = prompts[STAGE_SCRIPTS].render(
            abstract_goal=goal.abstract_goal,
            examples=examples[goal.abstract_goal],
            constraint=goal.constraint,
            specific_goal=goal.specific_goal,
        )
        for k in range(run.k):
            params = {
                **sampling,
                "top_p": SCRIPT_TOP_P,
                "presence_penalty": SCRIPT_PRESENCE_PENALTY,
                "frequency_penalty": SCRIPT_FREQUENCY_PENALTY,
                "seed": run.seed * MAX_K + k,
            }
            requests.append(_request(STAGE_SCRIPTS, text, run.language_model, params, completion_cue="\n1."))
    return requests


def _collect_scripts(run: CoScriptRun) -> None:
    if CandidateScript.objects.filter(goal__run=run).exists():
        return
    goals = list(run.goals.order_by("id"))
    results = llm_job_results(_job_required(run.scripts_job, Phase.SCRIPTS))
    rows: list[CandidateScript] = []
    outcomes: Counter[str] = Counter()
    for n, result in enumerate(results):
        goal, index = goals[n // run.k], n % run.k
        outcome = result.outcome if result is not None else "missing"
        text = result.text if result is not None else ""
        if run.language_model.prompt_style == PromptStyle.BASE and text:
            text = "1." + text  # the prompt ended with the first item's number
        steps = parse_steps(text) if result is not None and result.ok else []
        outcomes[outcome if steps or outcome != "ok" else "no_steps"] += 1
        rows.append(
            CandidateScript(
                goal=goal,
                index=index,
                outcome=outcome,
                steps=steps,
                completion=text,
                provenance={
                    "ledger_key": result.key if result else None,
                    "prompt_hash": run.prompts[STAGE_SCRIPTS]["sha256"],
                },
            )
        )
    CandidateScript.objects.bulk_create(rows, batch_size=2000)
    _set(run, report={**run.report, "scripts": {"candidates": len(rows), "outcomes": dict(outcomes)}})


def coscript_run_filter(
    *, run: CoScriptRun, mode: str | None = None, keyword_bonus: float | None = None, embed: Embed | None = None
) -> dict[str, Any]:
    """Apply the filter (again, with another mode or bonus if given): every candidate gets a
    verdict, each goal with a kept candidate gets one chosen script, and the report gains
    the kept rates per constraint type. The verdicts are written in one transaction."""
    mode = mode or run.filter_mode
    bonus = run.keyword_bonus if keyword_bonus is None else keyword_bonus
    if mode not in FILTER_MODES:
        raise InvalidInput(f"filter mode must be one of {', '.join(FILTER_MODES)}")
    if bonus < 0:
        raise InvalidInput("the keyword bonus must not be negative")
    goals = list(run.goals.order_by("id"))
    candidates = list(CandidateScript.objects.filter(goal__run=run).order_by("goal_id", "index"))
    if not candidates and run.phase not in (Phase.FILTER, Phase.DONE):
        raise Conflict(f"run {run.pk} has no candidate scripts to filter yet")
    embedding_model = run.embedding_model
    if mode != FILTER_KEYWORD and embed is None:
        embedding_model = embedding_model or configured_model_name(getattr(settings, "EMBEDDING_MODEL", ""))
        embed = partial(embed_texts, model=embedding_model)
    filter_goals = [
        FilterGoal(
            key=g.pk,
            group=g.abstract_procedure_id or g.abstract_goal,
            specific_goal=g.specific_goal,
            constraint=g.constraint,
            constraint_type=g.constraint_type,
        )
        for g in goals
    ]
    filter_cands = [FilterCandidate(key=c.pk, goal_key=c.goal_id, steps=tuple(c.steps)) for c in candidates]
    verdicts = filter_candidates(filter_goals, filter_cands, mode=mode, embed=embed, keyword_bonus=bonus)
    selected = select_scripts(filter_cands, verdicts, seed=run.seed)
    chosen = set(selected.values())
    report = filter_report(filter_goals, filter_cands, verdicts, selected, mode=mode)
    report.update(keyword_bonus=bonus, embedding_model="" if mode == FILTER_KEYWORD else embedding_model)
    for c in candidates:
        verdict = verdicts[c.pk]
        c.kept, c.reason, c.selected, c.scores = verdict.kept, verdict.reason, c.pk in chosen, verdict.as_dict()
    # A run stopped at the filter (say, the embedding model was missing) is finished by a filter that works.
    finished = (
        {"status": RunStatus.DONE, "error": "", "finished_at": timezone.now()}
        if run.phase == Phase.FILTER and run.status in (RunStatus.PAUSED, RunStatus.FAILED)
        else {}
    )
    with transaction.atomic():
        CandidateScript.objects.bulk_update(candidates, ["kept", "reason", "selected", "scores"], batch_size=2000)
        _set(
            run,
            filter_mode=mode,
            keyword_bonus=bonus,
            embedding_model=report["embedding_model"],
            report={**run.report, "filter": report},
            phase=Phase.DONE,
            **finished,
        )
    return report


# ----------------------------------------------------------------------------- controls


def coscript_run_pause(*, run: CoScriptRun, reason: str = "paused by a user") -> None:
    """Pause a pending or running run: its phase's job stops within seconds and keeps what
    was answered; *Resume* continues the phase. The filter has no model calls and runs in one
    step, so a run filtering cannot be paused."""
    run = CoScriptRun.objects.get(pk=run.pk)
    if run.status not in ACTIVE:
        raise RunStateConflict(f"run {run.pk} is {run.status}; only a pending or running run can be paused")
    if run.phase in (Phase.FILTER, Phase.DONE):
        raise RunStateConflict(f"run {run.pk} is filtering (no model calls, one step); it cannot be paused")
    for _, job in run.jobs:
        if job is not None:
            llm_job_pause(job=job, reason=reason)
    CoScriptRun.objects.filter(pk=run.pk, status__in=ACTIVE).update(status=RunStatus.PAUSED, error=reason)


def coscript_run_cancel(*, run: CoScriptRun) -> None:
    for _, job in run.jobs:
        if job is not None:
            llm_job_cancel(job=job)
    CoScriptRun.objects.filter(pk=run.pk).exclude(status__in=FINISHED).update(
        status=RunStatus.CANCELLED, finished_at=timezone.now()
    )


@transaction.atomic
def coscript_run_resume(*, run: CoScriptRun, without_errors: bool = False, enqueue: bool = True) -> CoScriptRun:
    """Put a paused, failed or interrupted run back in the queue; finished requests are not
    sent again. Requests that ended in API errors are sent again, or, with
    ``without_errors``, the phase goes on without them (counted in the report)."""
    run = CoScriptRun.objects.select_for_update().get(pk=run.pk)
    if run.status in (*FINISHED, RunStatus.CANCELLED):
        raise RunStateConflict(f"run {run.pk} is {run.status}; it cannot be resumed")
    job = _phase_job(run)
    if without_errors:
        run.report = {**run.report, "accepted_errors": sorted({*run.report.get("accepted_errors", []), run.phase})}
    if job is not None and (
        job.status in (LLMJob.Status.PAUSED, LLMJob.Status.FAILED)
        or (job.status == LLMJob.Status.DONE_WITH_FAILURES and not without_errors)
    ):
        llm_job_resume(job=job, enqueue=False)  # its requests without an ok answer are asked again
    run.status, run.error = RunStatus.PENDING, ""
    run.save(update_fields=["status", "error", "report"])
    if enqueue:
        _enqueue(run)
    return run


def coscript_run_retry_failed(*, run: CoScriptRun, enqueue: bool = True) -> int:
    """*Retry failed*: a run stopped at a phase whose requests have no usable answer asks
    exactly those again. Returns how many. A finished run's accepted failures stay in its
    report (start a new run to ask them: the ledger re-asks only what failed)."""
    if run.status in (*FINISHED, RunStatus.CANCELLED):
        raise RunStateConflict(f"run {run.pk} is {run.status}; only a stopped run's failed requests can be retried")
    if run.status in ACTIVE:
        raise RunStateConflict(f"run {run.pk} is {run.status}; its failures are retried once it has stopped")
    job = _phase_job(run)
    failed = llm_job_failed_count(job) if job is not None else 0
    coscript_run_resume(run=run, enqueue=enqueue)
    return failed


def specific_goal_review(*, goal: SpecificGoal, decision: str, user=None) -> SpecificGoal:
    """A reviewer's decision on a goal of the review list: approve it (exported and added like
    any other) or remove it (never exported or added)."""
    if decision not in (Review.APPROVED, Review.REMOVED):
        raise InvalidInput(f"decision must be {Review.APPROVED} or {Review.REMOVED}")
    if goal.review == Review.NOT_NEEDED:
        raise Conflict(f"specific goal {goal.pk} was not flagged; there is nothing to review")
    goal.review, goal.reviewed_by, goal.reviewed_at = decision, user, timezone.now()
    goal.save(update_fields=["review", "reviewed_by", "reviewed_at"])
    return goal


# ----------------------------------------------------------------------------- results


def export_records(run: CoScriptRun, *, candidates: str = "selected") -> list[dict[str, Any]]:
    """Records in the constraint-faithfulness study's input shape: the chosen script of each
    goal (``selected``), every kept candidate (``kept``) or every candidate with steps
    (``all``, to annotate the filter itself). Goals held by the review list are left out."""
    if candidates not in EXPORT_CHOICES:
        raise InvalidInput(f"candidates must be one of {', '.join(EXPORT_CHOICES)}")
    rows = CandidateScript.objects.filter(goal__run=run).select_related("goal").order_by("goal_id", "index")
    if candidates == "selected":
        rows = rows.filter(selected=True)
    elif candidates == "kept":
        rows = rows.filter(kept=True)
    records = []
    for c in rows.iterator(chunk_size=2000):
        goal = c.goal
        if not goal.exportable or not c.steps:
            continue
        records.append(
            {
                "id": f"coscript-{run.pk}-{goal.pk}-{c.index}",
                "abstract_goal": goal.abstract_goal,
                "specific_goal": goal.specific_goal,
                "constraint": goal.constraint,
                "constraint_type": goal.constraint_type,
                "steps": list(c.steps),
                "topic": goal.topic,
                "source": {
                    "coscript_run": run.pk,
                    "specific_goal_id": goal.pk,
                    "candidate": c.index,
                    "kept": c.kept,
                    "selected": c.selected,
                    "filter_mode": run.filter_mode,
                    "abstract_procedure_id": goal.abstract_procedure_id,
                    "model": run.language_model.name,
                    "ledger_key": c.provenance.get("ledger_key"),
                },
            }
        )
    return records


def coscript_export(*, run: CoScriptRun, output: str | Path, candidates: str = "selected") -> int:
    """Write :func:`export_records` as JSONL, atomically. Returns how many lines."""
    records = export_records(run, candidates=candidates)
    with atomic_output(output) as handle:
        for record in records:
            handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
    return len(records)


@transaction.atomic
def coscript_add_to_benchmark(*, run: CoScriptRun) -> dict[str, int]:
    """Add each goal's chosen script as a procedure of the "constrained" split (goal: the
    specific goal; steps: the script; topic: the abstract goal's, or the topic of that name
    when the abstract procedure is gone; no resources, which the
    paper's scripts do not list). Goals on the review list are left out; a goal already
    added is not added twice."""
    if run.phase != Phase.DONE:
        raise Conflict(f"run {run.pk} has not finished filtering; nothing to add yet")
    chosen = (
        CandidateScript.objects.filter(goal__run=run, selected=True)
        .select_related("goal__abstract_procedure__topic")
        .order_by("goal_id")
    )
    topics = {topic.name: topic for topic in Topic.objects.all()}
    counts: Counter[str] = Counter()
    for c in chosen:
        goal = c.goal
        if not goal.exportable:
            counts["held_by_review"] += 1
            continue
        if goal.benchmark_procedure_id:
            counts["already_added"] += 1
            continue
        topic = goal.abstract_procedure.topic if goal.abstract_procedure else topics.get(goal.topic)
        if topic is None:
            counts["no_topic"] += 1
            continue
        procedure, created = Procedure.objects.get_or_create(
            source_example_id=f"coscript:{run.pk}:{goal.pk}",
            goal=goal.specific_goal,
            defaults={
                "topic": topic,
                "steps": list(c.steps),
                "resources": [],
                "split": Split.CONSTRAINED,
                "provenance": {
                    "coscript_run": run.pk,
                    "specific_goal_id": goal.pk,
                    "candidate": c.index,
                    "abstract_procedure_id": goal.abstract_procedure_id,
                    "abstract_goal": goal.abstract_goal,
                    "constraint": goal.constraint,
                    "constraint_type": goal.constraint_type,
                    "model": run.language_model.name,
                    "filter_mode": run.filter_mode,
                },
            },
        )
        goal.benchmark_procedure = procedure
        goal.save(update_fields=["benchmark_procedure"])
        counts["added" if created else "already_added"] += 1
    return dict(counts)
