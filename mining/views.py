from __future__ import annotations

from django.conf import settings
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from core.app_errors import AppError
from core.permissions import admin_required, researcher_required
from core.record_files import RecordError
from core.request_bodies import accepts_uploads
from core.roles import is_admin
from mining.charts import documents_per_topic_chart, procedures_per_topic_chart
from mining.corpus_services import corpus_import_report_lines, corpus_imports_settle_stalled, corpus_upload_create
from mining.document_records import DocumentFields
from mining.forms import CorpusUploadForm
from mining.models import Corpus, CorpusImport, CorpusImportStatus, Document, Procedure, Split, SplitReport
from mining.panels import procedure_panels
from mining.selectors import (
    corpus_import_list,
    corpus_list,
    document_counts_by_topic,
    document_list,
    document_sample,
    procedure_counts_by_topic_and_split,
    procedure_list,
    split_report_list,
    topic_list,
)

PAGE_SIZE = 25
SAMPLE_SIZE = 10


@researcher_required
def home(request: HttpRequest) -> HttpResponse:
    rows = procedure_counts_by_topic_and_split()
    totals = {key: sum(row[key] for row in rows) for key in ("bench", "train", "constrained", "none", "total")}
    return render(
        request,
        "mining/home.html",
        {"rows": rows, "totals": totals, "chart": procedures_per_topic_chart(rows)},
    )


@researcher_required
def procedure_index(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "")
    topic = request.GET.get("topic", "")
    split = request.GET.get("split", "")
    mining_run = request.GET.get("mining_run", "")
    page = Paginator(procedure_list(q=q, topic=topic, split=split, mining_run=mining_run), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "mining/procedure_list.html",
        {
            "page": page,
            "q": q,
            "topic": topic,
            "split": split,
            "mining_run": mining_run,
            "topics": topic_list(),
            "splits": Split.choices,
            "query": query.urlencode(),
        },
    )


@researcher_required
def procedure_detail(request: HttpRequest, pk: int) -> HttpResponse:
    procedure = get_object_or_404(Procedure.objects.select_related("topic"), pk=pk)
    return render(
        request,
        "mining/procedure_detail.html",
        {"procedure": procedure, "panels": procedure_panels(procedure)},
    )


@researcher_required
def corpus_index(request: HttpRequest) -> HttpResponse:
    corpus_imports_settle_stalled()
    return render(request, "mining/corpus_list.html", {"corpora": corpus_list(), "imports": corpus_import_list()[:20]})


def _int_param(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(request.GET.get(name, default))
    except (TypeError, ValueError):
        return default
    return min(max(value, low), high)


@researcher_required
def corpus_detail(request: HttpRequest, pk: int) -> HttpResponse:
    corpus = get_object_or_404(Corpus, pk=pk)
    q = request.GET.get("q", "")
    topic = request.GET.get("topic", "")
    rows = document_counts_by_topic(corpus=corpus)
    page = Paginator(document_list(corpus=corpus, q=q, topic=topic), PAGE_SIZE).get_page(request.GET.get("page"))
    sample_n = _int_param(request, "n", SAMPLE_SIZE, 1, 100)
    seed = _int_param(request, "seed", 0, 0, 2**31 - 1)
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "mining/corpus_detail.html",
        {
            "corpus": corpus,
            "rows": rows,
            "chart": documents_per_topic_chart(rows) if rows else "",
            "page": page,
            "q": q,
            "topic": topic,
            "query": query.urlencode(),
            "sample": document_sample(corpus=corpus, n=sample_n, seed=seed, topic=topic),
            "n": sample_n,
            "seed": seed,
            "imports": corpus.imports.all()[:10],
        },
    )


@researcher_required
def document_detail(request: HttpRequest, pk: int, document_pk: int) -> HttpResponse:
    document = get_object_or_404(Document.objects.select_related("corpus", "topic"), pk=document_pk, corpus_id=pk)
    return render(request, "mining/document_detail.html", {"document": document})


@accepts_uploads(is_admin)
@admin_required
def corpus_upload(request: HttpRequest) -> HttpResponse:
    form = CorpusUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            job = corpus_upload_create(
                name=data["name"],
                upload=data["file"],
                description=data["description"],
                fields=DocumentFields(
                    id=data["id_field"], text=data["text_field"], url=data["url_field"], topic=data["topic_field"]
                ),
                skip_bad=data["skip_bad"],
                create_topics=data["create_topics"],
                user=request.user.get_username(),
            )
        except (AppError, RecordError) as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("corpus_import_detail", pk=job.pk)
    return render(
        request,
        "mining/corpus_upload.html",
        {"form": form, "sync_limit": settings.UPLOAD_BACKGROUND_MIN_BYTES},
        status=400 if request.method == "POST" else 200,
    )


@admin_required
def corpus_import_detail(request: HttpRequest, pk: int) -> HttpResponse:
    corpus_imports_settle_stalled()  # a killed worker's row says so
    job = get_object_or_404(CorpusImport.objects.select_related("corpus"), pk=pk)
    return render(
        request,
        "mining/corpus_import.html",
        {
            "job": job,
            "lines": corpus_import_report_lines(job.report),
            "pending": job.status in (CorpusImportStatus.QUEUED, CorpusImportStatus.RUNNING),
        },
    )


@researcher_required
def split_index(request: HttpRequest) -> HttpResponse:
    return render(request, "mining/split_list.html", {"reports": split_report_list()[:50]})


@researcher_required
def split_detail(request: HttpRequest, pk: int) -> HttpResponse:
    report = get_object_or_404(SplitReport, pk=pk)
    closest = sorted((r for r in report.records if r["cosine"] is not None), key=lambda r: -r["cosine"])[:50]
    return render(
        request,
        "mining/split_detail.html",
        {
            "report": report,
            "closest": closest,
            "dropped": report.dropped[:200],
        },
    )
