"""Annotator pages (no login: Prolific participants arrive with their PID) and the JSON
endpoints the annotation page calls. Thin: every rule lives in annotate/services.py.

An annotator reaches only their own participation (kept in their session when they enter
through the study link) and their own current item; everything else answers 403 or 404."""
from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, RawPostDataException
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_http_methods, require_POST

from annotate import constants as C
from annotate.kinds import codebook_get, kind_get
from annotate.kinds import multiple_choice
from annotate.models import Participation, ParticipationState, Study
from annotate.selectors import participation_for_session
from annotate.services import (
    AnnotateError,
    annotation_submit,
    assignment_next,
    assignment_page,
    assignment_save,
    participation_consent,
    participation_enter,
    training_answer,
    training_examples,
    training_open,
    training_position,
)
from core.client_ip import client_ip
from core.strict_json import StrictJSONError, loads_object


SESSION_ENDED = "Your session has ended. Open the study again from Prolific; your work so far is saved."


def _session_key(study: Study | str) -> str:
    slug = study if isinstance(study, str) else study.slug
    return f"annotate:participation:{slug}"


def _study_or_error(request: HttpRequest, slug: str) -> Study | HttpResponse:
    study = Study.objects.select_related("guideline_version").filter(slug=slug).first()
    if study is None:
        return _problem(request, "Study not found",
                        "There is no study at this address. Please open the study again from Prolific.", 404)
    return study


def _problem(request: HttpRequest, title: str, message: str, status: int) -> HttpResponse:
    return render(request, "annotate/problem.html", {"title": title, "message": message}, status=status)


def _participation(request: HttpRequest, study: Study) -> Participation | None:
    return participation_for_session(slug=study.slug, participation_id=request.session.get(_session_key(study)))


def _no_session(request: HttpRequest) -> HttpResponse:
    return _problem(
        request, "Please start from your study link",
        "This page belongs to an annotator's session that is not open in this browser. Open the study "
        "from Prolific (the link carries your Prolific ID) and you will continue where you were.", 403,
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


def _load(request: HttpRequest, slug: str) -> tuple[Study, Participation] | HttpResponse:
    study = _study_or_error(request, slug)
    if isinstance(study, HttpResponse):
        return study
    p = _participation(request, study)
    if p is None:
        return _no_session(request)
    return study, p


@login_not_required
@require_http_methods(["GET"])
def entry(request: HttpRequest, slug: str) -> HttpResponse:
    """``/a/<slug>/?PROLIFIC_PID=...&STUDY_ID=...&SESSION_ID=...``"""
    study = _study_or_error(request, slug)
    if isinstance(study, HttpResponse):
        return study
    if "PROLIFIC_PID" not in request.GET:
        existing = _participation(request, study)
        if existing is not None:
            return redirect(route(existing))
    try:
        p = participation_enter(
            study=study, pid=request.GET.get("PROLIFIC_PID"),
            prolific_study_id=request.GET.get("STUDY_ID"), session_id=request.GET.get("SESSION_ID"),
            client_address=client_ip(request), rate_limited=True,
        )
    except AnnotateError as exc:
        title = "Please try again later" if exc.status == 429 else "We could not start the study"
        return _problem(request, title, exc.message, 429 if exc.status == 429 else 400)
    request.session[_session_key(study)] = p.pk
    return redirect(route(p))


@login_not_required
@require_http_methods(["GET", "POST"])
def consent(request: HttpRequest, slug: str) -> HttpResponse:
    loaded = _load(request, slug)
    if isinstance(loaded, HttpResponse):
        return loaded
    study, p = loaded
    if p.state != ParticipationState.CONSENT:
        return redirect(route(p))
    if request.method == "POST":
        if request.POST.get("agree") != "yes":
            return render(request, "annotate/consent.html", {"study": study, "p": p,
                          "error": "Tick the box to confirm you have read the guidelines and agree to take part."}, status=400)
        p = participation_consent(participation=p)
        return redirect(route(p))
    return render(request, "annotate/consent.html", {"study": study, "p": p})


@login_not_required
@require_http_methods(["GET", "POST"])
def training(request: HttpRequest, slug: str, index: int | None = None) -> HttpResponse:
    """The codebook: definition and categories, then each example with its check question."""
    loaded = _load(request, slug)
    if isinstance(loaded, HttpResponse):
        return loaded
    study, p = loaded
    if p.state != ParticipationState.TRAINING:
        return redirect(route(p))
    examples = training_examples(study)
    codebook = codebook_get(study.kind) or {}
    position = training_position(p)
    if index is None:
        return render(request, "annotate/training_intro.html", {
            "study": study, "codebook": codebook, "n_examples": len(examples), "position": position,
            "next_number": min(position, len(examples) - 1) + 1,
        })
    i = index - 1
    if not 0 <= i < len(examples) or i > position:
        return redirect("annotate:training_example", slug=slug, index=min(position, len(examples) - 1) + 1)
    result = None
    try:
        if request.method == "POST":
            choice = request.POST.get("answer")
            if choice not in ("critical", "acceptable"):
                raise AnnotateError("Choose one answer before checking.")
            result = training_answer(participation=p, index=i, answer=choice == "critical")
            p.refresh_from_db()
        else:
            p = training_open(participation=p, index=i)
    except AnnotateError as exc:
        return render(request, "annotate/training_example.html", {
            "study": study, "example": examples[i], "number": index, "total": len(examples), "error": exc.message,
        }, status=400)
    example = examples[i]
    entry_state = p.training_progress.get(example["id"], {})
    answered = "answer" in entry_state
    return render(request, "annotate/training_example.html", {
        "study": study, "example": example, "number": index, "total": len(examples),
        "answered": answered, "first_answer_correct": entry_state.get("correct"),
        "result": result, "is_last": index == len(examples),
        "next_url": route(p) if p.state != ParticipationState.TRAINING else
        reverse("annotate:training_example", args=[slug, index + 1]),
    })


def _item_context(study: Study, p: Participation, a: Any) -> dict[str, Any]:
    from django.utils import timezone

    kind = kind_get(study.kind)
    item = a.item
    elapsed = max(0.0, (timezone.now() - a.first_served_at).total_seconds())
    page_state = {
        "assignment": str(a.public_id),
        "saveUrl": reverse("annotate:save", args=[study.slug, a.public_id]),
        "submitUrl": reverse("annotate:submit", args=[study.slug, a.public_id]),
        "draft": a.draft or {},
        "draftSeq": a.draft_seq,
        "stepsOpened": sorted(a.steps_opened),
        "goalAcknowledged": a.goal_acknowledged_at is not None,
        "elapsedSeconds": elapsed,
        "minSeconds": study.min_seconds,
        "nL1": len(item.reference_steps),
        "nL2": len(item.candidate_steps),
        "autosaveSeconds": C.AUTOSAVE_SECONDS,
        "interfaceVersion": C.INTERFACE_VERSION,
    }
    return {
        "study": study, "p": p, "assignment": a, "item": item, "kind_template": kind.item_template,
        "l1": list(enumerate(item.reference_steps, start=1)), "l2": list(enumerate(item.candidate_steps, start=1)),
        "codebook": codebook_get(study.kind) or {}, "page_state": page_state,
        "in_qualification": p.state == ParticipationState.QUALIFICATION,
        "kind_script": kind.item_script, "shortcuts_template": kind.shortcuts_template,
        "kind_context": kind.item_context(item) if kind.item_context is not None else {},
    }


@login_not_required
@ensure_csrf_cookie  # the page's script sends the token with every save and submit
@require_http_methods(["GET"])
def work(request: HttpRequest, slug: str) -> HttpResponse:
    """The annotator's current item (qualification items first, then the main pool)."""
    loaded = _load(request, slug)
    if isinstance(loaded, HttpResponse):
        return loaded
    study, p = loaded
    if p.state not in (ParticipationState.QUALIFICATION, ParticipationState.ANNOTATING):
        return redirect(route(p))
    kind = kind_get(study.kind)
    if kind.page_template is not None:
        return _work_page(request, study, p, kind)
    a = assignment_next(participation=p)
    p.refresh_from_db()
    if a is None:
        return redirect(route(p))
    response = render(request, "annotate/item.html", _item_context(study, p, a))
    response["Cache-Control"] = "no-store"
    return response


def _work_page(request: HttpRequest, study: Study, p: Participation, kind: Any) -> HttpResponse:
    """A page of one or more multiple-choice items (the study's items per page), each saved
    and submitted on its own by the page script."""
    from django.utils import timezone

    page = assignment_page(participation=p, size=study.items_per_page)
    p.refresh_from_db()
    if not page:
        return redirect(route(p))
    now = timezone.now()
    items = []
    for number, a in enumerate(page, start=1):
        options = [(str(i), chr(ord("A") + i), text) for i, text in enumerate(a.item.candidate_steps)]
        items.append({"assignment": a, "item": a.item, "number": number, "options": options,
                      "extra": multiple_choice.extra_options(len(a.item.candidate_steps)), "task": a.item.source.get("task", "")})
    page_state = {
        "items": [{
            "assignment": str(a.public_id),
            "saveUrl": reverse("annotate:save", args=[study.slug, a.public_id]),
            "submitUrl": reverse("annotate:submit", args=[study.slug, a.public_id]),
            "draft": a.draft or {}, "draftSeq": a.draft_seq,
            "elapsedSeconds": max(0.0, (now - a.first_served_at).total_seconds()),
        } for a in page],
        "minSeconds": study.min_seconds, "autosaveSeconds": C.AUTOSAVE_SECONDS,
        "nextUrl": reverse("annotate:work", args=[study.slug]),
    }
    response = render(request, kind.page_template, {
        "study": study, "p": p, "items": items, "page_state": page_state,
        "in_qualification": p.state == ParticipationState.QUALIFICATION, "guidance": multiple_choice.GUIDANCE,
    })
    response["Cache-Control"] = "no-store"
    return response


def _json_body(request: HttpRequest) -> dict[str, Any] | JsonResponse:
    """The request's JSON object, strictly parsed (core/strict_json.py): NaN, Infinity, NUL,
    lone surrogates, deep nesting, over-long strings or an oversized body are a 400 naming the
    field, before any service runs."""
    try:
        try:
            body = request.body
        except RawPostDataException:  # a form upload whose stream was already read as form data
            raise StrictJSONError("", "the request body must be a JSON object (Content-Type: application/json)") from None
        return loads_object(body, max_bytes=C.MAX_REQUEST_BYTES, max_depth=C.MAX_JSON_DEPTH,
                            max_string_length=C.MAX_DRAFT_STRING_LENGTH)
    except StrictJSONError as exc:
        message = f"{exc.field}: {exc.message}" if exc.field else exc.message
        return JsonResponse({"ok": False, "message": message, "errors": [exc.as_dict()]}, status=400)


def _json_error(exc: AnnotateError) -> JsonResponse:
    return JsonResponse(
        {"ok": False, "message": exc.message, "errors": [e.as_dict() for e in exc.errors]}, status=exc.status
    )


def _json_load(request: HttpRequest, slug: str) -> tuple[Study, Participation] | JsonResponse:
    """One query: the participation in the session, with its study (autosaves are frequent)."""
    p = participation_for_session(slug=slug, participation_id=request.session.get(_session_key(slug)))
    if p is None:
        return JsonResponse({"ok": False, "message": SESSION_ENDED}, status=403)
    return p.study, p


@login_not_required
@require_POST
def save(request: HttpRequest, slug: str, public_id: str) -> JsonResponse:
    """Autosave: ``{"draft": {...}, "seq": n, "events": [...], "active_ms": n}``. The most frequent
    request: the participation id from the session goes straight into the assignment lookup,
    which answers 404 unless the assignment is theirs."""
    participation_id = request.session.get(_session_key(slug))
    if not isinstance(participation_id, int):
        return JsonResponse({"ok": False, "message": SESSION_ENDED}, status=403)
    body = _json_body(request)
    if isinstance(body, JsonResponse):
        return body
    try:
        result = assignment_save(
            participation=participation_id, public_id=public_id, draft=body.get("draft"), seq=body.get("seq"),
            events=body.get("events"), active_ms=body.get("active_ms", 0),
        )
    except AnnotateError as exc:
        return _json_error(exc)
    a = result.assignment
    return JsonResponse({
        "ok": True, "draft_saved": result.draft_saved, "seq": a.draft_seq,
        "steps_opened": len(a.steps_opened), "goal_acknowledged": a.goal_acknowledged_at is not None,
    })


@login_not_required
@require_POST
def submit(request: HttpRequest, slug: str, public_id: str) -> JsonResponse:
    """Submit & Continue: ``{"answer": {...}, "submission_id": "..."}``."""
    loaded = _json_load(request, slug)
    if isinstance(loaded, JsonResponse):
        return loaded
    study, p = loaded
    body = _json_body(request)
    if isinstance(body, JsonResponse):
        return body
    try:
        result = annotation_submit(
            participation=p, public_id=public_id, answer=body.get("answer"),
            submission_id=body.get("submission_id") or "",
        )
    except AnnotateError as exc:
        return _json_error(exc)
    p.refresh_from_db()
    return JsonResponse({
        "ok": True, "created": result.created, "annotation": result.annotation.pk,
        "surplus": result.annotation.surplus, "next": route(p),
    })


@login_not_required
@require_http_methods(["GET"])
def done(request: HttpRequest, slug: str) -> HttpResponse:
    loaded = _load(request, slug)
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
    return render(request, "annotate/done.html", {
        "study": study, "p": p, "code": code,
        "redirect_url": C.PROLIFIC_COMPLETE_URL.format(code=code) if code else None,
        "redirect_seconds": C.COMPLETION_REDIRECT_SECONDS,
    })
