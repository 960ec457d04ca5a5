"""REST API of the Prolific integration (researchers and admins; token or session): a study's
link, publish (the draft), publish-now (the PUBLISH transition), sync, review, bonus preview
and pay, the submissions seen and the log of Prolific's answers — a study can be taken from
judged generations to paid participants by script. Every write calls the service the study
page calls (prolific/services.py). docs/prolific.md shows them in order.

Failures talking to Prolific answer 502 with ``kind`` and ``what_to_do``; the caller's own bad
values 400 naming the field; a step out of order (not published, already paid) 409, as is a
Prolific token that is missing, unreadable or refused by Prolific, or a PROLIFIC_API_URL that is
not Prolific's API (with ``kind`` and ``what_to_do``: settings to fix, not a wait)."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.shortcuts import get_object_or_404
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_variables
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.studies.selectors import study_get
from core.api_schema import ApiErrorSerializer
from core.confirm import CONFIRM_FIELD, CONFIRM_VALUE
from core.parsers import StrictJSONParser
from core.serializer_fields import StrictCharField
from prolific import constants as C
from prolific.models import ProlificBonusBatch, ProlificRequest, ProlificStudyLink, ProlificWebhookSubscription
from prolific.selectors import (
    prolific_link_get,
    prolific_request_list,
    prolific_review_counts,
    prolific_submission_list,
    prolific_submission_row,
    prolific_token_state,
    prolific_webhook_state,
)
from prolific.services import (
    ProlificInvalid,
    prolific_bonus_pay,
    prolific_bonus_preview,
    prolific_bonus_reconcile,
    prolific_bonus_resolve,
    prolific_draft,
    prolific_review,
    prolific_study_publish,
    prolific_study_publish_now,
    prolific_submissions_sync,
    prolific_token_clear,
    prolific_token_save,
)
from prolific.webhooks import ID_MAX, prolific_webhooks_subscribe

TAG = ["prolific"]


class ProlificFailureSerializer(ApiErrorSerializer):
    """Prolific refused or failed: ``code`` is ``prolific_<kind>``, ``what_to_do`` says what next."""

    upstream_status = serializers.IntegerField(
        allow_null=True, required=False, help_text="Prolific's HTTP status, if it answered (its failures only)"
    )


def _errors(**extra: str) -> dict[int, OpenApiResponse]:
    answers = {
        400: OpenApiResponse(ApiErrorSerializer, description="A value refused, named by its field; nothing was done"),
        401: OpenApiResponse(ApiErrorSerializer, description="Not logged in (no token or session)"),
        403: OpenApiResponse(ApiErrorSerializer, description="The researcher or admin role is needed"),
        404: OpenApiResponse(ApiErrorSerializer, description="No such study"),
        409: OpenApiResponse(
            ProlificFailureSerializer,
            description="Not in a state for this (code prolific_state: not published, already paid; "
            "prolific_not_ready: a setting of the study to fill first) "
            "or, with code prolific_<kind> and what_to_do, settings to fix: no Prolific token saved, one that cannot be "
            "read or that Prolific refuses, a PROLIFIC_API_URL that is not Prolific's API)",
        ),
        502: OpenApiResponse(
            ProlificFailureSerializer, description="Prolific refused or failed; what_to_do says what next"
        ),
    }
    for code, description in extra.items():
        answers[int(code.lstrip("_"))].description = description
    return answers


class ProlificConfirmSerializer(serializers.Serializer):
    confirm = serializers.ChoiceField(
        choices=[CONFIRM_VALUE],
        help_text=f"Must be '{CONFIRM_VALUE}', as the study page asks for a confirmation.",
        error_messages={
            "required": f"'{CONFIRM_FIELD}' must be '{CONFIRM_VALUE}'; nothing was done.",
            "invalid_choice": f"'{CONFIRM_FIELD}' must be '{CONFIRM_VALUE}'; nothing was done.",
        },
    )


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


class ProlificTokenStateSerializer(serializers.Serializer):
    saved = serializers.BooleanField()
    last4 = serializers.CharField()
    from_env = serializers.BooleanField()
    usable = serializers.BooleanField()


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


class ProlificTokenSerializer(serializers.Serializer):
    token = StrictCharField(
        max_length=500,
        trim_whitespace=False,
        help_text="The researcher's Prolific API token (from Prolific's settings); "
        "stored encrypted and never shown again",
    )


class ProlificTokenView(APIView):
    """The acting researcher's own Prolific token, as on the Prolific token page: saved
    encrypted, only its last four characters ever shown."""

    parser_classes = [StrictJSONParser]

    @extend_schema(
        tags=TAG,
        summary="Whether your Prolific token is saved (never the token)",
        responses={200: ProlificTokenStateSerializer, **{k: v for k, v in _errors().items() if k == 401}},
    )
    def get(self, request):
        return Response(prolific_token_state(request.user))

    @extend_schema(
        tags=TAG,
        summary="Save or replace your Prolific token",
        request=ProlificTokenSerializer,
        responses={200: ProlificTokenStateSerializer, **{k: v for k, v in _errors().items() if k in (400, 401, 403)}},
    )
    @method_decorator(sensitive_variables("body", "token"))
    def put(self, request):
        body = ProlificTokenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token = body.validated_data["token"]
        prolific_token_save(user=request.user, token=token)
        return Response(prolific_token_state(request.user))

    @extend_schema(
        tags=TAG,
        summary="Remove your Prolific token",
        request=None,
        responses={200: ProlificTokenStateSerializer, **{k: v for k, v in _errors().items() if k in (401, 403)}},
    )
    def delete(self, request):
        prolific_token_clear(user=request.user)
        return Response(prolific_token_state(request.user))


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


# An amount from 0.01 to BONUS_MAX_PER_PARTICIPANT (100) with at most two decimals, as the
# service reads it (prolific/services.py, _money), written so that the schema says it too.
AMOUNT_PATTERN = r"^(100(\.00?)?|[1-9][0-9]?(\.[0-9][0-9]?)?|0?\.(0[1-9]|[1-9][0-9]?))$"


class ProlificBonusRuleSerializer(serializers.Serializer):
    per_item = StrictCharField(
        max_length=20,
        validators=[RegexValidator(AMOUNT_PATTERN, message="between 0.01 and 100, at most two decimals")],
        help_text='Amount in the study\'s currency per item beyond the quota, from 0.01 to 100, e.g. "0.10"',
    )
    quota = serializers.IntegerField(min_value=0, max_value=1_000_000, default=0)


class ProlificBonusRowSerializer(serializers.Serializer):
    participant_id = serializers.CharField()
    submission_id = serializers.CharField()
    items = serializers.IntegerField()
    amount_cents = serializers.IntegerField()


class ProlificBonusBatchSerializer(serializers.ModelSerializer):
    rows = ProlificBonusRowSerializer(many=True)

    class Meta:
        model = ProlificBonusBatch
        fields = [
            "id",
            "rule",
            "rows",
            "n_participants",
            "total_cents",
            "state",
            "prolific_bonus_id",
            "prolific_total_cents",
            "error",
            "created_at",
            "paid_at",
        ]


class BonusPreviewView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        tags=TAG,
        summary="Preview bonuses by a rule (nothing is paid)",
        description="Who gets how much for each main item annotated beyond the quota, among participants "
        "who completed the study and have no paid bonus yet, and the total.",
        request=ProlificBonusRuleSerializer,
        responses={
            201: ProlificBonusBatchSerializer,
            200: OpenApiResponse(
                ProlificBonusBatchSerializer, description="Nobody to pay: the preview is not stored (id null)"
            ),
            **_errors(),
        },
        examples=[
            OpenApiExample("10 cents per item beyond 20", request_only=True, value={"per_item": "0.10", "quota": 20})
        ],
    )
    def post(self, request, slug: str):
        study = study_get(slug=slug)
        body = ProlificBonusRuleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        batch = prolific_bonus_preview(study=study, user=request.user, **body.validated_data)
        # A preview that pays no one is not stored: 200 with id null.
        return Response(
            ProlificBonusBatchSerializer(batch).data, status=status.HTTP_201_CREATED if batch.pk else status.HTTP_200_OK
        )


class BonusPayView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        tags=TAG,
        summary="Pay a previewed bonus batch (once)",
        description="Refused (409) for a batch paid, being paid, or uncertain (a payment request without "
        "a clear answer: check Prolific before paying again).",
        request=ProlificConfirmSerializer,
        responses={200: ProlificBonusBatchSerializer, **_errors()},
        examples=[OpenApiExample("Confirm", request_only=True, value={CONFIRM_FIELD: CONFIRM_VALUE})],
    )
    def post(self, request, slug: str, pk: int):
        study = study_get(slug=slug)
        batch = get_object_or_404(ProlificBonusBatch, pk=pk, link__study=study)
        ProlificConfirmSerializer(data=request.data).is_valid(raise_exception=True)
        batch = prolific_bonus_pay(batch=batch, user=request.user)
        return Response(ProlificBonusBatchSerializer(batch).data)


class ProlificBonusResolveSerializer(ProlificConfirmSerializer):
    paid = serializers.BooleanField(help_text="What Prolific's bonus payments show: paid or not")


class BonusResolveView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        tags=TAG,
        summary="Settle an uncertain bonus payment after checking Prolific",
        request=ProlificBonusResolveSerializer,
        responses={200: ProlificBonusBatchSerializer, **_errors()},
        examples=[OpenApiExample("It was paid", request_only=True, value={CONFIRM_FIELD: CONFIRM_VALUE, "paid": True})],
    )
    def post(self, request, slug: str, pk: int):
        study = study_get(slug=slug)
        batch = get_object_or_404(ProlificBonusBatch, pk=pk, link__study=study)
        body = ProlificBonusResolveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        batch = prolific_bonus_resolve(batch=batch, paid=body.validated_data["paid"])
        return Response(ProlificBonusBatchSerializer(batch).data)


class ProlificBonusReconcileSerializer(serializers.Serializer):
    batch = ProlificBonusBatchSerializer()
    shown = serializers.IntegerField(help_text="Participants whose bonus Prolific lists since the pay call")
    of = serializers.IntegerField(help_text="Participants in the batch")
    note = serializers.CharField()


class BonusReconcileView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        tags=TAG,
        summary="Check on Prolific whether a payment without a clear answer was made (never pays)",
        description="Reads each participant's bonuses on Prolific and compares them with those listed just "
        "before the one pay call: all shown makes the batch paid; otherwise it stays uncertain and says how "
        "many were shown. The scheduled sync does the same. 409 for a batch that is not uncertain.",
        request=None,
        responses={200: ProlificBonusReconcileSerializer, **_errors()},
    )
    def post(self, request, slug: str, pk: int):
        study = study_get(slug=slug)
        batch = get_object_or_404(ProlificBonusBatch, pk=pk, link__study=study)
        result = prolific_bonus_reconcile(batch=batch, user=request.user)
        return Response(
            {
                "batch": ProlificBonusBatchSerializer(result.batch).data,
                "shown": result.shown,
                "of": result.of,
                "note": result.note,
            }
        )


class WebhookSubscriptionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ProlificWebhookSubscription
        fields = ["workspace_id", "event_type", "subscription_id", "target_url", "confirmed_at", "created_at"]


class WebhookStateSerializer(serializers.Serializer):
    target_url = serializers.CharField(help_text="This server's webhook address, as Prolific is given it")
    subscriptions = WebhookSubscriptionSerializer(many=True)
    events = serializers.DictField(child=serializers.IntegerField(), help_text="Events received, by outcome")


class WebhookSubscribeSerializer(ProlificConfirmSerializer):
    workspace_id = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=ID_MAX,
        validators=[RegexValidator(r"^[A-Za-z0-9]*$", "a Prolific workspace id (letters and digits)")],
        help_text="The Prolific workspace to subscribe; empty: the only one the token sees",
    )


class WebhookSubscribedSerializer(serializers.Serializer):
    workspace_id = serializers.CharField()
    target_url = serializers.CharField()
    created = serializers.ListField(child=serializers.CharField(), help_text="Event types subscribed now")
    kept = serializers.ListField(child=serializers.CharField(), help_text="Already subscribed, left as they were")


class WebhookSubscriptionsView(APIView):
    """Prolific's webhooks for this server: the subscriptions made from the product, and making
    them (a new workspace secret, then one confirmed subscription per event type)."""

    parser_classes = [StrictJSONParser]

    @extend_schema(
        tags=TAG,
        summary="The webhook subscriptions made from the product, and the events received",
        responses={200: WebhookStateSerializer, **{k: v for k, v in _errors().items() if k in (401, 403)}},
    )
    def get(self, request):
        return Response(prolific_webhook_state(base_url=request.build_absolute_uri("/")))

    @extend_schema(
        tags=TAG,
        summary="Subscribe this server to Prolific's submission and study status events",
        request=WebhookSubscribeSerializer,
        responses={201: WebhookSubscribedSerializer, **{k: v for k, v in _errors().items() if k != 404}},
        examples=[OpenApiExample("Subscribe", request_only=True, value={CONFIRM_FIELD: CONFIRM_VALUE})],
    )
    def post(self, request):
        body = WebhookSubscribeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        done = prolific_webhooks_subscribe(
            user=request.user,
            base_url=request.build_absolute_uri("/"),
            workspace_id=body.validated_data.get("workspace_id") or None,
        )
        return Response(
            {
                "workspace_id": done.workspace_id,
                "target_url": done.target_url,
                "created": done.created,
                "kept": done.kept,
            },
            status=status.HTTP_201_CREATED,
        )


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
