"""Only the admin role reaches the Django admin (researchers use the product's pages)."""
from django.contrib import admin

from core.roles import is_admin


def _admin_site_has_permission(request) -> bool:
    return bool(request.user.is_active and request.user.is_staff and is_admin(request.user))


admin.site.has_permission = _admin_site_has_permission
admin.site.site_header = "How2Everything Studio administration"
admin.site.site_title = "How2Everything Studio"
