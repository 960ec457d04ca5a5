"""How errors are answered: the 400 page that says what was wrong, without a traceback, a
setting or anything else about the server (templates/400.html); the API's one exception
handler and the pages' one decorator for the application's error family (core/app_errors.py)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import BadRequest, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.template import loader
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.app_errors import AppError, InvalidInput

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
    if isinstance(exception, RequestDataTooBig):  # the limit is ours to state, not the server's secret
        return f"the request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes"
    if isinstance(exception, BadRequest) and not isinstance(exception, SuspiciousOperation):
        message = str(exception).strip()
        if message:
            return message[:1000]
    return GENERIC_400


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """REST_FRAMEWORK's EXCEPTION_HANDLER: an ``AppError`` a view or service raised is answered
    with its status and body; DRF's own refusals (a serializer's 400, 401, 403, 404, 405, 429)
    in the same shape (``api_error_body``); anything else is a 500."""
    if isinstance(exc, AppError):
        return Response(exc.body(), status=exc.status)
    response = drf_exception_handler(exc, context)
    if response is not None:
        response.data = api_error_body(exc, response.data)
    return response


def api_error_body(exc: Exception, data: Any) -> dict[str, Any]:
    """A DRF refusal in the application's one error shape (core/app_errors.py): ``code`` (a
    serializer's refusal is ``invalid_input``; the others keep DRF's: ``not_authenticated``,
    ``permission_denied``, ``not_found``, ``method_not_allowed``, ``throttled``, ...),
    ``detail``, and each refused field with its problems."""
    if isinstance(exc, ValidationError):
        fields = data if isinstance(data, dict) else {"non_field_errors": data}
        flat = {name: _problems(problems) for name, problems in fields.items()}
        detail = "; ".join(f"{name}: {'; '.join(problems)}" for name, problems in flat.items())
        return {"code": InvalidInput.code, "detail": detail, **fields}
    body = dict(data) if isinstance(data, dict) else {"detail": str(data)}
    # Django's Http404 and PermissionDenied, which DRF answers as its own NotFound and PermissionDenied.
    code = (
        exc.default_code
        if isinstance(exc, APIException)
        else "not_found"
        if isinstance(exc, Http404)
        else "permission_denied"
    )
    return {"code": code, **body}


def _problems(value: Any) -> list[str]:
    """A field's problems as text lines (a nested serializer's are ``key: problem``)."""
    if isinstance(value, dict):
        return [f"{key}: {line}" for key, inner in value.items() for line in _problems(inner)]
    if isinstance(value, list):
        return [line for inner in value for line in _problems(inner)]
    return [str(value)]


def app_error_response(request: HttpRequest, exc: AppError) -> HttpResponse:
    """The error page with ``exc``'s status and message."""
    response = bad_request_response(request, exc.message)
    response.status_code = exc.status
    return response


def refusal_text(exc: AppError, prefix: str = "") -> str:
    """What a page says of a refusal: ``prefix``, the message, then what to do when the error
    says more than its message."""
    text = f"{prefix}{exc.message}"
    return f"{text} What to do: {exc.what_to_do}" if exc.what_to_do else text


def refusal_message(request: HttpRequest, exc: AppError, prefix: str = "") -> None:
    """A page action's refusal shown as an error message on the page it goes back to (the run
    pages, whose buttons post and redirect)."""
    messages.error(request, refusal_text(exc, prefix))


def app_errors(page: Callable[..., HttpResponse] | None = None) -> Callable[[Callable], Callable]:
    """A page view's ``AppError`` answered: ``page(request, exc, *args, **kwargs)`` (the view's
    own page showing the message, e.g. its form with the fields' problems) when given, else the
    error page with the error's status and message."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except AppError as exc:
                if page is not None:
                    return page(request, exc, *args, **kwargs)
                return app_error_response(request, exc)

        return wrapped

    return decorate


def form_add_app_error(form: Any, exc: AppError, *, field: str | None = None) -> None:
    """Put a refusal on a Django form: each named field the form has gets its problems, the
    rest (and the message of a refusal naming no field of the form) go on ``field`` (``None``:
    the form's own errors)."""
    named = {name: problems for name, problems in exc.fields.items() if name in form.fields}
    for name, problems in named.items():
        for problem in problems:
            form.add_error(name, problem)
    if not named:
        form.add_error(field, exc.message)
        return
    for name, problems in exc.fields.items():
        if name not in named:
            for problem in problems:
                form.add_error(field, f"{name}: {problem}")
