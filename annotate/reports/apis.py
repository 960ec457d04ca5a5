"""REST API of the study page's results (docs/api.md): the report of a study, with intervals."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.kinds import kind_get, kind_list
from annotate.kinds.base import REPORT_AGREEMENT, REPORT_METRIC_AGREEMENT
from annotate.studies.api_fields import error_responses, include_test
from annotate.studies.api_selectors import study_api_progress
from annotate.studies.apis import RoundSerializer, round_rows
from annotate.studies.selectors import study_get

# -- the study page's results ----------------------------------------------------------------


class StudyReportView(APIView):
    @extend_schema(
        summary="The study page's results",
        description=(
            "The numbers of the study page that the agreement endpoints do not give: pilot rounds with "
            "their alpha, attention-check and qualification pass rates (share, n, 95% Wilson interval), "
            "median active time with its n; for multiple-choice studies Table 2 per task (yield and human "
            "accuracy with n and interval), for constraint-faithfulness studies Fleiss' kappa and alpha "
            "per question (bootstrap intervals), accuracy per constraint type (Wilson intervals) and error "
            "types. Critical-failure agreement: /agreement and /metric-agreement."
        ),
        responses={
            200: inline_serializer(
                "StudyReport",
                {
                    "study": serializers.CharField(),
                    "kind": serializers.CharField(),
                    "k": serializers.IntegerField(),
                    "rounds": RoundSerializer(many=True),
                    "attention_checks": serializers.DictField(),
                    "qualification": serializers.DictField(),
                    "median_active_seconds": serializers.DictField(
                        help_text="value and n (counted main-pool annotations)"
                    ),
                    "hourly_pay": serializers.FloatField(allow_null=True),
                    "choice_results": serializers.DictField(allow_null=True, help_text="Multiple choice: per task"),
                    "faithfulness_results": serializers.DictField(allow_null=True, help_text="Constraint faithfulness"),
                    "rubric_results": serializers.DictField(
                        required=False,
                        allow_null=True,
                        help_text="A rubric's kind (present once a rubric is stored): Krippendorff's alpha per "
                        "question with its level of measurement (nominal, ordinal; none for free text) and n",
                    ),
                    "agreement_url": serializers.CharField(allow_null=True),
                    "metric_agreement_url": serializers.CharField(allow_null=True),
                },
            ),
            **error_responses(
                _400="{include_test: [problem]}: the study page's numbers never count test participants",
                _404="No study with this slug",
            ),
        },
    )
    def get(self, request, slug: str):
        study = study_get(slug=slug)
        include_test(request, offered=False)  # the study page's numbers never count test participants
        progress = study_api_progress(study)
        kind = kind_get(study.kind)
        # Every kind's results key (None but for this study's kind), as the schema lists them.
        results = {other.results_name: None for other in kind_list() if other.results_name}
        if kind.results_name:
            results[kind.results_name] = kind.api_results(study)
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
                **results,
                "agreement_url": request.build_absolute_uri(reverse("study-agreement", args=[study.slug]))
                if kind.has_report(REPORT_AGREEMENT)
                else None,
                "metric_agreement_url": request.build_absolute_uri(reverse("study-metric-agreement", args=[study.slug]))
                if kind.has_report(REPORT_METRIC_AGREEMENT)
                else None,
            }
        )
