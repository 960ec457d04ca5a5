"""Agreement reports of studies in the database: the same computation as
``agreement_report --annotations FILE`` on the study's export (annotate/stats/agreement.py), plus
what the dashboards show beside it (annotators with active time and attention checks,
disagreements item by item, judges' failures next to annotators')."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

from annotate import constants as C
from annotate.kinds import kind_list
from annotate.kinds.base import REPORT_AGREEMENT
from annotate.models import Study, StudyItem
from annotate.review.selectors import HUMAN_MAJORITY
from annotate.review.selectors import human_labels as human_labels_by_source
from annotate.stats.agreement import agreement_report
from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP, sample_size_note
from annotate.stats.calibration import calibrated_score, calibration_summary, ppi_score
from annotate.stats.majority import HumanMajority, human_majority
from annotate.stats.records import AnnotationRow, JudgmentRow, parse_annotation_record
from annotate.studies.exports import annotation_export_rows, annotation_list
from annotate.studies.round_selectors import study_rounds
from annotate.studies.selectors import study_annotators
from judging.models import Judgment

REPORT_BOOTSTRAP = DEFAULT_BOOTSTRAP  # the study page's round alphas use the same (annotate/studies/round_selectors.py)
REPORT_SEED = 0


def study_annotation_rows(study: Study, *, include_test: bool = False) -> list[AnnotationRow]:
    """The study's annotations as its export file carries them (the same fields, read
    straight from the columns the report needs rather than through the full export); a test
    participant's only with ``include_test``."""
    fields = ("item__item_id", "annotator__pid", "has_failure", "failures", "excluded", "surplus", "source", "flag")
    rows = annotation_list(study, include_test=include_test).order_by("submitted_at", "pk").values_list(*fields)
    return [
        parse_annotation_record(
            {
                "item_id": item_id,
                "annotator": pid,
                "has_failure": has_failure,
                "excluded": excluded,
                "surplus": surplus,
                "source": source,
                "flag": flag,
                "failures": [
                    {"description": f["description"], "L1_steps": f["L1_steps"], "L2_steps": f["L2_steps"]}
                    for f in failures
                ],
            }
        )
        for item_id, pid, has_failure, failures, excluded, surplus, source, flag in rows.iterator(chunk_size=2000)
    ]


def study_judgment_rows(study: Study) -> list[JudgmentRow]:
    """Every stored judge verdict on the generations the study's items came from."""
    by_generation: dict[int, str] = {}
    for item_id, source in StudyItem.objects.filter(study=study).values_list("item_id", "source"):
        generation_id = (source or {}).get("generation_id")
        if generation_id is not None:
            by_generation[int(generation_id)] = item_id
    rows = []
    judgments = Judgment.objects.filter(generation_id__in=by_generation, has_failure__isnull=False)
    for generation_id, judge, has_failure in judgments.values_list("generation_id", "judge", "has_failure"):
        # bool(): the column is nullable, the filter above left only verdicts
        rows.append(JudgmentRow(item_id=by_generation[generation_id], judge=judge, has_failure=bool(has_failure)))
    return rows


def study_human_majority(study: Study, *, min_annotations: int | None = None) -> HumanMajority:
    """The human majority of the study's items under its ``min_annotations_for_majority``
    (or ``min_annotations``): the one the agreement page, the metric page and calibration read."""
    threshold = study.min_annotations_for_majority if min_annotations is None else min_annotations
    return human_majority(study_annotation_rows(study), min_annotations=threshold)


def study_agreement_report(
    study: Study,
    *,
    bootstrap: int = REPORT_BOOTSTRAP,
    seed: int = REPORT_SEED,
    include_test: bool = False,
    human_source: str = HUMAN_MAJORITY,
) -> dict[str, Any]:
    """The agreement report of a study under its ``min_annotations_for_majority`` (test
    participants' annotations only with ``include_test``). Calibration's human label comes
    from ``human_source`` (judging/calibration.py, ``HUMAN_SOURCES``: the majority, the
    adjudicated gold labels, or gold where an item has one), stated in the report as
    ``calibration_human_source``. Agreement with gold is its own read (``gold_agreement``), so
    this report stays the one its export file gives."""
    annotations = study_annotation_rows(study, include_test=include_test)
    judgments = study_judgment_rows(study)
    human = None
    if human_source != HUMAN_MAJORITY:
        majority = human_majority(annotations, min_annotations=study.min_annotations_for_majority).decided()
        human = human_labels_by_source(study, human_source, majority)
    return agreement_report(
        annotations,
        judgments,
        bootstrap=bootstrap,
        seed=seed,
        min_annotations=study.min_annotations_for_majority,
        item_strata=dict(StudyItem.objects.filter(study=study).values_list("item_id", "topic")),
        source=study.slug,
        human_labels=human,
        human_source=human_source,
    )


def study_rounds_reports(study: Study, *, bootstrap: int = REPORT_BOOTSTRAP) -> list[dict[str, Any]]:
    """One report per pilot round of the study's family, oldest first, with its alpha cells
    (``alpha_cells``) as the agreement page's table shows them."""
    rounds = []
    for s in study_rounds(study):
        report = study_agreement_report(s, bootstrap=bootstrap)
        rounds.append({"study": s, "report": report, "alpha_cells": alpha_cells(report)})
    return rounds


def alpha_cells(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One cell per alpha kind of a report, in the keys the shared template
    ``annotate/_agreement_estimate.html`` reads (the study page's round row reads the same):
    the value, its interval, its n (pairable items), why the interval is not estimable, the
    small-sample note, whether the interval is approximate at its n and why alpha is undefined."""
    return [
        {
            "kind": kind,
            "label": ALPHA_LABELS[kind],
            "value": value,
            "ci95": report["alpha_ci95"][kind],
            "n": report["alpha_details"][kind]["n_units"],
            "not_estimable": report.get("alpha_ci95_not_estimable", {}).get(kind),
            "approximate": report.get("alpha_interval", {}).get(kind, {}).get("approximate", False),
            "small_sample": report["alpha_small_sample"][kind],
            "undefined": report["alpha_undefined"][kind],
        }
        for kind, value in report["alpha"].items()
    ]


def annotator_table(study: Study, report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per annotator (by PID): the study page's counts (``study_annotators``: items labelled,
    reservations, attention checks passed/failed, median active seconds, exclusion) and the
    leave-one-out agreement of ``report`` with its n, interval and small-sample note."""
    table = []
    for row in sorted(study_annotators(study), key=lambda r: r["pid"]):
        loo = report["leave_one_out"].get(row["pid"], {})
        table.append(
            {
                "annotator": row["pid"],
                "n_main": row["n_main"],
                "n_counted": row["n_counted"],
                "n_broken": row["n_broken"],
                "n_unsure": row["n_unsure"],
                "loo_agreement": loo.get("agreement"),
                "loo_n": loo.get("n", 0),
                "loo_ci95": loo.get("ci95"),
                "loo_small_sample": sample_size_note(loo["n"], loo.get("ci95")) if loo.get("n") else None,
                "median_active_seconds": row["median_active_seconds"],
                "checks_passed": row["checks_passed"],
                "checks_failed": row["checks_failed"],
                "excluded": row["excluded"],
                "exclusion_reason": row["exclusion_reason"],
            }
        )
    return table


def confusion_table(confusion: dict[str, dict[str, int]]) -> dict[str, Any]:
    """A judge's confusion matrix (``judges[...]["confusion"]``: human-majority rows, judge
    columns) turned for display: one row per judge label, one column per human-majority
    label, with row and column totals."""
    labels = ("has_failure", "no_failure")
    rows: list[dict[str, Any]] = []
    for judge in labels:
        cells = [confusion[f"human_{human}"][f"judge_{judge}"] for human in labels]
        rows.append({"label": judge, "cells": cells, "total": sum(cells)})
    totals = [sum(row["cells"][k] for row in rows) for k in range(len(labels))]
    return {"columns": list(labels), "rows": rows, "totals": totals, "total": sum(totals)}


ALPHA_LABELS = {
    "binary": "binary",
    "first_failure_location": "first-failure location",
    "l2_step_sets_masi": "L2 step sets (MASI)",
}


def agreement_display(study: Study, report: dict[str, Any]) -> dict[str, Any]:
    """What the agreement page shows beside the report: one row per judge with its
    confusion table and calibration, the sentences saying why alpha is undefined (kinds
    sharing a reason together), the warning when items lack a majority, and the page's
    small-sample note (on the items with a human majority, ``sample_size_note``)."""
    majority = report["human_majority"]
    judges = [
        {
            "name": name,
            "result": result,
            "confusion": confusion_table(result["confusion"]),
            "calibration": report["calibration"].get(name, {}),
        }
        for name, result in report["judges"].items()
    ]
    reasons: dict[str, list[str]] = defaultdict(list)
    for kind, reason in report["alpha_undefined"].items():
        if reason:
            reasons[reason].append(ALPHA_LABELS[kind])
    n = majority["n_with_majority"]
    small = None
    if n and sample_size_note(n, None):
        small = (
            f"Small sample: judge–human agreement rests on {n} item{'' if n == 1 else 's'} with a human "
            f"majority (fewer than {C.SMALL_SAMPLE_ITEMS}), so every interval on this page is wide; read each "
            f"number with its interval."
        )
    return {
        "judges": judges,
        "any_judge_compared": any(j["result"]["n"] for j in judges),
        "alpha_undefined": [{"kinds": kinds, "reason": reason} for reason, kinds in reasons.items()],
        "majority": majority,
        "annotators_per_item": study.annotators_per_item,
        "small_sample": small,
    }


def _entropy(labels: list[bool]) -> float:
    counts = Counter(labels)
    total = len(labels)
    return -sum(n / total * math.log2(n / total) for n in counts.values() if n)


def disagreement_list(study: Study) -> list[dict[str, Any]]:
    """Items ranked by disagreement among their annotators (binary entropy of the counted
    labels, ``AnnotationRow.counted``, 1.0 for an even split), then by how many judges differ from the human majority (the
    study's, ``study_human_majority``: ``None`` for a tie or too few annotations)."""
    rows = [r for r in study_annotation_rows(study) if r.counted]
    majority_of = human_majority(rows, min_annotations=study.min_annotations_for_majority)
    by_item: dict[str, list[bool]] = defaultdict(list)
    for row in rows:
        by_item[row.item_id].append(row.has_failure)
    judges: dict[str, list[bool]] = defaultdict(list)
    for verdict in study_judgment_rows(study):
        judges[verdict.item_id].append(verdict.has_failure)
    items = {i.item_id: i for i in StudyItem.objects.filter(study=study, item_id__in=list(by_item))}
    result: list[dict[str, Any]] = []
    for item_id, labels in by_item.items():
        n_yes = sum(labels)
        majority = majority_of.label(item_id)
        judge_dissent = sum(1 for label in judges[item_id] if majority is not None and label != majority)
        result.append(
            {
                "item": items.get(item_id),
                "item_id": item_id,
                "n": len(labels),
                "n_has_failure": n_yes,
                "entropy": _entropy(labels),
                "majority": majority,
                "majority_reason": majority_of.reason(item_id),
                "judge_dissent": judge_dissent,
            }
        )
    result.sort(key=lambda r: (-r["entropy"], -r["judge_dissent"], r["item_id"]))
    return result


def item_failure_views(study: Study, item: StudyItem) -> dict[str, Any]:
    """Every annotator's and every judge's failures on one item, with the steps each links."""
    people = []
    for row in annotation_export_rows(study):
        if row["item_id"] != item.item_id or row["source"] != "main":
            continue
        people.append(
            {
                "who": row["annotator"],
                "kind": "annotator",
                "has_failure": row["has_failure"],
                "failures": [
                    {"text": f["description"], "L1_steps": f["L1_steps"], "L2_steps": f["L2_steps"]}
                    for f in row["failures"]
                ],
                "excluded": row["excluded"],
            }
        )
    judges = []
    generation_id = (item.source or {}).get("generation_id")
    if generation_id is not None:
        for j in Judgment.objects.filter(generation_id=generation_id).order_by("judge"):
            judges.append(
                {
                    "who": j.judge,
                    "kind": "judge",
                    "has_failure": j.has_failure,
                    "excluded": False,
                    "failures": [
                        {"text": f["failure"], "L1_steps": f["L1_steps"], "L2_steps": f["L2_steps"]}
                        for f in j.critical_failures
                    ],
                }
            )
    views = people + judges
    l1 = [
        (n, text, [v["who"] for v in views for f in v["failures"] if n in f["L1_steps"]])
        for n, text in enumerate(item.reference_steps, start=1)
    ]
    l2 = [
        (n, text, [v["who"] for v in views for f in v["failures"] if n in f["L2_steps"]])
        for n, text in enumerate(item.candidate_steps, start=1)
    ]
    return {"views": views, "l1": l1, "l2": l2}


def generations_in_studies() -> set[int]:
    """Ids of every generation that is an item of some study (kept out of distillation data)."""
    ids = set()
    for source in StudyItem.objects.exclude(source={}).values_list("source", flat=True).iterator():
        generation_id = (source or {}).get("generation_id")
        if generation_id is not None:
            ids.add(int(generation_id))
    return ids


def calibration_from_studies(
    judge: str,
    successes: list[bool],
    items: list[tuple[int, str, bool]] | None = None,
    *,
    human_source: str = HUMAN_MAJORITY,
) -> dict[str, Any] | None:
    """The human How2Score of a leaderboard row estimated from the judge's labels and the
    human majority of every study item the judge has a verdict on: Rogan-Gladen and stratified
    PPI++ side by side (annotate/stats/calibration.py, ``calibration_summary``: fractions with
    ``_percent`` siblings, the same shape as the agreement API's ``calibration``).

    ``successes`` are the row's usable verdicts (True = no_failure, the class How2Score
    counts), ``items`` the same verdicts as ``(generation_id, topic, success)``.
    Rogan-Gladen corrects the row's observed score with the judge's TPR and TNR over *every*
    labelled item (its errors are assumed to transfer across models); PPI++ takes as labelled
    only the row's own generations that are labelled study items (the same population as the
    row; strata = topics) and as unlabelled the row's ``items``. None when no human majority
    exists for the judge. ``source_studies`` name the studies that gave at least one
    human-labelled item (an item with a human majority the judge has a verdict on), not every
    study made of judged generations; ``ppi.source_studies`` those that gave the row's own.
    ``human_source`` (judging/calibration.py, ``HUMAN_SOURCES``) takes gold labels as the
    human label instead of, or before, the majority: the leaderboard's ``human`` choice."""
    item_judge: dict[tuple[int, str], tuple[int, bool]] = {}
    study_ids = set()  # studies with an item the judge has a verdict on: where labels may be
    generation_items = defaultdict(list)
    # Only studies of kinds with the agreement report hold has_failure labels (multiple-choice
    # and constraint-faithfulness answers have none, even when their items name a generation).
    labelled = [kind.key for kind in kind_list() if kind.has_report(REPORT_AGREEMENT)]
    study_items = StudyItem.objects.filter(study__kind__in=labelled).exclude(source={})
    for study_id, item_id, source in study_items.values_list("study_id", "item_id", "source"):
        generation_id = (source or {}).get("generation_id")
        if generation_id is not None:
            generation_items[int(generation_id)].append((study_id, item_id))
    for generation_id, has_failure in Judgment.objects.filter(
        judge=judge, generation_id__in=list(generation_items), has_failure__isnull=False
    ).values_list("generation_id", "has_failure"):
        for study_id, item_id in generation_items[generation_id]:
            item_judge[(study_id, item_id)] = (generation_id, bool(has_failure))  # a verdict: not null, as filtered
            study_ids.add(study_id)
    if not item_judge:
        return None
    row_topics = {generation_id: topic for generation_id, topic, _ in items or []}
    judge_labels, human_labels = [], []
    ppi_labelled: list[tuple[str, bool, bool]] = []
    contributing: dict[int, str] = {}  # studies that gave at least one human-labelled item
    ppi_contributing: dict[int, str] = {}  # ... of this row's own generations
    for study in Study.objects.filter(pk__in=study_ids).order_by("pk"):
        majority = study_human_majority(study).decided()
        labels = majority if human_source == HUMAN_MAJORITY else human_labels_by_source(study, human_source, majority)
        for item_id, label in labels.items():
            if (study.pk, item_id) in item_judge:
                generation_id, judge_label = item_judge[(study.pk, item_id)]
                judge_labels.append(judge_label)
                human_labels.append(label)
                contributing[study.pk] = study.slug
                if generation_id in row_topics:
                    ppi_labelled.append((row_topics[generation_id], judge_label, label))
                    ppi_contributing[study.pk] = study.slug
    if not judge_labels:
        return None
    # calibrated_score and ppi_score take has_failure labels; the leaderboard's are successes.
    rogan = calibrated_score(
        judge_labels, human_labels, [not s for s in successes], bootstrap=REPORT_BOOTSTRAP, seed=REPORT_SEED
    )
    ppi = ppi_score(ppi_labelled, [(topic, not success) for _, topic, success in items or []])
    return calibration_summary(
        rogan, ppi, source_studies=list(contributing.values()), ppi_source_studies=list(ppi_contributing.values())
    )
