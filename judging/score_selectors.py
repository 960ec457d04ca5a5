"""Reads for SCORE on How2Bench runs (docs/score.md): SCORE of each generation against its
reference, from stored ``extract_components`` results when a run has them, else from the
rule-based components (offline), and means per run and per model."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.intervals import ITEM_BOOTSTRAP, bootstrap_mean_estimate, interval_fields
from judging.components import StepComponents, components_from_dict, rule_based_steps
from judging.models import ComponentExtraction, ComponentsRun, Generation, GenerationRun
from judging.score_metric import ScoreResult, score_steps
from judging.score_services import steps_hash
from llm.run_models import FINISHED

RULE_EXTRACTOR = "rule"


@dataclass(frozen=True)
class GenerationScore:
    """SCORE of one generation, and which components it was computed from."""

    generation_id: int
    result: ScoreResult
    extractor: str


def components_extractor(generation_run: GenerationRun) -> str | None:
    """The extractor of the run's latest finished ``extract_components`` run, if any."""
    return (
        ComponentsRun.objects.filter(generation_run=generation_run, status__in=FINISHED)
        .order_by("-id")
        .values_list("extractor", flat=True)
        .first()
    )


def _stored(extractor: str, keys: Iterable[str]) -> dict[str, tuple[StepComponents, ...]]:
    rows = ComponentExtraction.objects.filter(extractor=extractor, steps_hash__in=list(keys), outcome="ok")
    return {row.steps_hash: tuple(components_from_dict(c) for c in row.components) for row in rows}


@dataclass(frozen=True)
class GenerationComponents:
    """The triples SCORE reads for one generation: its reference's (``gold``) and its
    own (``pred``), both by the same ``extractor``."""

    generation_id: int
    gold: tuple[StepComponents, ...]
    pred: tuple[StepComponents, ...]
    extractor: str


def generation_components(generations: Sequence[Generation]) -> dict[int, GenerationComponents]:
    """The components of every usable generation (outcome ok), by generation id.

    A pair (reference, generation) uses the LLM components of its run's latest finished
    ``extract_components`` run when both step lists have them; otherwise both sides use the
    rule-based components, so the two sides are always read by the same extractor.
    Generations without reference steps, or with a step the rule cannot read, are left out."""
    usable = [g for g in generations if g.outcome == "ok"]
    extractors: dict[int | None, str | None] = {}
    for generation in usable:
        if generation.run_id not in extractors:
            extractors[generation.run_id] = components_extractor(generation.run) if generation.run is not None else None
    stored: dict[str, dict[str, tuple[StepComponents, ...]]] = {}
    for named in {e for e in extractors.values() if e}:
        keys = {
            steps_hash(s)
            for g in usable
            if extractors[g.run_id] == named
            for s in (g.procedure.steps, g.predicted_steps)
            if s
        }
        stored[named] = _stored(named, keys)
    components: dict[int, GenerationComponents] = {}
    for generation in usable:
        reference, predicted = generation.procedure.steps, generation.predicted_steps
        if not reference:
            continue
        extractor = extractors[generation.run_id]
        found = stored.get(extractor or "", {})
        gold = found.get(steps_hash(reference))
        pred = found.get(steps_hash(predicted)) if predicted else ()
        if gold is None or pred is None:
            extractor, gold, pred = RULE_EXTRACTOR, rule_based_steps(reference), rule_based_steps(predicted)
        if gold is None or pred is None:
            continue
        components[generation.pk] = GenerationComponents(generation.pk, gold, pred, extractor or RULE_EXTRACTOR)
    return components


def generation_scores(generations: Sequence[Generation]) -> dict[int, GenerationScore]:
    """SCORE of every usable generation (outcome ok), by generation id, from the components
    ``generation_components`` chooses."""
    return {
        pk: GenerationScore(pk, score_steps(c.pred, c.gold), c.extractor)
        for pk, c in generation_components(generations).items()
    }


def score_summary(scores: Iterable[GenerationScore]) -> dict[str, Any]:
    """Means over generations of SCORE and the §4.2 metrics, each with its 95 % BCa bootstrap
    interval over the generations (``ci95``; ``core.intervals.bootstrap_mean_estimate``,
    seeded, so every page shows the same one), with how many were scored and how many used
    the rule-based components. An interval that would have zero width (every generation
    has the same value) is null, and ``not_estimable`` says why ("interval not estimable
    (n = ...)"); ``interval``, ``interval_name`` and ``approximate`` (true below the n at
    which the coverage harness measured the bootstrap's coverage on target:
    ``core.intervals.interval_fields``) name the method. Means and intervals are null when
    nothing was scored."""
    scores = list(scores)
    n = len(scores)
    keys = ("score", "step_m", "order_strict", "order_lcs_eval", "order_tau", "semantic")
    values = {key: [getattr(s.result, key) for s in scores] for key in keys}
    means = {key: (sum(values[key]) / n if n else None) for key in keys}
    estimates = {key: bootstrap_mean_estimate(values[key]) for key in keys}
    return {
        **means,
        "ci95": {key: estimates[key][0] for key in keys},
        "not_estimable": {key: estimates[key][1] for key in keys},
        **interval_fields(ITEM_BOOTSTRAP, n),
        "n_scored": n,
        "n_rule_based": sum(1 for s in scores if s.extractor == RULE_EXTRACTOR),
    }


def generation_run_score(run: GenerationRun) -> dict[str, Any]:
    """SCORE of a generation run (its usable generations), for the run page."""
    generations = list(run.generations.select_related("procedure", "run"))
    summary = score_summary(generation_scores(generations).values())
    summary["extractor"] = components_extractor(run) or RULE_EXTRACTOR
    return summary
