"""Pages of the core app: login (Django's), the admin's system page, the API-token page,
the 400 page (handler400), and the 404 answer (handler404: JSON under /api/, the page
elsewhere). plotly.js is a static file (core/static_finders.py)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt, requires_csrf_token
from django.views.decorators.http import require_http_methods
from django.views.defaults import page_not_found

from core.app_errors import InvalidInput
from core.errors import bad_request_message, bad_request_response
from core.permissions import admin_required, researcher_required
from core.selectors import api_token_list, system_status_get
from core.services import ApiTokenLabelError, api_token_create, api_token_revoke
from core.workers import workers_check

# A token id in a form: digits only, and short enough for any integer column.
_MAX_ID_DIGITS = 18


@admin_required
@require_http_methods(["GET", "POST"])
def system(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        for check in workers_check():
            where = f"queue {check.queue}" + (f" ({', '.join(check.kinds)})" if check.kinds else "")
            if check.answered:
                messages.success(request, f"A worker answered on {where}: process {check.pid} on {check.hostname}.")
            else:
                messages.error(request, f"No Celery worker answered on {where}: {check.error}")
        return redirect("system")
    return render(request, "core/system.html", {"status": system_status_get()})


@researcher_required
@never_cache  # the page may show a new token's secret: no cache, no back-button copy
@require_http_methods(["GET", "POST"])
def account(request: HttpRequest) -> HttpResponse:
    """The user's API tokens: create one (its secret is shown in this response only), revoke one."""
    created = None
    label_error = ""
    if request.method == "POST":
        action = request.POST.get("action", "create")
        if action == "revoke":
            token_id = request.POST.get("token", "")
            if not (token_id.isascii() and token_id.isdigit() and len(token_id) <= _MAX_ID_DIGITS):
                return bad_request_response(request, "a token id is a whole number", field="token")
            if api_token_revoke(user=request.user, token_id=int(token_id)):
                messages.success(request, "The token was revoked; it no longer works.")
            else:
                messages.error(request, "You have no such token (it may have been revoked already).")
            return redirect("account")
        if action != "create":
            return bad_request_response(request, "must be create or revoke", field="action")
        try:
            created = api_token_create(user=request.user, label=request.POST.get("label", ""))
        except ApiTokenLabelError as exc:
            label_error = str(exc)
    context = {
        "tokens": api_token_list(user=request.user),
        "created": created,
        "label_error": label_error,
        "token_days": settings.API_TOKEN_DAYS,
    }
    return render(request, "core/account.html", context, status=400 if label_error else 200)


def login_locked_out(request: HttpRequest, original_response=None, credentials: dict | None = None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the page shown instead of the login form once a username is
    locked out from this address (429), on /login/ and /admin/login/ alike."""
    from axes.helpers import get_client_username, get_cool_off, get_failure_limit

    cool_off = get_cool_off(request)
    minutes = max(1, round(cool_off.total_seconds() / 60)) if cool_off else None
    context = {
        "failure_limit": get_failure_limit(request, credentials),
        "username": (get_client_username(request, credentials) or "")[:150],
        "lockout_minutes": minutes,
    }
    return render(request, "registration/locked_out.html", context, status=settings.AXES_HTTP_RESPONSE_CODE)


@requires_csrf_token
def bad_request(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    """handler400: the 400 page, with the message of a BadRequest a view raised; under /api/
    the same message as JSON (``{"code": "invalid_input", "detail": ...}``), as every API refusal is."""
    message = bad_request_message(exception)
    if request.path.startswith("/api/"):
        return JsonResponse({"code": InvalidInput.code, "detail": message}, status=400)
    return bad_request_response(request, message)


@requires_csrf_token
@csrf_exempt  # it only points elsewhere; the endpoint it points at checks what it checks
@login_not_required  # an API client is answered by the API (401), not sent to the login page
def api_trailing_slash(request: HttpRequest, route: str) -> HttpResponse:
    """``/api/<route>`` without the trailing slash that every API path has: a permanent
    redirect to ``/api/<route>/`` (with the query string) when that names an endpoint, as a 308,
    so that a POST stays a POST with its body (Django's APPEND_SLASH answers 301, which clients
    turn into a GET); the API's JSON 404 when it names nothing."""
    target = f"/api/{route}/"
    try:
        resolve(target)
    except Resolver404:
        return not_found(request)
    query = request.META.get("QUERY_STRING", "")
    return HttpResponsePermanentRedirect(f"{target}?{query}" if query else target, preserve_request=True)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: an address under /api/ that matches nothing answers JSON as the API does
    (``{"code": "not_found", "detail": "Not found."}``); every other one the 404 page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"code": "not_found", "detail": "Not found."}, status=404)
    return page_not_found(request, exception)
