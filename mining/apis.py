"""REST API for topics, procedures and mining runs (read: researchers and admins; a run's
controls: admins)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import django_filters
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_lists import ListView
from core.run_configs import RunConfigError
from llm.run_apis import RunCollection, RunFilter, RunStateFields
from llm.run_launch_apis import Launched, RunLaunchSerializer
from mining.models import MiningRun, Procedure, Split, SplitReport, Topic
from mining.run_configs import mining_config_parse

if TYPE_CHECKING:
    from mining.run_selectors import CountedRun
from mining.run_selectors import (
    mining_run_list,
    mining_run_progress,
    mining_run_state,
    mining_run_yield,
)
from mining.run_services import (
    mining_run_create,
)
from mining.selectors import (
    procedure_counts_by_topic_and_split,
    procedure_list,
    procedures_of_mining_run,
    split_report_list,
    topic_list,
)


class TopicSerializer(serializers.ModelSerializer):
    n_procedures = serializers.IntegerField(read_only=True)
    n_bench = serializers.IntegerField(read_only=True)
    n_train = serializers.IntegerField(read_only=True)

    class Meta:
        model = Topic
        fields = ["id", "name", "slug", "n_procedures", "n_bench", "n_train"]


class ProcedureSerializer(serializers.ModelSerializer):
    topic: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    topic_name = serializers.CharField(source="topic.name", read_only=True)
    steps = serializers.ListField(child=serializers.CharField(), help_text="Ordered; step 1 first.")
    resources = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Procedure
        fields = [
            "id",
            "topic",
            "topic_name",
            "goal",
            "resources",
            "steps",
            "source_example_id",
            "source_url",
            "split",
            "provenance",
            "created_at",
            "updated_at",
        ]


class ProcedureFilter(django_filters.FilterSet):
    topic = django_filters.CharFilter(field_name="topic__slug", help_text="Topic slug, e.g. food-dining.")
    split = django_filters.ChoiceFilter(choices=Split.choices)
    mining_run = django_filters.CharFilter(
        method="filter_mining_run",
        help_text="A mining run's name: every procedure its documents became (also those an earlier run stored first).",
    )

    class Meta:
        model = Procedure
        fields = ["topic", "split", "source_example_id", "mining_run"]

    def filter_mining_run(self, queryset: QuerySet[Procedure], name: str, value: str) -> QuerySet[Procedure]:
        return procedures_of_mining_run(queryset, value)


class TopicListView(ListView):
    serializer_class = TopicSerializer
    pagination_class = None

    @extend_schema(responses=TopicSerializer(many=True))
    def get(self, request: Request, format: str | None = None) -> Response:
        return self.list_response(request)

    def rows(self) -> QuerySet[Any]:
        return topic_list()


class TopicDetailView(APIView):
    @extend_schema(responses=TopicSerializer, parameters=[OpenApiParameter("slug", str, OpenApiParameter.PATH)])
    def get(self, request: Request, slug: str, format: str | None = None) -> Response:
        return Response(TopicSerializer(get_object_or_404(topic_list(), slug=slug)).data)


class ProcedureListView(ListView):
    serializer_class = ProcedureSerializer
    filterset_class = ProcedureFilter
    search_fields = ["goal", "source_example_id"]
    ordering_fields = ["id", "created_at"]

    @extend_schema(responses=ProcedureSerializer(many=True))
    def get(self, request: Request, format: str | None = None) -> Response:
        return self.list_response(request)

    def rows(self) -> QuerySet[Any]:
        return procedure_list()


class ProcedureDetailView(APIView):
    @extend_schema(
        responses=ProcedureSerializer,
        parameters=[
            OpenApiParameter(
                "id", int, OpenApiParameter.PATH, description="A unique integer value identifying this procedure."
            )
        ],
    )
    def get(self, request: Request, pk: str, format: str | None = None) -> Response:
        return Response(ProcedureSerializer(get_object_or_404(procedure_list(), pk=pk)).data)


class MiningRunSerializer(RunStateFields, serializers.ModelSerializer):
    """A mining run with its state (requests per outcome from the ledger) and documents."""

    corpus: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="name", read_only=True)
    documents = serializers.IntegerField(source="n_candidates", read_only=True, help_text="Documents sampled.")
    procedures = serializers.IntegerField(source="n_passed", read_only=True)
    failed_documents = serializers.IntegerField(
        source="n_failed", read_only=True, help_text="Documents whose stage call had no usable answer."
    )

    class Meta:
        model = MiningRun
        fields = [
            "id",
            "name",
            "corpus",
            *RunStateFields.STATE_FIELDS,
            "documents",
            "procedures",
            "failed_documents",
            "executor",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_fields(self) -> dict[str, serializers.Field]:
        # "yield" is a Python keyword, so the field is added here rather than declared.
        fields = super().get_fields()
        fields["yield"] = serializers.SerializerMethodField(
            method_name="get_yield",
            help_text="Procedures / decided documents (passed or rejected by a stage): "
            "share, ci95 (95% Wilson), successes, n, interval, and left_out {in_flight, not_asked (of a cancelled run), failed} (docs/mining.md, Yield).",
        )
        return fields

    def run_state(self, run: MiningRun) -> dict[str, Any]:
        # The runs of this viewset come from mining_run_list, with their document counts.
        return mining_run_state(run, n_failed_documents=cast("CountedRun", run).n_failed)

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_yield(self, run: MiningRun) -> dict[str, Any]:
        return mining_run_yield(cast("CountedRun", run))


class MiningRunFilter(RunFilter):
    corpus = django_filters.CharFilter(field_name="corpus__name", help_text="The corpus's name")

    class Meta:
        model = MiningRun
        fields = ["status", "corpus", "executor"]


class MiningRunLaunchSerializer(RunLaunchSerializer):
    corpus = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text=("The corpus to sample documents from (as mine_run --corpus); default: the file's corpus key"),
    )


MINING_EXAMPLE = """name: web-sample-1
corpus: web
candidates_per_topic: 20
topics: all
"""


class MiningRuns(RunCollection):
    """Mining runs, newest first, each with its state (docs/mining.md, "Run states");
    admins launch them from their YAML (``POST``) and drive them as the run page does
    (retry-failed walks the failed documents again)."""

    serializer_class = MiningRunSerializer
    filterset_class = MiningRunFilter
    launch_serializer_class = MiningRunLaunchSerializer
    launch = dict(
        kind="a mining run",
        command="manage.py mine_run --config FILE.yaml",
        example=MINING_EXAMPLE,
        description="The corpus is the file's `corpus` key or the body's `corpus` (as `--corpus`, or the launch "
        "page's choice). A name that exists is refused: the run page (or `mine_run` with the same name) "
        "changes a run's stages. A reference configuration's `inputs` (files on the server) are imported "
        "by `mine_run` only.",
    )
    search_fields = ["name"]
    ordering_fields = ["id", "created_at"]

    def get_queryset(self):
        return mining_run_list()

    def launch_runs(self, *, config_text: str, source: str, data: dict[str, Any]) -> Launched:
        corpus = data.get("corpus") or ""
        parsed = mining_config_parse(config_text, source=source)
        if (parsed.get("reference") or {}).get("inputs"):
            raise RunConfigError(
                f"{source}: inputs names files on the server; import them with mine_run on the "
                "server, or upload the corpus and launch without inputs"
            )
        return Launched(
            runs=[
                mining_run_create(
                    config_text=config_text,
                    source=source,
                    corpus_name=corpus,
                    created_by=self.request.user.get_username(),
                )
            ]
        )


class MiningRunProgressView(MiningRuns):
    """A mining run's progress."""

    @extend_schema(
        summary="Progress",
        description=(
            "The run page's figures (mining_run_progress): totals (planned, sampled, pending, finished, procedures, "
            "rejected, failed, yield with n and its 95% Wilson interval, pace, ETA and projected cost with their "
            "intervals), the funnel overall and per topic, cost per stage, stage outcomes and rejection reasons."
        ),
        responses=OpenApiTypes.OBJECT,
        filters=False,
    )
    def get(self, request: Request, pk: str, format: str | None = None) -> Response:
        return Response(mining_run_progress(self.get_object()))


class SplitReportSerializer(serializers.ModelSerializer):
    class Meta:
        model = SplitReport
        fields = [
            "id",
            "created_at",
            "embedding_model",
            "per_topic",
            "seed",
            "tau",
            "n_procedures",
            "n_bench",
            "n_train",
            "topics",
        ]


class SplitReportDetailSerializer(SplitReportSerializer):
    records = serializers.JSONField(help_text="Per bench procedure: its nearest train procedure and their cosine")
    dropped = serializers.JSONField(help_text="Per dropped candidate: its nearest neighbour and their cosine")

    class Meta(SplitReportSerializer.Meta):
        fields = [*SplitReportSerializer.Meta.fields, "records", "dropped"]


class SplitReportListView(ListView):
    """The How2Bench / How2Train splits with their similarity reports, newest first, as the
    split pages show them (a detail has every bench procedure's nearest train neighbour)."""

    serializer_class = SplitReportSerializer
    filter_backends: list[Any] = []

    @extend_schema(responses=SplitReportSerializer(many=True))
    def get(self, request: Request, format: str | None = None) -> Response:
        return self.list_response(request)

    def rows(self) -> QuerySet[Any]:
        return split_report_list()


class SplitReportDetailView(APIView):
    """The How2Bench / How2Train splits with their similarity reports, newest first, as the
    split pages show them (a detail has every bench procedure's nearest train neighbour)."""

    @extend_schema(
        responses=SplitReportDetailSerializer,
        parameters=[
            OpenApiParameter(
                "id", int, OpenApiParameter.PATH, description="A unique integer value identifying this split report."
            )
        ],
    )
    def get(self, request: Request, pk: str, format: str | None = None) -> Response:
        return Response(SplitReportDetailSerializer(get_object_or_404(split_report_list(), pk=pk)).data)


class MiningOverviewView(APIView):
    """The home page's overview: procedures per topic and split, and the totals."""

    @extend_schema(
        summary="Procedures per topic and split",
        responses=OpenApiTypes.OBJECT,
        description=(
            "The overview page's table: one row per topic (topic, slug, bench, train, constrained, none, total) and "
            "the totals row."
        ),
    )
    def get(self, request: Request, format: str | None = None) -> Response:
        rows = procedure_counts_by_topic_and_split()
        totals = {key: sum(row[key] for row in rows) for key in ("bench", "train", "constrained", "none", "total")}
        return Response({"rows": rows, "totals": totals})
