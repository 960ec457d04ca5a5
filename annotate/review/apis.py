"""REST API of review and adjudication (docs/api.md, "Review and adjudication"): the review
list and decisions (one or many), an annotation's history, gold labels, and agreement with
gold beside agreement with the majority. Thin: the services refuse with the error family,
answered by the one exception handler (400 naming the field, 404, 409)."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.models import Annotation, StudyItem
from annotate.reports.selectors import study_judgment_rows
from annotate.review import rules
from annotate.review.models import AnnotationReview, GoldLabel
from annotate.review.selectors import (
    REVIEW_STATUSES,
    gold_agreement,
    gold_label_list,
    review_counts,
    review_history,
    review_list,
    review_status_check,
)
from annotate.review.services import annotation_review, gold_label_delete, gold_label_set, gold_qualification_add
from annotate.studies.api_fields import KIND_NOT_INSTALLED, error_responses, query_int
from annotate.studies.selectors import study_get
from core.app_errors import InvalidInput
from core.parsers import StrictJSONParser

LIST_LIMIT_MAX = 1000


def _body(request: Any) -> dict[str, Any]:
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput(fields={"body": "a JSON object"})
    return data


def review_data(review: AnnotationReview) -> dict[str, Any]:
    return {
        "id": review.pk,
        "annotation": review.annotation_id,
        "decision": review.decision,
        "reason": review.reason,
        "rejection_category": review.rejection_category,
        "corrected_answer": review.corrected_answer,
        "reviewer": review.reviewer.get_username() if review.reviewer else None,
        "created_at": review.created_at.isoformat(),
    }


def annotation_review_data(a: Annotation) -> dict[str, Any]:
    return {
        "id": a.pk,
        "item_id": a.item.item_id,
        "annotator": a.annotator.pid,
        "label": a.label,
        "answer": a.answer,
        "submitted_answer": a.submitted_answer,
        "flag": a.flag,
        "review": a.review,
        "reviewed_at": a.reviewed_at.isoformat() if a.reviewed_at else None,
        "excluded": a.excluded,
        "exclusion_reason": a.exclusion_reason,
    }


def gold_data(gold: GoldLabel) -> dict[str, Any]:
    return {
        "item_id": gold.item.item_id,
        "answer": gold.answer,
        "has_failure": gold.has_failure,
        "note": gold.note,
        "adjudicator": gold.adjudicator.get_username() if gold.adjudicator else None,
        "settled": sorted(a.pk for a in gold.settled.all()),
        "history": gold.history,
        "created_at": gold.created_at.isoformat(),
        "updated_at": gold.updated_at.isoformat(),
    }


def _ids_field(maximum: int) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.IntegerField(min_value=1), min_length=1, max_length=maximum, help_text="annotation ids"
    )


class AcceptRequestSerializer(serializers.Serializer):
    annotation_ids = _ids_field(rules.BULK_MAX)
    decision = serializers.ChoiceField(choices=[rules.DECISION_ACCEPT])
    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=rules.NOTE_MAX_LENGTH, help_text="an optional note"
    )


class RejectRequestSerializer(serializers.Serializer):
    annotation_ids = _ids_field(rules.BULK_MAX)
    decision = serializers.ChoiceField(choices=[rules.DECISION_REJECT])
    reason = serializers.CharField(
        min_length=rules.REJECT_MESSAGE_MIN_LENGTH,
        max_length=rules.REJECT_MESSAGE_MAX_LENGTH,
        help_text="the message the participant reads on Prolific (counted without spaces at either end)",
    )
    rejection_category = serializers.ChoiceField(choices=list(rules.REJECTION_CATEGORIES))


class CorrectRequestSerializer(serializers.Serializer):
    annotation_ids = _ids_field(1)
    decision = serializers.ChoiceField(choices=[rules.DECISION_CORRECT])
    answer = serializers.DictField(help_text="the corrected answer in the kind's shape, checked as a submit is")
    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=rules.NOTE_MAX_LENGTH, help_text="an optional note"
    )


ReviewRequestSerializer = PolymorphicProxySerializer(
    component_name="ReviewRequest",
    serializers={
        rules.DECISION_ACCEPT: AcceptRequestSerializer,
        rules.DECISION_REJECT: RejectRequestSerializer,
        rules.DECISION_CORRECT: CorrectRequestSerializer,
    },
    resource_type_field_name="decision",
)
REVIEW_FIELDS = {"annotation_ids", "decision", "reason", "rejection_category", "answer"}


class GoldRequestSerializer(serializers.Serializer):
    item_id = serializers.CharField()
    answer = serializers.JSONField(help_text="The gold answer in the kind's shape, checked as a submitted answer is")
    note = serializers.CharField(help_text="Why the label is what it is (required)")
    settled = serializers.ListField(
        child=serializers.IntegerField(), required=False, help_text="Default: the item's counted annotations"
    )


class StudyReviewView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        summary="A study's main-pool annotations with their review state",
        parameters=[
            OpenApiParameter("status", OpenApiTypes.STR, description=f"one of {', '.join(REVIEW_STATUSES)}"),
            OpenApiParameter("item_id", OpenApiTypes.STR, description="one item's annotations"),
            OpenApiParameter("limit", OpenApiTypes.INT, description=f"at most {LIST_LIMIT_MAX} (default 100)"),
            OpenApiParameter("offset", OpenApiTypes.INT),
        ],
        responses={200: OpenApiTypes.OBJECT, **error_responses(_400="{status: [problem]}", _404="No such study")},
    )
    def get(self, request, slug: str):
        study = study_get(slug=slug)
        status_value = review_status_check(request.query_params.get("status"))
        item = None
        if request.query_params.get("item_id"):
            item = get_object_or_404(StudyItem, study=study, item_id=request.query_params["item_id"])
        limit = query_int(request, "limit", 100, LIST_LIMIT_MAX)
        offset = query_int(request, "offset", 0)
        qs = review_list(study, status=status_value, item=item)
        return Response(
            {
                "counts": review_counts(study),
                "count": qs.count(),
                "results": [annotation_review_data(a) for a in qs[offset : offset + limit]],
            }
        )

    @extend_schema(
        summary="Accept, reject or correct annotations",
        description=(
            "One decision on one or many annotations (a correction: one). The latest decision counts; "
            "a rejection excludes the annotation and rejects its participant in the Prolific review with the "
            "message and category; a correction counts with the corrected answer and keeps the annotator's."
        ),
        request=ReviewRequestSerializer,
        responses={
            201: OpenApiTypes.OBJECT,
            **error_responses(
                _400="{reason|rejection_category|decision|annotation_ids|answer.<field>: [problem]}",
                _404="No such study, or an annotation id not of this study",
                _409="A correction of a check answer or of an annotation flagged broken",
            ),
        },
        examples=[
            OpenApiExample(
                "Reject",
                request_only=True,
                value={
                    "annotation_ids": [12],
                    "decision": "reject",
                    "rejection_category": "LOW_EFFORT",
                    "reason": "Every failure you described names a step the procedure does not have; the "
                    "guidelines ask you to read both procedures first.",
                },
            )
        ],
    )
    def post(self, request, slug: str):
        study = study_get(slug=slug)
        body = _body(request)
        unknown = sorted(set(body) - REVIEW_FIELDS)
        if unknown:
            raise InvalidInput(fields={name: "not a field of a review" for name in unknown})
        reviews = annotation_review(
            study=study,
            annotation_ids=body.get("annotation_ids"),
            decision=body.get("decision"),
            reviewer=request.user,
            reason=body.get("reason"),
            rejection_category=body.get("rejection_category"),
            answer=body.get("answer"),
        )
        return Response({"reviews": [review_data(r) for r in reviews]}, status=status.HTTP_201_CREATED)


class AnnotationReviewHistoryView(APIView):
    @extend_schema(
        summary="An annotation's review history, oldest first",
        responses={200: OpenApiTypes.OBJECT, **error_responses(_404="No such study or annotation")},
    )
    def get(self, request, slug: str, pk: int):
        study = study_get(slug=slug)
        annotation = get_object_or_404(Annotation.objects.select_related("item", "annotator"), study=study, pk=pk)
        return Response(
            {
                "annotation": annotation_review_data(annotation),
                "history": [review_data(r) for r in review_history(annotation)],
            }
        )


class StudyGoldView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        summary="A study's gold labels",
        responses={200: OpenApiTypes.OBJECT, **error_responses(_404="No such study")},
    )
    def get(self, request, slug: str):
        return Response({"results": [gold_data(g) for g in gold_label_list(study_get(slug=slug))]})

    @extend_schema(
        summary="Settle an item into its gold label (or replace it)",
        request=GoldRequestSerializer,
        responses={
            200: OpenApiTypes.OBJECT,
            **error_responses(_400="{item_id|note|settled|answer.<field>: [problem]}", _404="No such study or item"),
        },
        examples=[
            OpenApiExample(
                "Critical failure",
                request_only=True,
                value={
                    "item_id": "item-1",
                    "answer": {"has_failure": False, "failures": []},
                    "note": "Step 2 boils the water; the annotator who said otherwise misread it.",
                },
            )
        ],
    )
    def post(self, request, slug: str):
        study = study_get(slug=slug)
        body = _body(request)
        unknown = sorted(set(body) - set(GoldRequestSerializer().fields))
        if unknown:
            raise InvalidInput(fields={name: "not a field of a gold label" for name in unknown})
        item = _item(study, body.get("item_id"))
        gold = gold_label_set(
            item=item,
            answer=body.get("answer"),
            note=body.get("note"),
            adjudicator=request.user,
            settled=body.get("settled"),
        )
        return Response(gold_data(gold))

    @extend_schema(
        summary="Remove an item's gold label",
        parameters=[OpenApiParameter("item_id", OpenApiTypes.STR, required=True)],
        responses={204: None, **error_responses(_400="{item_id: [problem]}", _404="No such study, item or gold label")},
    )
    def delete(self, request, slug: str):
        study = study_get(slug=slug)
        gold_label_delete(item=_item(study, request.query_params.get("item_id")))
        return Response(status=status.HTTP_204_NO_CONTENT)


def _item(study: Any, item_id: Any) -> StudyItem:
    """The study's item named ``item_id`` (404 for an id it does not have, the empty one included)."""
    if not isinstance(item_id, str):
        raise InvalidInput(fields={"item_id": "the item's id, as the study's items list gives it"})
    return get_object_or_404(StudyItem, study=study, item_id=item_id)


class StudyGoldAgreementView(APIView):
    @extend_schema(
        summary="Agreement with the adjudicated gold, per annotator and per judge",
        description=(
            "Over the items with a gold label: each rater's share of matches with gold and, on the same items, "
            "with the human majority (an annotator's: leave-one-out), each with its n and 95% Wilson interval."
        ),
        responses={200: OpenApiTypes.OBJECT, **error_responses(_404="No such study", _503=KIND_NOT_INSTALLED)},
    )
    def get(self, request, slug: str):
        study = study_get(slug=slug)
        return Response(gold_agreement(study, study_judgment_rows(study)))


class GoldQualificationRequestSerializer(serializers.Serializer):
    from_study = serializers.CharField(help_text="The slug of the study whose gold-labelled items to take")
    qualification_pass = serializers.IntegerField(
        required=False, help_text="Correct answers needed to pass (default: the study's, else every qualification item)"
    )


class StudyGoldQualificationView(APIView):
    parser_classes = [StrictJSONParser]

    @extend_schema(
        summary="Take another study's gold-labelled items as this study's qualification items",
        description=(
            "Each gold-labelled item of from_study (same kind) becomes a qualification item of this study, "
            "its known answer the gold label and its explanation the adjudicator's note; ids are "
            "'<from_study>/<item_id>', and items already here are skipped. Refused once anyone has entered."
        ),
        request=GoldQualificationRequestSerializer,
        responses={
            200: OpenApiTypes.OBJECT,
            **error_responses(
                _400="{from_study|items: [problem]}",
                _404="No such study",
                _409="Another kind, no gold label, or a kind without known answers",
            ),
        },
    )
    def post(self, request, slug: str):
        target = study_get(slug=slug)
        body = _body(request)
        source_slug = body.get("from_study")
        if not isinstance(source_slug, str) or not source_slug or len(source_slug) > 100:
            raise InvalidInput(fields={"from_study": "the slug of a study with gold labels"})
        added = gold_qualification_add(source=study_get(slug=source_slug), target=target)
        return Response(
            {"added": added.added, "skipped": added.skipped, "qualification_enabled": target.qualification_enabled}
        )
