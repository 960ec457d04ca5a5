"""The Prolific API's shared pieces: its tag in the schema, the error answers every endpoint
documents (``_errors``) and the confirmation a write asks for (``ProlificConfirmSerializer``),
as the study page asks for it. Failures talking to Prolific answer 502 with ``kind`` and
``what_to_do`` (``ProlificFailureSerializer``); the caller's own bad values 400 naming the
field; a step out of order (not published, already paid) 409, as is a Prolific token that is
missing, unreadable or refused by Prolific, or a PROLIFIC_API_URL that is not Prolific's API
(with ``kind`` and ``what_to_do``: settings to fix, not a wait)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from core.api_schema import ApiErrorSerializer
from core.confirm import CONFIRM_FIELD, CONFIRM_VALUE

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
