"""REST API of studies (researchers and admins; token or session): list and create (from an
uploaded items file or from judged generations), imports, detail with progress, settings and
pilot rounds. Every write calls the service the study pages call (annotate/studies/services.py,
annotate/studies/imports.py); every read a selector (annotate/studies/api_selectors.py,
annotate/studies/selectors.py, round_selectors.py). docs/api.md shows them by task."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, cast

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate import constants as C
from annotate.errors import AnnotateError
from annotate.models import Study, StudyImport
from annotate.stats.alpha import ALPHA_KEYS
from annotate.studies.api_fields import (
    INSTRUCTIONS_MAX_CHARS,
    KIND_NOT_INSTALLED,
    Pattern,
    Text,
    error_responses,
)
from annotate.studies.api_selectors import study_api_list
from annotate.studies.api_serializers import StudyDetailSerializer, StudyFilter, StudySerializer, study_detail_data
from annotate.studies.create_serializers import (
    CREATE_FROM_FILE,
    CREATE_FROM_JUDGE,
    CREATE_FROM_JUDGE_RUN,
    StudyCreateFormSerializer,
    StudyCreateSerializer,
    StudyImportSerializer,
)
from annotate.studies.imports import study_create_from_upload, study_imports_settle_stalled, upload_problem_lines
from annotate.studies.round_selectors import study_round_summaries
from annotate.studies.selectors import study_get
from annotate.studies.services import study_round_create, study_update
from core.api_schema import ApiErrorSerializer
from core.app_errors import InvalidInput
from core.parsers import StrictJSONParser
from core.record_files import RecordError
from core.roles import is_researcher
from core.serializer_fields import FormNullDecimalField, StrictBooleanField


class StudyListCreateView(generics.ListAPIView):
    """Studies, newest first, with their progress toward k; POST creates one."""

    serializer_class = StudySerializer
    filterset_class = StudyFilter
    search_fields = ["name", "slug"]
    ordering_fields = ["created_at", "name"]
    parser_classes = [StrictJSONParser, MultiPartParser, FormParser]
    upload_check = staticmethod(is_researcher)  # an items file up to UPLOAD_MAX_BYTES (core/request_bodies.py)

    def get_queryset(self):
        return study_api_list()

    @extend_schema(
        summary="List studies",
        description="Studies with their progress: main items, k, annotations, "
        "slots filled toward k and coverage (with n and a 95% Wilson interval). Filters: kind, status "
        "(open/closed), search (name or slug).",
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        summary="Create a study",
        description=(
            "From an uploaded items file (multipart/form-data, field items_file: the New study page's "
            "formats, limits and checks), from judged generations (judge, n_judged, seed: as "
            "`manage.py create_study --from-judge --sample --seed`; judge_runs, topics and models narrow "
            "the pool the sample is drawn from), or both. A bad file is a 400 whose "
            "items_file lists each problem with file, line and field; nothing is created. A file too large "
            "to read in the request is handed to a worker: 202 with the import to follow."
        ),
        request={"application/json": StudyCreateSerializer, "multipart/form-data": StudyCreateFormSerializer},
        responses={
            201: OpenApiResponse(StudyDetailSerializer, description="The new study"),
            202: OpenApiResponse(StudyImportSerializer, description="A worker creates the study"),
            400: OpenApiResponse(OpenApiTypes.OBJECT, description="{field: [problems]}; nothing was created"),
            401: OpenApiResponse(ApiErrorSerializer, description="Not logged in"),
            403: OpenApiResponse(ApiErrorSerializer, description="The researcher or admin role is needed"),
        },
        examples=[CREATE_FROM_JUDGE, CREATE_FROM_JUDGE_RUN, CREATE_FROM_FILE],
    )
    def post(self, request, *args, **kwargs):
        serializer = StudyCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        options = serializer.options()
        upload = serializer.validated_data.get("items_file")
        try:
            outcome = study_create_from_upload(options=options, upload=upload, created_by=request.user)
        except RecordError as exc:
            problems = upload_problem_lines(exc, upload.name)
            raise InvalidInput("The items file has bad lines; nothing was created.", {"items_file": problems}) from None
        except AnnotateError as exc:
            if not exc.errors:  # the sampled generations and the file clash, or the judge gave nothing
                field = "judge" if exc.message.startswith("The judge") else "items_file"
                raise InvalidInput(exc.message + " Nothing was created.", {field: exc.message}, code=exc.code) from None
            raise  # its field problems, answered by the API's exception handler
        if outcome.job is not None:  # too large for the request: a worker creates the study
            return Response(
                StudyImportSerializer(outcome.job, context={"request": request}).data,
                status=status.HTTP_202_ACCEPTED,
            )
        assert outcome.study is not None
        study = study_get(slug=outcome.study.slug)
        return Response(study_detail_data(study, request), status=status.HTTP_201_CREATED)


class StudyImportView(APIView):
    @extend_schema(
        summary="A study import's status",
        description="queued, running, then done (with its study) or failed (with every file-line-field "
        "problem; nothing was created).",
        responses={200: StudyImportSerializer, **error_responses(_404="No such import")},
    )
    def get(self, request, pk: int):
        study_imports_settle_stalled()  # a killed worker's import says so here too
        job = get_object_or_404(StudyImport.objects.select_related("study"), pk=pk)
        return Response(StudyImportSerializer(job, context={"request": request}).data)


class StudySettingsSerializer(serializers.Serializer):
    """The settings the study page edits; a field left out is left as it is."""

    unknown_keys_refused = True  # validate() names each unknown key (the schema: additionalProperties false)

    is_open = StrictBooleanField(required=False, help_text="Open to new annotators")
    payment_per_item = FormNullDecimalField(
        required=False,
        allow_null=True,
        max_digits=8,
        decimal_places=2,
        min_value=Decimal(0),
        help_text="USD per item; null clears it",
    )
    min_annotations_for_majority = serializers.IntegerField(
        required=False, min_value=C.MIN_ANNOTATIONS_FOR_MAJORITY_MIN, max_value=C.MIN_ANNOTATIONS_FOR_MAJORITY_MAX
    )
    prolific_study_id = Pattern(
        C.PROLIFIC_STUDY_ID_PATTERN,
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="Empty: any STUDY_ID may enter",
    )
    allow_other_pids = StrictBooleanField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(self.initial_data, dict):
            raise serializers.ValidationError({"body": ["expected a JSON object of settings"]})
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {name: [f"not a setting the study page edits (editable: {', '.join(self.fields)})"] for name in unknown}
            )
        return attrs


class StudyDetailView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        summary="A study with its progress",
        description="Settings, entry URL and codes, items by role, and progress: items complete / in "
        "progress / open, items by slots filled (annotations vs k), coverage, participants "
        "by state, median times, implied pay, attention-check and qualification pass rates "
        "with n and 95% Wilson intervals (the study page's numbers).",
        responses={200: StudyDetailSerializer, **error_responses(_404="No study with this slug")},
    )
    def get(self, request, slug: str):
        return Response(study_detail_data(study_get(slug=slug), request))

    @extend_schema(
        summary="Edit a study's settings",
        description="The study page's settings, with its rules: is_open, payment_per_item (null clears "
        "it), min_annotations_for_majority (2 or more; analysis only), prolific_study_id, "
        "allow_other_pids. Other fields are refused by name.",
        request=StudySettingsSerializer,
        responses={
            200: StudyDetailSerializer,
            **error_responses(_400="{field: [problem]}; nothing was changed", _404="No study with this slug"),
        },
        examples=[
            OpenApiExample(
                "Close and set the pay", request_only=True, value={"is_open": False, "payment_per_item": "0.30"}
            )
        ],
    )
    def patch(self, request, slug: str):
        study = study_get(slug=slug)
        serializer = StudySettingsSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        study_update(
            study=study,
            is_open=data.get("is_open"),
            payment_per_item=data.get("payment_per_item"),
            clear_payment="payment_per_item" in data and data["payment_per_item"] is None,
            min_annotations_for_majority=data.get("min_annotations_for_majority"),
            prolific_study_id=data.get("prolific_study_id"),
            allow_other_pids=data.get("allow_other_pids"),
        )
        return Response(study_detail_data(study_get(slug=slug), request))


# -- pilot rounds ----------------------------------------------------------------------------


class RoundSerializer(serializers.Serializer):
    round = serializers.IntegerField()
    slug = serializers.CharField()
    name = serializers.CharField()
    guideline_version = serializers.CharField()
    n_annotations = serializers.IntegerField(
        help_text="Counted annotations of the round (not excluded, not surplus, not flagged broken): the agreement "
        "report's n_annotations"
    )
    n_excluded = serializers.IntegerField(
        help_text="Excluded annotations (excluded annotators, qualification and attention-check answers), as the "
        "agreement report counts them"
    )
    n_surplus = serializers.IntegerField(
        help_text="Surplus annotations (a late submit into an item that already had its k counted annotations; "
        "excluded ones are counted in n_excluded only), left out of alpha as the excluded ones are"
    )
    n_broken = serializers.IntegerField(
        help_text="Annotations their annotators flagged 'This item is broken' (no label; neither excluded nor "
        "surplus), left out of alpha as the excluded ones are (docs/annotation.md, 'Flags')"
    )
    n_unsure = serializers.IntegerField(
        help_text="Counted annotations flagged 'I'm unsure': they count, and stay in alpha"
    )
    alpha = serializers.FloatField(allow_null=True, help_text="Krippendorff's alpha of the kind's label")
    alpha_ci95 = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        required=False,
        help_text="95% BCa bootstrap interval over the alpha_n items (Efron 1987); null when alpha is undefined or "
        "the interval is not estimable (alpha_ci95_not_estimable)",
    )
    alpha_n = serializers.IntegerField(
        allow_null=True, required=False, help_text="Items with two or more counted annotations (alpha's n)"
    )
    alpha_ci95_not_estimable = serializers.CharField(
        allow_null=True,
        required=False,
        help_text="'interval not estimable (n = N): ...' when every bootstrap resample gives the same alpha "
        "(too few items to vary): alpha_ci95 is null instead of a zero-width interval",
    )
    alpha_interval = serializers.DictField(
        allow_null=True,
        required=False,
        help_text="The interval's method: interval (key of GET /api/interval-methods/), interval_name (BCa "
        "bootstrap over items) and approximate (true below the n where the coverage harness found it under target)",
    )
    alpha_small_sample = serializers.CharField(
        allow_null=True,
        required=False,
        help_text="The small-sample note (fewer than 30 items or an interval wider than 0.3), or null",
    )
    alpha_undefined = serializers.CharField(allow_null=True, required=False, help_text="Why alpha is undefined")
    as_of = serializers.DateTimeField(
        allow_null=True, required=False, help_text="Shown from a computation at this time (a slow round)"
    )
    n_new = serializers.IntegerField(allow_null=True, required=False, help_text="Annotations since as_of")


def round_rows(study: Study) -> list[dict[str, Any]]:
    rows = []
    for summary in study_round_summaries(study):
        r = summary["study"]
        rows.append(
            {
                "round": r.round,
                "slug": r.slug,
                "name": r.name,
                "guideline_version": r.guideline_version.label,
                **{
                    key: summary.get(key)
                    for key in (
                        "n_annotations",
                        "n_excluded",
                        "n_surplus",
                        "n_broken",
                        "n_unsure",
                        *ALPHA_KEYS,
                        "as_of",
                        "n_new",
                    )
                },
            }
        )
    # many=True gives a ReturnList of the rows (the stubs type .data as a ReturnDict).
    return cast("list[dict[str, Any]]", RoundSerializer(rows, many=True).data)


class RoundCreateSerializer(serializers.Serializer):
    instructions = Text(
        max_length=INSTRUCTIONS_MAX_CHARS,
        trim_whitespace=False,
        help_text="The guidelines of the new round (a new version: annotators qualify again)",
    )

    def validate_instructions(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("the new round needs guidelines")
        return value


class StudyRoundsView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        summary="A study's pilot rounds",
        description="Every round of the study's family with its annotations, exclusions and "
        "Krippendorff's alpha with its n, 95% interval (or why it is not estimable) and small-sample "
        "note, as the study page shows them.",
        responses={
            200: RoundSerializer(many=True),
            **error_responses(_404="No study with this slug", _503=KIND_NOT_INSTALLED),
        },
    )
    def get(self, request, slug: str):
        return Response(round_rows(study_get(slug=slug)))

    @extend_schema(
        summary="Start a new pilot round",
        description="The same items and settings under new guidelines, as the study page's 'Start a new round' does.",
        request=RoundCreateSerializer,
        responses={
            201: StudyDetailSerializer,
            **error_responses(
                _400="{instructions: [problem]}", _404="No study with this slug", _503=KIND_NOT_INSTALLED
            ),
        },
        examples=[
            OpenApiExample(
                "Revised guidelines",
                request_only=True,
                value={"instructions": "Round two: a failure must name the step."},
            )
        ],
    )
    def post(self, request, slug: str):
        study = study_get(slug=slug)
        serializer = RoundCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        new = study_round_create(
            study=study, instructions=serializer.validated_data["instructions"], created_by=request.user
        )
        return Response(study_detail_data(study_get(slug=new.slug), request), status=status.HTTP_201_CREATED)
