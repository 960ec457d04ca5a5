"""The researchers' review pages (docs/annotation.md, "Review and adjudication"): the study's
annotations to accept, reject or correct, one by one or ticked in bulk; an item's page with its
answers, judges, each annotation's history and the gold-label form. Thin: the services decide,
and a refusal comes back on the same page with its message and status (``core.errors.app_errors``)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotate.kinds import kind_get
from annotate.models import Annotation, StudyItem
from annotate.reports.selectors import study_judgment_rows
from annotate.review import rules
from annotate.review.selectors import (
    REVIEW_STATUSES,
    gold_agreement,
    gold_groups,
    gold_label_get,
    gold_sources,
    review_counts,
    review_list,
    review_status_check,
)
from annotate.review.services import annotation_review, gold_label_delete, gold_label_set, gold_qualification_add
from annotate.studies.selectors import study_get
from core.app_errors import AppError, InvalidInput
from core.errors import app_errors
from core.permissions import researcher_required

PAGE_SIZE = 100


def _answer_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _answer_from_form(text: str, field: str = "answer") -> Any:
    """The answer typed as JSON in the kind's shape; a parse error names the field and the line."""
    if len(text) > 200_000:
        raise InvalidInput(fields={field: "at most 200,000 characters"})
    try:
        return json.loads(text, parse_constant=lambda name: float("nan"))
    except json.JSONDecodeError as exc:
        raise InvalidInput(fields={field: f"not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"}) from None


def _review_context(request: HttpRequest, slug: str) -> dict[str, Any]:
    study = study_get(slug=slug)
    status = review_status_check(request.GET.get("status"))
    page = Paginator(review_list(study, status=status), PAGE_SIZE).get_page(request.GET.get("page"))
    gold_report = gold_agreement(study, study_judgment_rows(study))
    return {
        "study": study,
        "gold_sources": gold_sources(study),
        "gold_report": gold_report,
        "gold_groups": gold_groups(gold_report),
        "status": status,
        "statuses": REVIEW_STATUSES,
        "page": page,
        "counts": review_counts(study),
        "categories": rules.REJECTION_CATEGORIES,
        "min_length": rules.REJECT_MESSAGE_MIN_LENGTH,
        "max_length": rules.REJECT_MESSAGE_MAX_LENGTH,
    }


def _review_refused(request: HttpRequest, exc: AppError, slug: str) -> HttpResponse:
    context = _review_context(request, slug)
    context.update({"error": exc, "form": request.POST})
    return render(request, "annotate/review/review.html", context, status=exc.status)


@researcher_required
@app_errors()
def review(request: HttpRequest, slug: str) -> HttpResponse:
    return render(request, "annotate/review/review.html", _review_context(request, slug))


@researcher_required
@require_POST
@app_errors(_review_refused)
def review_bulk(request: HttpRequest, slug: str) -> HttpResponse:
    """Accept or reject the ticked annotations (``annotation_ids``)."""
    study = study_get(slug=slug)
    ids = request.POST.getlist("annotation_ids")
    if not ids:
        raise InvalidInput(fields={"annotation_ids": "tick the annotations to review"})
    decision = request.POST.get("decision", "")
    if decision == rules.DECISION_CORRECT:
        raise InvalidInput(fields={"decision": "correct an annotation on its item's page"})
    reviews = annotation_review(
        study=study,
        annotation_ids=ids,
        decision=decision,
        reviewer=request.user,
        reason=request.POST.get("reason", ""),
        rejection_category=request.POST.get("rejection_category", ""),
    )
    messages.success(request, f"{rules.DECISIONS[decision]}: {len(reviews)} annotation(s).")
    query = request.GET.urlencode()
    return redirect(reverse("annotate:review", args=[slug]) + (f"?{query}" if query else ""))


def _item_context(slug: str, item_id: str) -> dict[str, Any]:
    study = study_get(slug=slug)
    item = get_object_or_404(StudyItem, study=study, item_id=item_id)
    kind = kind_get(study.kind)
    annotations = list(
        Annotation.objects.filter(item=item, is_test=False)
        .select_related("annotator", "study")  # the study's kind summarizes each answer (label)
        .prefetch_related("reviews__reviewer")
        .order_by("submitted_at", "pk")
    )
    rows = [
        {
            "annotation": a,
            "answer_text": _answer_text(a.answer),
            "submitted_text": _answer_text(a.submitted_answer["answer"]) if a.submitted_answer else "",
            "history": sorted(a.reviews.all(), key=lambda r: (r.created_at, r.pk)),
        }
        for a in annotations
    ]
    gold = gold_label_get(item)
    judges = sorted((row.judge, row.has_failure) for row in study_judgment_rows(study) if row.item_id == item.item_id)
    counted = [a for a in annotations if not a.excluded and not a.surplus and not a.broken]
    template = gold.answer if gold else (counted[0].answer if counted else {})
    return {
        "study": study,
        "item": item,
        "kind": kind,
        "rows": rows,
        "gold": gold,
        "gold_settled": set(gold.settled.values_list("pk", flat=True)) if gold else {a.pk for a in counted},
        "gold_answer_text": _answer_text(template),
        "judges": judges,
        "categories": rules.REJECTION_CATEGORIES,
        "min_length": rules.REJECT_MESSAGE_MIN_LENGTH,
        "max_length": rules.REJECT_MESSAGE_MAX_LENGTH,
    }


def _item_refused(request: HttpRequest, exc: AppError, slug: str, item_id: str) -> HttpResponse:
    context = _item_context(slug, item_id)
    context.update({"error": exc, "form": request.POST, "form_for": request.POST.get("form", "")})
    if request.POST.get("form") == "gold":
        context["gold_answer_text"] = request.POST.get("answer", context["gold_answer_text"])
    return render(request, "annotate/review/item.html", context, status=exc.status)


@researcher_required
@app_errors(_item_refused)
def review_item(request: HttpRequest, slug: str, item_id: str) -> HttpResponse:
    """An item's answers with their review forms (GET), or one form sent (POST): ``form`` is
    ``review`` (one annotation: accept, reject or correct), ``gold`` (set the gold label) or
    ``gold_delete``."""
    if request.method != "POST":
        return render(request, "annotate/review/item.html", _item_context(slug, item_id))
    study = study_get(slug=slug)
    item = get_object_or_404(StudyItem, study=study, item_id=item_id)
    form = request.POST.get("form", "")
    if form == "review":
        decision = request.POST.get("decision", "")
        answer = None
        if decision == rules.DECISION_CORRECT:
            answer = _answer_from_form(request.POST.get("answer", ""))
        annotation_review(
            study=study,
            annotation_ids=[request.POST.get("annotation_id", "")],
            decision=decision,
            reviewer=request.user,
            reason=request.POST.get("reason", ""),
            rejection_category=request.POST.get("rejection_category", ""),
            answer=answer,
        )
        messages.success(
            request, f"{rules.DECISIONS.get(decision, decision)}: annotation {request.POST.get('annotation_id')}."
        )
    elif form == "gold":
        gold_label_set(
            item=item,
            answer=_answer_from_form(request.POST.get("answer", "")),
            note=request.POST.get("note", ""),
            adjudicator=request.user,
            settled=request.POST.getlist("settled") or None,
        )
        messages.success(request, f"Gold label of {item.item_id} saved.")
    elif form == "gold_delete":
        gold_label_delete(item=item)
        messages.success(request, f"Gold label of {item.item_id} removed.")
    else:
        raise InvalidInput(fields={"form": "one of review, gold, gold_delete"})
    return redirect("annotate:review_item", slug=slug, item_id=item.item_id)


@researcher_required
@require_POST
@app_errors(_review_refused)
def review_gold_qualification(request: HttpRequest, slug: str) -> HttpResponse:
    """Take the gold-labelled items of the study chosen (``from_study``) as qualification items."""
    target = study_get(slug=slug)
    source_slug = request.POST.get("from_study", "")
    if not source_slug:
        raise InvalidInput(fields={"from_study": "choose a study with gold labels"})
    added = gold_qualification_add(source=study_get(slug=source_slug), target=target)
    note = (
        ""
        if target.qualification_enabled
        else " The qualification test is off in this study's settings: turn it on to use them."
    )
    messages.success(
        request,
        f"{len(added.added)} qualification item(s) added from the gold labels of {source_slug}"
        f"{f'; {len(added.skipped)} already here' if added.skipped else ''}.{note}",
    )
    return redirect("annotate:review", slug=slug)
