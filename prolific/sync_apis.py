"""What the product knows of a study on Prolific, in the API: syncing its submissions
(``SyncView``), the submissions seen (``SubmissionListView``) and the log of Prolific's answers
(``RequestLogView``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.studies.selectors import study_get
from prolific.api_fields import TAG, _errors
from prolific.models import ProlificRequest
from prolific.selectors import prolific_request_list, prolific_submission_list, prolific_submission_row
from prolific.sync_services import prolific_submissions_sync


class ProlificSyncResultSerializer(serializers.Serializer):
    seen = serializers.IntegerField()
    new = serializers.IntegerField()
    changed = serializers.IntegerField()
    released_participants = serializers.IntegerField(help_text="Returned or timed out: their slots released")
    released_slots = serializers.IntegerField()
    skipped_malformed = serializers.IntegerField(help_text="Rows of Prolific's answer that could not be read")
    study_status = serializers.CharField()


class SyncView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Sync the study's submissions from Prolific now",
        request=None,
        responses={200: ProlificSyncResultSerializer, **_errors()},
    )
    def post(self, request, slug: str):
        study = study_get(slug=slug)
        result = prolific_submissions_sync(study=study, user=request.user)
        return Response(ProlificSyncResultSerializer(result).data)


class ProlificSubmissionSerializer(serializers.Serializer):
    submission_id = serializers.CharField()
    participant_id = serializers.CharField()
    prolific_status = serializers.CharField(help_text="As Prolific last said")
    product_state = serializers.CharField(help_text="The participant's state here (empty: never arrived)")
    product_state_reason = serializers.CharField()
    slots_released = serializers.IntegerField()
    reviewed_action = serializers.CharField()
    reviewed_at = serializers.DateTimeField(allow_null=True)
    review_note = serializers.CharField()
    bonus_paid_cents = serializers.IntegerField()


class SubmissionListView(generics.ListAPIView):
    serializer_class = ProlificSubmissionSerializer
    filter_backends: list = []

    @extend_schema(tags=TAG, summary="Submissions seen on Prolific, beside each participant's state here")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        return prolific_submission_list(study_get(slug=self.kwargs["slug"]))

    def list(self, request, *args, **kwargs):
        submissions = self.get_queryset()
        page = self.paginate_queryset(submissions)
        if page is None:  # pagination turned off in REST_FRAMEWORK: every row
            return Response([prolific_submission_row(s) for s in submissions])
        return self.get_paginated_response([prolific_submission_row(s) for s in page])


class ProlificRequestLogSerializer(serializers.ModelSerializer):
    class Meta:
        model = ProlificRequest
        fields = [
            "at",
            "method",
            "path",
            "attempt",
            "status_code",
            "request_excerpt",
            "response_excerpt",
            "error",
            "seconds",
        ]


class RequestLogView(generics.ListAPIView):
    serializer_class = ProlificRequestLogSerializer
    filter_backends: list = []

    @extend_schema(tags=TAG, summary="Every request to Prolific on this study and its answer, newest first")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        return prolific_request_list(study_get(slug=self.kwargs["slug"]))
