"""Prolific's webhook endpoint (``POST /api/prolific/webhook/``): anonymous and CSRF-exempt,
since Prolific signs its requests instead (prolific/webhooks.py checks the signature over the
raw body before anything is parsed). Its body is capped by PROLIFIC_WEBHOOK_MAX_BYTES, refused
unread above it; a multipart form is refused (415, ``Content-Type``), since its raw bytes, which
the signature covers, are not kept. Every refusal is a 4xx naming the header or field; every event stored, a
duplicate or one the product does not act on included, is answered 200 so Prolific stops
redelivering it."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse, RawPostDataException
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core.request_bodies import body_limit
from prolific.webhooks import WebhookRefused, prolific_webhook_receive


@csrf_exempt  # signed by Prolific instead: no browser session is involved
@login_not_required  # Prolific has no account here; the signature is its credential
@body_limit("PROLIFIC_WEBHOOK_MAX_BYTES")
@require_POST
def webhook(request: HttpRequest) -> JsonResponse:
    try:
        if request.content_type == "multipart/form-data":
            # Prolific sends JSON; a form's parts are parsed from the stream, and the signature
            # covers the raw bytes, which are then gone.
            raise WebhookRefused(415, "Content-Type", "Prolific sends JSON (application/json), not a multipart form")
        try:
            body = request.body
        except RawPostDataException:  # read as a form before this view: the raw bytes are gone
            raise WebhookRefused(415, "Content-Type", "Prolific sends JSON (application/json), not a form") from None
        received = prolific_webhook_receive(headers=request.headers, body=body)
    except WebhookRefused as exc:
        return JsonResponse(exc.body(), status=exc.status)
    event = received.event
    return JsonResponse(
        {
            "outcome": received.outcome,
            "event_id": event.event_id if event is not None else request.headers.get("X-Event-ID", "")[:100],
            "released_slots": received.released_slots,
        }
    )
