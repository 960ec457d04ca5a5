"""What researchers do with a finished CoScript run: review the goals the screen flagged (``specific_goal_review``), export the result in the constraint-faithfulness study's input shape (``export_records``, ``coscript_export``), and add it to the benchmark as the "constrained" split (``coscript_add_to_benchmark``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.app_errors import Conflict, InvalidInput
from core.record_output import atomic_output
from coscript.models import CandidateScript, CoScriptRun, Phase, Review, SpecificGoal
from mining.models import Procedure, Split, Topic

EXPORT_CHOICES = ("selected", "kept", "all")


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
