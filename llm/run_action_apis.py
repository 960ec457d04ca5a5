"""Driving a run through the API: the four controls' request (``ConfirmSerializer``, the confirmation a cancel needs), their answer (``RunActionResultSerializer``) and their OpenAPI descriptions (``RUN_ACTION_SCHEMAS``: retry-failed, resume, pause, cancel)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers

from core.api_schema import ApiErrorSerializer
from core.confirm import CONFIRM_FIELD, CONFIRM_VALUE


class ConfirmSerializer(serializers.Serializer):
    """The confirmation a cancel needs, as the pages ask for it (core/confirm.py)."""

    confirm = serializers.ChoiceField(
        choices=[CONFIRM_VALUE],
        help_text=f"Must be '{CONFIRM_VALUE}': a cancelled run cannot be resumed.",
        error_messages={
            "required": f"'{CONFIRM_FIELD}' must be '{CONFIRM_VALUE}' to cancel; nothing was done.",
            "invalid_choice": f"'{CONFIRM_FIELD}' must be '{CONFIRM_VALUE}' to cancel; nothing was done.",
        },
    )


class RunActionResultSerializer(serializers.Serializer):
    action = serializers.CharField(help_text="retry-failed, resume, pause or cancel")
    detail = serializers.CharField(help_text="What was done.")
    asked_again = serializers.IntegerField(
        allow_null=True,
        help_text=(
            "retry-failed: how many failed requests are asked again (mining runs: failed documents); null otherwise."
        ),
    )
    run = serializers.DictField(help_text="The run as its detail gives it, after the action.")


def _action_schema(summary: str, description: str, *, cancel: bool = False):
    responses = {
        200: RunActionResultSerializer,
        401: OpenApiResponse(ApiErrorSerializer, description="Not logged in (no token or session)"),
        403: OpenApiResponse(ApiErrorSerializer, description="The admin role is needed"),
        404: OpenApiResponse(ApiErrorSerializer, description="No such run"),
        409: OpenApiResponse(
            ApiErrorSerializer, description="The action does not apply in the run's state; detail says why"
        ),
    }
    if cancel:
        responses[400] = OpenApiResponse(
            OpenApiTypes.OBJECT,
            description=(
                f'No {{"{CONFIRM_FIELD}": "{CONFIRM_VALUE}"}}: {{"{CONFIRM_FIELD}": [why]}}; nothing was done'
            ),
        )
    return extend_schema(
        summary=summary,
        description=description,
        request=ConfirmSerializer if cancel else None,
        filters=False,
        responses=responses,
    )


RUN_ACTION_SCHEMAS = {
    "retry-failed": _action_schema(
        "Retry failed",
        "Ask exactly the run's requests without an ok answer again (admins), as the "
        "run page's Retry failed does; the run is queued again. 409 while it is pending or running.",
    ),
    "resume": _action_schema(
        "Resume",
        "Continue a paused, failed or interrupted run (admins); requests without an ok "
        "answer are asked again. 409 for a finished or cancelled run.",
    ),
    "pause": _action_schema(
        "Pause",
        "Pause a pending or running run (admins); work in flight stops within seconds and "
        "what was answered is kept. 409 in any other state.",
    ),
    "cancel": _action_schema(
        "Cancel",
        f"Cancel a run (admins); a cancelled run cannot be resumed, so the body must be "
        f'{{"{CONFIRM_FIELD}": "{CONFIRM_VALUE}"}} (400 otherwise). 409 for a finished or cancelled run.',
        cancel=True,
    ),
}
