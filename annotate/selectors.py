"""Reads of the annotation app: studies, progress, annotators, items, exports."""
from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from django.utils import timezone

from annotate import constants as C
from annotate.agreement import DEFAULT_BOOTSTRAP, alpha_report, parse_annotation_record
from annotate.choice_results import ChoiceItem, study_results
from annotate.faithfulness_results import FaithfulnessItem, study_results as faithfulness_results
from annotate.kinds.constraint_faithfulness import KEY as CONSTRAINT_FAITHFULNESS
from annotate.kinds.multiple_choice import KEY as MULTIPLE_CHOICE
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION
from annotate.models import (
    FINISHED_STATES,
    Annotation,
    Assignment,
    AssignmentStatus,
    Participation,
    ParticipationState,
    Qualification,
    Study,
    StudyItem,
)


def _count_per_study(queryset: QuerySet) -> Coalesce:
    """The number of ``queryset``'s rows of each study, as a correlated subquery (one
    grouped count per study row, using the table's study index), 0 when it has none."""
    counts = queryset.filter(study=OuterRef("pk")).order_by().values("study").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counts, output_field=IntegerField()), 0)


def study_list() -> QuerySet[Study]:
    """Studies with their main items, main-pool annotations and participants. Each count is
    its own subquery: counting all three over one join would read items × annotations ×
    participants rows per study (tests/security/test_query_linearity.py)."""
    return Study.objects.select_related("guideline_version").annotate(
        n_items=_count_per_study(StudyItem.objects.filter(role=ROLE_MAIN)),
        n_annotations=_count_per_study(Annotation.objects.filter(source=ROLE_MAIN)),
        n_participants=_count_per_study(Participation.objects.all()),
    )


def study_get(*, slug: str) -> Study:
    return get_object_or_404(Study.objects.select_related("guideline_version", "first_round"), slug=slug)


def study_rounds(study: Study) -> list[Study]:
    root = study.round_root
    return list(Study.objects.filter(Q(pk=root.pk) | Q(first_round=root)).select_related("guideline_version").order_by("round", "pk"))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def study_progress_get(study: Study) -> dict[str, Any]:
    """Items complete / in progress / open, live annotators, median active time, implied pay,
    attention-check and qualification pass rates."""
    now = timezone.now()
    k = study.annotators_per_item
    items = StudyItem.objects.filter(study=study, role=ROLE_MAIN).annotate(
        filled=Count("assignments", filter=Q(assignments__status=AssignmentStatus.SUBMITTED, assignments__surplus=False)),
        live=Count("assignments", filter=Q(assignments__status=AssignmentStatus.RESERVED, assignments__lease_expires_at__gt=now)),
    ).values_list("filled", "live")
    complete = in_progress = open_ = 0
    for filled, live in items:
        if filled >= k:
            complete += 1
        elif filled or live:
            in_progress += 1
        else:
            open_ += 1
    main = Annotation.objects.filter(study=study, source=ROLE_MAIN)
    active_times = list(main.filter(excluded=False).values_list("active_seconds", flat=True))
    wall_times = list(main.filter(excluded=False).values_list("wall_seconds", flat=True))
    median_active = _median(active_times)
    hourly = None
    if study.payment_per_item is not None and median_active:
        hourly = float(study.payment_per_item) * 3600.0 / median_active
    attention = Annotation.objects.filter(study=study, source=ROLE_ATTENTION, correct__isnull=False)
    n_attention = attention.count()
    qualifications = Qualification.objects.filter(study=study)
    n_qual = qualifications.count()
    live_since = now - timedelta(seconds=C.LIVE_WINDOW_SECONDS)
    states = Counter(Participation.objects.filter(study=study).values_list("state", flat=True))
    return {
        "k": k,
        "items_total": complete + in_progress + open_,
        "items_complete": complete,
        "items_in_progress": in_progress,
        "items_open": open_,
        "annotations_main": main.count(),
        "annotations_excluded": main.filter(excluded=True).count(),
        "annotations_surplus": main.filter(surplus=True).count(),
        "live_reservations": Assignment.objects.filter(study=study, status=AssignmentStatus.RESERVED, lease_expires_at__gt=now).count(),
        "live_annotators": Participation.objects.filter(study=study)
        .filter(Q(last_seen_at__gte=live_since) | Q(assignments__last_activity_at__gte=live_since))
        .exclude(state__in=FINISHED_STATES).distinct().count(),
        "participants": sum(states.values()),
        "states": dict(states),
        "median_active_seconds": median_active,
        "median_wall_seconds": _median(wall_times),
        "hourly_pay": hourly,
        "paper_hourly_rate": C.PAPER_HOURLY_RATE_USD,
        "attention_total": n_attention,
        "attention_pass_rate": (attention.filter(correct=True).count() / n_attention) if n_attention else None,
        "qualification_total": n_qual,
        "qualification_pass_rate": (qualifications.filter(passed=True).count() / n_qual) if n_qual else None,
    }


def study_annotators(study: Study) -> list[dict[str, Any]]:
    """One row per annotator who started the study (oldest first): the counts the study page,
    the annotators report and its CSV all show, so they cannot disagree.

    ``n_main``: submitted main-pool annotations (excluded and surplus ones included);
    ``n_counted``: those not excluded (the ones the agreement statistics use);
    ``n_reserved``: items reserved now; ``checks_passed`` / ``checks_failed``: graded
    attention-check answers; ``median_active_seconds`` over the main-pool annotations;
    ``excluded`` / ``exclusion_reason`` come from the participation alone (never from the
    rows of check and qualification items, which are always set aside): excluded when its
    answers were excluded (failed attention checks) or it was screened out (a failed
    qualification), with the participation's reason. Each count is its own grouped
    query over one table: two ``Count``s over one join would multiply each other."""
    def grouped(queryset: QuerySet) -> dict[int, int]:
        counts = queryset.order_by().values("participation_id").annotate(n=Count("pk"))
        return dict(counts.values_list("participation_id", "n"))

    main = Annotation.objects.filter(study=study, source=ROLE_MAIN)
    attention = Annotation.objects.filter(study=study, source=ROLE_ATTENTION, correct__isnull=False)
    n_main = grouped(main)
    n_counted = grouped(main.filter(excluded=False))
    n_reserved = grouped(Assignment.objects.filter(study=study, status=AssignmentStatus.RESERVED))
    passed = grouped(attention.filter(correct=True))
    failed = grouped(attention.filter(correct=False))
    active = defaultdict(list)
    for pid, seconds in main.values_list("participation_id", "active_seconds"):
        active[pid].append(seconds)
    rows = []
    for p in Participation.objects.filter(study=study).select_related("annotator").order_by("started_at", "pk"):
        rows.append({
            "participation": p,
            "pid": p.annotator.pid,
            "n_main": n_main.get(p.pk, 0),
            "n_counted": n_counted.get(p.pk, 0),
            "n_reserved": n_reserved.get(p.pk, 0),
            "checks_passed": passed.get(p.pk, 0),
            "checks_failed": failed.get(p.pk, 0),
            "median_active_seconds": _median(active[p.pk]),
            **_participation_exclusion(p),
        })
    return rows


def _participation_exclusion(p: Participation) -> dict[str, Any]:
    """Whether the participation is excluded, and why: its own exclusion (failed attention
    checks), else a screening-out (qualification) with the state's reason."""
    if p.excluded:
        return {"excluded": True, "exclusion_reason": p.exclusion_reason or p.state_reason}
    if p.state == ParticipationState.SCREENED_OUT:
        return {"excluded": True, "exclusion_reason": p.state_reason or "screened out"}
    return {"excluded": False, "exclusion_reason": ""}


def study_items_with_annotations(study: Study) -> list[dict[str, Any]]:
    annotations = defaultdict(list)
    for a in Annotation.objects.filter(study=study).select_related("annotator").order_by("submitted_at"):
        annotations[a.item_id].append(a)
    return [
        {"item": item, "annotations": annotations[item.pk]}
        for item in StudyItem.objects.filter(study=study).order_by("role", "position")
    ]


def study_round_summaries(study: Study) -> list[dict[str, Any]]:
    """One row per pilot round: annotations, exclusions and Krippendorff's alpha, over the
    label the study's kind has (``_round_alpha``; for critical failure the binary has_failure,
    for which How2Everything §4.3 reports 0.273 in its pilots and 0.593 at the end, with its
    95 % interval and n as the agreement page shows them)."""
    summaries = []
    for round_study in study_rounds(study):
        rows = [r for r in annotation_export_rows(round_study) if r["source"] == ROLE_MAIN]
        summaries.append({
            "study": round_study,
            "n_annotations": len(rows),
            "n_excluded": sum(1 for r in rows if r["excluded"]),
            **_round_alpha(round_study, rows),
        })
    return summaries


def _round_alpha(study: Study, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The alpha of a round's row (``alpha``, and for critical failure ``alpha_ci95``,
    ``alpha_n`` items with two or more annotations and ``alpha_undefined``): multiple choice
    over the options; constraint faithfulness over question 3 (steps correct); critical
    failure over the binary has_failure label, computed by the agreement report's own alpha
    (``alpha_report``, the same resamples and seed), so the study page and the agreement page
    show the same numbers."""
    if study.kind == MULTIPLE_CHOICE:
        return {"alpha": _choice_alpha(study)}
    if study.kind == CONSTRAINT_FAITHFULNESS:
        return {"alpha": faithfulness_study_results(study, bootstrap=0)["questions"]["steps_correct"]["alpha"]}
    alphas = alpha_report(map(parse_annotation_record, rows), bootstrap=DEFAULT_BOOTSTRAP)
    return {"alpha": alphas["alpha"]["binary"], "alpha_ci95": alphas["alpha_ci95"]["binary"],
            "alpha_n": alphas["alpha_details"]["binary"]["n_units"], "alpha_undefined": alphas["alpha_undefined"]["binary"]}


def choice_items(studies: QuerySet[Study] | list[Study]) -> list[ChoiceItem]:
    """Main-pool items of multiple-choice studies with the answers that count: submitted,
    not excluded (failed attention checks) and not surplus, in submission order."""
    answers: dict[int, list] = defaultdict(list)
    rows = (Annotation.objects.filter(study__in=studies, source=ROLE_MAIN, excluded=False, surplus=False)
            .order_by("submitted_at", "pk").values_list("item_id", "answer"))
    for item_pk, answer in rows:
        answers[item_pk].append(answer.get("choice"))
    items = StudyItem.objects.filter(study__in=studies, role=ROLE_MAIN).order_by("study_id", "position")
    return [ChoiceItem(item_id=i.item_id, task=i.source.get("task", ""), topic=i.topic, label=i.expected_choice,
                       answers=tuple(answers.get(i.pk, ()))) for i in items]


def choice_study_results(study: Study) -> dict[str, dict[str, Any]]:
    """Table 2 of Zhang et al. 2020 per task of a multiple-choice study (annotate/choice_results.py)."""
    return study_results(choice_items([study]), study.annotators_per_item)


def _choice_alpha(study: Study) -> float | None:
    """Nominal alpha over every answer of the study, all tasks together."""
    return study_results([ChoiceItem(i.item_id, "all", i.topic, i.label, i.answers) for i in choice_items([study])],
                         study.annotators_per_item).get("all", {}).get("alpha")


def faithfulness_items(study: Study) -> list[FaithfulnessItem]:
    """Main-pool items of a constraint-faithfulness study with the answers that count:
    submitted, not excluded (failed attention checks) and not surplus, in submission order."""
    answers: dict[int, list[dict[str, Any]]] = defaultdict(list)
    rows = (Annotation.objects.filter(study=study, source=ROLE_MAIN, excluded=False, surplus=False)
            .order_by("submitted_at", "pk").values_list("item_id", "answer"))
    for item_pk, answer in rows:
        answers[item_pk].append(answer)
    items = StudyItem.objects.filter(study=study, role=ROLE_MAIN).order_by("position")
    return [FaithfulnessItem(item_id=i.item_id, constraint_type=(i.source or {}).get("constraint_type", ""),
                             topic=i.topic, answers=tuple(answers.get(i.pk, ()))) for i in items]


def faithfulness_study_results(study: Study, *, bootstrap: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Fleiss' kappa, alpha, accuracy by constraint type and error-type counts of a
    constraint-faithfulness study (annotate/faithfulness_results.py)."""
    return faithfulness_results(faithfulness_items(study), study.annotators_per_item, bootstrap=bootstrap, seed=seed)


def choice_human_accuracy(task: str) -> dict[str, Any] | None:
    """Human accuracy on a goal-step task over every multiple-choice study (the provider of
    goalstep.validation): answers equal to the label / answers."""
    studies = list(Study.objects.filter(kind=MULTIPLE_CHOICE))
    items = [item for item in choice_items(studies) if item.task == task and item.answers]
    if not items:
        return None
    answers = sum(len(item.answers) for item in items)
    correct = sum(answer == item.label for item in items for answer in item.answers)
    return {"accuracy": correct / answers, "n_answers": answers, "n_items": len(items),
            "source": ", ".join(sorted(s.slug for s in studies))}


def choice_tier_records(study: Study, tier: str) -> list[dict[str, Any]]:
    """The items of a tier (``gold``: all annotators chose the label; ``harder``: all but one)
    as goal-step task lines, ready for evaluation."""
    if tier not in ("gold", "harder"):
        raise ValueError("tier must be gold or harder")
    chosen = {item_id for results in choice_study_results(study).values() for item_id in results[tier]}
    records = []
    for item in study.items.filter(role=ROLE_MAIN).order_by("position"):
        if item.item_id in chosen:
            records.append({"id": item.item_id, "task": item.source.get("task", ""), "prompt": item.goal,
                            "candidates": list(item.candidate_steps), "label": item.expected_choice,
                            "topic": item.topic, "source_procedure_ids": item.source.get("source_procedure_ids", [])})
    return records


EXPORT_FIELDS = (
    "item_id", "annotator", "has_failure", "failures", "comments", "study", "round", "guideline_version",
    "submitted_at", "wall_seconds", "active_seconds", "excluded", "exclusion_reason",
    # provenance
    "source", "surplus", "late", "correct", "expected_has_failure", "choice", "expected_choice", "kind", "topic", "l1_hash", "l2_hash",
    "interface_version", "first_served_at", "goal_acknowledged_at", "steps_opened", "click_log",
    "prolific_study_id", "prolific_session_id", "item_source", "answer",
)


def annotation_export_rows(study: Study) -> Iterator[dict[str, Any]]:
    """One dict per annotation in the export shape (the agreement report's input), oldest first."""
    qs = (
        Annotation.objects.filter(study=study)
        .select_related("item", "annotator", "participation", "study")
        .order_by("submitted_at", "pk")
    )
    for a in qs.iterator(chunk_size=1000):
        yield {
            "item_id": a.item.item_id,
            "annotator": a.annotator.pid,
            "has_failure": a.has_failure,
            "failures": [
                {"description": f["description"], "L1_steps": f["L1_steps"], "L2_steps": f["L2_steps"]} for f in a.failures
            ],
            "comments": a.comments,
            "study": study.slug,
            "round": study.round,
            "guideline_version": a.guideline_version,
            "submitted_at": a.submitted_at.isoformat(),
            "wall_seconds": a.wall_seconds,
            "active_seconds": a.active_seconds,
            "excluded": a.excluded,
            "exclusion_reason": a.exclusion_reason,
            "source": a.source,
            "surplus": a.surplus,
            "late": a.late,
            "correct": a.correct,
            "expected_has_failure": a.item.expected_has_failure,
            "choice": a.answer.get("choice") if a.has_failure is None else None,
            "expected_choice": a.item.expected_choice,
            "kind": study.kind,
            "topic": a.item.topic,
            "l1_hash": a.l1_hash,
            "l2_hash": a.l2_hash,
            "interface_version": a.interface_version,
            "first_served_at": a.first_served_at.isoformat(),
            "goal_acknowledged_at": a.goal_acknowledged_at.isoformat() if a.goal_acknowledged_at else None,
            "steps_opened": a.steps_opened,
            "click_log": a.click_log,
            "prolific_study_id": a.participation.prolific_study_id,
            "prolific_session_id": a.participation.prolific_session_id,
            "item_source": a.item.source,
            # The kind's whole cleaned answer (constraint faithfulness: the three answers and
            # the wrong steps with their error types; has_failure is null there).
            "answer": a.answer,
        }


def participation_for_session(*, slug: str, participation_id: Any) -> Participation | None:
    """The participation kept in an annotator's session, if it belongs to this study."""
    if not isinstance(participation_id, int):
        return None
    return Participation.objects.select_related("study__guideline_version", "annotator").filter(
        pk=participation_id, study__slug=slug
    ).first()


def study_item_counts(study: Study) -> dict[str, int]:
    """The study's items by role (main, attention, qualification), zeros included."""
    counts = dict(StudyItem.objects.filter(study=study).order_by().values("role").annotate(n=Count("pk")).values_list("role", "n"))
    return {role: counts.get(role, 0) for role in (ROLE_MAIN, ROLE_ATTENTION, ROLE_QUALIFICATION)}


def participation_reserved_count(participation: Participation) -> int:
    """How many slots the participant holds reserved now (what a release gives back)."""
    return Assignment.objects.filter(participation=participation, status=AssignmentStatus.RESERVED).count()
