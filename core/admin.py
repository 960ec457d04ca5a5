"""Only the admin role reaches the Django admin (researchers use the product's pages)."""

from django.contrib import admin

from core.models import ApiToken
from core.roles import is_admin


def _admin_site_has_permission(request) -> bool:
    return bool(request.user.is_active and request.user.is_staff and is_admin(request.user))


# Replaces the check on the default site itself, so every app's admin.register keeps working.
admin.site.has_permission = _admin_site_has_permission  # type: ignore[method-assign]
admin.site.site_header = "How2Everything Studio administration"
admin.site.site_title = "How2Everything Studio"


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens by their prefix only: the secret is never stored, so it cannot be listed.
    Deleting a token revokes it. Tokens are created by their owner on the account page."""

    list_display = ("prefix", "user", "label", "created_at", "expires_at", "last_used_at")
    list_filter = ("expires_at",)
    search_fields = ("prefix", "label", "user__username")
    fields = ("prefix", "user", "label", "created_at", "expires_at", "last_used_at")
    readonly_fields = fields
    ordering = ("-created_at",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
