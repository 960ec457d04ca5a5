"""REST API of a study's contents: items, annotations and the export (docs/api.md; the
participants are in participant_apis.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import django_filters
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.negotiation import BaseContentNegotiation, DefaultContentNegotiation
from rest_framework.views import APIView

from annotate import constants as C
from annotate.kinds import kind_get, kind_list
from annotate.kinds.base import ROLE_MAIN, StudyKind
from annotate.kinds.columns import AnswerFilter, AnswerRecord
from annotate.models import Annotation, ItemRole, Study, StudyItem
from annotate.participation.flags import FLAGS
from annotate.studies import kind_schema  # the kinds' parts of the schema
from annotate.studies.api_fields import (
    EXPORT_FORMATS,
    INCLUDE_TEST,
    KIND_NOT_INSTALLED,
    IncludeTestQuery,
    IntegerFilter,
    StrictBooleanFilter,
    error_responses,
    include_test,
)
from annotate.studies.api_selectors import study_annotation_api_list, study_item_api_list
from annotate.studies.exports import annotation_csv_lines, annotation_export_rows
from annotate.studies.selectors import study_get
from core.api_lists import UtcIsoDateTimeFilter
from core.query_params import QueryChoice, query_params_clean

if TYPE_CHECKING:
    from annotate.studies.api_selectors import CountedItem

# -- items and annotations -------------------------------------------------------------------

FLAG_NONE = "none"  # the annotations filter's value for "no flag"


class StudyScoped:
    """A list under /api/studies/{slug}/: the study is looked up once (404 when unknown)."""

    kwargs: Any  # the URL's arguments, set by the API view this mixes into
    _study: Study

    def study(self) -> Study:
        if not hasattr(self, "_study"):
            self._study = study_get(slug=self.kwargs["slug"])
        return self._study


class ItemFilter(django_filters.FilterSet):
    role = django_filters.ChoiceFilter(choices=ItemRole.choices, help_text="main, attention or qualification")
    done = StrictBooleanFilter(
        method="filter_done",
        help_text=("true: main-pool items with k slots filled; false: main-pool items still short of k"),
    )
    item_id = django_filters.CharFilter(max_length=200)

    class Meta:
        model = StudyItem
        fields = ["role", "done", "item_id"]

    def filter_done(self, queryset, name, value):
        k = self.request.parser_context["view"].study().annotators_per_item
        queryset = queryset.filter(role=ROLE_MAIN)
        done = StrictBooleanFilter.VALUES[value]
        return queryset.filter(n_filled__gte=k) if done else queryset.filter(n_filled__lt=k)


class StudyItemSerializer(serializers.ModelSerializer):
    n_annotations = serializers.IntegerField(
        help_text="Submitted annotations of the item (excluded and surplus included)"
    )
    n_filled = serializers.IntegerField(help_text="Main pool: slots filled toward k (not surplus)")
    n_broken = serializers.IntegerField(
        help_text="Annotations flagged 'This item is broken' (a slot filled, no label: left out of agreement)"
    )
    n_unsure = serializers.IntegerField(help_text="Annotations flagged 'I'm unsure' (counted as any other)")
    n_reserved = serializers.IntegerField(help_text="Reservations held now")
    k = serializers.SerializerMethodField()
    done = serializers.SerializerMethodField(help_text="Main pool: k slots filled; null for check and gold items")
    # The item's known answer is added under its kind's column (``to_representation``; the
    # schema lists every registered kind's: annotate/studies/kind_schema.py).

    class Meta:
        model = StudyItem
        fields = [
            "item_id",
            "role",
            "position",
            "topic",
            "goal",
            "reference_steps",
            "candidate_steps",
            "explanation",
            "source",
            "l1_hash",
            "l2_hash",
            "n_annotations",
            "n_filled",
            "n_broken",
            "n_unsure",
            "n_reserved",
            "k",
            "done",
        ]

    @extend_schema_field(OpenApiTypes.INT)
    def get_k(self, item: StudyItem) -> int:
        return self.context["k"]

    @extend_schema_field(serializers.BooleanField(allow_null=True))
    def get_done(self, item: CountedItem) -> bool | None:  # an item of ``study_item_api_list``
        return item.n_filled >= self.context["k"] if item.role == ROLE_MAIN else None

    def to_representation(self, instance: StudyItem) -> dict[str, Any]:
        """The shared fields, then the item's known answer under its kind's column."""
        data: dict[str, Any] = super().to_representation(instance)
        data.update(self.context["kind"].known_answer_cells(instance.expected))
        return data


class StudyItemListView(StudyScoped, generics.ListAPIView):
    serializer_class = StudyItemSerializer
    filterset_class = ItemFilter
    search_fields = ["item_id", "goal", "topic"]
    ordering_fields = ["position", "item_id"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no study
            return StudyItem.objects.none()
        return study_item_api_list(self.study(), include_test=include_test(self.request))

    def get_serializer_context(self):
        return {
            **super().get_serializer_context(),
            "k": self.study().annotators_per_item,
            "kind": kind_get(self.study().kind),
        }

    @extend_schema(
        summary="A study's items",
        parameters=[
            INCLUDE_TEST,
            OpenApiParameter(
                "done",
                {"type": "string", "enum": list(StrictBooleanFilter.VALUES)},
                description="true: main items with k slots filled; false: those without; also 1/0, yes/no",
            ),
        ],
        description="Items (role, then position) with their annotations counted against k. Filters: "
        "role, done (main-pool items with / without k slots filled), item_id; search: "
        "item_id, goal or topic.",
        responses={
            200: StudyItemSerializer(many=True),
            **error_responses(_404="No study with this slug", _503=KIND_NOT_INSTALLED),
        },
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


# The filters whose schema django-filter's own does not say: whole numbers within bounds, and the
# words a true/false filter takes (drf-spectacular read ``excluded`` as a boolean of strings).
ANNOTATION_FILTER_PARAMETERS = [
    OpenApiParameter(
        "participant",
        {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
        description="The participant's id (as /participants/ lists them)",
    ),
    OpenApiParameter(
        "excluded",
        {"type": "string", "enum": list(StrictBooleanFilter.VALUES)},
        description="true: only excluded annotations; false: only those not excluded (surplus ones among them, "
        "marked surplus, do not count either); also 1/0, yes/no",
    ),
]


class AnnotationFilter(django_filters.FilterSet):
    item = django_filters.CharFilter(field_name="item__item_id", max_length=200, help_text="The item's item_id")
    participant = IntegerFilter(
        field_name="participation_id",
        min_value=1,
        max_value=2**63 - 1,
        help_text="The participant's id (as /participants/ lists them)",
    )
    annotator = django_filters.CharFilter(
        field_name="annotator__pid",
        lookup_expr="iexact",
        max_length=C.PID_MAX_LENGTH,
        help_text="The annotator's PROLIFIC_PID (any case)",
    )
    source = django_filters.ChoiceFilter(choices=ItemRole.choices, help_text="main, attention or qualification")
    excluded = StrictBooleanFilter(
        help_text="true: only excluded annotations; false: only those not excluded (surplus ones among them, "
        "marked surplus, do not count either)"
    )
    flag = django_filters.ChoiceFilter(
        choices=[(FLAG_NONE, "no flag"), *FLAGS.items()],
        method="filter_flag",
        help_text="broken, unsure, or none (no flag)",
    )
    submitted_after = UtcIsoDateTimeFilter(
        field_name="submitted_at", lookup_expr="gte", help_text="ISO 8601, inclusive"
    )
    submitted_before = UtcIsoDateTimeFilter(
        field_name="submitted_at", lookup_expr="lt", help_text="ISO 8601, exclusive"
    )

    class Meta:
        model = Annotation
        fields = [
            "item",
            "participant",
            "annotator",
            "source",
            "excluded",
            "flag",
            "submitted_after",
            "submitted_before",
        ]

    def filter_flag(self, queryset, name, value):
        return queryset.filter(flag="" if value == FLAG_NONE else value)


def _kind_filter(answer_filter: AnswerFilter, *, own: bool) -> django_filters.Filter:
    """A kind's filter of the annotations API: a word of its enum, or a whole number within its
    bounds (anything else a 400 naming it), selecting what its ``lookups`` say in a study of
    its kind, and nothing in a study of another (whose answers have no such field: as a
    ``choice`` asked of a critical-failure study always selected none)."""

    def select(queryset: QuerySet[Annotation], name: str, value: Any) -> QuerySet[Annotation]:
        return queryset.filter(**answer_filter.lookups(value)) if own else queryset.none()

    schema = answer_filter.schema
    if "enum" in schema:
        return django_filters.ChoiceFilter(
            choices=[(word, word) for word in schema["enum"]], method=select, help_text=answer_filter.description
        )
    return IntegerFilter(
        method=select,
        min_value=schema.get("minimum"),
        max_value=schema.get("maximum"),
        help_text=answer_filter.description,
    )


def annotation_filter_of(kind: StudyKind) -> type[AnnotationFilter]:
    """The annotations API's filters for a study of ``kind``: the shared ones, the kind's own,
    and every other registered kind's (its value checked as that kind declares it, the first
    that declares the name; selecting nothing)."""
    filters = {f.name: _kind_filter(f, own=True) for f in kind.api_filters}
    for other in kind_list():
        for answer_filter in other.api_filters:
            if answer_filter.name not in filters:
                filters[answer_filter.name] = _kind_filter(answer_filter, own=False)
    return type("KindAnnotationFilter", (AnnotationFilter,), filters)


def annotation_filter_for_schema() -> type[AnnotationFilter]:
    """The filters the schema documents: the shared ones and every registered kind's, each
    typed and described as its kinds declare it (annotate/studies/kind_schema.py)."""
    documented = {
        name: extend_schema_field(schema)(django_filters.CharFilter())
        for name, schema in kind_schema.api_filter_schemas().items()
    }
    return type("AnyKindAnnotationFilter", (AnnotationFilter,), documented)


class AnnotationSerializer(serializers.ModelSerializer):
    """An annotation with the export's names (annotate/studies/exports.py EXPORT_FIELDS)."""

    item_id = serializers.CharField(source="item.item_id")
    annotator = serializers.CharField(source="annotator.pid")
    participant = serializers.IntegerField(source="participation_id")
    # A declared field: DRF's serializer metaclass takes it off the class, so it does not replace
    # Field.label (the stubs cannot say so).
    label = serializers.CharField(  # type: ignore[assignment]
        help_text="The answer in one line as its study's kind summarizes it (has_failure / no_failure, "
        "'choice N', 'rating 4', ...), or 'flagged broken'"
    )

    class Meta:
        model = Annotation
        fields = [
            "id",
            "item_id",
            "annotator",
            "participant",
            "source",
            "label",
            "comments",
            "answer",
            "guideline_version",
            "submitted_at",
            "first_served_at",
            "wall_seconds",
            "active_seconds",
            "surplus",
            "late",
            "correct",
            "excluded",
            "exclusion_reason",
            "flag",
            "flag_reason",
            "flag_note",
            "review",
            "reviewed_at",
            "submitted_answer",
            "is_test",
            "l1_hash",
            "l2_hash",
            "interface_version",
        ]
        # Then the fields of its study's kind (``to_representation``; the schema lists every
        # registered kind's: annotate/studies/kind_schema.py).

    def to_representation(self, instance: Annotation) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        record = AnswerRecord(
            answer=instance.answer if isinstance(instance.answer, dict) else {},
            has_failure=instance.has_failure,
            failures=instance.failures,
            broken=instance.broken,
        )
        data.update(self.context["kind"].api_cells(record))
        return data


class StudyAnnotationListView(StudyScoped, generics.ListAPIView):
    serializer_class = AnnotationSerializer
    ordering_fields = ["submitted_at", "id"]

    @property
    def filterset_class(self) -> type[AnnotationFilter]:
        """The shared filters and those of the study's kind (the schema generator, which has no
        study: every registered kind's)."""
        if getattr(self, "swagger_fake_view", False):
            return annotation_filter_for_schema()
        return annotation_filter_of(kind_get(self.study().kind))

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no study
            return Annotation.objects.none()
        return study_annotation_api_list(self.study(), include_test=include_test(self.request))

    def get_serializer_context(self):
        if getattr(self, "swagger_fake_view", False):
            return super().get_serializer_context()
        return {**super().get_serializer_context(), "kind": kind_get(self.study().kind)}

    @extend_schema(
        summary="A study's annotations",
        parameters=[INCLUDE_TEST, *ANNOTATION_FILTER_PARAMETERS],
        description="Every submitted annotation, oldest first (excluded ones included and marked), with "
        "the fields its study's kind declares after the shared ones. Filters: item (item_id), participant "
        "(id), annotator (PID), source, excluded, flag, submitted_after / submitted_before (ISO 8601), and "
        "those the study kinds declare (each says its kinds; another kind's selects nothing).",
        responses={
            200: AnnotationSerializer(many=True),
            **error_responses(_404="No study with this slug", _503=KIND_NOT_INSTALLED),
        },
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


# -- the export ------------------------------------------------------------------------------


class FormatFreeNegotiation(BaseContentNegotiation):
    """The export reads ``?format=`` itself (jsonl or csv), so DRF's format override must not
    claim it: errors are JSON, the export a stream."""

    def select_parser(self, request, parsers):
        return DefaultContentNegotiation().select_parser(request, parsers)

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ExportQuerySerializer(IncludeTestQuery):
    format = QueryChoice(
        choices=EXPORT_FORMATS,
        required=False,
        default="jsonl",
        help_text="jsonl (default): export_annotations' lines; csv: the same fields",
    )


class StudyExportView(APIView):
    content_negotiation_class = FormatFreeNegotiation

    @extend_schema(
        summary="Export a study's annotations",
        description="Every annotation with its provenance, streamed: JSONL, byte for byte what "
        "`manage.py export_annotations --study SLUG` writes (with include_test: what "
        "`--include-test` writes), or CSV with the same fields (list cells as JSON; no cell "
        "starts a formula). Test participants' annotations only with include_test.",
        parameters=[ExportQuerySerializer],
        responses={
            (200, "application/x-ndjson"): OpenApiTypes.STR,
            (200, "text/csv"): OpenApiTypes.STR,
            **error_responses(_400="{format: [problem]}", _404="No study with this slug", _503=KIND_NOT_INSTALLED),
        },
    )
    def get(self, request, slug: str):
        query = query_params_clean(ExportQuerySerializer, request.query_params)
        fmt = query["format"]
        study = study_get(slug=slug)
        rows = annotation_export_rows(study, include_test=query["include_test"])
        if fmt == "csv":
            response = StreamingHttpResponse(annotation_csv_lines(rows), content_type="text/csv; charset=utf-8")
        else:
            response = StreamingHttpResponse(
                ((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8") for r in rows),
                content_type="application/x-ndjson; charset=utf-8",
            )
        response["Content-Disposition"] = f'attachment; filename="{study.slug}-annotations.{fmt}"'
        return response
