"""Role checks for pages (decorators, mixins) and the API (DRF permission classes)."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.mixins import AccessMixin
from django.core.exceptions import PermissionDenied
from django.views import View
from rest_framework.permissions import BasePermission

from core.roles import is_admin, is_researcher


def _role_required(check, view_func):
    @wraps(view_func)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            from django.contrib.auth.views import redirect_to_login

            return redirect_to_login(request.get_full_path())
        if not check(request.user):
            raise PermissionDenied("Your account does not have the role this page needs.")
        return view_func(request, *args, **kwargs)

    return wrapper


def researcher_required(view_func):
    return _role_required(is_researcher, view_func)


def admin_required(view_func):
    return _role_required(is_admin, view_func)


class _RoleRequiredMixin(AccessMixin, View):
    role_check = staticmethod(is_researcher)

    def dispatch(self, request, *args, **kwargs):
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        if not self.role_check(request.user):
            raise PermissionDenied("Your account does not have the role this page needs.")
        return super().dispatch(request, *args, **kwargs)


class ResearcherRequiredMixin(_RoleRequiredMixin):
    role_check = staticmethod(is_researcher)


class AdminRequiredMixin(_RoleRequiredMixin):
    role_check = staticmethod(is_admin)


class IsResearcher(BasePermission):
    message = "This endpoint needs the researcher or admin role."

    def has_permission(self, request, view) -> bool:
        return is_researcher(request.user)


class IsAdminRole(BasePermission):
    message = "This endpoint needs the admin role."

    def has_permission(self, request, view) -> bool:
        return is_admin(request.user)
