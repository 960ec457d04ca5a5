"""Error pages for people: the 400 page that says what was wrong, without a traceback, a
setting or anything else about the server (templates/400.html)."""
from __future__ import annotations

from django.core.exceptions import BadRequest, SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.template import loader

GENERIC_400 = "The request could not be understood."


def bad_request_response(request: HttpRequest, message: str, *, field: str = "") -> HttpResponse:
    """A 400 page naming what was wrong (``field``: the form field or parameter, if one)."""
    context = {"message": message, "field": field}
    try:
        body = loader.get_template("400.html").render(context, request)
    except Exception:  # the page frame itself failed: still answer 400, in plain text
        return HttpResponseBadRequest(f"{field}: {message}" if field else message, content_type="text/plain")
    return HttpResponseBadRequest(body)


def bad_request_message(exception: BaseException | None) -> str:
    """What a 400 page may say about ``exception``: the message of a ``BadRequest`` a view
    raised on purpose; nothing from a ``SuspiciousOperation`` (a bad Host header, a forged
    session, ...), whose message describes the server's configuration."""
    if isinstance(exception, BadRequest) and not isinstance(exception, SuspiciousOperation):
        message = str(exception).strip()
        if message:
            return message[:1000]
    return GENERIC_400
