"""REST API of the study page's results (docs/api.md): the report of a study, with intervals."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.kinds import kind_get
from annotate.kinds.base import REPORT_AGREEMENT, REPORT_METRIC_AGREEMENT
from annotate.studies import kind_schema  # noqa: F401  (the kinds' parts of the schema)
from annotate.studies.api_fields import error_responses, include_test
from annotate.studies.api_selectors import study_api_progress
from annotate.studies.apis import RoundSerializer, round_rows
from annotate.studies.selectors import study_get

# -- the study page's results ----------------------------------------------------------------


class StudyReportSerializer(serializers.Serializer):
    """The study page's results. Besides these fields, the body carries its study's kind's
    results under the kind's ``results_name`` (``choice_results``, ``faithfulness_results``,
    ``rubric_results``, ...), and no other kind's: the schema lists each registered kind's as an
    optional property typed by the kind's ``results_schema`` (annotate/studies/kind_schema.py)."""

    study = serializers.CharField()
    kind = serializers.CharField()
    k = serializers.IntegerField()
    rounds = RoundSerializer(many=True)
    attention_checks = serializers.DictField()
    qualification = serializers.DictField()
    median_active_seconds = serializers.DictField(help_text="value and n (counted main-pool annotations)")
    hourly_pay = serializers.FloatField(allow_null=True)
    results_name = serializers.CharField(
        allow_null=True, help_text="The property that holds the kind's results (null: the kind has none)"
    )
    agreement_url = serializers.CharField(allow_null=True)
    metric_agreement_url = serializers.CharField(allow_null=True)


class StudyReportView(APIView):
    @extend_schema(
        summary="The study page's results",
        description=(
            "The numbers of the study page that the agreement endpoints do not give: pilot rounds with "
            "their alpha, attention-check and qualification pass rates (share, n, 95% Wilson interval), "
            "median active time with its n, and the study's kind's own results under the name "
            "`results_name` gives (one property per kind, present only on a study of that kind): for "
            "multiple-choice studies `choice_results`, Table 2 per task (yield and human accuracy with n "
            "and interval); for constraint-faithfulness studies `faithfulness_results`, Fleiss' kappa and "
            "alpha per question (bootstrap intervals), accuracy per constraint type (Wilson intervals) and "
            "error types; for a rubric's kind `rubric_results`, alpha per question. Critical-failure "
            "agreement: /agreement and /metric-agreement."
        ),
        responses={
            200: StudyReportSerializer,
            **error_responses(
                _400="{include_test: [problem]}: the study page's numbers never count test participants",
                _404="No study with this slug",
                _503="The study's kind is not installed on this server (named): its results cannot be read",
            ),
        },
    )
    def get(self, request, slug: str):
        study = study_get(slug=slug)
        include_test(request, offered=False)  # the study page's numbers never count test participants
        progress = study_api_progress(study)
        kind = kind_get(study.kind)
        # The study's kind's results under its name; no other kind's.
        results = {kind.results_name: kind.api_results(study)} if kind.results_name else {}
        return Response(
            {
                "study": study.slug,
                "kind": study.kind,
                "k": study.annotators_per_item,
                "rounds": round_rows(study),
                "attention_checks": progress["attention_checks"],
                "qualification": progress["qualification"],
                "median_active_seconds": {
                    "value": progress["median_active_seconds"],
                    "n": progress["n_counted_annotations"],
                },
                "hourly_pay": progress["hourly_pay"],
                "results_name": kind.results_name,
                **results,
                "agreement_url": request.build_absolute_uri(reverse("study-agreement", args=[study.slug]))
                if kind.has_report(REPORT_AGREEMENT)
                else None,
                "metric_agreement_url": request.build_absolute_uri(reverse("study-metric-agreement", args=[study.slug]))
                if kind.has_report(REPORT_METRIC_AGREEMENT)
                else None,
            }
        )
