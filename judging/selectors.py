"""Reads of the judging app: How2Score per run, leaderboards, cross-judge rankings."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import QuerySet

from judging.calibration import judge_calibration
from judging.how2score import How2ScoreTally
from judging.metrics import MetricsSummary, record_metrics
from judging.models import Generation, GenerationRun, Judgment, JudgeRun
from judging.rankings import kendall_tau, spearman_rho
from judging.score_selectors import generation_scores, score_summary

# Difficulty slices by the reference's step count (How2Bench procedures have 5-15 steps, App. B.3).
STEP_COUNT_SLICES = ((5, 6), (7, 8), (9, 10), (11, 15))


def judge_names() -> list[str]:
    return list(Judgment.objects.values_list("judge", flat=True).distinct().order_by("judge"))


def judge_run_score(run: JudgeRun) -> dict[str, Any]:
    """How2Score of a judge run, overall and per topic, with every exclusion counted."""
    tally = How2ScoreTally()
    outcomes: dict[str, int] = defaultdict(int)
    for judgment in run.judgments.select_related("generation__procedure__topic"):
        outcomes[judgment.outcome] += 1
        tally.add(judgment.generation.procedure.topic.name, judgment.has_failure)
    result = tally.result()
    result["outcomes"] = dict(outcomes)
    result["n_generation_failed"] = run.generation_run.generations.exclude(outcome="ok").count()
    return result


def judged_splits(judge: str | None = None) -> list[str]:
    """The procedure splits this judge (any judge when None) has judged generations of."""
    judgments = Judgment.objects.all() if judge is None else Judgment.objects.filter(judge=judge)
    return sorted(judgments.values_list("generation__procedure__split", flat=True).distinct().order_by())


def leaderboard(judge: str, split: str | None = None) -> list[dict[str, Any]]:
    """One row per model over the generations this judge judged (of procedures of ``split``
    when given: How2Bench, or the constrained slice): How2Score (100 × no_failure / judged),
    judged and unusable counts, per-topic scores, step-count slices, average generated
    tokens, the formatting proxies and SCORE (docs/score.md) over the same generations."""
    rows: dict[str, dict[str, Any]] = {}
    judgments = Judgment.objects.filter(judge=judge)
    if split:
        judgments = judgments.filter(generation__procedure__split=split)
    judgments = judgments.select_related("generation__procedure__topic", "generation__run").order_by(
        "generation__model", "id")
    for judgment in judgments:
        generation = judgment.generation
        row = rows.setdefault(generation.model, {
            "model": generation.model, "label": generation.display_name, "tally": How2ScoreTally(),
            "slices": {s: How2ScoreTally() for s in STEP_COUNT_SLICES}, "metrics": MetricsSummary(), "successes": [],
            "generations": [],
        })
        row["generations"].append(generation)
        if judgment.has_failure is not None:
            row["successes"].append(not judgment.has_failure)
        procedure = generation.procedure
        row["tally"].add(procedure.topic.name, judgment.has_failure)
        for low, high in STEP_COUNT_SLICES:
            if low <= len(procedure.steps) <= high:
                row["slices"][(low, high)].add(procedure.topic.name, judgment.has_failure)
        if generation.predicted_steps:
            row["metrics"].add(record_metrics(reference_steps=procedure.steps, predicted_steps=generation.predicted_steps))
    scores = generation_scores([g for row in rows.values() for g in row["generations"]])
    result = []
    for row in rows.values():
        score = row["tally"].result()
        structured = score_summary(scores[g.pk] for g in row["generations"] if g.pk in scores)
        result.append({
            "model": row["model"], "label": row["label"], "how2score": score["how2score"], "n": score["n"],
            "n_scored": score["n_scored"], "n_unusable": score["n_parse_failed"], "by_topic": score["by_topic"],
            "slices": {f"{lo}-{hi}": row["slices"][(lo, hi)].result()["how2score"] for lo, hi in STEP_COUNT_SLICES},
            "metrics": row["metrics"].result(),
            "calibrated": judge_calibration(judge, row["successes"]) if row["successes"] else None,
            "score": structured["score"], "score_n": structured["n_scored"],
        })
    result.sort(key=lambda r: (r["how2score"] is None, -(r["how2score"] or 0), r["model"]))
    return result


def cross_judge_rankings(judges: list[str], split: str | None = None) -> dict[str, Any]:
    """How2Score of every model under each judge (over the procedures of ``split`` when
    given), and the rank correlations between judges over the models both judged (paper
    Figure 5)."""
    scores = {judge: {row["model"]: row["how2score"] for row in leaderboard(judge, split)
                      if row["how2score"] is not None}
              for judge in judges}
    pairs = []
    for i, a in enumerate(judges):
        for b in judges[i + 1:]:
            common = sorted(set(scores[a]) & set(scores[b]))
            x = [scores[a][m] for m in common]
            y = [scores[b][m] for m in common]
            pairs.append({"judges": (a, b), "n_models": len(common), "kendall_tau": kendall_tau(x, y),
                          "spearman": spearman_rho(x, y)})
    models = sorted({m for s in scores.values() for m in s})
    return {"judges": judges, "split": split, "models": models, "scores": scores, "pairs": pairs}


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
