"""Where study items come from: judged generations (judging.models) or a JSONL file.

Both give ``ItemSpec`` rows; ``study_create`` does not care which. ``study_items_gather`` is the
one way a new study's items are gathered, from either source or both."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from annotate.errors import AnnotateError
from annotate.kinds import kind_get
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION, ItemRecordError, ItemSpec
from annotate.models import StudyItem
from annotate.studies.item_files import SCOPE, items_read
from annotate.studies.sampling import stratified_sample
from core.record_files import ReadLimits
from core.stored_values import StrictJSONError, check_stored_values
from judging.models import Judgment

ROLE_FIELDS = {ROLE_ATTENTION: "attention_check", ROLE_QUALIFICATION: "qualification"}
STORED_FIELDS = ("item_id", "topic", "goal", "reference_steps", "candidate_steps", "explanation", "source", "expected")


def item_storable_check(kind: str):
    """A ``check`` for ``items_read``: an item whose values would not fit ``StudyItem``'s
    columns (a topic over 100 characters, a NUL character, an out-of-range number) is an
    ``ItemRecordError`` naming the field as the file calls it."""
    names = kind_get(kind).file_field_names  # what the kind's file calls the item's fields

    def check(spec: ItemSpec) -> None:
        labels = {name: names.get(name, name) for name in STORED_FIELDS}
        role_field = ROLE_FIELDS.get(spec.role)
        if role_field:
            labels["explanation"] = f"{role_field}.explanation"
            # A check's known answer: the field inside the role's object, or the object itself.
            labels["expected"] = f"{role_field}.{names['expected']}" if "expected" in names else role_field
        try:
            check_stored_values(StudyItem, {name: getattr(spec, name) for name in STORED_FIELDS}, labels=labels)
        except StrictJSONError as exc:
            raise ItemRecordError(exc.message, exc.field) from exc

    return check


def items_from_file(*, path: str | Path, kind: str, file_name: str | None = None) -> list[ItemSpec]:
    """The items of a study item file, read within the ``STUDY_ITEMS_MAX_...`` settings and
    checked against the columns they go to; ``RecordError`` lists the bad lines."""
    return items_read(
        path,
        kind=kind,
        limits=ReadLimits.from_settings(settings, SCOPE),
        check=item_storable_check(kind),
        file_name=file_name,
    )


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
    *,
    judge: str,
    n: int,
    seed: int = 0,
    topics: list[str] | None = None,
    models: list[str] | None = None,
    judge_runs: list[int] | None = None,
    exclude_item_ids: frozenset[str] = frozenset(),
) -> list[ItemSpec]:
    """Up to ``n`` judged generations, stratified by topic and the judge's label (round-robin
    over the (topic, label) strata, seeded). Generations without steps are skipped. ``topics``
    (slugs), ``models`` and ``judge_runs`` (ids) narrow the pool the sample is drawn from;
    ``exclude_item_ids`` takes out the generations already in a study (items added to it)."""
    # Only usable verdicts: an answer the judge could not give has no label to stratify by.
    judgments = (
        Judgment.objects.filter(judge=judge, has_failure__isnull=False)
        .select_related("generation__procedure__topic")
        .order_by("pk")
    )
    if topics:
        judgments = judgments.filter(generation__procedure__topic__slug__in=topics)
    if models:
        judgments = judgments.filter(generation__model__in=models)
    if judge_runs:
        judgments = judgments.filter(run_id__in=judge_runs)
    rows = [
        j
        for j in judgments
        if j.generation.predicted_steps
        and j.generation.procedure.steps
        and f"gen-{j.generation.pk}" not in exclude_item_ids
    ]
    sample = stratified_sample(rows, key=lambda j: (j.generation.procedure.topic.name, j.label), n=n, seed=seed)
    return [item_from_judgment(j) for j in sample]


def judge_names() -> list[str]:
    return list(Judgment.objects.order_by("judge").values_list("judge", flat=True).distinct())


def study_items_gather(
    *,
    kind: str,
    judge: str | None = None,
    n_judged: int | None = None,
    seed: int = 0,
    file_path: str | Path | None = None,
    file_name: str | None = None,
    topics: list[str] | None = None,
    models: list[str] | None = None,
    judge_runs: list[int] | None = None,
    exclude_item_ids: frozenset[str] = frozenset(),
) -> list[ItemSpec]:
    """The items of a new study, however it is created (the New study page, the API,
    ``manage.py create_study``, a worker's import), or of items added to a running one (the
    data manager, with ``exclude_item_ids``: the study's own, never sampled again): judged
    generations (of ``judge``, optionally only of some ``topics``, ``models`` or
    ``judge_runs``) and/or the lines of an items file. Raises ``RecordError`` (bad lines) or
    ``AnnotateError``."""
    items: list[ItemSpec] = []
    if judge:
        items += items_from_judgments(
            judge=judge,
            n=n_judged or 0,
            seed=seed or 0,
            topics=topics or None,
            models=models or None,
            judge_runs=judge_runs or None,
            exclude_item_ids=exclude_item_ids,
        )
        if not items:
            raise AnnotateError(f"The judge {judge!r} has no judged generations with steps.")
    if file_path is not None:
        name = file_name or Path(file_path).name
        file_items = items_from_file(path=file_path, kind=kind, file_name=name)
        for spec in file_items:
            spec.source["file"] = name
        taken = {i.item_id for i in items}
        clash = [i.item_id for i in file_items if i.item_id in taken]
        if clash:
            raise AnnotateError(f"{name}: item_id {clash[0]!r} is also a sampled generation's id.")
        items += file_items
    return items
