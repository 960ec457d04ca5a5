from csp.constants import SELF
from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from core.permissions import IsResearcher
from annotate.metric_agreement_views import metric_agreement_api
from annotate.report_views import agreement_api
from coscript.apis import CoScriptRunViewSet
from goalstep.apis import TaskEvaluationViewSet
from judging.apis import (
    ComponentsRunViewSet, GenerationRunViewSet, JudgeRunViewSet, LeaderboardCompareView, LeaderboardView, RewardView,
)
from llm.apis import LLMJobViewSet
from mining.apis import MiningRunViewSet, ProcedureViewSet, TopicViewSet

router = DefaultRouter()
router.register("topics", TopicViewSet, basename="topic")
router.register("procedures", ProcedureViewSet, basename="procedure")
router.register("coscript/runs", CoScriptRunViewSet, basename="coscript-run")
router.register("mining/runs", MiningRunViewSet, basename="mining-run")
router.register("judging/generation-runs", GenerationRunViewSet, basename="generation-run")
router.register("judging/judge-runs", JudgeRunViewSet, basename="judge-run")
router.register("judging/components-runs", ComponentsRunViewSet, basename="components-run")
router.register("goalstep/evaluations", TaskEvaluationViewSet, basename="goalstep-evaluation")
router.register("llm/jobs", LLMJobViewSet, basename="llm-job")

# DRF views opt out of the login-redirect middleware and answer 401/403 themselves;
# the browsable docs are pages for people, so anonymous users are sent to the login page.
api_patterns = [
    path("", include(router.urls)),
    path("reward", RewardView.as_view(), name="reward"),
    path("leaderboard", LeaderboardView.as_view(), name="leaderboard-api"),
    path("leaderboard/compare", LeaderboardCompareView.as_view(), name="leaderboard-compare-api"),
    path("studies/<slug:slug>/agreement", agreement_api, name="study-agreement"),
    path("studies/<slug:slug>/metric-agreement", metric_agreement_api, name="study-metric-agreement"),
    path("schema/", SpectacularAPIView.as_view(permission_classes=[IsResearcher]), name="schema"),
    # The split view serves Swagger UI's start-up script as a file (?script): no inline script.
    path("docs/", login_required(SpectacularSwaggerSplitView.as_view(url_name="schema", permission_classes=[IsResearcher])), name="api-docs"),
    # Redoc builds its search index in a worker made from a blob: URL (its own script).
    path("redoc/", csp_update({"worker-src": [SELF, "blob:"]})(login_required(SpectacularRedocView.as_view(url_name="schema", permission_classes=[IsResearcher]))), name="api-redoc"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include(api_patterns)),
    path("", include("core.urls")),
    path("", include("llm.urls")),
    path("", include("mining.urls")),
    path("", include("judging.urls")),
    path("", include("goalstep.urls")),
    path("", include("coscript.urls")),
    path("", include("annotate.urls")),
]

# A 400 page in the page frame that says what was wrong when a view raised BadRequest with a
# message (core/errors.py); 403, 404 and 500 are templates/403.html, 404.html and 500.html.
handler400 = "core.views.bad_request"
