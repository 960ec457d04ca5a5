"""Pages of the core app: login (Django's), the admin's system page, the API-token page,
and the bundled plotly.js."""
from __future__ import annotations

from functools import lru_cache

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from core.permissions import admin_required, researcher_required
from core.selectors import system_status_get
from core.tasks import ping


@login_not_required
def plotly_js(request: HttpRequest) -> HttpResponse:
    """plotly.js from the installed plotly package: charts work with no internet."""
    response = HttpResponse(_plotly_source(), content_type="application/javascript")
    response["Cache-Control"] = "public, max-age=86400"
    return response


@lru_cache(maxsize=1)
def _plotly_source() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


@admin_required
@require_http_methods(["GET", "POST"])
def system(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        try:
            timeout = settings.WORKER_PING_TIMEOUT_SECONDS
            # A ping nobody picked up in time is stale: let a late worker discard it.
            answer = ping.apply_async(expires=timeout).get(timeout=timeout)
        except Exception as exc:  # the broker is down, no worker, or the worker is too slow
            messages.error(request, f"No Celery worker answered: {exc.__class__.__name__}: {exc}")
        else:
            messages.success(
                request, f"A worker answered: process {answer['pid']} on {answer['hostname']}."
            )
        return redirect("system")
    return render(request, "core/system.html", {"status": system_status_get()})


@researcher_required
@require_http_methods(["GET", "POST"])
def account(request: HttpRequest) -> HttpResponse:
    token = Token.objects.filter(user=request.user).first()
    if request.method == "POST":
        if token is not None:
            token.delete()
        token = Token.objects.create(user=request.user)
        messages.success(request, "A new API token was created; the old one no longer works.")
        return redirect("account")
    return render(request, "core/account.html", {"token": token})
