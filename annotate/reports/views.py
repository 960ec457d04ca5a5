"""The researchers' report pages: the agreement report per study and round, annotators,
disagreements item by item, and which metric agrees with people (docs/metric-agreement.md);
their CSV and JSON downloads and the reports over the API."""

from __future__ import annotations

import io
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.kinds import kind_get
from annotate.kinds.base import REPORT_AGREEMENT, REPORT_METRIC_AGREEMENT
from annotate.models import Study, StudyItem
from annotate.reports.charts import alpha_by_round, annotator_scatter, judge_agreement_bars, metric_agreement_chart
from annotate.reports.metric_selectors import REPORT_SEED, study_metric_agreement_report
from annotate.reports.selectors import (
    agreement_display,
    annotator_table,
    disagreement_list,
    item_failure_views,
    study_agreement_report,
    study_judgment_rows,
    study_rounds_reports,
)
from annotate.review.selectors import (
    HUMAN_MAJORITY,
    HUMAN_SOURCES,
    gold_agreement,
    gold_groups,
    gold_label_map,
    human_source_check,
)
from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP
from annotate.studies.api_fields import INCLUDE_TEST, KIND_NOT_INSTALLED, error_responses, include_test, query_int
from core.app_errors import InvalidInput
from core.csv_cells import csv_writer
from core.permissions import IsResearcher, researcher_required
from core.query_params import query_format


def other_kind_note(
    request: HttpRequest,
    study: Study,
    page: str,
    what: str = "compares critical-failure labels (has_failure) between annotators and with judges",
) -> HttpResponse | None:
    """These dashboards read has_failure; a study whose kind has no agreement report (multiple
    choice, constraint faithfulness) gets a note pointing to its own results on the study
    page instead of numbers computed on nothing. None for a kind that has the report."""
    if kind_get(study.kind).has_report(REPORT_AGREEMENT):
        return None
    return render(
        request,
        "annotate/reports/other_kind.html",
        {"study": study, "kind": kind_get(study.kind), "page": page, "what": what},
    )


def other_kind_detail(study: Study, report: str) -> str:
    """The API's answer (with status 400) for a study of another kind."""
    return (
        f"study {study.slug!r} is a {study.kind} study: its answers carry no has_failure, so there is no "
        f"{report}; its results are on the study page"
    )


def _csv_response(filename: str, header: list[str], rows: list[list]) -> HttpResponse:
    buffer = io.StringIO()
    writer = csv_writer(buffer)  # no cell starts a formula (core/csv_cells.py)
    writer.writerow(header)
    writer.writerows(rows)
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


JUDGES_CSV_FIELDS = [
    "judge",
    "agreement",
    "ci95_low",
    "ci95_high",
    "n",
    "agreement_has_failure",
    "ci95_has_failure_low",
    "ci95_has_failure_high",
    "n_has_failure",
    "agreement_no_failure",
    "ci95_no_failure_low",
    "ci95_no_failure_high",
    "n_no_failure",
    "cohen_kappa",
    "cohen_kappa_ci95_low",
    "cohen_kappa_ci95_high",
    "n_judged",
    "n_human_tie",
    "n_too_few_annotations",
    "n_no_human_labels",
    "min_annotations",
]


def judges_csv_rows(report: dict[str, Any]) -> list[list[Any]]:
    """One row per judge of an agreement report, by name, with the columns of ``JUDGES_CSV_FIELDS``."""
    return [
        [
            j,
            v["agreement"],
            *(v["ci95"] or [None, None]),
            v["n"],
            v["agreement_has_failure"],
            *(v["ci95_has_failure"] or [None, None]),
            v["n_has_failure"],
            v["agreement_no_failure"],
            *(v["ci95_no_failure"] or [None, None]),
            v["n_no_failure"],
            v["cohen_kappa"],
            *(v["cohen_kappa_ci95"] or [None, None]),
            v["n_judged"],
            v["n_human_tie"],
            v["n_too_few_annotations"],
            v["n_no_human_labels"],
            report["human_majority"]["min_annotations"],
        ]
        for j, v in sorted(report["judges"].items())
    ]


@researcher_required
def agreement(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    fmt = query_format(request.GET, ("json", "judges.csv"))
    if (note := other_kind_note(request, study, "Agreement")) is not None:
        return note
    human = human_source_check(request.GET.get("human"))
    rounds = study_rounds_reports(study)
    report = next(r["report"] for r in rounds if r["study"].pk == study.pk)
    if human != HUMAN_MAJORITY:  # calibration against the chosen human labels
        report = study_agreement_report(study, human_source=human)
    if fmt == "json":
        response = JsonResponse(report, json_dumps_params={"indent": 2})
        response["Content-Disposition"] = f'attachment; filename="{study.slug}-agreement.json"'
        return response
    if fmt == "judges.csv":
        return _csv_response(f"{study.slug}-judges.csv", JUDGES_CSV_FIELDS, judges_csv_rows(report))
    gold_report = gold_agreement(study, study_judgment_rows(study))
    return render(
        request,
        "annotate/reports/agreement.html",
        {
            "study": study,
            "report": report,
            "rounds": rounds,
            "display": agreement_display(study, report),
            "judge_chart": judge_agreement_bars(report),
            "alpha_chart": alpha_by_round(rounds),
            "human": human,
            "human_sources": HUMAN_SOURCES,
            "human_text": HUMAN_SOURCES[human],
            "gold_report": gold_report,
            "gold_groups": gold_groups(gold_report),
        },
    )


@researcher_required
def annotators(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    fmt = query_format(request.GET, ("csv",))
    if (note := other_kind_note(request, study, "Annotators")) is not None:
        return note
    report = study_agreement_report(study)
    table = annotator_table(study, report)
    sort = request.GET.get("sort", "annotator")
    if sort in ("n_main", "loo_agreement", "median_active_seconds", "checks_failed"):
        table.sort(
            key=lambda r: (r[sort] is None, r[sort] if r[sort] is not None else 0),
            reverse=sort != "median_active_seconds",
        )
    if fmt == "csv":
        header = [
            "annotator",
            "n_main",
            "loo_agreement",
            "loo_n",
            "loo_ci95_low",
            "loo_ci95_high",
            "median_active_seconds",
            "checks_passed",
            "checks_failed",
            "excluded",
            "exclusion_reason",
            "n_counted",
            "n_broken",
            "n_unsure",
        ]
        rows = [
            [
                r["annotator"],
                r["n_main"],
                r["loo_agreement"],
                r["loo_n"],
                *(r["loo_ci95"] or [None, None]),
                r["median_active_seconds"],
                r["checks_passed"],
                r["checks_failed"],
                r["excluded"],
                r["exclusion_reason"],
                r["n_counted"],
                r["n_broken"],
                r["n_unsure"],
            ]
            for r in table
        ]
        return _csv_response(f"{study.slug}-annotators.csv", header, rows)
    return render(
        request,
        "annotate/reports/annotators.html",
        {
            "study": study,
            "table": table,
            "scatter": annotator_scatter(table),
            "sort": sort,
            "min_annotations": report["human_majority"]["min_annotations"],
        },
    )


@researcher_required
def disagreements(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    fmt = query_format(request.GET, ("csv",))
    if (note := other_kind_note(request, study, "Disagreements")) is not None:
        return note
    rows = disagreement_list(study)
    if fmt == "csv":
        return _csv_response(
            f"{study.slug}-disagreements.csv",
            ["item_id", "n", "n_has_failure", "entropy", "majority", "judge_dissent"],
            [
                [r["item_id"], r["n"], r["n_has_failure"], round(r["entropy"], 4), r["majority"], r["judge_dissent"]]
                for r in rows
            ],
        )
    golds = gold_label_map(study)
    for r in rows:
        gold = golds.get(r["item_id"])
        r["gold"] = {"label": "has_failure" if gold.has_failure else "no_failure"} if gold is not None else None
    return render(request, "annotate/reports/disagreements.html", {"study": study, "rows": rows})


@researcher_required
def item_views(request: HttpRequest, slug: str, item_id: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    item = get_object_or_404(StudyItem, study=study, item_id=item_id)
    if (
        note := other_kind_note(
            request,
            study,
            f"Item {item.item_id}",
            "shows each annotator's and each judge's critical failures on the steps",
        )
    ) is not None:
        return note
    return render(
        request, "annotate/reports/item.html", {"study": study, "item": item, **item_failure_views(study, item)}
    )


class StudyAgreementView(APIView):
    permission_classes = [IsResearcher]

    @extend_schema(
        summary="The agreement report of a critical-failure study",
        description=(
            "Krippendorff's alpha, the human majority, leave-one-out human agreement, judges against the "
            "majority and between each other, calibration: the same JSON as "
            "`manage.py agreement_report --study SLUG`."
        ),
        parameters=[
            OpenApiParameter("bootstrap", OpenApiTypes.INT, description="resamples, 0 to 10000 (default 1000)"),
            OpenApiParameter("seed", OpenApiTypes.INT, description="seed of the resamples (default 0)"),
            OpenApiParameter(
                "human",
                OpenApiTypes.STR,
                description="calibration's human label: majority (default), gold (adjudicated gold labels only) "
                "or gold_or_majority (gold where an item has one); stated as calibration_human_source",
            ),
            INCLUDE_TEST,
        ],
        responses={
            200: OpenApiTypes.OBJECT,
            400: OpenApiResponse(
                description="a bad bootstrap, seed or include_test, or a study of another kind (multiple "
                "choice, constraint faithfulness): its answers carry no has_failure"
            ),
            **error_responses(_404="No study with this slug", _503=KIND_NOT_INSTALLED),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        """The agreement report of a study: the same JSON as `manage.py agreement_report --study SLUG`."""
        study = get_object_or_404(Study, slug=slug)
        if not kind_get(study.kind).has_report(REPORT_AGREEMENT):
            raise InvalidInput(other_kind_detail(study, "critical-failure agreement report"))
        bootstrap = query_int(request, "bootstrap", 1000, 10000)
        seed = query_int(request, "seed", 0)
        test = include_test(request)  # as `agreement_report --include-test`
        human = human_source_check(request.query_params.get("human"))
        return Response(
            study_agreement_report(study, bootstrap=bootstrap, seed=seed, include_test=test, human_source=human)
        )


# --------------------------------------------------------------------------- which metric agrees with people

# Resamples the API accepts at most (one request must not hold a worker for minutes).
MAX_API_BOOTSTRAP = 10_000

CSV_FIELDS = [
    "rank",
    "key",
    "label",
    "family",
    "higher_means",
    "n",
    "n_has_failure",
    "n_no_failure",
    "auc",
    "auc_ci95_low",
    "auc_ci95_high",
    "best_threshold_accuracy",
    "best_threshold_ci95_low",
    "best_threshold_ci95_high",
    "best_threshold",
    "best_threshold_rule",
    "baseline_accuracy",
    "kendall_tau",
    "kendall_tau_ci95_low",
    "kendall_tau_ci95_high",
    "n_models",
    "note",
]


def report_csv_rows(report: dict[str, Any]) -> list[list[Any]]:
    """One row per signal, in rank order, with the columns of ``CSV_FIELDS``."""
    rows = []
    for s in report["signals"]:
        best = s["best_threshold"]
        rows.append(
            [
                s["rank"],
                s["key"],
                s["label"],
                s["family"],
                s["higher_means"],
                s["n"],
                s["n_has_failure"],
                s["n_no_failure"],
                s["auc"],
                *(s["auc_ci95"] or [None, None]),
                best["accuracy"],
                *(best["ci95"] or [None, None]),
                best["threshold"],
                best["rule"],
                best["baseline_accuracy"],
                s["kendall_tau"],
                *(s["kendall_tau_ci95"] or [None, None]),
                s["n_models"],
                s.get("note", ""),
            ]
        )
    return rows


@researcher_required
def metric_agreement(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    fmt = query_format(request.GET, ("json", "csv"))
    note = other_kind_note(
        request,
        study,
        "Which metric agrees with people",
        "ranks automatic signals by their agreement with the human majority's has_failure",
    )
    if note is not None:
        return note
    report = study_metric_agreement_report(study)
    if fmt == "json":
        response: HttpResponse = JsonResponse(report, json_dumps_params={"indent": 2})
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
    return render(
        request,
        "annotate/reports/metric_agreement.html",
        {
            "study": study,
            "report": report,
            "chart": metric_agreement_chart(report) if report["signals"] else "",
        },
    )


class StudyMetricAgreementView(APIView):
    permission_classes = [IsResearcher]

    @extend_schema(
        summary="Which metric agrees with people",
        description=(
            "Every automatic signal of a study (How2Score per judge, SCORE and its parts, ROUGE-L, BLEU, the "
            "length ratio, the formatting proxies) ranked by AUC against the human majority's has_failure, with "
            "the agreement at the best threshold and Kendall's tau between model rankings, each with a 95% "
            "BCa bootstrap interval over items (null with the reason when every resample gives one value). The same "
            "JSON as `manage.py metric_agreement --study SLUG`."
        ),
        parameters=[
            OpenApiParameter(
                "bootstrap",
                OpenApiTypes.INT,
                description=f"resamples, 0 to {MAX_API_BOOTSTRAP} (default {DEFAULT_BOOTSTRAP}; 0: no intervals)",
            ),
            OpenApiParameter(
                "seed", OpenApiTypes.INT, description=f"seed of the resamples, non-negative (default {REPORT_SEED})"
            ),
        ],
        responses={
            200: OpenApiTypes.OBJECT,
            400: OpenApiResponse(
                description="a bad bootstrap or seed, include_test other than false (the human majority "
                "never counts test participants), or a study of another kind (multiple choice, constraint "
                "faithfulness: no has_failure labels)"
            ),
            **error_responses(_404="No study with this slug", _503=KIND_NOT_INSTALLED),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        study = get_object_or_404(Study, slug=slug)
        if not kind_get(study.kind).has_report(REPORT_METRIC_AGREEMENT):
            raise InvalidInput(other_kind_detail(study, "metric-agreement report"))
        bootstrap = query_int(request, "bootstrap", DEFAULT_BOOTSTRAP, MAX_API_BOOTSTRAP)
        seed = query_int(request, "seed", REPORT_SEED)
        include_test(request, offered=False)  # the human majority never counts test participants
        return Response(study_metric_agreement_report(study, bootstrap=bootstrap, seed=seed))
