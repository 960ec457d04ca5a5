"""Staff roles. Two groups: ``admin`` (pipeline jobs, users, everything a researcher
can do) and ``researcher`` (studies, dashboards, exports). Annotators are not users."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, Permission

ROLE_ADMIN = "admin"
ROLE_RESEARCHER = "researcher"
ROLES = (ROLE_ADMIN, ROLE_RESEARCHER)


def roles_ensure() -> None:
    """Create both groups; the admin group holds every model permission (Django admin)."""
    admin_group, _ = Group.objects.get_or_create(name=ROLE_ADMIN)
    Group.objects.get_or_create(name=ROLE_RESEARCHER)
    admin_group.permissions.set(Permission.objects.all())


def _group_names(user) -> set[str]:
    cached = getattr(user, "_role_group_names", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))
        user._role_group_names = cached
    return cached


def is_admin(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    # is_superuser comes from PermissionsMixin, which a custom user model may leave out.
    return bool(getattr(user, "is_superuser", False)) or ROLE_ADMIN in _group_names(user)


def is_researcher(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    """Researchers and admins (an admin can do everything a researcher can)."""
    if is_admin(user):
        return True
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return ROLE_RESEARCHER in _group_names(user)


def user_role(user) -> str | None:
    if is_admin(user):
        return ROLE_ADMIN
    if is_researcher(user):
        return ROLE_RESEARCHER
    return None
