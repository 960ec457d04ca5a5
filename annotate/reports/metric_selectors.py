"""Reads for the metric-agreement report of a study (docs/metric-agreement.md): the human
majority of each item, the model behind it, every judge's verdict on its generation, and
its reference-based signals (annotate/stats/signals.py), then the report
(annotate/stats/metric_agreement.py)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.core.cache import cache
from django.db.models import TextField
from django.db.models.functions import Cast

from annotate.kinds.base import ROLE_MAIN
from annotate.models import Study, StudyItem
from annotate.reports.selectors import study_human_majority, study_judgment_rows
from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP
from annotate.stats.majority import HumanMajority
from annotate.stats.metric_agreement import metric_agreement_report
from annotate.stats.records import GenerationRow, JudgmentRow
from annotate.stats.signals import SCORE_SIGNALS, item_signals, judge_signals
from annotate.studies.exports import annotation_list
from judging.models import ComponentsRun, Generation, GenerationRun, Judgment
from judging.score_selectors import RULE_EXTRACTOR, components_extractor, generation_components

REPORT_SEED = 0
_ID_BATCH = 5000

REPORT_CACHE_PREFIX = "metric-agreement:report:"
FINGERPRINT_CACHE_PREFIX = "metric-agreement:rows:"
FINGERPRINT_VERSION = 2  # 2: the annotations' flag is read (issue 31)
REPORT_CACHE_VERSION = 1  # raise when the report's shape changes in a way the sources below do not show
REPORT_CACHE_SECONDS = 7 * 24 * 3600  # an unused report leaves the cache after a week
# The code a report is computed by: a changed file (a new release) is a new digest.
_REPORT_SOURCES = (
    "annotate/stats/metric_agreement.py",
    "annotate/stats/ranking.py",
    "annotate/stats/signals.py",
    "annotate/stats/majority.py",
    "annotate/stats/records.py",
    "annotate/stats/bootstrap.py",
    "annotate/reports/metric_selectors.py",
    "judging/score_metric.py",
    "judging/score_order.py",
    "judging/components.py",
    "judging/metrics.py",
    "judging/tokens.py",
    "core/intervals.py",
)
_REPORT_PACKAGES = ("numpy", "scipy", "scikit-learn", "sacrebleu", "rouge-score", "nltk", "tiktoken")


@lru_cache(maxsize=1)
def report_code_version() -> str:
    """A hash of the report's source files and the versions of the libraries it calls."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for name in _REPORT_SOURCES:
        path = root / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"") + b"\0")
    for package in _REPORT_PACKAGES:
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = ""
        digest.update(f"{package}={version}\0".encode())
    return digest.hexdigest()


@dataclass
class MetricInputs:
    """What the report needs: the human majority of the items (annotate/stats/majority.py
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

    def add_item(
        self,
        item_id: str,
        reference: list[str],
        candidate: list[str],
        *,
        model: str | None,
        gold: Any = None,
        pred: Any = None,
        extractor: str | None = None,
    ) -> None:
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
        parts = [
            f"{n} item{'s' if n != 1 else ''} by {'the rule-based fallback' if e == RULE_EXTRACTOR else e}"
            for e, n in sorted(self.extractors.items())
        ]
        text = "components: " + ", ".join(parts)
        return {key: text for key in SCORE_SIGNALS}

    def report(self, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = REPORT_SEED) -> dict[str, Any]:
        report = metric_agreement_report(
            majority=self.majority,
            signals=self.signals,
            models=self.models,
            notes=self.notes(),
            bootstrap=bootstrap,
            seed=seed,
        )
        report["score_components"] = dict(sorted(self.extractors.items()))
        return report


@dataclass(frozen=True)
class _ItemRow:
    """One labelled item as the report reads it: its steps, model and, when stored LLM
    components are used, those (``gold``/``pred`` None: the rule reads both sides)."""

    item_id: str
    reference: tuple[str, ...]
    candidate: tuple[str, ...]
    model: str | None
    gold: tuple[Any, ...] | None = None
    pred: tuple[Any, ...] | None = None
    extractor: str | None = None


@dataclass
class _StudyRows:
    """Everything a study's report is computed from, read from the database (no signal yet)."""

    majority: HumanMajority
    items: list[_ItemRow]
    judgments: list[JudgmentRow]

    def inputs(self) -> MetricInputs:
        inputs = MetricInputs(majority=self.majority)
        for row in self.items:
            if row.gold is not None and row.pred is not None:
                inputs.add_item(
                    row.item_id,
                    list(row.reference),
                    list(row.candidate),
                    model=row.model,
                    gold=row.gold,
                    pred=row.pred,
                    extractor=row.extractor,
                )
            else:
                inputs.add_item(row.item_id, list(row.reference), list(row.candidate), model=row.model)
        inputs.add_judgments(self.judgments)
        return inputs

    def digest(self, *, bootstrap: int, seed: int) -> str:
        """A hash of every input of the report, the settings and the code that computes it:
        new or changed data (an annotation, a verdict, an edited item) is a new digest."""
        labels = sorted(self.majority.labels.items())
        too_few = sorted(self.majority.too_few.items())
        judgments = sorted((j.item_id, j.judge, bool(j.has_failure)) for j in self.judgments)
        items = [
            (
                r.item_id,
                r.reference,
                r.candidate,
                r.model,
                r.extractor,
                None if r.gold is None else [c.as_dict() for c in r.gold],
                None if r.pred is None else [c.as_dict() for c in r.pred],
            )
            for r in self.items
        ]
        payload = json.dumps(
            [
                REPORT_CACHE_VERSION,
                report_code_version(),
                bootstrap,
                seed,
                self.majority.min_annotations,
                labels,
                too_few,
                judgments,
                items,
            ],
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def _study_rows(study: Study, *, min_annotations: int | None = None) -> _StudyRows:
    """The rows of a study's report, in a fixed number of queries (see ``study_metric_inputs``)."""
    majority = study_human_majority(study, min_annotations=min_annotations)
    labelled = set(majority.decided())
    rows = (
        StudyItem.objects.filter(study=study, role=ROLE_MAIN)
        .order_by("item_id")
        .values_list("item_id", "reference_steps", "candidate_steps", "source")
    )
    items = [row for row in rows.iterator(chunk_size=2000) if row[0] in labelled]
    generation_ids = sorted(
        {
            int(source["generation_id"])
            for _, _, _, source in items
            if isinstance(source, dict) and source.get("generation_id") is not None
        }
    )
    # Each generation's model and run as plain values; the full rows (steps) only for the
    # generations whose run has stored components, which the judging selector reads.
    plain: dict[int, tuple[str, int | None]] = {}
    for start in range(0, len(generation_ids), _ID_BATCH):  # bounded IN lists (SQLite's variable limit)
        batch = generation_ids[start : start + _ID_BATCH]
        plain.update(
            (pk, (model, run_id))
            for pk, model, run_id in Generation.objects.filter(pk__in=batch).values_list("id", "model", "run_id")
        )
    run_ids = sorted({run_id for _, run_id in plain.values() if run_id is not None})
    extractors = {run.pk: components_extractor(run) for run in GenerationRun.objects.filter(pk__in=run_ids).only("id")}
    with_components = sorted(pk for pk, (_, run_id) in plain.items() if run_id is not None and extractors.get(run_id))
    generations: dict[int, Generation] = {}
    for start in range(0, len(with_components), _ID_BATCH):
        batch = with_components[start : start + _ID_BATCH]
        generations.update(
            (g.pk, g)
            for g in Generation.objects.filter(pk__in=batch)
            .select_related("procedure", "run")
            .only("id", "outcome", "model", "predicted_steps", "run", "procedure__steps")
        )
    components = generation_components(list(generations.values()))
    item_rows = []
    for item_id, reference, candidate, source in items:
        source = source if isinstance(source, dict) else {}
        generation_id = int(source["generation_id"]) if source.get("generation_id") is not None else None
        found = plain.get(generation_id) if generation_id is not None else None
        model = found[0] if found is not None else source.get("model")
        model = model if isinstance(model, str) and model.strip() else None
        chosen = components.get(generation_id) if generation_id is not None else None
        generation = generations.get(generation_id) if generation_id is not None else None
        # The stored components describe the generation's steps; use them only when the
        # item shows exactly those steps.
        if (
            chosen is not None
            and generation is not None
            and (
                list(reference) != list(generation.procedure.steps)
                or list(candidate) != list(generation.predicted_steps)
            )
        ):
            chosen = None
        row = _ItemRow(item_id, tuple(reference), tuple(candidate), model)
        if chosen is not None and chosen.extractor != RULE_EXTRACTOR:
            row = _ItemRow(
                item_id,
                tuple(reference),
                tuple(candidate),
                model,
                gold=tuple(chosen.gold),
                pred=tuple(chosen.pred),
                extractor=chosen.extractor,
            )
        item_rows.append(row)
    return _StudyRows(majority=majority, items=item_rows, judgments=study_judgment_rows(study))


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
    return _study_rows(study, min_annotations=min_annotations).inputs()


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


def _study_fingerprint(study: Study, *, bootstrap: int, seed: int) -> str | None:
    """A hash of the study's raw rows the report depends on, read without decoding steps or
    validating annotations: every column that feeds the human majority (in the order it is
    read), every item's steps, role and source as stored text, the model and run of each
    generation and every verdict on it, the settings and the code's version. Any change to
    those rows is a new fingerprint. None when a generation's run has stored SCORE
    components (their rows are not covered here): then only the full digest is used."""
    annotations = (
        annotation_list(study)
        .order_by("submitted_at", "pk")
        .values_list("item__item_id", "annotator__pid", "has_failure", "excluded", "surplus", "source", "flag")
    )
    items = (
        StudyItem.objects.filter(study=study)
        .order_by("pk")
        .annotate(
            reference_text=Cast("reference_steps", TextField()),
            candidate_text=Cast("candidate_steps", TextField()),
            source_text=Cast("source", TextField()),
        )
        .values_list("item_id", "role", "reference_text", "candidate_text", "source_text")
    )
    digest = hashlib.sha256()
    digest.update(
        json.dumps(
            [FINGERPRINT_VERSION, report_code_version(), bootstrap, seed, study.min_annotations_for_majority]
        ).encode()
    )
    for annotation in annotations.iterator(chunk_size=5000):
        digest.update(repr(annotation).encode("utf-8", "surrogatepass"))
    digest.update(b"\0items\0")
    generation_ids: set[int] = set()
    for row in items.iterator(chunk_size=2000):
        digest.update(repr(row).encode("utf-8", "surrogatepass"))
        try:
            source = json.loads(row[4]) if row[4] else None
        except ValueError:
            source = None
        generation_id = source.get("generation_id") if isinstance(source, dict) else None
        if generation_id is not None:
            try:
                generation_ids.add(int(generation_id))
            except (TypeError, ValueError):
                return None  # the full path decides what such an item means
    digest.update(b"\0generations\0")
    ordered = sorted(generation_ids)
    run_ids: set[int] = set()
    for start in range(0, len(ordered), _ID_BATCH):
        batch = ordered[start : start + _ID_BATCH]
        for generation in (
            Generation.objects.filter(pk__in=batch).order_by("pk").values_list("id", "model", "run_id", "outcome")
        ):
            digest.update(repr(generation).encode("utf-8", "surrogatepass"))
            if generation[2] is not None:
                run_ids.add(generation[2])
        for verdict in (
            Judgment.objects.filter(generation_id__in=batch)
            .order_by("pk")
            .values_list("generation_id", "judge", "has_failure")
        ):
            digest.update(repr(verdict).encode("utf-8", "surrogatepass"))
    if run_ids and ComponentsRun.objects.filter(generation_run_id__in=sorted(run_ids)).exists():
        return None
    return digest.hexdigest()


def study_metric_agreement_report(
    study: Study, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = REPORT_SEED
) -> dict[str, Any]:
    """The metric-agreement report of a study (the JSON of ``metric_agreement --study``).

    Kept in Django's cache under the digest of its inputs (``_StudyRows.digest``: the human
    majority, the items' steps, models and components, the judges' verdicts, the settings and
    the code's version), so a report asked again is read, not recomputed, and new data is a
    new key: a cached report is never stale, only unused. A cheaper fingerprint of the raw
    rows (``_study_fingerprint``) finds a cached report without computing the majority or
    decoding the steps; when it misses, the inputs are read and the digest decides."""
    fingerprint = _study_fingerprint(study, bootstrap=bootstrap, seed=seed)
    if fingerprint is not None:
        report = cache.get(f"{FINGERPRINT_CACHE_PREFIX}{fingerprint}")
        if report is not None:
            return report
    rows = _study_rows(study)
    key = f"{REPORT_CACHE_PREFIX}{rows.digest(bootstrap=bootstrap, seed=seed)}"
    report = cache.get(key)
    if report is None:
        report = rows.inputs().report(bootstrap=bootstrap, seed=seed)
        cache.set(key, report, REPORT_CACHE_SECONDS)
    if fingerprint is not None:
        cache.set(f"{FINGERPRINT_CACHE_PREFIX}{fingerprint}", report, REPORT_CACHE_SECONDS)
    return report
