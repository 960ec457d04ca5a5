"""Writes of the core app: staff accounts."""
from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from core.roles import ROLE_ADMIN, ROLES, roles_ensure


@dataclass(frozen=True)
class CreatedUser:
    username: str
    password: str | None  # only set when this call created the account


@transaction.atomic
def user_create(*, username: str, role: str, password: str | None = None, email: str = "") -> CreatedUser:
    """Create a staff account with one role. A random password is generated when none is given."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
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
