"""The metric-agreement page of a study (researchers), its JSON and CSV downloads, and the
report over the API (docs/metric-agreement.md)."""
from __future__ import annotations

import io
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotate.agreement import DEFAULT_BOOTSTRAP
from annotate.kinds.critical_failure import KEY as CRITICAL_FAILURE
from annotate.api_params import query_int
from annotate.metric_agreement_selectors import REPORT_SEED, study_metric_agreement_report
from annotate.models import Study
from annotate.report_charts import metric_agreement_chart
from annotate.report_views import other_kind_detail, other_kind_note
from core.csv_cells import csv_writer
from core.permissions import IsResearcher, researcher_required

# Resamples the API accepts at most (one request must not hold a worker for minutes).
MAX_API_BOOTSTRAP = 10_000

CSV_FIELDS = ["rank", "key", "label", "family", "higher_means", "n", "n_has_failure", "n_no_failure", "auc",
              "auc_ci95_low", "auc_ci95_high", "best_threshold_accuracy", "best_threshold_ci95_low",
              "best_threshold_ci95_high", "best_threshold", "best_threshold_rule", "baseline_accuracy", "kendall_tau",
              "kendall_tau_ci95_low", "kendall_tau_ci95_high", "n_models", "note"]


def report_csv_rows(report: dict[str, Any]) -> list[list[Any]]:
    """One row per signal, in rank order, with the columns of ``CSV_FIELDS``."""
    rows = []
    for s in report["signals"]:
        best = s["best_threshold"]
        rows.append([s["rank"], s["key"], s["label"], s["family"], s["higher_means"], s["n"], s["n_has_failure"],
                     s["n_no_failure"], s["auc"], *(s["auc_ci95"] or [None, None]), best["accuracy"],
                     *(best["ci95"] or [None, None]), best["threshold"], best["rule"], best["baseline_accuracy"],
                     s["kendall_tau"], *(s["kendall_tau_ci95"] or [None, None]), s["n_models"], s.get("note", "")])
    return rows


@researcher_required
def metric_agreement(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    note = other_kind_note(request, study, "Which metric agrees with people",
                           "ranks automatic signals by their agreement with the human majority's has_failure")
    if note is not None:
        return note
    report = study_metric_agreement_report(study)
    fmt = request.GET.get("format")
    if fmt == "json":
        response = JsonResponse(report, json_dumps_params={"indent": 2})
        response["Content-Disposition"] = f'attachment; filename="{study.slug}-metric-agreement.json"'
        return response
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv_writer(buffer)  # no cell starts a formula (core/csv_cells.py)
        writer.writerow(CSV_FIELDS)
        writer.writerows(report_csv_rows(report))
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{study.slug}-metric-agreement.csv"'
        return response
    return render(request, "annotate/reports/metric_agreement.html", {
        "study": study, "report": report,
        "chart": metric_agreement_chart(report) if report["signals"] else "",
    })


@extend_schema(
    summary="Which metric agrees with people",
    description=("Every automatic signal of a study (How2Score per judge, SCORE and its parts, ROUGE-L, BLEU, the "
                 "length ratio, the formatting proxies) ranked by AUC against the human majority's has_failure, with "
                 "the agreement at the best threshold and Kendall's tau between model rankings, each with a 95% "
                 "bootstrap interval. The same JSON as `manage.py metric_agreement --study SLUG`."),
    parameters=[
        OpenApiParameter("bootstrap", OpenApiTypes.INT, description=f"resamples, 0 to {MAX_API_BOOTSTRAP} (default {DEFAULT_BOOTSTRAP}; 0: no intervals)"),
        OpenApiParameter("seed", OpenApiTypes.INT, description=f"seed of the resamples, non-negative (default {REPORT_SEED})"),
    ],
    responses={200: OpenApiTypes.OBJECT,
               400: OpenApiResponse(description="a bad bootstrap or seed, or a study of another kind (multiple "
                                                "choice, constraint faithfulness: no has_failure labels)"),
               404: OpenApiResponse(description="no study with this slug")},
)
@api_view(["GET"])
@permission_classes([IsResearcher])
def metric_agreement_api(request, slug: str) -> Response:
    study = get_object_or_404(Study, slug=slug)
    if study.kind != CRITICAL_FAILURE:
        return Response({"detail": other_kind_detail(study, "metric-agreement report")}, status=400)
    bootstrap = query_int(request, "bootstrap", DEFAULT_BOOTSTRAP, MAX_API_BOOTSTRAP)
    if isinstance(bootstrap, Response):
        return bootstrap
    seed = query_int(request, "seed", REPORT_SEED)
    if isinstance(seed, Response):
        return seed
    return Response(study_metric_agreement_report(study, bootstrap=bootstrap, seed=seed))
