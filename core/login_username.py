"""The username a failed login is counted against (django-axes' ``AXES_USERNAME_CALLABLE``).

What a stranger types into the username field is stored in the record of failed logins, whose
column holds 255 characters: a longer value made PostgreSQL refuse the insert (a 500 on the
login page). No account's name is longer than the user model allows, so the typed value is
cut to that length; lockouts still work for every real username."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Field
from django.http import HttpRequest


def login_username(request: HttpRequest, credentials: dict[str, Any] | None = None) -> str | None:
    field = get_user_model().USERNAME_FIELD
    if credentials:
        value = credentials.get(field, credentials.get("username"))
    else:
        value = getattr(request, "POST", {}).get(field)
    if value is None:
        return None
    model_field = get_user_model()._meta.get_field(field)
    limit = (model_field.max_length if isinstance(model_field, Field) else None) or 150
    return str(value).replace("\x00", "")[:limit]
