"""REST API for topics, procedures and mining runs (read: researchers and admins; a run's
controls: admins)."""
from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, viewsets

from llm.apis import RunActions, RunStateFields
from mining.models import MiningRun, Procedure, Split, Topic
from mining.run_selectors import mining_run_list, mining_run_state, mining_run_yield
from mining.run_services import mining_run_cancel, mining_run_pause, mining_run_resume, mining_run_retry_failures
from mining.selectors import procedure_list, topic_list


class TopicSerializer(serializers.ModelSerializer):
    n_procedures = serializers.IntegerField(read_only=True)
    n_bench = serializers.IntegerField(read_only=True)
    n_train = serializers.IntegerField(read_only=True)

    class Meta:
        model = Topic
        fields = ["id", "name", "slug", "n_procedures", "n_bench", "n_train"]


class ProcedureSerializer(serializers.ModelSerializer):
    topic = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    topic_name = serializers.CharField(source="topic.name", read_only=True)
    steps = serializers.ListField(child=serializers.CharField(), help_text="Ordered; step 1 first.")
    resources = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Procedure
        fields = [
            "id", "topic", "topic_name", "goal", "resources", "steps", "source_example_id",
            "source_url", "split", "provenance", "created_at", "updated_at",
        ]


class ProcedureFilter(django_filters.FilterSet):
    topic = django_filters.CharFilter(field_name="topic__slug", help_text="Topic slug, e.g. food-dining.")
    split = django_filters.ChoiceFilter(choices=Split.choices)

    class Meta:
        model = Procedure
        fields = ["topic", "split", "source_example_id"]


class TopicViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = TopicSerializer
    lookup_field = "slug"
    pagination_class = None

    def get_queryset(self):
        return topic_list()


class ProcedureViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = ProcedureSerializer
    filterset_class = ProcedureFilter
    search_fields = ["goal", "source_example_id"]
    ordering_fields = ["id", "created_at"]

    def get_queryset(self):
        return procedure_list()


class MiningRunSerializer(RunStateFields, serializers.ModelSerializer):
    """A mining run with its state (requests per outcome from the ledger) and documents."""

    corpus = serializers.SlugRelatedField(slug_field="name", read_only=True)
    documents = serializers.IntegerField(source="n_candidates", read_only=True, help_text="Documents sampled.")
    procedures = serializers.IntegerField(source="n_passed", read_only=True)
    failed_documents = serializers.IntegerField(source="n_failed", read_only=True,
                                                help_text="Documents whose stage call had no usable answer.")

    class Meta:
        model = MiningRun
        fields = ["id", "name", "corpus", "status", "outcomes", "n_failed", "top_errors", "reason", "breaker",
                  "documents", "procedures", "failed_documents", "executor", "created_by", "created_at",
                  "started_at", "finished_at"]

    def get_fields(self) -> dict[str, serializers.Field]:
        # "yield" is a Python keyword, so the field is added here rather than declared.
        fields = super().get_fields()
        fields["yield"] = serializers.SerializerMethodField(
            method_name="get_yield", help_text="Procedures / decided documents (passed or rejected by a stage): "
            "share, ci95 (95% Wilson), successes, n, interval, and left_out {in_flight, failed} (docs/mining.md, Yield).")
        return fields

    def run_state(self, run: MiningRun) -> dict[str, Any]:
        return mining_run_state(run, n_failed_documents=run.n_failed)

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_yield(self, run: MiningRun) -> dict[str, Any]:
        return mining_run_yield(run)


class MiningRunViewSet(RunActions, viewsets.ReadOnlyModelViewSet):
    """Mining runs, newest first, each with its state (docs/mining.md, "Run states");
    admins drive them as the run page does (retry-failed walks the failed documents again)."""

    serializer_class = MiningRunSerializer
    filterset_fields = ["status"]
    search_fields = ["name"]
    ordering_fields = ["id", "created_at"]
    run_noun = "mining run"
    controls = {"pause": mining_run_pause, "resume": mining_run_resume, "cancel": mining_run_cancel,
                "retry-failed": mining_run_retry_failures}

    def get_queryset(self):
        return mining_run_list()

    def run_control(self, run: MiningRun, action_name: str) -> int | None:
        return self.controls[action_name](run=run)
