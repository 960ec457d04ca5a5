"""REST API for topics and procedures (read-only; researchers and admins)."""
from __future__ import annotations

import django_filters
from rest_framework import serializers, viewsets

from mining.models import Procedure, Split, Topic
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
