"""Reviewing a study's submissions on Prolific through the API (``ReviewView``): approve the
completed, and the screened out by the researcher's policy, after a confirmation."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.studies.selectors import study_get
from core.confirm import CONFIRM_FIELD, CONFIRM_VALUE
from core.parsers import StrictJSONParser
from prolific import constants as C
from prolific.api_fields import TAG, ProlificConfirmSerializer, _errors
from prolific.review_services import prolific_review


class ProlificReviewSerializer(ProlificConfirmSerializer):
    policy = serializers.ChoiceField(
        choices=list(C.POLICIES),
        default=C.POLICY_APPROVE,
        help_text="Screened-out participants: approve (default) or reject where Prolific "
        "allows it (failed attention checks)",
    )
    message = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=C.REJECT_MESSAGE_MAX_LENGTH,
        help_text=f"Rejection message, at least {C.REJECT_MESSAGE_MIN_LENGTH} characters "
        "(a default is used when left out)",
    )


class ProlificReviewResultSerializer(serializers.Serializer):
    approved = serializers.IntegerField()
    rejected = serializers.IntegerField()
    screened_out_approved = serializers.IntegerField()
    not_rejectable = serializers.IntegerField(help_text="Screened out by the qualification: approved under 'reject'")
    waiting = serializers.IntegerField(help_text="Awaiting review on Prolific, still working in the product")
    already_reviewed = serializers.IntegerField()
    rejected_in_review = serializers.IntegerField(
        help_text="Of rejected: participants with an annotation a researcher rejected in review (its message and category)"
    )


class ReviewView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        tags=TAG,
        summary="Approve the completed, and the screened out by policy (once each)",
        description="Syncs first. Each submission is decided once: a retry or a concurrent call finds it reviewed.",
        request=ProlificReviewSerializer,
        responses={200: ProlificReviewResultSerializer, **_errors()},
        examples=[
            OpenApiExample("Approve all", request_only=True, value={CONFIRM_FIELD: CONFIRM_VALUE, "policy": "approve"})
        ],
    )
    def post(self, request, slug: str):
        study = study_get(slug=slug)
        body = ProlificReviewSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = prolific_review(
            study=study,
            user=request.user,
            policy=body.validated_data["policy"],
            message=body.validated_data.get("message"),
        )
        return Response(ProlificReviewResultSerializer(result).data)
