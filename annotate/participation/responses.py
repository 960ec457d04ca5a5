"""How the annotator's pages answer: the request's JSON body strictly parsed, and the one place a
service's refusal (``annotate.errors.AnnotateError``, or any member of the application's error
family, core/app_errors.py) becomes a response, ``annotate_errors`` (the page decorator of
``core.errors.app_errors`` with the annotator's answers).

The services raise; the views do not catch. A view decorated with ``annotate_errors(json=True)``
(the page's saves and submits, and their preview twins) answers ``{"ok": false, "message",
"errors": [{"field", "message"}]}`` with the error's status (400 naming the field, 404 not
theirs, 409 a conflict, 429 too many); a page view answers with its own page carrying the
message (``page=``) or the problem page with the error's status."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, RawPostDataException
from django.shortcuts import render

from annotate import constants as C
from annotate.errors import AnnotateError, StudyFull
from core.app_errors import AppError
from core.errors import app_errors
from core.strict_json import StrictJSONError, loads_object


def problem_page(request: HttpRequest, title: str, message: str, status: int) -> HttpResponse:
    return render(request, "annotate/problem.html", {"title": title, "message": message}, status=status)


def study_full_page(request: HttpRequest, study: Any = None, p: Any = None) -> HttpResponse:
    """The "study full" page (409): no item is left for the participant, so they are asked to
    return the study on Prolific; no completion code. ``p``: the participation of one already
    in the study (a new participant turned away at the entry has none)."""
    return render(request, "annotate/full.html", {"study": study, "p": p}, status=StudyFull.status)


def json_error(exc: AppError) -> JsonResponse:
    errors = (
        [e.as_dict() for e in exc.errors]
        if isinstance(exc, AnnotateError)
        else [{"field": field, "message": m} for field, messages in exc.fields.items() for m in messages]
    )
    return JsonResponse({"ok": False, "message": exc.message, "errors": errors}, status=exc.status)


def annotate_errors(
    *, json: bool = False, title: str = "We could not go on", page: Callable[..., HttpResponse] | None = None
) -> Callable[[Callable], Callable]:
    """Turn a service's refusal (an ``AppError``) raised by the view into its response: JSON for
    the page's scripts (``json``), else ``page(request, exc, *args, **kwargs)`` (the view's own
    page with the message), else the problem page titled ``title`` ("Please try again later"
    for a 429; the study-full page for ``StudyFull``)."""

    def answer(request: HttpRequest, exc: AppError, *args: Any, **kwargs: Any) -> HttpResponse:
        if json:
            return json_error(exc)
        if isinstance(exc, StudyFull):
            return study_full_page(request)
        if page is not None:
            return page(request, exc, *args, **kwargs)
        return problem_page(request, "Please try again later" if exc.status == 429 else title, exc.message, exc.status)

    return app_errors(page=answer)


def json_body(request: HttpRequest) -> dict[str, Any] | JsonResponse:
    """The request's JSON object, strictly parsed (core/strict_json.py): NaN, Infinity, NUL,
    lone surrogates, deep nesting, over-long strings or an oversized body are a 400 naming the
    field, before any service runs."""
    try:
        try:
            body = request.body
        except RawPostDataException:  # a form upload whose stream was already read as form data
            raise StrictJSONError(
                "", "the request body must be a JSON object (Content-Type: application/json)"
            ) from None
        return loads_object(
            body, max_bytes=C.MAX_REQUEST_BYTES, max_depth=C.MAX_JSON_DEPTH, max_string_length=C.MAX_DRAFT_STRING_LENGTH
        )
    except StrictJSONError as exc:
        message = f"{exc.field}: {exc.message}" if exc.field else exc.message
        return JsonResponse({"ok": False, "message": message, "errors": [exc.as_dict()]}, status=400)
