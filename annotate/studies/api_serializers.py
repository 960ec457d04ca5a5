"""Serializers of the studies API: a study's detail and progress, the list and its filter (the
creation input and imports are in create_serializers.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import django_filters
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotate.kinds import kind_choices_fresh
from annotate.links import prolific_entry_url
from annotate.models import Study
from annotate.participation.allocation_selectors import study_allocation
from annotate.studies.api_fields import (
    STATUS_CLOSED,
    STATUS_OPEN,
)
from annotate.studies.api_selectors import study_api_progress, study_coverage

if TYPE_CHECKING:
    from annotate.studies.api_selectors import CountedStudy
from annotate.studies.selectors import study_item_counts

# -- one study: detail and settings ----------------------------------------------------------


class StudyProgressSerializer(serializers.Serializer):
    k = serializers.IntegerField()
    items_total = serializers.IntegerField(help_text="Main-pool items")
    items_complete = serializers.IntegerField(help_text="Items with k slots filled")
    items_in_progress = serializers.IntegerField(
        help_text="Items below k with a filled slot or a live reservation; once the study is closed, only those "
        "with a live reservation (someone already in the study can still submit): the others are items_incomplete"
    )
    items_incomplete = serializers.IntegerField(
        help_text="Items of a closed study left below k: a filled slot, no live reservation, and no new annotator "
        "can join to fill them (0 while the study is open)"
    )
    items_open = serializers.IntegerField(
        help_text="Items with no filled slot and no live reservation "
        "(items_complete + items_in_progress + items_incomplete + items_open = items_total)"
    )
    items_by_annotations = serializers.DictField(
        child=serializers.IntegerField(), help_text="Main items by slots filled: {'0': n, ..., 'k': n}"
    )
    coverage = serializers.DictField(help_text="Filled slots / (items × k): slots, slots_filled, share, ci95, n")
    annotations_main = serializers.IntegerField()
    annotations_excluded = serializers.IntegerField()
    annotations_surplus = serializers.IntegerField()
    annotations_broken = serializers.IntegerField(
        help_text="Main-pool annotations flagged 'This item is broken' by their annotator: left out of every "
        "counted number and statistic"
    )
    annotations_unsure = serializers.IntegerField(
        help_text="Main-pool annotations flagged 'I'm unsure': counted as any other answer"
    )
    n_counted_annotations = serializers.IntegerField(
        help_text="Main-pool annotations that count: not excluded, not surplus and not flagged broken (as in the "
        "agreement report)"
    )
    live_reservations = serializers.IntegerField()
    live_annotators = serializers.IntegerField()
    participants = serializers.IntegerField()
    states = serializers.DictField(child=serializers.IntegerField(), help_text="Participants by state")
    test_participants = serializers.IntegerField(help_text="Test participants (left out of every other number)")
    median_active_seconds = serializers.FloatField(allow_null=True, help_text="Over the n_counted_annotations")
    median_wall_seconds = serializers.FloatField(allow_null=True)
    hourly_pay = serializers.FloatField(allow_null=True, help_text="payment_per_item × 3600 / median active seconds")
    paper_hourly_rate = serializers.FloatField()
    attention_checks = serializers.DictField(help_text="Attention checks passed: share, ci95 (Wilson), successes, n")
    qualification = serializers.DictField(help_text="Qualification tests passed: share, ci95 (Wilson), successes, n")
    attention_total = serializers.IntegerField()
    attention_pass_rate = serializers.FloatField(allow_null=True)
    qualification_total = serializers.IntegerField()
    qualification_pass_rate = serializers.FloatField(allow_null=True)


class StudyAllocationSerializer(serializers.Serializer):
    """Where the study stands under its allocation policy (annotate/participation/allocation_selectors.py,
    ``study_allocation``)."""

    policy = serializers.CharField()
    policy_label = serializers.CharField()
    min_annotators_per_item = serializers.IntegerField()
    max_annotators_per_item = serializers.IntegerField()
    n_items = serializers.IntegerField(help_text="Main-pool items")
    n_items_decided = serializers.IntegerField(help_text="Items that need no further annotation")
    n_items_labelled = serializers.IntegerField(help_text="Decided items with a human majority and a judge label")
    n_annotations = serializers.IntegerField(help_text="Counted main-pool annotations (the labels used)")
    n_annotations_submitted = serializers.IntegerField(help_text="Main-pool slots filled (counted or not)")
    annotations_per_decided_item = serializers.FloatField(allow_null=True)
    estimate = serializers.FloatField(allow_null=True, help_text="PPI++ How2Score of the study's items, 0-1")
    estimate_percent = serializers.FloatField(allow_null=True)
    ci95 = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    ci95_percent = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    interval_width = serializers.FloatField(allow_null=True)
    interval_width_percent = serializers.FloatField(allow_null=True)
    interval_not_estimable = serializers.CharField(allow_null=True)
    interval_name = serializers.CharField()
    interval_unsettled = serializers.CharField(
        allow_null=True, help_text="Why the interval cannot stop the study yet (null: it can)"
    )
    target_interval_width = serializers.FloatField(allow_null=True)
    target_interval_width_percent = serializers.FloatField(allow_null=True)
    target_reached = serializers.BooleanField()
    target_reached_at = serializers.DateTimeField(allow_null=True)


class StudyDetailSerializer(serializers.Serializer):
    """One study: its settings, entry link and codes, progress, items by role."""

    slug = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.CharField(help_text="open or closed")
    is_open = serializers.BooleanField()
    round = serializers.IntegerField()
    first_round = serializers.CharField(allow_null=True, help_text="Slug of the first round (null: this is it)")
    guideline_version = serializers.CharField()
    entry_url = serializers.CharField(help_text="The study URL to paste into Prolific")
    completion_code = serializers.CharField()
    screened_out_code = serializers.CharField()
    annotators_per_item = serializers.IntegerField()
    min_seconds = serializers.IntegerField()
    lease_minutes = serializers.IntegerField()
    training_enabled = serializers.BooleanField()
    qualification_enabled = serializers.BooleanField()
    qualification_pass = serializers.IntegerField()
    attention_check_rate = serializers.FloatField()
    attention_max_failures = serializers.IntegerField()
    max_items_per_annotator = serializers.IntegerField(allow_null=True)
    items_per_page = serializers.IntegerField()
    payment_per_item = serializers.DecimalField(max_digits=8, decimal_places=2, allow_null=True)
    min_annotations_for_majority = serializers.IntegerField()
    prolific_study_id = serializers.CharField(allow_blank=True)
    allow_other_pids = serializers.BooleanField()
    allocation_policy = serializers.CharField(help_text="fixed, dynamic or active (docs/annotation.md)")
    max_annotators_per_item = serializers.IntegerField(
        allow_null=True, help_text="Dynamic k's most annotators per item (null under fixed k)"
    )
    target_interval_width = serializers.FloatField(
        allow_null=True, help_text="The PPI++ How2Score interval width (0-1) at which the study stops"
    )
    created_at = serializers.DateTimeField()
    item_counts = serializers.DictField(child=serializers.IntegerField(), help_text="Items by role")
    progress = StudyProgressSerializer()
    allocation = StudyAllocationSerializer()


STUDY_SETTING_FIELDS = (
    "annotators_per_item",
    "min_seconds",
    "lease_minutes",
    "training_enabled",
    "qualification_enabled",
    "qualification_pass",
    "attention_check_rate",
    "attention_max_failures",
    "max_items_per_annotator",
    "items_per_page",
    "payment_per_item",
    "min_annotations_for_majority",
    "prolific_study_id",
    "allow_other_pids",
    "allocation_policy",
    "max_annotators_per_item",
    "target_interval_width",
    "completion_code",
    "screened_out_code",
    "is_open",
)


def study_detail_data(study: Study, request) -> dict[str, Any]:
    data = {name: getattr(study, name) for name in STUDY_SETTING_FIELDS}
    data.update(
        {
            "slug": study.slug,
            "name": study.name,
            "kind": study.kind,
            "round": study.round,
            "status": STATUS_OPEN if study.is_open else STATUS_CLOSED,
            "first_round": study.first_round.slug if study.first_round else None,
            "guideline_version": study.guideline_version.label,
            "entry_url": prolific_entry_url(request.build_absolute_uri("/"), study.slug),
            "created_at": study.created_at,
            "item_counts": study_item_counts(study),
            "progress": study_api_progress(study),
            "allocation": study_allocation(study),
        }
    )
    return StudyDetailSerializer(data).data


# -- studies: list and create ----------------------------------------------------------------


class StudyProgressBriefSerializer(serializers.Serializer):
    items = serializers.IntegerField(help_text="Main-pool items (attention and qualification items are not counted).")
    k = serializers.IntegerField(help_text="Annotators per item.")
    annotations = serializers.IntegerField(help_text="Main-pool annotations, excluded and surplus ones included.")
    annotations_done = serializers.IntegerField(
        help_text="Slots filled toward k: main-pool annotations that are not surplus."
    )
    participants = serializers.IntegerField()
    coverage = serializers.DictField(
        help_text="Filled slots over items × k: slots, slots_filled, share, ci95 (95% Wilson), successes, n, interval."
    )


class StudySerializer(serializers.ModelSerializer):
    """A study in the list, with its progress toward k."""

    # The stored key, not the model field's choices: a study whose kind has since been taken away
    # keeps its key and is still listed.
    kind = serializers.CharField(read_only=True, help_text="The study's kind, by key")
    status = serializers.SerializerMethodField(help_text="open (accepts new annotators) or closed")
    guideline_version: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="label", read_only=True)
    first_round: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    progress = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField(help_text="This study's API detail.")

    class Meta:
        model = Study
        fields = [
            "slug",
            "name",
            "kind",
            "status",
            "round",
            "first_round",
            "guideline_version",
            "annotators_per_item",
            "created_at",
            "progress",
            "url",
        ]

    @extend_schema_field(OpenApiTypes.STR)
    def get_status(self, study: Study) -> str:
        return STATUS_OPEN if study.is_open else STATUS_CLOSED

    @extend_schema_field(StudyProgressBriefSerializer)
    def get_progress(self, study: CountedStudy) -> dict[str, Any]:  # a study of ``study_api_list``
        return {
            "items": study.n_items,
            "k": study.annotators_per_item,
            "annotations": study.n_annotations,
            "annotations_done": study.n_filled,
            "participants": study.n_participants,
            "coverage": study_coverage(n_items=study.n_items, k=study.annotators_per_item, n_filled=study.n_filled),
        }

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, study: Study) -> str:
        return self.context["request"].build_absolute_uri(reverse("api-study-detail", args=[study.slug]))


class StudyFilter(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=kind_choices_fresh, help_text="The study's kind.")  # asked per request
    status = django_filters.ChoiceFilter(
        choices=[(STATUS_OPEN, "open"), (STATUS_CLOSED, "closed")],
        method="filter_status",
        help_text="open: accepts new annotators; closed: does not.",
    )

    class Meta:
        model = Study
        fields = ["kind", "status"]

    def filter_status(self, queryset, name, value):
        return queryset.filter(is_open=value == STATUS_OPEN)
