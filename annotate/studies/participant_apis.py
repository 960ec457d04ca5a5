"""REST API of a study's participants: the list with each one's state and reserved slots, and
the release of a participant's slots (docs/api.md)."""

from __future__ import annotations

from typing import Any

import django_filters
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.models import Participation, ParticipationState, Study
from annotate.studies.api_fields import (
    error_responses,
)
from annotate.studies.api_selectors import study_participation_api_list
from annotate.studies.item_apis import INCLUDE_TEST, StudyScoped, include_test
from annotate.studies.selectors import study_annotators, study_get
from annotate.studies.services import participation_release
from core.confirm import CONFIRM_FIELD, CONFIRM_VALUE
from core.parsers import StrictJSONParser

# -- participants ----------------------------------------------------------------------------


class ParticipantFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=ParticipationState.choices, help_text="Where they are on the path")

    class Meta:
        model = Participation
        fields = ["state"]


class ParticipantSerializer(serializers.Serializer):
    """A participant with the study page's counts (``study_annotators``)."""

    id = serializers.IntegerField()
    pid = serializers.CharField()
    is_test = serializers.BooleanField(help_text="A researcher's test participant (listed only with include_test)")
    state = serializers.CharField()
    state_reason = serializers.CharField(allow_blank=True)
    prolific_session_id = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    n_main = serializers.IntegerField(help_text="Main-pool annotations (excluded and surplus included)")
    n_counted = serializers.IntegerField(help_text="Main-pool annotations that count: not excluded, not surplus")
    n_reserved = serializers.IntegerField(help_text="Slots held now (what a release gives back)")
    checks_passed = serializers.IntegerField()
    checks_failed = serializers.IntegerField()
    median_active_seconds = serializers.FloatField(allow_null=True)
    excluded = serializers.BooleanField()
    exclusion_reason = serializers.CharField(allow_blank=True)


def participant_rows(study: Study, participations: list[Participation]) -> list[dict[str, Any]]:
    rows = study_annotators(study, participation_ids=[p.pk for p in participations], include_test=True)
    return [
        {
            "id": r["participation"].pk,
            "pid": r["pid"],
            "is_test": r["participation"].is_test,
            "state": r["participation"].state,
            "state_reason": r["participation"].state_reason,
            "prolific_session_id": r["participation"].prolific_session_id,
            "started_at": r["participation"].started_at,
            "finished_at": r["participation"].finished_at,
            **{
                key: r[key]
                for key in (
                    "n_main",
                    "n_counted",
                    "n_reserved",
                    "checks_passed",
                    "checks_failed",
                    "median_active_seconds",
                    "excluded",
                    "exclusion_reason",
                )
            },
        }
        for r in rows
    ]


class StudyParticipantListView(StudyScoped, generics.ListAPIView):
    serializer_class = ParticipantSerializer
    filterset_class = ParticipantFilter
    search_fields = ["annotator__pid"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no study
            return Participation.objects.none()
        return study_participation_api_list(self.study(), include_test=include_test(self.request))

    @extend_schema(
        summary="A study's participants",
        parameters=[INCLUDE_TEST],
        description="Participants, oldest first, with their state and the study page's counts. Filter: "
        "state; search: PID.",
        responses={200: ParticipantSerializer(many=True), **error_responses(_404="No study with this slug")},
    )
    def get(self, request, *args, **kwargs):
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        assert page is not None  # the API pages every list (REST_FRAMEWORK's DEFAULT_PAGINATION_CLASS)
        rows = participant_rows(self.study(), list(page))
        return self.get_paginated_response(ParticipantSerializer(rows, many=True).data)


class ReleaseSerializer(serializers.Serializer):
    confirm = serializers.ChoiceField(
        choices=[CONFIRM_VALUE],
        help_text=f"Must be '{CONFIRM_VALUE}', as the study page asks for a confirmation.",
        error_messages={
            "required": f"'{CONFIRM_FIELD}' must be '{CONFIRM_VALUE}' to release; nothing was done.",
            "invalid_choice": f"'{CONFIRM_FIELD}' must be '{CONFIRM_VALUE}' to release; nothing was done.",
        },
    )


class ReleaseResultSerializer(serializers.Serializer):
    released = serializers.IntegerField(help_text="Reserved slots returned to the pool")
    detail = serializers.CharField()
    participant = ParticipantSerializer()


class ParticipantReleaseView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        summary="Release a participant's reserved slots",
        description=f"The participant returned the study on Prolific: their reserved slots go back to "
        f"the pool and they are marked returned (drafts stay stored; a late submit is still "
        f'kept), as the study page does. The body must be {{"{CONFIRM_FIELD}": '
        f'"{CONFIRM_VALUE}"}}. 409 for a participant already returned, or finished with '
        f"nothing reserved.",
        request=ReleaseSerializer,
        responses={
            200: ReleaseResultSerializer,
            **error_responses(
                _400="{confirm: [why]}; nothing was done",
                _404="No such study, or no such participant in it",
                _409="Nothing to release in the participant's state",
            ),
        },
        examples=[OpenApiExample("Confirm", request_only=True, value={CONFIRM_FIELD: CONFIRM_VALUE})],
    )
    def post(self, request, slug: str, pk: int):
        study = study_get(slug=slug)
        participation = get_object_or_404(Participation.objects.select_related("annotator"), pk=pk, study=study)
        ReleaseSerializer(data=request.data).is_valid(raise_exception=True)
        pid = participation.annotator.pid
        # Where a release does not apply the service refuses (ReleaseRefused: 409 with its detail).
        released = participation_release(participation=participation)
        participation.refresh_from_db()
        return Response(
            {
                "released": released,
                "detail": f"Released {released} reserved slot(s) of {pid}; they return to the pool.",
                "participant": ParticipantSerializer(participant_rows(study, [participation])[0]).data,
            }
        )
