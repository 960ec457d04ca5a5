"""Prolific's webhooks in the API (``WebhookSubscriptionsView``, admins): the workspace's
subscriptions as the product knows them, and subscribing to submission status changes."""

from __future__ import annotations

from django.core.validators import RegexValidator
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.confirm import CONFIRM_FIELD, CONFIRM_VALUE
from core.parsers import StrictJSONParser
from core.serializer_fields import StrictCharField
from prolific.api_fields import TAG, ProlificConfirmSerializer, _errors
from prolific.models import ProlificWebhookSubscription
from prolific.selectors import prolific_webhook_state
from prolific.webhooks import ID_MAX, prolific_webhooks_subscribe


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
