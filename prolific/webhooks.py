"""Prolific's webhooks: subscribing this server from the product, and receiving events exactly
once (docs/prolific.md, "Webhooks").

Receiving, in this order, each refusal a 4xx naming the header or field and storing nothing:

1. the body is at most ``PROLIFIC_WEBHOOK_MAX_BYTES`` (the view reads no more than that);
2. ``X-Prolific-Request-Signature`` is base64(HMAC-SHA256(secret, X-Prolific-Request-Timestamp
   + raw body)) under a workspace secret saved here, compared with ``hmac.compare_digest`` over
   the raw bytes before anything is parsed;
3. ``X-Prolific-Request-Timestamp`` is within ``PROLIFIC_WEBHOOK_TOLERANCE_SECONDS`` of this
   server's clock (a replay of a captured request is stale);
4. the body is a JSON object with ``event_type`` and ``resource_id``, and ``X-Event-ID`` is there.

Then, in one transaction, the event is stored under its unique id (a redelivery finds it and is
answered 2xx, not applied again) and applied through the one status mechanism the poll uses
(``prolific.sync_services.submission_status_apply``): a status older than the one known is kept as
``stale`` and not applied. Events of submissions or studies not linked here are kept as
``unmatched`` (the poll, which stays the reconciler, brings them in); other event types are kept
as ``ignored``. Every stored event is answered 200."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from annotate.models import Participation
from core.app_errors import AppError
from core.secret_masking import secret_register
from prolific import constants as C
from prolific.client import ProlificError
from prolific.crypto import TokenUnreadable, token_decrypt, token_encrypt
from prolific.errors import ProlificInvalid, ProlificNotReady
from prolific.models import (
    ProlificStudyLink,
    ProlificSubmission,
    ProlificWebhookEvent,
    ProlificWebhookSecret,
    ProlificWebhookSubscription,
)
from prolific.sync_services import LEARNT_BY_WEBHOOK, link_status_apply, submission_status_apply
from prolific.token_services import prolific_client

ID_MAX = 100


class WebhookRefused(AppError):
    """A webhook request refused before anything was stored: ``status`` (400, 403, 415) and
    the header or field it names, in the application's error body (code ``webhook_refused``)."""

    code = "webhook_refused"

    def __init__(self, status: int, field: str, problem: str):
        super().__init__(fields={field: problem}, status=status)
        self.field = field
        self.problem = problem


def webhook_signature(secret: str, timestamp: str, body: bytes) -> str:
    """Prolific's signature of a webhook request: base64 of HMAC-SHA256 under the workspace's
    secret over the request timestamp (as sent) followed by the raw body."""
    digest = hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def _secrets() -> list[str]:
    found = []
    for row in ProlificWebhookSecret.objects.all():
        try:
            found.append(token_decrypt(row.secret_encrypted))
        except TokenUnreadable:  # saved under another SECRET_KEY: subscribe again
            continue
    return found


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        return None
    return value.strip()


def _unix_seconds(value: str, name: str) -> float:
    """A UNIX time from a header: seconds (a value beyond 10^11 is read as milliseconds)."""
    try:
        seconds = float(value) if len(value) <= 24 else math.nan
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise WebhookRefused(400, name, "must be a UNIX timestamp in seconds")
    return seconds / 1000 if seconds > 1e11 else seconds


@dataclass
class VerifiedEvent:
    event_id: str
    event_type: str
    resource_id: str
    payload: dict[str, Any]
    sent_at: datetime


def prolific_webhook_verify(*, headers: Mapping[str, str], body: bytes, now: float | None = None) -> VerifiedEvent:
    """Check one webhook request (signature over the raw bytes first, then the time, then the
    body's shape); refuses with ``WebhookRefused`` naming the header or field."""
    signature = _header(headers, C.HEADER_SIGNATURE)
    if not signature:
        raise WebhookRefused(400, C.HEADER_SIGNATURE, "missing: every request from Prolific is signed")
    timestamp = _header(headers, C.HEADER_REQUEST_TIMESTAMP)
    if not timestamp:
        raise WebhookRefused(400, C.HEADER_REQUEST_TIMESTAMP, "missing: it is part of what the signature covers")
    secrets = _secrets()
    if not secrets:
        raise WebhookRefused(
            403, C.HEADER_SIGNATURE, "no webhook secret is saved here: subscribe from the product first"
        )
    given = signature.encode("utf-8", "replace")
    # Every saved secret is compared (one per workspace), so the time taken says nothing of which matched.
    matched = False
    for secret in secrets:
        matched |= hmac.compare_digest(webhook_signature(secret, timestamp, body).encode(), given)
    if not matched:
        raise WebhookRefused(
            403, C.HEADER_SIGNATURE, "does not match the request body and timestamp under the saved webhook secret"
        )
    sent = _unix_seconds(timestamp, C.HEADER_REQUEST_TIMESTAMP)
    clock = time.time() if now is None else now
    tolerance = settings.PROLIFIC_WEBHOOK_TOLERANCE_SECONDS
    if abs(clock - sent) > tolerance:
        raise WebhookRefused(
            400,
            C.HEADER_REQUEST_TIMESTAMP,
            f"{abs(clock - sent):.0f} seconds from this server's clock; at most {tolerance} "
            "(PROLIFIC_WEBHOOK_TOLERANCE_SECONDS) are accepted",
        )
    event_id = _header(headers, C.HEADER_EVENT_ID)
    if not event_id or len(event_id) > ID_MAX:
        raise WebhookRefused(400, C.HEADER_EVENT_ID, f"missing or longer than {ID_MAX} characters")
    event_time = _header(headers, C.HEADER_EVENT_TIMESTAMP)
    # The event's own time orders it; it is not signed, so it is never later than the signed time.
    at = min(sent, _unix_seconds(event_time, C.HEADER_EVENT_TIMESTAMP)) if event_time else sent
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise WebhookRefused(400, "body", "is not JSON") from None
    if not isinstance(payload, dict):
        raise WebhookRefused(400, "body", "must be a JSON object")
    event_type = payload.get("event_type")
    if not isinstance(event_type, str) or not event_type or len(event_type) > ID_MAX:
        raise WebhookRefused(400, "event_type", "missing, or not text of at most 100 characters")
    resource_id = payload.get("resource_id", "")
    if not isinstance(resource_id, str) or len(resource_id) > ID_MAX:
        raise WebhookRefused(400, "resource_id", "not text of at most 100 characters")
    if event_type in C.WEBHOOK_EVENT_TYPES:
        if not resource_id:
            raise WebhookRefused(400, "resource_id", f"missing from a {event_type} event")
        status = payload.get("status")
        if not isinstance(status, str) or not status or len(status) > 40:
            raise WebhookRefused(400, "status", f"missing from a {event_type} event, or longer than 40 characters")
        participant = payload.get("participant_id")
        if participant is not None and (not isinstance(participant, str) or len(participant) > ID_MAX):
            raise WebhookRefused(400, "participant_id", "not text of at most 100 characters")
    return VerifiedEvent(
        event_id=event_id,
        event_type=event_type,
        resource_id=resource_id,
        payload=payload,
        sent_at=datetime.fromtimestamp(at, tz=UTC),
    )


def _submission_for(event: VerifiedEvent) -> ProlificSubmission | None:
    """The submission an event is about: one stored by a sync or an earlier event, else the
    participant who arrived here with that submission id as their SESSION_ID in a study linked
    to Prolific (stored now)."""
    sub = ProlificSubmission.objects.filter(submission_id=event.resource_id).select_related("participation").first()
    if sub is not None:
        return sub
    participation = (
        Participation.objects.filter(prolific_session_id=event.resource_id, study__prolific_link__isnull=False)
        .exclude(study__prolific_link__prolific_id="")
        .select_related("annotator", "study__prolific_link")
        .first()
    )
    if participation is None:
        return None
    participant = event.payload.get("participant_id") or participation.annotator.pid
    sub, _ = ProlificSubmission.objects.get_or_create(
        link=participation.study.prolific_link,
        submission_id=event.resource_id,
        defaults={"participant_id": participant, "status": "", "participation": participation},
    )
    return sub


@dataclass
class Received:
    outcome: str  # applied, stale, unmatched, ignored, or duplicate (seen before: nothing done)
    event: ProlificWebhookEvent | None
    released_slots: int = 0


def prolific_webhook_receive(*, headers: Mapping[str, str], body: bytes) -> Received:
    """Verify one webhook request and apply its event once (the module says how)."""
    event = prolific_webhook_verify(headers=headers, body=body)
    if ProlificWebhookEvent.objects.filter(event_id=event.event_id).exists():
        return Received("duplicate", None)
    status = str(event.payload.get("status") or "")[:40]
    try:
        with transaction.atomic():
            row = ProlificWebhookEvent.objects.create(
                event_id=event.event_id,
                event_type=event.event_type,
                resource_id=event.resource_id,
                status=status,
                sent_at=event.sent_at,
                outcome=C.EVENT_IGNORED,
            )
            released = 0
            if event.event_type == C.EVENT_SUBMISSION_STATUS:
                sub = _submission_for(event)
                if sub is None:
                    row.outcome, row.detail = C.EVENT_UNMATCHED, "no submission or participant of a linked study"
                else:
                    row.link_id = sub.link_id
                    applied = submission_status_apply(
                        submission=sub, status=status, at=event.sent_at, learnt_by=LEARNT_BY_WEBHOOK
                    )
                    released = applied.released_slots
                    row.outcome = C.EVENT_APPLIED if applied.stored else C.EVENT_STALE
                    if not applied.stored:
                        row.detail = "a newer status of this submission is known"
            elif event.event_type == C.EVENT_STUDY_STATUS:
                link = ProlificStudyLink.objects.filter(prolific_id=event.resource_id).first()
                if link is None:
                    row.outcome, row.detail = C.EVENT_UNMATCHED, "no study here is linked to it"
                else:
                    row.link_id = link.pk
                    stored = link_status_apply(link=link, status=status, at=event.sent_at)
                    row.outcome = C.EVENT_APPLIED if stored else C.EVENT_STALE
            row.save(update_fields=["outcome", "detail", "link"])
    except IntegrityError:  # the same event delivered twice at once: the other delivery applied it
        return Received("duplicate", None)
    return Received(row.outcome, row, released)


# --------------------------------------------------------------------------- subscribing


@dataclass
class Subscribed:
    workspace_id: str
    target_url: str
    created: list[str] = field(default_factory=list)  # event types subscribed now
    kept: list[str] = field(default_factory=list)  # already subscribed here, left as they were


def webhook_target_url(base_url: str | None = None) -> str:
    """This server's webhook address: under PROLIFIC_SITE_URL (the public address) when it is
    set, else under the address the request came to."""
    base = (settings.PROLIFIC_SITE_URL or base_url or "").rstrip("/")
    return base + reverse("prolific-webhook")


def prolific_webhooks_subscribe(*, user: Any, base_url: str | None = None, workspace_id: Any = None) -> Subscribed:
    """Subscribe this server to Prolific's submission and study status events: a new webhook
    secret for the workspace (Prolific keeps one per workspace, so this replaces the previous
    one, and it is saved encrypted here before any subscription exists), then one confirmed
    subscription per event type (its ``X-Hook-Secret`` sent back), skipping those already made
    here for the same address. The workspace is ``workspace_id``, or the only one the token
    sees."""
    target = webhook_target_url(base_url)
    if not target.startswith("https://") or "://localhost" in target or "://127.0.0.1" in target:
        raise ProlificNotReady(
            "target_url",
            f"Prolific sends webhooks only to a public https:// address, and this server's is {target}: "
            "set PROLIFIC_SITE_URL (or open this page at the public address)",
        )
    if workspace_id not in (None, ""):
        if not isinstance(workspace_id, str) or len(workspace_id) > ID_MAX or not workspace_id.isalnum():
            raise ProlificInvalid("workspace_id", "a Prolific workspace id (letters and digits)")
    client = prolific_client(None, user)
    if workspace_id in (None, ""):
        spaces = [str(w["id"]) for w in client.workspaces() if isinstance(w.get("id"), str)]
        if len(spaces) != 1:
            raise ProlificInvalid(
                "workspace_id",
                f"the token sees {len(spaces)} workspaces; name the one to subscribe"
                + (f" (one of {', '.join(spaces[:10])})" if spaces else ""),
            )
        workspace_id = spaces[0]
    done = Subscribed(workspace_id=workspace_id, target_url=target)
    existing = set(
        ProlificWebhookSubscription.objects.filter(
            workspace_id=workspace_id, target_url=target, confirmed_at__isnull=False
        ).values_list("event_type", flat=True)
    )
    todo = [t for t in C.WEBHOOK_EVENT_TYPES if t not in existing]
    done.kept = [t for t in C.WEBHOOK_EVENT_TYPES if t in existing]
    if not todo:
        return done
    answer = client.hook_secret_create(workspace_id)
    secret = answer.get("value")
    if not isinstance(secret, str) or not secret or len(secret) > 500:
        raise ProlificError("malformed", "Prolific's new webhook secret has no usable value.")
    secret_register(secret)
    ProlificWebhookSecret.objects.update_or_create(
        workspace_id=workspace_id,
        defaults={"secret_encrypted": token_encrypt(secret), "created_by": user if getattr(user, "pk", None) else None},
    )
    for event_type in todo:
        subscription_id, hook_secret = client.hook_subscription_create(workspace_id, event_type, target)
        row, _ = ProlificWebhookSubscription.objects.update_or_create(
            subscription_id=subscription_id[:ID_MAX],
            defaults={"workspace_id": workspace_id, "event_type": event_type, "target_url": target},
        )
        client.hook_subscription_confirm(subscription_id, hook_secret)
        row.confirmed_at = timezone.now()
        row.save(update_fields=["confirmed_at"])
        done.created.append(event_type)
    return done
