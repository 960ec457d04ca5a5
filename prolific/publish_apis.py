"""A study on Prolific in the API: its state (``ProlificStateView``: the link, the draft publishing
would send, the review counts, the token), creating its draft (``PublishView``) and the PUBLISH
transition (``PublishNowView``), each calling the service the study page calls."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.studies.selectors import study_get
from core.confirm import CONFIRM_FIELD, CONFIRM_VALUE
from core.parsers import StrictJSONParser
from prolific.api_fields import TAG, ProlificConfirmSerializer, _errors
from prolific.errors import ProlificInvalid
from prolific.models import ProlificStudyLink
from prolific.publish_services import prolific_draft, prolific_study_publish, prolific_study_publish_now
from prolific.selectors import prolific_link_get, prolific_review_counts, prolific_token_state
from prolific.token_apis import ProlificTokenStateSerializer


class ProlificDraftSerializer(serializers.Serializer):
    main_items = serializers.IntegerField()
    k = serializers.IntegerField(help_text="Annotators per item")
    items_per_annotator = serializers.IntegerField(
        help_text="Main items each participant is given at least (their "
        "items less the most attention checks among them)"
    )
    places = serializers.IntegerField(help_text="ceil(main items × k ÷ items_per_annotator)")
    estimated_minutes = serializers.IntegerField()
    reward_cents = serializers.IntegerField()
    external_study_url = serializers.CharField()
    warnings = serializers.ListField(child=serializers.CharField())


class ProlificLinkSerializer(serializers.ModelSerializer):
    class Meta:
        model = ProlificStudyLink
        fields = [
            "prolific_id",
            "status",
            "name",
            "external_study_url",
            "places",
            "reward_cents",
            "estimated_minutes",
            "items_per_annotator",
            "published_at",
            "last_synced_at",
            "last_error",
        ]


class ProlificReviewCountsSerializer(serializers.Serializer):
    completed = serializers.IntegerField()
    screened_out = serializers.IntegerField()
    rejectable = serializers.IntegerField()
    waiting = serializers.IntegerField()


class ProlificStateSerializer(serializers.Serializer):
    link = ProlificLinkSerializer(allow_null=True)
    draft = ProlificDraftSerializer(
        allow_null=True, help_text="What publishing would send (only before a draft exists)"
    )
    draft_problem = serializers.CharField(help_text="Why the study cannot be published yet (empty when it can)")
    token = ProlificTokenStateSerializer()
    review = ProlificReviewCountsSerializer(
        help_text="Submissions awaiting review at the last sync, by the product's state"
    )


def _draft_data(draft: Any) -> dict[str, Any]:
    return {
        "main_items": draft.main_items,
        "k": draft.k,
        "items_per_annotator": draft.items_per_annotator,
        "places": draft.places,
        "estimated_minutes": draft.estimated_minutes,
        "reward_cents": draft.reward_cents,
        "external_study_url": draft.external_study_url,
        "warnings": draft.warnings,
    }


class ProlificStateView(APIView):
    @extend_schema(
        tags=TAG,
        summary="A study's Prolific link, or the draft it would publish",
        responses={200: ProlificStateSerializer, **{k: v for k, v in _errors().items() if k in (401, 403, 404)}},
    )
    def get(self, request, slug: str):
        study = study_get(slug=slug)
        link = prolific_link_get(study)
        linked = link is not None and bool(link.prolific_id)
        draft, problem = None, ""
        if not linked:
            try:
                draft = _draft_data(prolific_draft(study=study, base_url=request.build_absolute_uri("/")))
            except ProlificInvalid as exc:
                problem = exc.message
        return Response(
            {
                "link": ProlificLinkSerializer(link).data if linked else None,
                "draft": draft,
                "draft_problem": problem,
                "token": {k: v for k, v in prolific_token_state(request.user).items() if k != "saved_at"},
                "review": prolific_review_counts(study),
            }
        )


class ProlificPublishSerializer(serializers.Serializer):
    relink = serializers.BooleanField(default=False, help_text="Replace a link whose Prolific study is gone")


class PublishView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        tags=TAG,
        summary="Create the Prolific draft of a study",
        description="A draft with the study URL (Prolific's {{%PROLIFIC_PID%}}, {{%STUDY_ID%}} and "
        "{{%SESSION_ID%}} placeholders), the completed and screened-out completion codes, "
        "places = ceil(main items × k ÷ items per annotator), the estimated time and the "
        "reward from the study's settings. Not published until publish-now.",
        request=ProlificPublishSerializer,
        responses={201: ProlificLinkSerializer, **_errors()},
        examples=[OpenApiExample("Create", request_only=True, value={})],
    )
    def post(self, request, slug: str):
        study = study_get(slug=slug)
        body = ProlificPublishSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        link = prolific_study_publish(
            study=study,
            user=request.user,
            base_url=request.build_absolute_uri("/"),
            relink=body.validated_data["relink"],
        )
        return Response(ProlificLinkSerializer(link).data, status=status.HTTP_201_CREATED)


class PublishNowView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        tags=TAG,
        summary="Publish the linked draft on Prolific (participants can start)",
        request=ProlificConfirmSerializer,
        responses={200: ProlificLinkSerializer, **_errors()},
        examples=[OpenApiExample("Confirm", request_only=True, value={CONFIRM_FIELD: CONFIRM_VALUE})],
    )
    def post(self, request, slug: str):
        study = study_get(slug=slug)
        ProlificConfirmSerializer(data=request.data).is_valid(raise_exception=True)
        link = prolific_study_publish_now(study=study, user=request.user)
        return Response(ProlificLinkSerializer(link).data)
