"""Annotator pages (no login: Prolific participants arrive with their PID): entry, consent,
training and the end page; the annotation page and its JSON endpoints are in item_views.py. Thin: every rule lives in the services
(annotate/participation/), and their errors become answers in one decorator (responses.py).

An annotator reaches only their own participation (kept in their session when they enter
through the study link) and their own current item; everything else answers 403 or 404."""

from __future__ import annotations

from typing import cast

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotate import constants as C
from annotate.errors import AnnotateError
from annotate.kinds import codebook_get
from annotate.models import Participation, ParticipationState, Study
from annotate.participation.responses import annotate_errors, problem_page, study_full_page
from annotate.participation.selectors import participation_for_session, participation_study_full, study_terms
from annotate.participation.services import (
    participation_consent,
    participation_enter,
    training_answer,
    training_examples,
    training_open,
    training_position,
)
from core.client_ip import client_ip

SESSION_ENDED = "Your session has ended. Open the study again from Prolific; your work so far is saved."


def session_key(study: Study | str) -> str:
    slug = study if isinstance(study, str) else study.slug
    return f"annotate:participation:{slug}"


def _study_or_error(request: HttpRequest, slug: str) -> Study | HttpResponse:
    study = Study.objects.select_related("guideline_version").filter(slug=slug).first()
    if study is None:
        return problem_page(
            request,
            "Study not found",
            "There is no study at this address. Please open the study again from Prolific.",
            404,
        )
    return study


def participation_session_set(request: HttpRequest, p: Participation) -> None:
    """This browser's session now holds participation ``p`` of its study."""
    request.session[session_key(p.study)] = p.pk


def _participation(request: HttpRequest, study: Study) -> Participation | None:
    return participation_for_session(slug=study.slug, participation_id=request.session.get(session_key(study)))


def _no_session(request: HttpRequest) -> HttpResponse:
    return problem_page(
        request,
        "Please start from your study link",
        "This page belongs to an annotator's session that is not open in this browser. Open the study "
        "from Prolific (the link carries your Prolific ID) and you will continue where you were.",
        403,
    )


def route(p: Participation) -> str:
    slug = p.study.slug
    if p.state == ParticipationState.CONSENT:
        return reverse("annotate:consent", args=[slug])
    if p.state == ParticipationState.TRAINING:
        return reverse("annotate:training", args=[slug])
    if p.state in (ParticipationState.QUALIFICATION, ParticipationState.ANNOTATING):
        return reverse("annotate:work", args=[slug])
    return reverse("annotate:done", args=[slug])


def session_participation(request: HttpRequest, slug: str) -> tuple[Study, Participation] | HttpResponse:
    study = _study_or_error(request, slug)
    if isinstance(study, HttpResponse):
        return study
    p = _participation(request, study)
    if p is None:
        return _no_session(request)
    return study, p


@login_not_required
@require_http_methods(["GET"])
@annotate_errors(title="We could not start the study")
def entry(request: HttpRequest, slug: str) -> HttpResponse:
    """``/a/<slug>/?PROLIFIC_PID=...&STUDY_ID=...&SESSION_ID=...``"""
    study = _study_or_error(request, slug)
    if isinstance(study, HttpResponse):
        return study
    if "PROLIFIC_PID" not in request.GET:
        existing = _participation(request, study)
        if existing is not None:
            return redirect(route(existing))
    p = participation_enter(
        study=study,
        pid=request.GET.get("PROLIFIC_PID"),
        prolific_study_id=request.GET.get("STUDY_ID"),
        session_id=request.GET.get("SESSION_ID"),
        client_address=client_ip(request),
        rate_limited=True,
    )
    participation_session_set(request, p)
    return redirect(route(p))


@login_not_required
@require_http_methods(["GET", "POST"])
@annotate_errors()
def consent(request: HttpRequest, slug: str) -> HttpResponse:
    """The guidelines and the study's terms; the study-full page instead while no item is left
    for the participant (``participation_study_full``): its promise of items and pay is never
    shown to someone who would get nothing."""
    loaded = session_participation(request, slug)
    if isinstance(loaded, HttpResponse):
        return loaded
    study, p = loaded
    if p.state != ParticipationState.CONSENT:
        return redirect(route(p))
    if participation_study_full(p):
        return study_full_page(request, study, p)
    terms = study_terms(study)
    if request.method == "POST":
        if request.POST.get("agree") != "yes":
            return render(
                request,
                "annotate/consent.html",
                {
                    "study": study,
                    "p": p,
                    "terms": terms,
                    "error": "Tick the box to confirm you have read the guidelines and agree to take part.",
                },
                status=400,
            )
        p = participation_consent(participation=p)
        return redirect(route(p))
    return render(request, "annotate/consent.html", {"study": study, "p": p, "terms": terms})


def _training_refused(request: HttpRequest, exc: AnnotateError, slug: str, index: int | None = None) -> HttpResponse:
    """The training example again, with the service's message (an answer it refused)."""
    # The view loaded both before the service refused, so this is never the error page.
    study, p = cast("tuple[Study, Participation]", session_participation(request, slug))
    examples = training_examples(study)
    return render(
        request,
        "annotate/training_example.html",
        {
            "study": study,
            "p": p,
            "example": examples[(index or 1) - 1],
            "number": index,
            "total": len(examples),
            "error": exc.message,
            "intro_url": reverse("annotate:training", args=[slug]),
        },
        status=400,
    )


@login_not_required
@require_http_methods(["GET", "POST"])
@annotate_errors(page=_training_refused)
def training(request: HttpRequest, slug: str, index: int | None = None) -> HttpResponse:
    """The codebook: definition and categories, then each example with its check question."""
    loaded = session_participation(request, slug)
    if isinstance(loaded, HttpResponse):
        return loaded
    study, p = loaded
    if p.state != ParticipationState.TRAINING:
        return redirect(route(p))
    examples = training_examples(study)
    codebook = codebook_get(study.kind) or {}
    position = training_position(p)
    if index is None:
        return render(
            request,
            "annotate/training_intro.html",
            {
                "study": study,
                "p": p,
                "codebook": codebook,
                "n_examples": len(examples),
                "position": position,
                "next_number": min(position, len(examples) - 1) + 1,
                "example_url": reverse("annotate:training_example", args=[slug, min(position, len(examples) - 1) + 1]),
            },
        )
    i = index - 1
    if not 0 <= i < len(examples) or i > position:
        return redirect("annotate:training_example", slug=slug, index=min(position, len(examples) - 1) + 1)
    result = None
    if request.method == "POST":
        choice = request.POST.get("answer")
        if choice not in ("critical", "acceptable"):
            raise AnnotateError("Choose one answer before checking.")
        result = training_answer(participation=p, index=i, answer=choice == "critical")
        p.refresh_from_db()
    else:
        p = training_open(participation=p, index=i)
    example = examples[i]
    entry_state = p.training_progress.get(example["id"], {})
    answered = "answer" in entry_state
    return render(
        request,
        "annotate/training_example.html",
        {
            "study": study,
            "p": p,
            "example": example,
            "number": index,
            "total": len(examples),
            "intro_url": reverse("annotate:training", args=[slug]),
            "answered": answered,
            "first_answer_correct": entry_state.get("correct"),
            "result": result,
            "is_last": index == len(examples),
            "next_url": route(p)
            if p.state != ParticipationState.TRAINING
            else reverse("annotate:training_example", args=[slug, index + 1]),
        },
    )


@login_not_required
@require_http_methods(["GET"])
def done(request: HttpRequest, slug: str) -> HttpResponse:
    loaded = session_participation(request, slug)
    if isinstance(loaded, HttpResponse):
        return loaded
    study, p = loaded
    if not p.finished:
        return redirect(route(p))
    code = None
    if p.state == ParticipationState.COMPLETED:
        code = study.completion_code
    elif p.state == ParticipationState.SCREENED_OUT:
        code = study.screened_out_code
    return render(
        request,
        "annotate/done.html",
        {
            "study": study,
            "p": p,
            "code": code,
            "redirect_url": C.PROLIFIC_COMPLETE_URL.format(code=code) if code else None,
            "redirect_seconds": C.COMPLETION_REDIRECT_SECONDS,
        },
    )
