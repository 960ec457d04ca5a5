"""The researchers' agreement dashboards: report per study and round, annotators,
disagreements item by item; CSV and JSON downloads; the report over the API."""
from __future__ import annotations

import io

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotate.api_params import query_int
from annotate.kinds.critical_failure import KEY as CRITICAL_FAILURE
from annotate.models import Study, StudyItem
from annotate.report_charts import alpha_by_round, annotator_scatter, judge_agreement_bars
from annotate.reports import (
    agreement_display, annotator_table, disagreement_list, item_failure_views, study_agreement_report,
    study_rounds_reports,
)
from core.csv_cells import csv_writer
from core.permissions import IsResearcher, researcher_required


def other_kind_note(request: HttpRequest, study: Study, page: str,
                    what: str = "compares critical-failure labels (has_failure) between annotators and with judges",
                    ) -> HttpResponse | None:
    """These dashboards read has_failure; a study of another kind (multiple choice,
    constraint faithfulness) gets a note pointing to its own results on the study page
    instead of numbers computed on nothing. None for a critical-failure study."""
    if study.kind == CRITICAL_FAILURE:
        return None
    return render(request, "annotate/reports/other_kind.html", {"study": study, "page": page, "what": what})


def other_kind_detail(study: Study, report: str) -> str:
    """The API's answer (with status 400) for a study of another kind."""
    return (f"study {study.slug!r} is a {study.kind} study: its answers carry no has_failure, so there is no "
            f"{report}; its results are on the study page")


def _csv_response(filename: str, header: list[str], rows: list[list]) -> HttpResponse:
    buffer = io.StringIO()
    writer = csv_writer(buffer)  # no cell starts a formula (core/csv_cells.py)
    writer.writerow(header)
    writer.writerows(rows)
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@researcher_required
def agreement(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    if (note := other_kind_note(request, study, "Agreement")) is not None:
        return note
    rounds = study_rounds_reports(study)
    report = next(r["report"] for r in rounds if r["study"].pk == study.pk)
    fmt = request.GET.get("format")
    if fmt == "json":
        response = JsonResponse(report, json_dumps_params={"indent": 2})
        response["Content-Disposition"] = f'attachment; filename="{study.slug}-agreement.json"'
        return response
    if fmt == "judges.csv":
        return _csv_response(f"{study.slug}-judges.csv",
                             ["judge", "agreement", "ci95_low", "ci95_high", "n",
                              "agreement_has_failure", "ci95_has_failure_low", "ci95_has_failure_high", "n_has_failure",
                              "agreement_no_failure", "ci95_no_failure_low", "ci95_no_failure_high", "n_no_failure",
                              "cohen_kappa", "cohen_kappa_ci95_low", "cohen_kappa_ci95_high",
                              "n_judged", "n_human_tie", "n_too_few_annotations", "n_no_human_labels",
                              "min_annotations"],
                             [[j, v["agreement"], *(v["ci95"] or [None, None]), v["n"],
                               v["agreement_has_failure"], *(v["ci95_has_failure"] or [None, None]), v["n_has_failure"],
                               v["agreement_no_failure"], *(v["ci95_no_failure"] or [None, None]), v["n_no_failure"],
                               v["cohen_kappa"], *(v["cohen_kappa_ci95"] or [None, None]),
                               v["n_judged"], v["n_human_tie"], v["n_too_few_annotations"], v["n_no_human_labels"],
                               report["human_majority"]["min_annotations"]]
                              for j, v in sorted(report["judges"].items())])
    return render(request, "annotate/reports/agreement.html", {
        "study": study, "report": report, "rounds": rounds, "display": agreement_display(study, report),
        "judge_chart": judge_agreement_bars(report),
        "alpha_chart": alpha_by_round(rounds),
    })


@researcher_required
def annotators(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    if (note := other_kind_note(request, study, "Annotators")) is not None:
        return note
    report = study_agreement_report(study)
    table = annotator_table(study, report)
    sort = request.GET.get("sort", "annotator")
    if sort in ("n_main", "loo_agreement", "median_active_seconds", "checks_failed"):
        table.sort(key=lambda r: (r[sort] is None, r[sort] if r[sort] is not None else 0), reverse=sort != "median_active_seconds")
    if request.GET.get("format") == "csv":
        header = ["annotator", "n_main", "loo_agreement", "loo_n", "loo_ci95_low", "loo_ci95_high",
                  "median_active_seconds", "checks_passed", "checks_failed", "excluded", "exclusion_reason", "n_counted"]
        rows = [[r["annotator"], r["n_main"], r["loo_agreement"], r["loo_n"], *(r["loo_ci95"] or [None, None]),
                 r["median_active_seconds"], r["checks_passed"], r["checks_failed"], r["excluded"],
                 r["exclusion_reason"], r["n_counted"]] for r in table]
        return _csv_response(f"{study.slug}-annotators.csv", header, rows)
    return render(request, "annotate/reports/annotators.html",
                  {"study": study, "table": table, "scatter": annotator_scatter(table), "sort": sort,
                   "min_annotations": report["human_majority"]["min_annotations"]})


@researcher_required
def disagreements(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    if (note := other_kind_note(request, study, "Disagreements")) is not None:
        return note
    rows = disagreement_list(study)
    if request.GET.get("format") == "csv":
        return _csv_response(f"{study.slug}-disagreements.csv",
                             ["item_id", "n", "n_has_failure", "entropy", "majority", "judge_dissent"],
                             [[r["item_id"], r["n"], r["n_has_failure"], round(r["entropy"], 4), r["majority"],
                               r["judge_dissent"]] for r in rows])
    return render(request, "annotate/reports/disagreements.html", {"study": study, "rows": rows})


@researcher_required
def item_views(request: HttpRequest, slug: str, item_id: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    item = get_object_or_404(StudyItem, study=study, item_id=item_id)
    if (note := other_kind_note(request, study, f"Item {item.item_id}",
                                "shows each annotator's and each judge's critical failures on the steps")) is not None:
        return note
    return render(request, "annotate/reports/item.html", {"study": study, "item": item, **item_failure_views(study, item)})


@extend_schema(
    summary="The agreement report of a critical-failure study",
    description=("Krippendorff's alpha, the human majority, leave-one-out human agreement, judges against the "
                 "majority and between each other, calibration: the same JSON as "
                 "`manage.py agreement_report --study SLUG`."),
    parameters=[
        OpenApiParameter("bootstrap", OpenApiTypes.INT, description="resamples, 0 to 10000 (default 1000)"),
        OpenApiParameter("seed", OpenApiTypes.INT, description="seed of the resamples (default 0)"),
    ],
    responses={200: OpenApiTypes.OBJECT,
               400: OpenApiResponse(description="a study of another kind (multiple choice, constraint "
                                                "faithfulness): its answers carry no has_failure"),
               404: OpenApiResponse(description="no study with this slug")},
)
@api_view(["GET"])
@permission_classes([IsResearcher])
def agreement_api(request, slug: str) -> Response:
    """The agreement report of a study: the same JSON as `manage.py agreement_report --study SLUG`."""
    study = get_object_or_404(Study, slug=slug)
    if study.kind != CRITICAL_FAILURE:
        return Response({"detail": other_kind_detail(study, "critical-failure agreement report")}, status=400)
    bootstrap = query_int(request, "bootstrap", 1000, 10000)
    if isinstance(bootstrap, Response):
        return bootstrap
    seed = query_int(request, "seed", 0)
    if isinstance(seed, Response):
        return seed
    return Response(study_agreement_report(study, bootstrap=bootstrap, seed=seed))
