"""The data manager's bulk actions: a registry, one entry per action (docs/annotation.md, "The
data manager"). The page and the API list the registry and run an action through
``data_action_run``, so a new action is one ``data_action_register(DataAction(...))`` call: its
name and label, the serializer of its own parameters (checked here, a bad one a 400 naming
it) and the function that calls its service on the selected items. An action answers with a
message and its counts, or with a download (the export)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from rest_framework import serializers

from annotate.kinds.base import ROLE_MAIN
from annotate.models import Annotation, Study, StudyItem
from annotate.review import rules as review_rules
from annotate.review.services import annotation_review
from annotate.studies.api_fields import EXPORT_FORMATS, INSTRUCTIONS_MAX_CHARS, Text
from annotate.studies.data_services import (
    EXCLUSION_REASON_MAX,
    ROUND_NEW,
    study_items_add_to_round,
    study_items_exclude,
    study_items_restore,
)
from annotate.studies.exports import annotation_csv_lines, annotation_export_rows
from core.app_errors import InvalidInput
from core.query_params import QueryChoice


@dataclass(frozen=True)
class Download:
    """A file an action answers with, streamed."""

    filename: str
    content_type: str
    chunks: Iterator[bytes]


@dataclass(frozen=True)
class ActionResult:
    """What an action did: a sentence for the page, its counts for the API, or a download."""

    message: str = ""
    counts: dict[str, Any] = field(default_factory=dict)
    download: Download | None = None


@dataclass(frozen=True)
class ActionContext:
    """What every action receives: the study, the selected items, the one who asked."""

    study: Study
    items: QuerySet[StudyItem]
    user: Any


@dataclass(frozen=True)
class DataAction:
    name: str
    label: str
    description: str
    params: type[serializers.Serializer]
    run: Callable[[ActionContext, dict[str, Any]], ActionResult]


DATA_ACTIONS: dict[str, DataAction] = {}


def data_action_register(action: DataAction) -> DataAction:
    """Add ``action`` to the registry (a second one of the same name replaces the first)."""
    DATA_ACTIONS[action.name] = action
    return action


def data_action_list() -> list[DataAction]:
    return list(DATA_ACTIONS.values())


def data_action_run(
    *, study: Study, name: str, items: QuerySet[StudyItem], params: Mapping[str, Any], user: Any = None
) -> ActionResult:
    """Run the action ``name`` on ``items`` with ``params`` (only those its serializer declares
    are read); an unknown action or a bad parameter is an ``InvalidInput`` naming it."""
    action = DATA_ACTIONS.get(name)
    if action is None:
        raise InvalidInput(fields={"action": f"{name!r} is not an action; one of {', '.join(DATA_ACTIONS)}"})
    declared = list(action.params().fields.keys())
    serializer = action.params(data={key: params[key] for key in declared if key in params})
    if not serializer.is_valid():
        raise InvalidInput(fields={key: [str(m) for m in problems] for key, problems in serializer.errors.items()})
    return action.run(ActionContext(study=study, items=items, user=user), dict(serializer.validated_data))


# -- the built-in actions --------------------------------------------------------------------


class AnswersParams(serializers.Serializer):
    annotator = Text(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="Only this annotator's answers on the selected items (PROLIFIC_PID); empty: everyone's",
    )


class ExcludeParams(AnswersParams):
    reason = Text(max_length=EXCLUSION_REASON_MAX, help_text="Why (stored with each answer, shown in exports)")


def _exclude(context: ActionContext, params: dict[str, Any]) -> ActionResult:
    n = study_items_exclude(
        study=context.study, items=context.items, reason=params["reason"], annotator=params.get("annotator", "")
    )
    return ActionResult(f"Excluded {n} answer(s) of the selected items.", {"excluded": n})


def _restore(context: ActionContext, params: dict[str, Any]) -> ActionResult:
    n = study_items_restore(study=context.study, items=context.items, annotator=params.get("annotator", ""))
    return ActionResult(f"Restored {n} answer(s) a researcher had excluded.", {"restored": n})


class RoundField(serializers.Field):
    """A round's number (a whole number from 1) or ``new``; "2" from a form reads as 2."""

    def to_internal_value(self, data: Any) -> int | str:
        if data == ROUND_NEW:
            return ROUND_NEW
        if isinstance(data, bool) or not isinstance(data, (int, str)):
            raise serializers.ValidationError('a round number or "new"')
        try:
            number = int(data)
        except ValueError:
            raise serializers.ValidationError(f'a round number or "new", got {data!r}') from None
        if not 1 <= number <= 32_767:
            raise serializers.ValidationError(f"a round number from 1, got {data!r}")
        return number

    def to_representation(self, value: Any) -> Any:
        return value


class RoundParams(serializers.Serializer):
    round = RoundField(help_text='The number of another round of the study\'s family, or "new"')
    instructions = Text(
        required=False,
        allow_blank=True,
        max_length=INSTRUCTIONS_MAX_CHARS,
        help_text="A new round's guidelines (empty: the study's own)",
    )


def _add_to_round(context: ActionContext, params: dict[str, Any]) -> ActionResult:
    outcome = study_items_add_to_round(
        study=context.study,
        items=context.items,
        round=params["round"],
        instructions=params.get("instructions", ""),
        created_by=context.user,
    )
    target = outcome.study
    message = f"Added {len(outcome.added)} item(s) to round {target.round} ({target.name})"
    if outcome.skipped:
        message += f"; {len(outcome.skipped)} were already there"
    return ActionResult(
        message + ".",
        {"round": target.round, "study": target.slug, "added": len(outcome.added), "skipped": len(outcome.skipped)},
    )


class ExportParams(serializers.Serializer):
    format = QueryChoice(choices=EXPORT_FORMATS, required=False, default="jsonl", help_text="jsonl (default) or csv")


def _export(context: ActionContext, params: dict[str, Any]) -> ActionResult:
    rows = annotation_export_rows(context.study, items=context.items)
    fmt = params["format"]
    if fmt == "csv":
        chunks: Iterator[bytes] = (line.encode("utf-8") for line in annotation_csv_lines(rows))
        content_type = "text/csv; charset=utf-8"
    else:
        chunks = ((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8") for r in rows)
        content_type = "application/x-ndjson; charset=utf-8"
    return ActionResult(download=Download(f"{context.study.slug}-selection.{fmt}", content_type, chunks))


class ReviewParams(AnswersParams):
    decision = QueryChoice(
        choices=[review_rules.DECISION_ACCEPT, review_rules.DECISION_REJECT],
        help_text="accept or reject (a correction is made on the item's review page)",
    )
    reason = Text(
        required=False,
        allow_blank=True,
        max_length=review_rules.REJECT_MESSAGE_MAX_LENGTH,
        help_text=f"reject: the participant's message ({review_rules.REJECT_MESSAGE_MIN_LENGTH} characters or more)",
    )
    rejection_category = Text(
        required=False, allow_blank=True, max_length=40, help_text="reject: one of Prolific's categories"
    )


def _review(context: ActionContext, params: dict[str, Any]) -> ActionResult:
    """The selection's main-pool answers (or one annotator's) given a review decision by the
    review service (annotate/review/services.py), ``review_rules.BULK_MAX`` at a time, all or
    none: a refusal of one part undoes the others."""
    answers = Annotation.objects.filter(
        study=context.study, item__in=context.items.values("pk"), source=ROLE_MAIN, is_test=False
    )
    if params.get("annotator"):
        answers = answers.filter(annotator__pid=params["annotator"].lower())
    ids = list(answers.order_by("pk").values_list("pk", flat=True))
    if not ids:
        raise InvalidInput(fields={"items": "the selection has no main-pool answer to review"})
    n = 0
    with transaction.atomic():
        for start in range(0, len(ids), review_rules.BULK_MAX):
            n += len(
                annotation_review(
                    study=context.study,
                    annotation_ids=ids[start : start + review_rules.BULK_MAX],
                    decision=params["decision"],
                    reviewer=context.user,
                    reason=params.get("reason", ""),
                    rejection_category=params.get("rejection_category", ""),
                )
            )
    label = review_rules.DECISIONS[params["decision"]]
    return ActionResult(f"{label}: {n} answer(s) of the selected items.", {params["decision"]: n})


data_action_register(
    DataAction(
        "exclude",
        "Exclude answers",
        "The selected items' main-pool answers (or one annotator's) are excluded with a reason: stored and "
        "exported, left out of alpha, the human majority and agreement; their slots stay filled.",
        ExcludeParams,
        _exclude,
    )
)
data_action_register(
    DataAction(
        "restore",
        "Restore answers",
        "Answers a researcher excluded count again (exclusions for failed attention checks stay).",
        AnswersParams,
        _restore,
    )
)
data_action_register(
    DataAction(
        "add_to_round",
        "Add to a round",
        "The selected main items are copied into another pilot round of the study (annotated there under that "
        "round's guidelines, counted in its alpha; items it has are skipped), or into a new round made of them.",
        RoundParams,
        _add_to_round,
    )
)
data_action_register(
    DataAction(
        "export",
        "Export the selection",
        "Every annotation of the selected items in the study export's shape (JSONL or CSV).",
        ExportParams,
        _export,
    )
)
data_action_register(
    DataAction(
        "review",
        "Send to review",
        "A review decision on the selected items' main-pool answers (or one annotator's): accept, or reject with "
        "Prolific's message and category (the answer leaves the counted set and the participant is rejected in "
        "the Prolific review). A correction or a gold label is made on the item's review page.",
        ReviewParams,
        _review,
    )
)
