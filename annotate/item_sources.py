"""Where study items come from: judged generations (judging.models) or a JSONL file.

Both give ``ItemSpec`` rows; ``study_create`` does not care which."""
from __future__ import annotations

from pathlib import Path

from annotate.item_files import items_read
from annotate.kinds.base import ROLE_MAIN, ItemSpec
from annotate.sampling import stratified_sample
from judging.models import Judgment


def items_from_file(*, path: str | Path, kind: str) -> list[ItemSpec]:
    return items_read(path, kind=kind)


def item_from_judgment(judgment: Judgment) -> ItemSpec:
    generation = judgment.generation
    procedure = generation.procedure
    return ItemSpec(
        item_id=f"gen-{generation.pk}",
        topic=procedure.topic.name,
        goal=procedure.goal,
        reference_steps=list(procedure.steps),
        candidate_steps=list(generation.predicted_steps),
        role=ROLE_MAIN,
        source={
            "generation_id": generation.pk,
            "judgment_id": judgment.pk,
            "judge": judgment.judge,
            "judge_label": judgment.label,
            "model": generation.model,
            "procedure_id": procedure.pk,
            "source_example_id": procedure.source_example_id,
        },
    )


def items_from_judgments(
    *, judge: str, n: int, seed: int = 0, topics: list[str] | None = None, models: list[str] | None = None
) -> list[ItemSpec]:
    """Up to ``n`` judged generations, stratified by topic and the judge's label (round-robin
    over the (topic, label) strata, seeded). Generations without steps are skipped."""
    # Only usable verdicts: an answer the judge could not give has no label to stratify by.
    judgments = (Judgment.objects.filter(judge=judge, has_failure__isnull=False)
                 .select_related("generation__procedure__topic").order_by("pk"))
    if topics:
        judgments = judgments.filter(generation__procedure__topic__slug__in=topics)
    if models:
        judgments = judgments.filter(generation__model__in=models)
    rows = [j for j in judgments if j.generation.predicted_steps and j.generation.procedure.steps]
    sample = stratified_sample(rows, key=lambda j: (j.generation.procedure.topic.name, j.label), n=n, seed=seed)
    return [item_from_judgment(j) for j in sample]


def judge_names() -> list[str]:
    return list(Judgment.objects.order_by("judge").values_list("judge", flat=True).distinct())
