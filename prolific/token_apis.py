"""The Prolific token in the API (``ProlificTokenView``): whether one is saved and which (its last
four characters), saving one and removing it. The token itself is never shown back."""

from __future__ import annotations

from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_variables
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.parsers import StrictJSONParser
from core.serializer_fields import StrictCharField
from prolific.api_fields import TAG, _errors
from prolific.selectors import prolific_token_state
from prolific.token_services import prolific_token_clear, prolific_token_save


class ProlificTokenStateSerializer(serializers.Serializer):
    saved = serializers.BooleanField()
    last4 = serializers.CharField()
    from_env = serializers.BooleanField()
    usable = serializers.BooleanField()


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
