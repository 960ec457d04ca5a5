"""Failed logins counted per address, across usernames (``LOGIN_ADDRESS_FAILURE_LIMIT`` in
``LOGIN_ADDRESS_WINDOW_MINUTES``).

django-axes locks one username out from one address; an address trying one password against
many usernames never meets that lock. Every failed login (the site's and the admin's, through
Django's ``user_login_failed`` signal) also counts against the client's address in the shared
sliding-window limit of core/rate_limit.py; once an address has reached the limit, a login form
sent from it is answered by the lockout page (429) without checking the password, until the
window has slid past enough of its failures. The limit is high (a lab behind one address makes
a few typos, not a hundred), and a successful login does not reset it."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from core import rate_limit
from core.client_ip import client_ip


def _name(request: HttpRequest) -> str:
    return f"login-address:{rate_limit.address_key(client_ip(request))}"


def _window() -> int:
    return settings.LOGIN_ADDRESS_WINDOW_MINUTES * 60


def login_failure_count(sender, credentials=None, request: HttpRequest | None = None, **kwargs) -> None:
    """Receiver of ``user_login_failed``: one more failure for the request's address."""
    if request is not None:
        rate_limit.hit(_name(request), limit=settings.LOGIN_ADDRESS_FAILURE_LIMIT, window=_window())


def address_locked_out(request: HttpRequest) -> bool:
    return rate_limit.count(_name(request), window=_window()) >= settings.LOGIN_ADDRESS_FAILURE_LIMIT


class LoginAddressThrottleMiddleware:
    """A login form posted from an address over the limit gets the lockout page (429)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if (
            request.method == "POST"
            and request.path in (reverse("login"), reverse("admin:login"))
            and address_locked_out(request)
        ):
            context = {
                "address_limit": settings.LOGIN_ADDRESS_FAILURE_LIMIT,
                "window_minutes": settings.LOGIN_ADDRESS_WINDOW_MINUTES,
            }
            return render(request, "registration/locked_out.html", context, status=settings.AXES_HTTP_RESPONSE_CODE)
        return self.get_response(request)
