"""Reads for the metric-agreement report of a study (docs/metric-agreement.md): the human
majority of each item, the model behind it, every judge's verdict on its generation, and
its reference-based signals (annotate/metric_signals.py), then the report
(annotate/metric_agreement.py)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from annotate.agreement import DEFAULT_BOOTSTRAP, HumanMajority, JudgmentRow
from annotate.kinds.base import ROLE_MAIN
from annotate.metric_agreement import GenerationRow, judge_signals, metric_agreement_report
from annotate.metric_signals import SCORE_SIGNALS, item_signals
from annotate.models import Study, StudyItem
from annotate.reports import study_human_majority, study_judgment_rows
from judging.models import Generation
from judging.score_selectors import RULE_EXTRACTOR, components_extractor, generation_components

REPORT_SEED = 0
_ID_BATCH = 5000


@dataclass
class MetricInputs:
    """What the report needs: the human majority of the items (annotate/agreement.py
    ``HumanMajority``), item_id -> model, and signal key -> item_id -> value;
    ``extractors`` counts which components SCORE read."""

    majority: HumanMajority
    models: dict[str, str | None] = field(default_factory=dict)
    signals: dict[str, dict[str, float]] = field(default_factory=dict)
    extractors: Counter[str] = field(default_factory=Counter)

    def add_judgments(self, judgments: Iterable[JudgmentRow]) -> None:
        """Add judge verdicts (``judge:<name>`` signals); a judge labelling an item twice,
        here or already in the inputs, raises ``ValueError``."""
        for key, values in judge_signals(judgments).items():
            current = self.signals.setdefault(key, {})
            for item_id, value in values.items():
                if item_id in current:
                    raise ValueError(f"two judgments of item {item_id!r} by judge {key.split(':', 1)[1]!r}")
                current[item_id] = value

    def add_item(self, item_id: str, reference: list[str], candidate: list[str], *, model: str | None,
                 gold: Any = None, pred: Any = None, extractor: str | None = None) -> None:
        """The reference-based signals of one item (rule-based SCORE components unless
        ``gold`` and ``pred`` are given, read by ``extractor``)."""
        self.models[item_id] = model
        values, rule = item_signals(reference, candidate, gold=gold, pred=pred)
        for key, value in values.items():
            self.signals.setdefault(key, {})[item_id] = value
        if any(key in values for key in SCORE_SIGNALS):
            self.extractors[RULE_EXTRACTOR if rule else (extractor or RULE_EXTRACTOR)] += 1

    def notes(self) -> dict[str, str]:
        """The sentence shown with SCORE and its parts: which components they read."""
        if not self.extractors:
            return {}
        parts = [f"{n} item{'s' if n != 1 else ''} by {'the rule-based fallback' if e == RULE_EXTRACTOR else e}"
                 for e, n in sorted(self.extractors.items())]
        text = "components: " + ", ".join(parts)
        return {key: text for key in SCORE_SIGNALS}

    def report(self, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = REPORT_SEED) -> dict[str, Any]:
        report = metric_agreement_report(majority=self.majority, signals=self.signals, models=self.models,
                                         notes=self.notes(), bootstrap=bootstrap, seed=seed)
        report["score_components"] = dict(sorted(self.extractors.items()))
        return report


def study_metric_inputs(study: Study, *, min_annotations: int | None = None) -> MetricInputs:
    """The inputs of a study's report, in a fixed number of queries.

    Items: the study's main items with a human majority under the study's
    ``min_annotations_for_majority`` (the agreement page's majority, annotate/reports.py
    ``study_human_majority``; tied items, items with too few annotations and unannotated
    items carry no label to predict, so their signals are not computed); ``min_annotations``
    overrides the study's setting. An item built from a
    judged generation (``source.generation_id``) takes its model from the generation, its
    judges from every stored verdict on it, and SCORE's components from the generation's run
    when they are stored (judging/score_selectors.py ``generation_components``), else from
    the rule; any other item (from a file) takes ``source.model`` and the rule."""
    inputs = MetricInputs(majority=study_human_majority(study, min_annotations=min_annotations))
    labelled = set(inputs.majority.decided())
    rows = (StudyItem.objects.filter(study=study, role=ROLE_MAIN).order_by("item_id")
            .values_list("item_id", "reference_steps", "candidate_steps", "source"))
    items = [row for row in rows.iterator(chunk_size=2000) if row[0] in labelled]
    generation_ids = sorted({int(source["generation_id"]) for _, _, _, source in items
                             if isinstance(source, dict) and source.get("generation_id") is not None})
    generations: dict[int, Generation] = {}
    for start in range(0, len(generation_ids), _ID_BATCH):  # bounded IN lists (SQLite's variable limit)
        batch = generation_ids[start:start + _ID_BATCH]
        generations.update((g.pk, g) for g in Generation.objects.filter(pk__in=batch).select_related("procedure", "run")
                           .only("id", "outcome", "model", "predicted_steps", "run", "procedure__steps"))
    # Only generations whose run has stored components need the judging selector; the
    # others are read by the rule here, where the rule's readings are remembered.
    extractors = {run_id: components_extractor(run) for run_id, run in
                  {g.run_id: g.run for g in generations.values() if g.run_id is not None}.items()}
    components = generation_components([g for g in generations.values() if extractors.get(g.run_id)])
    for item_id, reference, candidate, source in items:
        source = source if isinstance(source, dict) else {}
        generation = generations.get(int(source["generation_id"])) if source.get("generation_id") is not None else None
        model = generation.model if generation is not None else source.get("model")
        model = model if isinstance(model, str) and model.strip() else None
        chosen = components.get(generation.pk) if generation is not None else None
        # The stored components describe the generation's steps; use them only when the
        # item shows exactly those steps.
        if chosen is not None and (list(reference) != list(generation.procedure.steps)
                                   or list(candidate) != list(generation.predicted_steps)):
            chosen = None
        if chosen is not None and chosen.extractor != RULE_EXTRACTOR:
            inputs.add_item(item_id, reference, candidate, model=model, gold=chosen.gold, pred=chosen.pred,
                            extractor=chosen.extractor)
        else:
            inputs.add_item(item_id, reference, candidate, model=model)
    inputs.add_judgments(study_judgment_rows(study))
    return inputs


def file_metric_inputs(majority: HumanMajority, generations: Iterable[GenerationRow]) -> MetricInputs:
    """The inputs from files: the majority of an annotations file and, for each item in a
    generations file, its reference-based signals (rule-based SCORE components) and model.
    Judgments are added with ``MetricInputs.add_judgments``."""
    inputs = MetricInputs(majority=majority)
    for row in generations:
        if majority.label(row.item_id) is None:
            continue  # no label to predict: tied, too few annotations or not annotated
        inputs.add_item(row.item_id, list(row.reference_steps), list(row.candidate_steps), model=row.model)
    return inputs


def study_metric_agreement_report(study: Study, *, bootstrap: int = DEFAULT_BOOTSTRAP,
                                  seed: int = REPORT_SEED) -> dict[str, Any]:
    """The metric-agreement report of a study (the JSON of ``metric_agreement --study``)."""
    return study_metric_inputs(study).report(bootstrap=bootstrap, seed=seed)

