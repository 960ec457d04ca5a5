"""Request checks that hold for every URL, before any view runs.

* A parameter (query string or form field, its name or its value) with a NUL character is
  answered 400 naming the parameter: no database takes NUL in text (PostgreSQL refuses it),
  and no legitimate form or link sends one.
* A body larger than this caller may send to this view is answered 400 naming the body
  before a byte of it is read, and a body that did not arrive in time 408
  (core/request_bodies.py, core/wsgi_body.py). This runs first among the view hooks, before
  CSRF's check reads a form; the body is read here, once it may be.
* A path integer beyond the 64-bit range of the database's keys is answered 404 ("no such
  object") instead of an overflow inside the ORM.

Bodies sent as JSON are checked by the views and the REST API's parser (core/parsers.py,
core/strict_json.py); this middleware only reads what Django has already parsed.

``AppErrorMiddleware`` answers a refusal of the application's error family (core/app_errors.py)
that a page did not answer itself (with ``core.errors.app_errors``): the error page with the
refusal's status and message, never a 500. The REST API answers its own (its exception
handler)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, UnreadablePostError

from core.app_errors import AppError, InvalidInput
from core.errors import app_error_response, bad_request_response
from core.request_bodies import BodyTimeout, body_refusal, declared_length
from core.strict_json import INT64_MAX


def _nul_field(params_by_source: list[tuple[str, Any]]) -> str | None:
    for _, params in params_by_source:
        for name, values in params.lists():
            if "\x00" in name:
                return ascii(name)[1:-1][:60]
            if any("\x00" in value for value in values):
                return name[:60]
    return None


def _read_body(request: HttpRequest) -> list[tuple[str, Any]]:
    """Read the body now, under its deadline, and the form it holds (if any)."""
    if request.method == "POST" and request.content_type == "multipart/form-data":
        return [("form", request.POST)]  # files go to the upload handlers, within the cap
    request.body  # noqa: B018 - kept, so that a view reading request.body later still can
    if request.method == "POST" and request.content_type == "application/x-www-form-urlencoded":
        return [("form", request.POST)]
    return []


def wants_json(request: HttpRequest) -> bool:
    return (
        request.path.startswith("/api/")
        or request.content_type == "application/json"
        or ("application/json" in request.headers.get("Accept", ""))
    )


def bad_request(request: HttpRequest, field: str, message: str) -> HttpResponse:
    """A 400 that names the field, as JSON for API and JSON clients, else as the error page."""
    if wants_json(request):
        return JsonResponse(InvalidInput(fields={field: message}).body(), status=400)
    return bad_request_response(request, message, field=field)


class HostileRequestMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        field = _nul_field([("query", request.GET)])
        if field is not None:
            return bad_request(request, field, "must not contain a NUL character")
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Any, view_args: Any, view_kwargs: dict[str, Any]
    ) -> HttpResponse | None:
        refusal = body_refusal(request, view_func)
        if refusal is not None:
            return bad_request(request, *refusal)
        if declared_length(request):
            try:
                forms = _read_body(request)
            except (BodyTimeout, UnreadablePostError) as exc:
                response = bad_request(request, "body", str(exc) or "the request body could not be read")
                response.status_code = 408
                return response
            except RequestDataTooBig as exc:
                return bad_request(request, "body", str(exc))
            field = _nul_field(forms)
            if field is not None:
                return bad_request(request, field, "must not contain a NUL character")
        for value in view_kwargs.values():
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT64_MAX:
                raise Http404("No such object.")
        return None


class AppErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return app_error_response(request, exception) if isinstance(exception, AppError) else None
