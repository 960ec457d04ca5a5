"""Where study items come from: judged generations (judging.models) or a JSONL file.

Both give ``ItemSpec`` rows; ``study_create`` does not care which."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings

from annotate.item_files import SCOPE, items_read
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION, ItemRecordError, ItemSpec
from annotate.models import StudyItem
from annotate.sampling import stratified_sample
from core.stored_values import StrictJSONError, check_stored_values
from judging.models import Judgment
from mining.record_files import ReadLimits

# What each kind's file calls the item's fields, where it differs from the item's own name
# (annotate/kinds/<kind>.py: parse_record), so an error names the field of the file.
FILE_FIELD_NAMES: dict[str, dict[str, str]] = {
    "multiple_choice": {"item_id": "id", "goal": "prompt", "candidate_steps": "candidates", "expected_choice": "label"},
    "constraint_faithfulness": {"item_id": "id", "goal": "specific_goal", "candidate_steps": "steps"},
}
ROLE_FIELDS = {ROLE_ATTENTION: "attention_check", ROLE_QUALIFICATION: "qualification"}
STORED_FIELDS = ("item_id", "topic", "goal", "reference_steps", "candidate_steps", "explanation", "source",
                 "expected_choice", "expected_answer")


def item_storable_check(kind: str):
    """A ``check`` for ``items_read``: an item whose values would not fit ``StudyItem``'s
    columns (a topic over 100 characters, a NUL character, an out-of-range number) is an
    ``ItemRecordError`` naming the field as the file calls it."""
    names = FILE_FIELD_NAMES.get(kind, {})

    def check(spec: ItemSpec) -> None:
        labels = {name: names.get(name, name) for name in STORED_FIELDS}
        role_field = ROLE_FIELDS.get(spec.role)
        if role_field:
            labels["explanation"] = f"{role_field}.explanation"
            labels["expected_choice"] = f"{role_field}.label"
            labels["expected_answer"] = role_field
        try:
            check_stored_values(StudyItem, {name: getattr(spec, name) for name in STORED_FIELDS}, labels=labels)
        except StrictJSONError as exc:
            raise ItemRecordError(exc.message, exc.field) from exc

    return check


def items_from_file(*, path: str | Path, kind: str, file_name: str | None = None) -> list[ItemSpec]:
    """The items of a study item file, read within the ``STUDY_ITEMS_MAX_...`` settings and
    checked against the columns they go to; ``ItemFileError`` lists the bad lines."""
    return items_read(path, kind=kind, limits=ReadLimits.from_settings(settings, SCOPE),
                      check=item_storable_check(kind), file_name=file_name)


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
