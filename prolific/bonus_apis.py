"""Bonuses through the API: a preview of a batch by a rule (``BonusPreviewView``), paying it
(``BonusPayView``), reading Prolific to settle an uncertain payment (``BonusReconcileView``) and
a researcher's decision on one (``BonusResolveView``)."""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.studies.selectors import study_get
from core.confirm import CONFIRM_FIELD, CONFIRM_VALUE
from core.parsers import StrictJSONParser
from core.serializer_fields import StrictCharField
from prolific.api_fields import TAG, ProlificConfirmSerializer, _errors
from prolific.bonus_services import (
    prolific_bonus_pay,
    prolific_bonus_preview,
    prolific_bonus_reconcile,
    prolific_bonus_resolve,
)
from prolific.models import ProlificBonusBatch

# An amount from 0.01 to BONUS_MAX_PER_PARTICIPANT (100) with at most two decimals, as the
# service reads it (prolific/bonus_services.py, _money), written so that the schema says it too.
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


class ProlificBonusUnstoredSerializer(ProlificBonusBatchSerializer):
    """A preview that pays no one: not stored, so it has no id and no creation time."""

    id = serializers.IntegerField(read_only=True, allow_null=True, help_text="null: the preview is not stored")
    created_at = serializers.DateTimeField(read_only=True, allow_null=True, help_text="null: the preview is not stored")


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
                ProlificBonusUnstoredSerializer, description="Nobody to pay: the preview is not stored (id null)"
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
        if batch.pk:
            return Response(ProlificBonusBatchSerializer(batch).data, status=status.HTTP_201_CREATED)
        return Response(ProlificBonusUnstoredSerializer(batch).data)  # a preview that pays no one


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
