"""Writes of the core app: staff accounts and their API tokens."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from core.api_tokens import new_secret, secret_digest, secret_prefix
from core.app_errors import InvalidInput
from core.models import API_TOKEN_LABEL_MAX_LENGTH, ApiToken
from core.roles import ROLE_ADMIN, ROLES, roles_ensure


@dataclass(frozen=True)
class CreatedUser:
    username: str
    password: str | None  # only set when this call created the account


@transaction.atomic
def user_create(*, username: str, role: str, password: str | None = None, email: str = "") -> CreatedUser:
    """Create a staff account with one role. A random password is generated when none is given."""
    if role not in ROLES:
        raise InvalidInput(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
    roles_ensure()
    password = password or secrets.token_urlsafe(12)
    user = get_user_model().objects.create_user(
        username=username,
        email=email,
        password=password,
        is_staff=(role == ROLE_ADMIN),
        is_superuser=(role == ROLE_ADMIN),
    )
    user.groups.add(Group.objects.get(name=role))
    return CreatedUser(username=username, password=password)


@transaction.atomic
def local_admin_ensure(*, username: str = "admin") -> CreatedUser:
    """Create the local admin account once, with a random password returned to be shown once.

    If the account exists already, nothing changes and no password is returned."""
    if get_user_model().objects.filter(username=username).exists():
        return CreatedUser(username=username, password=None)
    return user_create(username=username, role=ROLE_ADMIN)


@dataclass(frozen=True)
class CreatedToken:
    token: ApiToken
    secret: str  # shown to its owner once, never stored


class ApiTokenLabelError(ValueError):
    """A token label the product will not store; ``field`` names the form field."""

    field = "label"


def _clean_label(label: str) -> str:
    label = (label or "").strip()
    if len(label) > API_TOKEN_LABEL_MAX_LENGTH:
        raise ApiTokenLabelError(f"label: at most {API_TOKEN_LABEL_MAX_LENGTH} characters (got {len(label)})")
    if any(ord(ch) < 32 or ord(ch) == 127 or 0xD800 <= ord(ch) <= 0xDFFF for ch in label):
        raise ApiTokenLabelError("label: control characters (NUL included) are not allowed")
    return label


@transaction.atomic
def api_token_create(*, user, label: str = "", days: int | None = None) -> CreatedToken:
    """A new API token for ``user``, valid for ``days`` (API_TOKEN_DAYS by default). Only its
    digest and prefix are stored; the secret is returned to be shown once."""
    days = settings.API_TOKEN_DAYS if days is None else days
    if days < 1:
        raise InvalidInput("days: a token must be valid for at least one day")
    secret = new_secret()
    now = timezone.now()
    token = ApiToken.objects.create(
        user=user,
        label=_clean_label(label),
        prefix=secret_prefix(secret),
        digest=secret_digest(secret),
        created_at=now,
        expires_at=now + timedelta(days=days),
    )
    return CreatedToken(token=token, secret=secret)


@transaction.atomic
def api_token_revoke(*, user, token_id: int) -> bool:
    """Revoke one of ``user``'s tokens (it stops working at once). False if ``user`` has no
    such token."""
    deleted, _ = ApiToken.objects.filter(user=user, pk=token_id).delete()
    return deleted > 0


def api_tokens_revoke_all(*, user) -> int:
    """Revoke every token of ``user`` (its password changed). Returns how many there were."""
    deleted, _ = ApiToken.objects.filter(user=user).delete()
    return deleted


def api_token_mark_used(*, token: ApiToken, every_seconds: int = 300) -> None:
    """Record when a token was last used, at most once per ``every_seconds`` (not a write
    per request)."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= timedelta(seconds=every_seconds):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
