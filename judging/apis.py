"""REST API of the judging app: the reward endpoint for RL trainers."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import TokenAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from core.permissions import IsResearcher
from judging.rewards import RewardInput, rewards_compute
from llm.endpoints import EndpointNotConfigured

MAX_BATCH = 256


class RewardItemSerializer(serializers.Serializer):
    goal = serializers.CharField()
    resources = serializers.ListField(child=serializers.CharField(), required=False, default=list)
    reference_steps = serializers.ListField(child=serializers.CharField(), min_length=1)
    completion = serializers.CharField(allow_blank=True, trim_whitespace=False)
    with_score = serializers.BooleanField(
        required=False, default=False,
        help_text="Also return the SCORE term (SCORE / 2.5, rule-based components, offline) and add it to total")


class RewardBatchSerializer(serializers.Serializer):
    items = RewardItemSerializer(many=True)

    def validate_items(self, value):
        if not value:
            raise serializers.ValidationError("give at least one item")
        if len(value) > MAX_BATCH:
            raise serializers.ValidationError(f"at most {MAX_BATCH} items per request")
        return value


class RewardSerializer(serializers.Serializer):
    how2score = serializers.IntegerField(allow_null=True, help_text="1 no_failure, 0 has_failure, null: no usable verdict")
    format = serializers.IntegerField()
    length = serializers.FloatField()
    score = serializers.FloatField(required=False, allow_null=True, help_text="Only with with_score: SCORE / 2.5 in [0, 1]")
    total = serializers.FloatField()


class RewardView(APIView):
    """POST one item, or ``{"items": [...]}`` for a batch; returns the rewards in the same shape."""

    authentication_classes = [TokenAuthentication]
    permission_classes = [IsResearcher]

    @extend_schema(request=RewardItemSerializer, responses=RewardSerializer)
    def post(self, request):
        batched = isinstance(request.data, dict) and "items" in request.data
        serializer = RewardBatchSerializer(data=request.data) if batched else RewardItemSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        items = serializer.validated_data["items"] if batched else [serializer.validated_data]
        try:
            results = rewards_compute([RewardInput(**item) for item in items])
        except EndpointNotConfigured as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response({"items": results} if batched else results[0])
