from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from core.permissions import IsResearcher
from mining.apis import ProcedureViewSet, TopicViewSet

router = DefaultRouter()
router.register("topics", TopicViewSet, basename="topic")
router.register("procedures", ProcedureViewSet, basename="procedure")


def _api(patterns):
    """API views answer 401/403 themselves (DRF permissions): exempt them from the
    login-redirect middleware, which is meant for pages."""
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            _api(pattern.url_patterns)
        else:
            pattern.callback = login_not_required(pattern.callback)
    return patterns


api_patterns = _api([
    path("", include(router.urls)),
    path("schema/", SpectacularAPIView.as_view(permission_classes=[IsResearcher]), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[IsResearcher]), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="schema", permission_classes=[IsResearcher]), name="api-redoc"),
])

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include(api_patterns)),
    path("", include("core.urls")),
    path("", include("mining.urls")),
]
