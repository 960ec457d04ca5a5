"""Researchers' study pages: list, create (from a JSONL file and/or judged generations),
progress, annotators, items with their annotations, pilot rounds, exports."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotate.errors import AnnotateError, ReleaseRefused
from annotate.kinds import kind_get
from annotate.kinds.base import REPORT_AGREEMENT
from annotate.links import prolific_entry_url
from annotate.models import Participation, StudyImport
from annotate.participation.services import participation_test_start
from annotate.studies.api_fields import include_test
from annotate.studies.exports import annotation_csv_lines, annotation_export_rows
from annotate.studies.forms import RoundCreateForm, StudyCreateForm, StudySettingsForm
from annotate.studies.imports import (
    study_create_from_upload,
    study_create_options,
    study_imports_settle_stalled,
    upload_problem_lines,
)
from annotate.studies.item_sources import judge_names
from annotate.studies.round_selectors import study_round_summaries
from annotate.studies.selectors import (
    participation_release_marks_returned,
    participation_release_refusal,
    participation_reserved_count,
    study_annotators_page,
    study_flagged_items,
    study_get,
    study_item_counts,
    study_items_page,
    study_list,
    study_progress_get,
)
from annotate.studies.services import participation_release, study_round_create, study_update
from core.confirm import confirm_page, confirmed
from core.permissions import researcher_required
from core.record_files import RecordError
from core.request_bodies import accepts_uploads
from core.roles import is_researcher


def entry_url(request: HttpRequest, slug: str) -> str:
    """The URL to paste into Prolific (Prolific fills the three placeholders)."""
    return prolific_entry_url(request.build_absolute_uri("/"), slug)


@researcher_required
def study_index(request: HttpRequest) -> HttpResponse:
    return render(request, "annotate/study_list.html", {"studies": study_list()})


def _problems_beside_fields(form: StudyCreateForm, exc: AnnotateError) -> list[str]:
    """Each of the service's problems beside the form field it names; the rest (and the whole
    message, when none names a field) at the top."""
    beside = [e for e in exc.errors if e.field in form.fields]
    for e in beside:
        form.add_error(e.field, e.message[:1].upper() + e.message[1:] + ".")
    if not beside:
        return [exc.message]
    rest = [e.message for e in exc.errors if e.field not in form.fields]
    return ["The study was not created" + (": " + "; ".join(rest) if rest else "; see the fields marked below") + "."]


@accepts_uploads(is_researcher)
@researcher_required
@require_http_methods(["GET", "POST"])
def study_new(request: HttpRequest) -> HttpResponse:
    judges = judge_names()
    form = StudyCreateForm(request.POST or None, request.FILES or None, judges=judges)
    problems: list[str] = []
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        options = study_create_options(data)
        upload = data.get("items_file")
        try:
            outcome = study_create_from_upload(options=options, upload=upload, created_by=request.user)
        except RecordError as exc:
            assert upload is not None  # only an uploaded file's records are read here
            problems = [*upload_problem_lines(exc, upload.name), "Nothing was created."]
        except AnnotateError as exc:
            problems = _problems_beside_fields(form, exc)
        else:
            if outcome.job is not None:  # too large for the request: a worker creates the study
                messages.info(
                    request,
                    f"{outcome.job.original_name} is being read by a worker; the study appears when it is done.",
                )
                return redirect("annotate:study_import", pk=outcome.job.pk)
            assert outcome.study is not None
            messages.success(request, f"Study created with {outcome.study.items.count()} items.")
            return redirect("annotate:study_detail", slug=outcome.study.slug)
    status = 400 if request.method == "POST" else 200
    return render(
        request, "annotate/study_new.html", {"form": form, "problems": problems, "judges": judges}, status=status
    )


@researcher_required
def study_import(request: HttpRequest, pk: int) -> HttpResponse:
    """A study being created from a large items file by a worker: its status, then its
    study or the file-line-field problems that stopped it."""
    study_imports_settle_stalled()  # a killed worker's row says so
    job = get_object_or_404(StudyImport.objects.select_related("study"), pk=pk)
    return render(
        request,
        "annotate/study_import.html",
        {
            "job": job,
            "pending": job.status in ("queued", "running"),
        },
    )


def _kind_results(study) -> dict[str, Any]:
    """The study's kind, whether its agreement reports apply, and its results under the name
    their template reads (no template for a kind whose results are its reports)."""
    kind = kind_get(study.kind)
    context = {"kind": kind, "agreement_reports": kind.has_report(REPORT_AGREEMENT), "results_template": None}
    if kind.results_template is not None:
        context.update({"results_template": kind.results_template, kind.results_name or "results": kind.results(study)})
    return context


@researcher_required
def study_detail(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get(slug=slug)
    # A page of annotators and of items: the render's work does not grow with the study.
    annotators = study_annotators_page(study, page=request.GET.get("annotators_page", 1))
    items = study_items_page(study, page=request.GET.get("items_page", 1))
    return render(
        request,
        "annotate/study_detail.html",
        {
            "study": study,
            "entry_url": entry_url(request, slug),
            "progress": study_progress_get(study),
            "annotators": annotators["rows"],
            "annotators_page": annotators["page"],
            "item_counts": study_item_counts(study),
            "items": items["rows"],
            "items_page": items["page"],
            "rounds": study_round_summaries(study),
            "flagged": study_flagged_items(study),
            **_kind_results(study),
            "settings_form": StudySettingsForm(
                initial={
                    "is_open": study.is_open,
                    "payment_per_item": study.payment_per_item,
                    "min_annotations_for_majority": study.min_annotations_for_majority,
                    "prolific_study_id": study.prolific_study_id,
                    "allow_other_pids": study.allow_other_pids,
                }
            ),
            "round_form": RoundCreateForm(initial={"instructions": study.guideline_version.instructions}),
        },
    )


@researcher_required
@require_POST
def study_settings(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get(slug=slug)
    form = StudySettingsForm(request.POST)
    entry_rules = "prolific_study_id" in request.POST
    if form.is_valid():
        payment = form.cleaned_data.get("payment_per_item")
        study_update(
            study=study,
            is_open=form.cleaned_data["is_open"],
            payment_per_item=payment,
            clear_payment=payment is None,
            min_annotations_for_majority=form.cleaned_data.get("min_annotations_for_majority"),
            # The entry rules change only when the form that shows them was posted.
            prolific_study_id=(form.cleaned_data.get("prolific_study_id") or "") if entry_rules else None,
            allow_other_pids=form.cleaned_data["allow_other_pids"] if entry_rules else None,
        )
        messages.success(request, "Settings saved.")
    else:
        messages.error(
            request, "Settings not saved: " + "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in form.errors.items())
        )
    return redirect("annotate:study_detail", slug=slug)


@researcher_required
@require_POST
def study_round_new(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get(slug=slug)
    form = RoundCreateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The new round needs guidelines.")
        return redirect("annotate:study_detail", slug=slug)
    try:
        new = study_round_create(study=study, instructions=form.cleaned_data["instructions"], created_by=request.user)
    except AnnotateError as exc:
        messages.error(request, exc.message)
        return redirect("annotate:study_detail", slug=slug)
    messages.success(request, f"Round {new.round} created with guidelines {new.guideline_version.label}.")
    return redirect("annotate:study_detail", slug=new.slug)


@researcher_required
@require_http_methods(["GET", "POST"])
def participant_release(request: HttpRequest, slug: str, participation_id: int) -> HttpResponse:
    """Releasing asks first: a GET, or a POST without confirm=yes, shows the confirmation page.
    Where a release does not apply (``participation_release_refusal``, what the service and the
    API refuse) nothing is asked or done: the study page says why."""
    study = study_get(slug=slug)
    p = get_object_or_404(Participation.objects.select_related("annotator"), pk=participation_id, study=study)
    back = reverse("annotate:study_detail", args=[slug])
    n = participation_reserved_count(p)
    refusal = participation_release_refusal(p, n_reserved=n)
    if refusal is not None:
        messages.error(request, refusal)
        return redirect(back)
    if not confirmed(request):
        pid = p.annotator.pid
        after = (
            f"{pid} is marked returned"
            if participation_release_marks_returned(p)
            else f"{pid} stays {p.get_state_display()}"
        )
        return confirm_page(
            request,
            title=f"Release the slots of {pid}?",
            question=f"Release {n} reserved slot{'s' if n != 1 else ''} of {pid} in {study.name}? They return "
            f"to the pool for other annotators and {after} (their drafts stay stored; a late submit is "
            "still kept).",
            action=request.path,
            confirm_label="Yes, release",
            back_url=back,
        )
    try:
        released = participation_release(participation=p)
    except ReleaseRefused as exc:  # the state changed since it was read: the service's refusal
        messages.error(request, exc.message)
        return redirect(back)
    messages.success(request, f"Released {released} reserved slot(s) of {p.annotator.pid}; they return to the pool.")
    return redirect(back)


@researcher_required
@require_POST
def study_test_participant(request: HttpRequest, slug: str) -> HttpResponse:
    """Start the annotator path as a test participant (``participation_test_start``): this
    browser's session holds it, as an annotator's holds theirs after the entry link."""
    from annotate.participation.views import participation_session_set, route

    study = study_get(slug=slug)
    try:
        p = participation_test_start(study=study)
    except AnnotateError as exc:
        messages.error(request, exc.message)
        return redirect("annotate:study_detail", slug=slug)
    participation_session_set(request, p)
    return redirect(route(p))


@researcher_required
def study_choice_tier(request: HttpRequest, slug: str, tier: str) -> HttpResponse:
    """One tier of a study's items as its kind's lines (JSONL; multiple choice: the gold or
    harder tier as goal-step task lines)."""
    study = study_get(slug=slug)
    kind = kind_get(study.kind)
    if tier not in kind.tiers:
        raise Http404(f"A {kind.label} study has no tier {tier!r}")
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in kind.tier_records(study, tier)]
    response = HttpResponse("".join(lines), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-{tier}.jsonl"'
    return response


@researcher_required
def study_export(request: HttpRequest, slug: str, fmt: str) -> StreamingHttpResponse:
    if fmt not in ("csv", "jsonl"):
        raise Http404("Exports are .csv or .jsonl")
    study = study_get(slug=slug)
    # Test participants' annotations only when asked for (?include_test=1), marked is_test; the
    # parameter is read as the API reads it (a bad value is a 400 naming it).
    rows = annotation_export_rows(study, include_test=include_test(request))
    if fmt == "csv":
        response = StreamingHttpResponse(annotation_csv_lines(rows), content_type="text/csv; charset=utf-8")
    else:
        response = StreamingHttpResponse(
            (json.dumps(r, ensure_ascii=False) + "\n" for r in rows), content_type="application/x-ndjson; charset=utf-8"
        )
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-annotations.{fmt}"'
    return response
