"""Reads of the judging app: How2Score per judge run, the verdicts a judge's scores are
counted from (``verdict_counts``), the procedures each model should have been judged on
(``expected_items``), and the generation runs. The leaderboard and the pairwise comparisons
read these in judging/leaderboard_selectors.py, the cross-judge rankings in
judging/cross_judge_selectors.py. Every How2Score comes with its interval and its coverage
(judging/coverage.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet

from judging.how2score import How2ScoreTally
from judging.models import Generation, GenerationRun, JudgeRun, Judgment
from llm.constants import OUTCOME_API_ERROR
from llm.selectors import ledger_run_outcomes
from mining.models import Procedure, Split


def judge_names() -> list[str]:
    return list(Judgment.objects.values_list("judge", flat=True).distinct().order_by("judge"))


def usable_verdict(outcome: str, has_failure: bool | None) -> bool | None:
    """The verdict a judgment counts with: its has_failure when the judge's answer was
    usable (outcome ok), else None (counted as unusable, never scored)."""
    return has_failure if outcome == "ok" else None


def judge_request_failures(runs: Iterable[JudgeRun], split: str | None = None) -> list[Generation]:
    """The generations whose judge request (in one of ``runs``) ended ``api_error``: no
    answer, so no Judgment is stored, yet each is a judged item without a usable verdict,
    counted as unusable beside the stored ones. Procedure, topic and run loaded; only
    procedures of ``split`` when given."""
    failed: list[int] = []
    for run in runs:
        job = run.llm_job
        if job is None:
            continue
        # What the run asked (a reward endpoint's failure with the same key is not the run's).
        outcomes = {key: outcome for key, (outcome, _error) in ledger_run_outcomes(job.keys, run=job.run).items()}
        if OUTCOME_API_ERROR not in outcomes.values():
            continue
        stored = set(run.judgments.values_list("generation_id", flat=True))
        # The job's requests follow the run's usable generations in id order (judge_run_create).
        generation_ids = run.generation_run.generations.filter(outcome="ok").order_by("id").values_list("id", flat=True)
        failed += [
            pk
            for pk, key in zip(generation_ids, job.keys)
            if outcomes.get(key) == OUTCOME_API_ERROR and pk not in stored
        ]
    generations = (
        Generation.objects.filter(pk__in=failed).select_related("procedure__topic", "run").order_by("model", "id")
    )
    return list(generations.filter(procedure__split=split) if split else generations)


def judge_run_items(runs: Iterable[JudgeRun], split: str | None = None) -> set[int]:
    """The items of judge runs: the procedures of their generation runs (those asked for and
    those generated), only of ``split`` when given. A procedure stays an item when no judge
    request for it got a usable answer."""
    ids: set[int] = set()
    for generation_run in {run.generation_run for run in runs}:
        ids |= set(generation_run.procedure_ids) | set(
            generation_run.generations.values_list("procedure_id", flat=True)
        )
    found, chunk, ordered = set(), 2000, sorted(ids)
    for start in range(0, len(ordered), chunk):
        procedures = Procedure.objects.filter(pk__in=ordered[start : start + chunk])
        found |= set((procedures.filter(split=split) if split else procedures).values_list("pk", flat=True))
    return found


def _in_split(ids: Iterable[int], split: str | None) -> set[int]:
    """The procedures of ``ids`` that exist (and are of ``split`` when given)."""
    found: set[int] = set()
    chunk, ordered = 2000, sorted(set(ids))
    for start in range(0, len(ordered), chunk):
        procedures = Procedure.objects.filter(pk__in=ordered[start : start + chunk])
        found |= set((procedures.filter(split=split) if split else procedures).values_list("pk", flat=True))
    return found


# The benchmark splits: a model with imported generations (no generation run) of one of them
# should have been judged on the whole split, as the reference's How2Bench evaluation is.
BENCHMARK_SPLITS = (Split.BENCH, Split.CONSTRAINED)


def expected_items(models: Iterable[str], split: str | None = None) -> dict[str, set[int]]:
    """Per model, the procedures it should have been judged on (of ``split`` when given):
    the procedures of its generation runs (asked for, and generated), every procedure it has
    a generation of, and, when it has imported generations of a benchmark split (How2Bench,
    or the constrained slice) without a run, that whole split. A model's coverage is counted against these, never against the
    procedures that happen to have a judgment (docs/how2bench.md)."""
    wanted = set(models)
    generations = Generation.objects.filter(model__in=wanted)
    if split:
        generations = generations.filter(procedure__split=split)
    ids: dict[str, set[int]] = {model: set() for model in wanted}
    for model, procedure_id in generations.values_list("model", "procedure_id").iterator():
        ids[model].add(procedure_id)
    run_ids = set(generations.filter(run__isnull=False).values_list("model", "run_id").distinct())
    runs = GenerationRun.objects.in_bulk({run_id for _, run_id in run_ids})
    asked: dict[str, set[int]] = defaultdict(set)
    for model, run_id in run_ids:
        asked[model] |= {int(pk) for pk in runs[run_id].procedure_ids}
    for model, procedure_ids in asked.items():
        ids[model] |= _in_split(procedure_ids, split)
    for benchmark in BENCHMARK_SPLITS:
        if split and split != benchmark:
            continue
        imported = set(generations.filter(run__isnull=True, procedure__split=benchmark).values_list("model", flat=True))
        if imported:
            whole = set(Procedure.objects.filter(split=benchmark).values_list("pk", flat=True))
            for model in imported:
                ids[model] |= whole
    return ids


def judge_runs_of(judge: str) -> list[JudgeRun]:
    """This judge's judge runs, each with its LLM job and generation run."""
    return list(JudgeRun.objects.filter(judge=judge).select_related("llm_job", "generation_run"))


def judge_run_score(run: JudgeRun) -> dict[str, Any]:
    """How2Score of a judge run, overall and per topic, with its 95 % Wilson interval, every
    exclusion counted (judge requests that ended ``api_error`` among the unusable), and its
    coverage: the share of the generation run's procedures with a usable verdict."""
    tally = How2ScoreTally()
    outcomes: dict[str, int] = defaultdict(int)
    for judgment in run.judgments.select_related("generation__procedure__topic"):
        outcomes[judgment.outcome] += 1
        procedure = judgment.generation.procedure
        tally.add(procedure.topic.name, usable_verdict(judgment.outcome, judgment.has_failure), item=procedure.pk)
    for generation in judge_request_failures([run]):
        outcomes[OUTCOME_API_ERROR] += 1
        tally.add(generation.procedure.topic.name, None, item=generation.procedure_id)
    generation_run = run.generation_run
    result = tally.result(n_items=len(judge_run_items([run])))
    result["outcomes"] = dict(outcomes)
    result["n_generation_failed"] = generation_run.generations.exclude(outcome="ok").count()
    return result


def judged_splits(judge: str | None = None) -> list[str]:
    """The procedure splits this judge (any judge when None) has judged generations of."""
    judgments = Judgment.objects.all() if judge is None else Judgment.objects.filter(judge=judge)
    return sorted(judgments.values_list("generation__procedure__split", flat=True).distinct().order_by())


def judgments_of(judge: str, split: str | None) -> QuerySet[Judgment]:
    """This judge's judgments (of procedures of ``split`` when given)."""
    judgments = Judgment.objects.filter(judge=judge)
    return judgments.filter(generation__procedure__split=split) if split else judgments


def verdict_counts(judge: str, split: str | None = None) -> tuple[dict[str, dict[int, tuple[int, int, int]]], set[int]]:
    """Per model, per procedure judged: ``(no_failure, judged, unusable)`` under this judge
    (on procedures of ``split`` when given; judge requests that ended ``api_error`` are
    unusable), and the slice's items: the procedures of this judge's judge runs' generation
    runs, and every procedure it has a judgment for (imported ones included), so a
    procedure whose every judge request failed stays in the slice. Every How2Score of the
    leaderboard, the comparison and the cross-judge page is computed from these counts
    (judging/coverage.py)."""
    counts: dict[str, dict[int, list[int]]] = defaultdict(dict)
    runs = judge_runs_of(judge)
    items = judge_run_items(runs, split)
    rows = list(
        judgments_of(judge, split).values_list(
            "generation__model", "generation__procedure_id", "outcome", "has_failure"
        )
    )
    rows += [(g.model, g.procedure_id, OUTCOME_API_ERROR, None) for g in judge_request_failures(runs, split)]
    for model, procedure_id, outcome, has_failure in rows:
        items.add(procedure_id)
        cell = counts[model].setdefault(procedure_id, [0, 0, 0])
        verdict = usable_verdict(outcome, has_failure)
        if verdict is None:
            cell[2] += 1
        else:
            cell[1] += 1
            cell[0] += 0 if verdict else 1
    return {m: {i: (c[0], c[1], c[2]) for i, c in cells.items()} for m, cells in counts.items()}, items


def generation_run_list() -> QuerySet[GenerationRun]:
    return GenerationRun.objects.select_related("language_model", "llm_job").order_by("-id")


def generation_run_rows(run: GenerationRun) -> list[dict[str, Any]]:
    """Each generation with its judgments, for the run page."""
    rows = []
    for generation in run.generations.select_related("procedure__topic").prefetch_related("judgments").order_by("id"):
        rows.append({"generation": generation, "judgments": list(generation.judgments.all())})
    return rows


def generations_for_procedure(procedure_id: int) -> QuerySet[Generation]:
    return Generation.objects.filter(procedure_id=procedure_id).prefetch_related("judgments")
