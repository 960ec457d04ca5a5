"""Confirmation of destructive controls (cancel a run, release a participant's slots).

A control posts ``confirm=yes`` only from its confirmation step: an inline ``<details>``
disclosure on the page (templates/includes/confirm_action.html, no JavaScript needed) or the
confirmation page (templates/confirm.html) a view shows for a GET or for a POST without the
field. The server decides: a POST without ``confirm=yes`` changes nothing."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

CONFIRM_FIELD = "confirm"
CONFIRM_VALUE = "yes"


def confirmed(request: HttpRequest) -> bool:
    """Whether this request is a POST that carries the confirmation field."""
    return request.method == "POST" and request.POST.get(CONFIRM_FIELD) == CONFIRM_VALUE


def refuse_unconfirmed(request: HttpRequest, *, what: str, back_url: str) -> HttpResponse | None:
    """For a POST that cancels something: None when it carries the confirmation, otherwise
    the confirmation page (400, nothing done)."""
    if confirmed(request):
        return None
    return confirm_page(
        request,
        title=f"Cancel {what}?",
        question=f"Cancel {what}? Work in flight stops; what is "
        f"already answered is kept, and a cancelled run cannot be resumed.",
        action=request.path,
        confirm_label="Yes, cancel",
        back_url=back_url,
    )


def confirm_page(
    request: HttpRequest,
    *,
    title: str,
    question: str,
    action: str,
    confirm_label: str,
    back_url: str,
) -> HttpResponse:
    """The confirmation step as a page: 200 for a GET; 400 naming the field for a POST that
    lacks it (nothing was done)."""
    refused = request.method == "POST"
    return render(
        request,
        "confirm.html",
        {
            "title": title,
            "question": question,
            "action": action,
            "confirm_label": confirm_label,
            "back_url": back_url,
            "confirm_field": CONFIRM_FIELD,
            "confirm_value": CONFIRM_VALUE,
            "error": f"Nothing was done: the field '{CONFIRM_FIELD}' must be '{CONFIRM_VALUE}' to confirm."
            if refused
            else "",
        },
        status=400 if refused else 200,
    )
