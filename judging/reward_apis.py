"""The reward endpoint for RL trainers: a batch of items (goal, resources, reference steps, a completion) in, one How2Score reward per item out (``RewardView``), with the bounds of one item (beyond them a field is a 400 naming the item and the field) and the deadline after which an unjudged item answers without a verdict."""

from __future__ import annotations

import math

from django.conf import settings
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.authentication import ApiTokenAuthentication
from core.parsers import StrictJSONParser
from core.permissions import IsResearcher
from core.serializer_fields import StrictBooleanField, StrictCharField
from judging.rewards import (
    REASON_DEADLINE,
    STATUS_CACHED,
    STATUS_FAILED,
    STATUS_JUDGED,
    STATUS_NO_STEPS,
    TOTAL_WITHOUT_VERDICT_CHOICES,
    TOTAL_WITHOUT_VERDICT_COMPONENTS,
    TOTAL_WITHOUT_VERDICT_NULL,
    RewardInput,
    rewards_compute,
)

# Bounds of one reward item: beyond them a field is a 400 naming the item and the field.
REWARD_MAX_TEXT_CHARS = 100_000  # the goal, the completion


REWARD_MAX_STEP_CHARS = 10_000  # one reference step, one resource


REWARD_MAX_STEPS = 200  # reference steps, resources


class RewardItemSerializer(serializers.Serializer):
    goal = StrictCharField(max_length=REWARD_MAX_TEXT_CHARS)
    resources = serializers.ListField(
        child=StrictCharField(max_length=REWARD_MAX_STEP_CHARS),
        required=False,
        default=list,
        max_length=REWARD_MAX_STEPS,
    )
    reference_steps = serializers.ListField(
        child=StrictCharField(max_length=REWARD_MAX_STEP_CHARS), min_length=1, max_length=REWARD_MAX_STEPS
    )
    completion = StrictCharField(allow_blank=True, trim_whitespace=False, max_length=REWARD_MAX_TEXT_CHARS)
    with_score = StrictBooleanField(
        required=False,
        default=False,
        help_text="Also return the SCORE term (SCORE / 2.5, rule-based components, offline) and add it to total",
    )


class RewardBatchSerializer(serializers.Serializer):
    """A batch: ``{"items": [...]}``, or the bare list (the view wraps it). Its size is
    checked before any item is read; a bad item's errors are keyed by its position."""

    items = RewardItemSerializer(many=True, min_length=1)  # type: ignore[call-arg]  # an empty batch is refused

    def to_internal_value(self, data):
        items = data.get("items") if isinstance(data, dict) else None
        if isinstance(items, list):
            limit = settings.REWARD_MAX_BATCH
            if not items:
                raise serializers.ValidationError({"items": ["give at least one item"]})
            if len(items) > limit:
                raise serializers.ValidationError(
                    {
                        "items": [
                            f"at most {limit} items per request (REWARD_MAX_BATCH); this one has {len(items)}: "
                            f"split it into several requests"
                        ]
                    }
                )
        return super().to_internal_value(data)


@extend_schema_field(
    {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": settings.REWARD_DEADLINE_SECONDS}
)
class _DeadlineField(serializers.FloatField):
    """Seconds above 0 and at most REWARD_DEADLINE_SECONDS; the schema says both bounds."""


class RewardQuerySerializer(serializers.Serializer):
    """The query of a reward request, whichever form its body has; a bad value is a 400
    naming it, before anything is judged."""

    deadline_seconds = _DeadlineField(
        required=False,
        help_text=(
            "How long the judge may take, in seconds: above 0 and at most REWARD_DEADLINE_SECONDS (the default). "
            f"Items not answered by then are failed with reason {REASON_DEADLINE!r}; the response comes by then"
        ),
    )
    total_without_verdict = serializers.ChoiceField(
        choices=TOTAL_WITHOUT_VERDICT_CHOICES,
        required=False,
        default=TOTAL_WITHOUT_VERDICT_NULL,
        help_text=(
            f"total of an item without a verdict (how2score null): {TOTAL_WITHOUT_VERDICT_NULL} (the default) "
            f"or {TOTAL_WITHOUT_VERDICT_COMPONENTS}, the sum of the other terms (format + length, + score)"
        ),
    )

    def validate_deadline_seconds(self, value: float) -> float:
        limit = settings.REWARD_DEADLINE_SECONDS
        if not math.isfinite(value) or value <= 0:
            raise serializers.ValidationError(f"a number of seconds above 0 and at most {limit}")
        if value > limit:
            raise serializers.ValidationError(
                f"at most {limit} seconds (REWARD_DEADLINE_SECONDS, the deadline when none is given)"
            )
        return value


class RewardSerializer(serializers.Serializer):
    how2score = serializers.IntegerField(
        allow_null=True, help_text="1 no_failure, 0 has_failure, null: no usable verdict"
    )
    format = serializers.IntegerField()
    length = serializers.FloatField()
    score = serializers.FloatField(
        required=False, allow_null=True, help_text="Only with with_score: SCORE / 2.5 in [0, 1]"
    )
    total = serializers.FloatField(
        allow_null=True,
        help_text=(
            "how2score + format + length (+ score); null when there is no verdict (how2score null), "
            "unless total_without_verdict=components asked for the sum of the other terms"
        ),
    )
    status = serializers.ChoiceField(
        choices=[STATUS_JUDGED, STATUS_CACHED, STATUS_NO_STEPS, STATUS_FAILED],
        help_text=(
            "judged: the judge answered now; cached: the ledger held its answer; no_steps: nothing to follow, "
            "How2Score 0 without a judge call; failed: no usable verdict (see reason; deadline: not answered by the "
            "request's deadline). In the one-item and "
            '{"items": [...]} forms only a failed item carries it'
        ),
    )
    reason = serializers.CharField(
        required=False,
        help_text=f"Only when failed: why there is no verdict ({REASON_DEADLINE!r}: the deadline came first)",
    )


class RewardOneSerializer(RewardSerializer):
    """A reward of the one-item and ``{"items": [...]}`` forms (``_old_form``): ``status`` and
    ``reason`` only on a failed item."""

    status = serializers.ChoiceField(choices=[STATUS_FAILED], required=False, help_text="Only on a failed item")


class RewardFailureSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="The item's position in the batch, from 0")
    reason = serializers.CharField(help_text="Why there is no verdict")


class RewardItemsSerializer(serializers.Serializer):
    """The answer to ``{"items": [...]}``: the rewards in order, and the items without a verdict."""

    items = RewardOneSerializer(many=True)
    failed = RewardFailureSerializer(many=True)


# The three forms a request may take, each answered in its own (RewardView).
REWARD_REQUEST = PolymorphicProxySerializer(
    component_name="RewardRequest",
    serializers=[RewardItemSerializer(many=True, min_length=1), RewardItemSerializer, RewardBatchSerializer],  # type: ignore[call-arg]
    resource_type_field_name=None,
    many=False,
)
REWARD_ANSWER = PolymorphicProxySerializer(
    component_name="RewardAnswer",
    serializers=[RewardSerializer(many=True), RewardOneSerializer, RewardItemsSerializer],
    resource_type_field_name=None,
    many=False,
)


def _old_form(result: dict) -> dict:
    """An item of the one-item and ``{"items": [...]}`` forms: as before, plus status and
    reason on a failed item (so a failure is never mistaken for a verdict)."""
    if result["status"] == STATUS_FAILED:
        return result
    return {key: value for key, value in result.items() if key not in ("status", "reason")}


class RewardView(APIView):
    """POST a list of items (an RL trainer's batch) and get the list of rewards in the same
    order, each with its status; or one item, or ``{"items": [...]}``, answered in the same
    shape (docs/how2bench.md, "Rewards for RL")."""

    authentication_classes = [ApiTokenAuthentication]
    permission_classes = [IsResearcher]
    # JSON only: a form cannot carry a list of items.
    parser_classes = [StrictJSONParser]

    @extend_schema(
        request=REWARD_REQUEST,
        parameters=[RewardQuerySerializer],
        responses=REWARD_ANSWER,
        description=(
            "A list of items is answered with the list of rewards; one item with its reward, and "
            '{"items": [...]} with {"items": [...], "failed": [...]} (status and reason only on a failed item).'
        ),
    )
    def post(self, request):
        # A plain dict: a parameter sent empty is refused, not read as its default.
        query = RewardQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        data = request.data
        shape = "list" if isinstance(data, list) else "items" if isinstance(data, dict) and "items" in data else "one"
        serializer = (
            RewardBatchSerializer(data={"items": data})
            if shape == "list"
            else RewardBatchSerializer(data=data)
            if shape == "items"
            else RewardItemSerializer(data=data)
        )
        serializer.is_valid(raise_exception=True)
        items = serializer.validated_data["items"] if shape != "one" else [serializer.validated_data]
        results = rewards_compute(  # EndpointNotConfigured: a 503
            [RewardInput(**item) for item in items],
            deadline_seconds=query.validated_data.get("deadline_seconds"),
            total_without_verdict=query.validated_data["total_without_verdict"],
        )
        if shape == "list":
            return Response(results)
        if shape == "one":
            return Response(_old_form(results[0]))
        failed = [{"index": i, "reason": r["reason"]} for i, r in enumerate(results) if r["status"] == STATUS_FAILED]
        return Response({"items": [_old_form(r) for r in results], "failed": failed})
