"""``GET /api/interval-methods/``: every interval method the product publishes
(``core.intervals.METHODS``), so a reader of any ``interval`` field can look up its name,
what it is used for, its reference and below which n it is labelled approximate."""

from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.intervals import CONFIDENCE, METHODS


class IntervalMethodSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="The value of every `interval` field that names this method.")
    name = serializers.CharField()
    used_for = serializers.CharField()
    reference = serializers.CharField()
    approximate_below = serializers.IntegerField(
        help_text="Intervals on fewer items are marked approximate: bench/interval_coverage.py measured a "
        "coverage under target there (0: never)."
    )
    confidence = serializers.FloatField()


class IntervalMethodsView(APIView):
    @extend_schema(responses=IntervalMethodSerializer(many=True))
    def get(self, request: Request, format: str | None = None) -> Response:
        rows = [{**asdict(method), "confidence": CONFIDENCE} for method in METHODS.values()]
        return Response(IntervalMethodSerializer(rows, many=True).data)
