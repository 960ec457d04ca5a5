from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from core.permissions import researcher_required
from mining.charts import procedures_per_topic_chart
from mining.models import Procedure, Split
from mining.panels import procedure_panels
from mining.selectors import procedure_counts_by_topic_and_split, procedure_list, topic_list

PAGE_SIZE = 25


@researcher_required
def home(request: HttpRequest) -> HttpResponse:
    rows = procedure_counts_by_topic_and_split()
    totals = {key: sum(row[key] for row in rows) for key in ("bench", "train", "none", "total")}
    return render(
        request, "mining/home.html",
        {"rows": rows, "totals": totals, "chart": procedures_per_topic_chart(rows)},
    )


@researcher_required
def procedure_index(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "")
    topic = request.GET.get("topic", "")
    split = request.GET.get("split", "")
    page = Paginator(procedure_list(q=q, topic=topic, split=split), PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request, "mining/procedure_list.html",
        {
            "page": page, "q": q, "topic": topic, "split": split,
            "topics": topic_list(), "splits": Split.choices, "query": query.urlencode(),
        },
    )


@researcher_required
def procedure_detail(request: HttpRequest, pk: int) -> HttpResponse:
    procedure = get_object_or_404(Procedure.objects.select_related("topic"), pk=pk)
    return render(
        request, "mining/procedure_detail.html",
        {"procedure": procedure, "panels": procedure_panels(procedure)},
    )
