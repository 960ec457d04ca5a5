"""REST API of the data manager (docs/api.md, "The data manager"): a study's table of items
with their annotations (search, filters, sort, pages), its bulk actions, and items added to
a running study. Thin: the selectors and services of data_selectors.py, data_actions.py and
data_services.py do the work, and a refusal is answered by the API's one exception handler."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.studies.api_fields import KIND_NOT_INSTALLED, MAX_SAMPLE, SEED_MAX, Text, error_responses
from annotate.studies.data_actions import DATA_ACTIONS, data_action_list, data_action_run
from annotate.studies.data_selectors import (
    PAGE_SIZE_MAX,
    DataFilterSerializer,
    DataQuerySerializer,
    data_page,
    data_query_clean,
    data_selection,
)
from annotate.studies.data_services import study_items_add_from_upload
from annotate.studies.selectors import study_get
from core.parsers import StrictJSONParser
from core.roles import is_researcher
from core.serializer_fields import StrictBooleanField, StrictIntegerField

SELECTION_MAX = 10_000  # item ids one request may name (every item matching: all_matching)


class DataAnswerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    annotator = serializers.CharField(source="annotator.pid")
    # A declared field: DRF's serializer metaclass takes it off the class (the stubs cannot say so).
    label = serializers.CharField(help_text="has_failure / no_failure, 'choice N', ... (the export's)")  # type: ignore[assignment]
    flag = serializers.CharField(help_text="broken, unsure or empty")
    excluded = serializers.BooleanField()
    exclusion_reason = serializers.CharField()
    surplus = serializers.BooleanField()
    submitted_at = serializers.DateTimeField()


class DataRowSerializer(serializers.Serializer):
    item_id = serializers.CharField()
    role = serializers.CharField()
    position = serializers.IntegerField()
    topic = serializers.CharField()
    goal = serializers.CharField()
    status = serializers.CharField(help_text="open, in_progress, incomplete, complete; check for check and gold items")
    n_annotations = serializers.IntegerField(help_text="Submitted answers (excluded, surplus and flagged included)")
    n_counted = serializers.IntegerField(help_text="Answers that count: not excluded, not surplus, not flagged broken")
    n_has_failure = serializers.IntegerField(help_text="Counted answers saying has_failure (0 in kinds without it)")
    n_excluded = serializers.IntegerField()
    n_broken = serializers.IntegerField()
    n_unsure = serializers.IntegerField()
    n_filled = serializers.IntegerField(help_text="Slots filled toward k")
    k = serializers.SerializerMethodField()
    judge_label = serializers.CharField(allow_null=True, help_text="The source's judge_label (null: none)")
    majority = serializers.CharField(
        allow_null=True, help_text="The human majority under the study's rule (null: none, or a kind without labels)"
    )
    agreement = serializers.CharField(allow_null=True, help_text="unanimous, split or too_few (null: no labels)")
    last_submitted_at = serializers.DateTimeField(allow_null=True)
    annotations = DataAnswerSerializer(many=True, source="answers")

    @extend_schema_field(OpenApiTypes.INT)
    def get_k(self, item: Any) -> int:
        return self.context["k"]


class DataPageSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Items matching the filters")
    page = serializers.IntegerField()
    pages = serializers.IntegerField()
    page_size = serializers.IntegerField()
    sort = serializers.CharField()
    labels = serializers.BooleanField(help_text="The kind stores has_failure labels: the label columns apply")
    results = DataRowSerializer(many=True)


def data_page_body(study: Any, params: Any) -> dict[str, Any]:
    page = data_page(study, data_query_clean(study, params))
    rows = DataRowSerializer(page.rows, many=True, context={"k": study.annotators_per_item}).data
    return {
        "count": page.count,
        "page": page.query.page,
        "pages": page.pages,
        "page_size": page.query.page_size,
        "sort": page.query.sort,
        "labels": page.labels,
        "results": rows,
    }


class StudyDataView(APIView):
    @extend_schema(
        summary="A study's data manager table",
        description="The study's items (main pool unless role says otherwise), each with its annotations and "
        "counts, searched, filtered, sorted and paged in the database. A bad parameter (an unknown sort key or "
        "filter value, a page that is not a whole number or is past the last, a page size over "
        f"{PAGE_SIZE_MAX}, a topic or annotator the study does not have, a label filter in a kind without "
        "labels) is a 400 naming it.",
        parameters=[DataQuerySerializer],
        responses={
            200: DataPageSerializer,
            **error_responses(_400="{parameter: [problem]}", _404="No such study", _503=KIND_NOT_INSTALLED),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        study = study_get(slug=slug)
        return Response(data_page_body(study, request.query_params))


class ActionRequestSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=[], help_text="The action's name (GET lists them)")
    items = serializers.ListField(
        child=Text(max_length=200),
        required=False,
        max_length=SELECTION_MAX,
        help_text="The selected items' item_id (or all_matching)",
    )
    all_matching = StrictBooleanField(
        required=False, default=False, help_text="Every item matching the URL's filters (the table's parameters)"
    )
    reason = Text(
        required=False,
        allow_blank=True,
        help_text="exclude: why (required); review with reject: the participant's message",
    )
    annotator = Text(
        required=False, allow_blank=True, help_text="exclude, restore, review: only this annotator's answers"
    )
    decision = serializers.CharField(required=False, help_text="review: accept or reject")
    rejection_category = Text(required=False, allow_blank=True, help_text="review with reject: Prolific's category")
    round = serializers.CharField(required=False, help_text='add_to_round: a round number or "new"')
    instructions = Text(required=False, allow_blank=True, help_text="add_to_round with new: the round's guidelines")
    format = serializers.CharField(required=False, help_text="export: jsonl (default) or csv")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        action = self.fields["action"]
        assert isinstance(action, serializers.ChoiceField)
        action.choices = list(DATA_ACTIONS)  # the registry when asked: an action registered later is one

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("all_matching") and attrs.get("items"):
            raise serializers.ValidationError({"items": "send the item ids or all_matching, not both"})
        if not attrs.get("all_matching") and not attrs.get("items"):
            raise serializers.ValidationError({"items": "select items (their ids) or send all_matching: true"})
        return attrs


class ActionSerializer(serializers.Serializer):
    name = serializers.CharField()
    # A declared field: DRF's serializer metaclass takes it off the class (the stubs cannot say so).
    label = serializers.CharField()  # type: ignore[assignment]
    description = serializers.CharField()
    parameters = serializers.ListField(child=serializers.CharField())


class ActionResultSerializer(serializers.Serializer):
    action = serializers.CharField()
    items = serializers.IntegerField(help_text="Items selected")
    detail = serializers.CharField()
    counts = serializers.DictField(help_text="What the action did (excluded, restored, added, skipped, round, study)")


class StudyDataActionView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        summary="The data manager's bulk actions",
        description="The actions a selection of items can be given, with the parameters each reads.",
        responses={200: ActionSerializer(many=True), **error_responses(_404="No such study")},
    )
    def get(self, request: Request, slug: str) -> Response:
        study_get(slug=slug)
        return Response(
            [
                {"name": a.name, "label": a.label, "description": a.description, "parameters": list(a.params().fields)}
                for a in data_action_list()
            ]
        )

    @extend_schema(
        summary="Run a bulk action on a selection",
        description="The selection is the items named (items: their item_id) or every item matching the URL's "
        "filters (all_matching: true; the table's parameters, sort and page aside). exclude (reason, "
        "annotator): their main-pool answers excluded; restore (annotator): a researcher's exclusions undone; "
        "review (decision: accept or reject, reason, rejection_category, annotator): a review decision on their "
        "main-pool answers by the review service; "
        "add_to_round (round: a number or new, instructions): main items copied into another pilot round; "
        "export (format: jsonl or csv): the selection's annotations streamed in the export's shape. A bad "
        "parameter is a 400 naming it; nothing is changed then.",
        parameters=[DataFilterSerializer],
        request=ActionRequestSerializer,
        responses={
            (200, "application/json"): OpenApiResponse(ActionResultSerializer, description="What the action did"),
            (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR, description="export, jsonl: the file"),
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="export, csv: the file"),
            **error_responses(_400="{field: [problem]}; nothing was changed", _404="No such study", _409="Refused"),
        },
    )
    def post(self, request: Request, slug: str) -> Any:
        study = study_get(slug=slug)
        body = ActionRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if data.get("all_matching"):
            items = data_selection(study, query=data_query_clean(study, request.query_params, filters_only=True))
        else:
            items = data_selection(study, item_ids=data["items"])
        n_items = items.count()
        result = data_action_run(
            study=study,
            name=data["action"],
            items=items,
            params=cast("Mapping[str, Any]", request.data),
            user=request.user,
        )
        if result.download is not None:
            response = StreamingHttpResponse(result.download.chunks, content_type=result.download.content_type)
            response["Content-Disposition"] = f'attachment; filename="{result.download.filename}"'
            return response
        return Response({"action": data["action"], "items": n_items, "detail": result.message, "counts": result.counts})


class ItemsAddSerializer(serializers.Serializer):
    items_file = serializers.FileField(
        required=False,
        help_text="multipart: an items file in the study kind's shape (JSONL, CSV, Parquet, Arrow; compressed too)",
    )
    judge = Text(required=False, allow_blank=True, max_length=200, help_text="Sample judged generations of this judge")
    n_judged = StrictIntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_SAMPLE)
    seed = StrictIntegerField(required=False, default=0, min_value=0, max_value=SEED_MAX)
    topics = serializers.ListField(child=Text(max_length=100), required=False, help_text="Topic slugs")
    models = serializers.ListField(child=Text(max_length=200), required=False)


class ItemsAddedSerializer(serializers.Serializer):
    study = serializers.CharField()
    added = serializers.ListField(child=serializers.CharField())
    items_total = serializers.IntegerField()


class StudyItemsAddView(APIView):
    parser_classes = [StrictJSONParser, MultiPartParser, FormParser]
    upload_check = staticmethod(is_researcher)  # an items file up to UPLOAD_MAX_BYTES (core/request_bodies.py)

    @extend_schema(
        summary="Add items to a running study",
        description="From an items file (multipart, items_file) and/or judged generations (judge, n_judged, "
        "seed, topics, models; the study's own generations are never drawn again). The items join the pool "
        "after those already there: each main item gets the study's k annotators through the ordinary "
        "reservations, and counts in this study's round only. Bad lines: a 400 whose items_file lists each; "
        "an item id the study already has: 409; nothing is added then.",
        request={"multipart/form-data": ItemsAddSerializer, "application/json": ItemsAddSerializer},
        responses={
            201: ItemsAddedSerializer,
            **error_responses(
                _400="{field: [problem]}; nothing was added",
                _404="No such study",
                _409="Refused",
                _503=KIND_NOT_INSTALLED,
            ),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        study = study_get(slug=slug)
        body = ItemsAddSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        outcome = study_items_add_from_upload(
            study=study,
            upload=data.get("items_file"),
            judge=data.get("judge") or "",
            n_judged=data.get("n_judged"),
            seed=data.get("seed") or 0,
            topics=data.get("topics") or None,
            models=data.get("models") or None,
        )
        return Response(
            {"study": study.slug, "added": outcome.added, "items_total": study.items.count()},
            status=status.HTTP_201_CREATED,
        )


__all__ = ["StudyDataActionView", "StudyDataView", "StudyItemsAddView"]
