"""Executing a CoScript run, one phase after another (Yuan et al. 2023, Figure 2): ``coscript_run_execute`` runs each phase's LLM job and collects its answers: the specific goals (§4.2), the sensitive-domain screen (App. C.2), K candidate scripts per goal (§4.3); then ``coscript_run_filter`` keeps the faithful scripts and selects one per goal."""

from __future__ import annotations

import hashlib
from collections import Counter
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.app_errors import Conflict, InvalidInput
from coscript.constants import (
    CONSTRAINT_TYPES,
    FILTER_KEYWORD,
    FILTER_MODES,
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
    parse_screen_answer,
    parse_specific_goals,
    script_examples_block,
)
from coscript.retrieval import ExampleIndex
from coscript.run_services import (
    ACTIVE,
    STAGE_GOALS,
    STAGE_SCREEN,
    STAGE_SCRIPTS,
    _create_job,
    _phase_job,
    _request,
    _run_prompts,
    _sampling,
)
from judging.models import PromptStyle, RunStatus
from judging.steps import parse_steps
from llm.models import LLMJob
from llm.prompts import Prompt
from llm.request import LLMRequest
from llm.run_models import FINISHED
from llm.selectors import llm_job_results
from llm.services import llm_job_execute, llm_job_failed_count
from mining.embeddings import Embed, configured_model_name, embed_texts
from mining.models import Procedure, Split
from mining.words import normalise_text


def _set(run: CoScriptRun, **fields: Any) -> None:
    for name, value in fields.items():
        setattr(run, name, value)
    CoScriptRun.objects.filter(pk=run.pk).update(**fields)


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
        _set(run, status=RunStatus.PAUSED, pause_reason=job.pause_reason)
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
    _set(run, status=RunStatus.RUNNING, pause_reason="", error="")
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
                pause_reason=(
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
        {"status": RunStatus.DONE, "pause_reason": "", "error": "", "finished_at": timezone.now()}
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
