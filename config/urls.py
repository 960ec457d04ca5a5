from csp.constants import SELF
from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import URLPattern, URLResolver, include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.routers import APIRootView, DefaultRouter
from rest_framework.views import APIView

from annotate.reports.views import StudyAgreementView, StudyMetricAgreementView
from core.interval_apis import IntervalMethodsView
from core.permissions import IsResearcher
from core.views import api_trailing_slash
from coscript.apis import CoScriptConstrainedHow2ScoreView, CoScriptRunGoalsView, CoScriptRuns
from goalstep.apis import GoalStepLeaderboardListView, GoalStepLeaderboardView, TaskEvaluations
from judging.leaderboard_apis import CrossJudgeView, LeaderboardCompareView, LeaderboardView
from judging.reward_apis import RewardView
from judging.run_apis import ComponentsRuns, GenerationRuns, JudgeRuns
from llm.job_apis import LLMJobs
from llm.run_apis import RunCollection, run_views
from mining.apis import (
    MiningOverviewView,
    MiningRunProgressView,
    MiningRuns,
    ProcedureDetailView,
    ProcedureListView,
    SplitReportDetailView,
    SplitReportListView,
    TopicDetailView,
    TopicListView,
)


def api_root_entries(patterns: list[URLPattern | URLResolver], prefix: str = "") -> dict[str, str]:
    """The API root's entries, read from the URL configuration so that no endpoint is left
    out: every route of a REST framework view that takes no path parameter (its ``.json``
    twin aside), by its path without the trailing slash, with its URL name (the first route of
    a path wins, as when a request is resolved). The root itself (``schema = None``) and drf-spectacular's schema and docs pages
    are not endpoints of the API."""
    entries: dict[str, str] = {}
    for pattern in patterns:
        route = prefix + str(pattern.pattern).removeprefix("^").removesuffix("$")
        if isinstance(pattern, URLResolver):
            if pattern.pattern.regex.groups:  # every route under it takes that parameter
                continue
            for path_, name in api_root_entries(pattern.url_patterns, route).items():
                entries.setdefault(path_, name)
            continue
        view = getattr(pattern.callback, "cls", None)  # an APIView's as_view() keeps its class
        if (
            view is None
            or view.schema is None
            or view.__module__.startswith("drf_spectacular.")
            or pattern.pattern.regex.groups  # a path parameter (or the format suffix)
            or not pattern.name
            or not route.strip("/")
        ):
            continue
        entries.setdefault(route.strip("/"), pattern.name)
    return entries


class ApiRootView(APIRootView):
    """``GET /api/``: every endpoint of the API without a path parameter (``api_root_entries``),
    by path."""

    def get(self, request, *args, **kwargs):
        self.api_root_dict = dict(sorted(api_root_entries(api_patterns).items()))
        return super().get(request, *args, **kwargs)


class ApiRouter(DefaultRouter):
    """Serves the API root (and its format suffix), which lists what ``api_patterns`` routes."""

    APIRootView = ApiRootView


def view_routes(prefix: str, view: type[APIView], name: str) -> list[URLPattern]:
    """An APIView's routes as the router gives a viewset's: ``prefix/`` and the format suffix
    (``prefix.json``)."""
    return [
        re_path(rf"^{prefix}/$", view.as_view(), name=name),
        re_path(rf"^{prefix}\.(?P<format>[a-z0-9]+)/?$", view.as_view(), name=name),
    ]


def slash_and_alias(route: str, view: type[APIView], name: str) -> list[URLPattern]:
    """An endpoint at ``route/``, the API's one spelling (its URL name), and the old spelling
    without the slash as an alias of the same view (``<name>-unslashed``), which the schema
    leaves out (core/api_schema.py, ``schema_endpoints_canonical``): clients of the old
    spelling keep working, with any method, without a redirect."""
    return [path(f"{route}/", view.as_view(), name=name), path(route, view.as_view(), name=f"{name}-unslashed")]


def run_routes(
    prefix: str, collection: type[RunCollection], basename: str, extra: tuple[tuple[str, type[APIView], str], ...] = ()
) -> list[URLPattern]:
    """A collection of runs' routes (llm.run_apis.run_views), as the router gave a viewset's:
    ``prefix/`` (``<basename>-list``), ``prefix/<pk>/`` (``-detail``), ``prefix/<pk>/<action>/``
    (``-<action>``), each with its format suffix; ``extra``: (route under ``prefix/``, view,
    name) of the collection's own views, routes before the detail's so that a word is not read
    as a run's id."""
    routes: list[URLPattern] = []
    for route, view, name in extra:
        routes += view_routes(f"{prefix}/{route}", view, name)
    for route, view in run_views(collection, basename).items():
        if route == "":
            routes += view_routes(prefix, view, f"{basename}-list")
        elif route == "<pk>":
            routes += view_routes(f"{prefix}/(?P<pk>[^/.]+)", view, f"{basename}-detail")
        else:
            routes += view_routes(f"{prefix}/(?P<pk>[^/.]+)/{route}", view, f"{basename}-{route}")
    return routes


router = ApiRouter()

# DRF views opt out of the login-redirect middleware and answer 401/403 themselves;
# the browsable docs are pages for people, so anonymous users are sent to the login page.
api_patterns: list[URLPattern | URLResolver] = [
    # First: an RL trainer calls it once per batch of rollouts, and every pattern tried before
    # it is paid on each call (resolving it last cost 0.6 ms of CPU). Five paths began without
    # the trailing slash every other path has: each now has the slash, and its old spelling
    # stays an alias of the same view (left out of the schema).
    *slash_and_alias("reward", RewardView, "reward"),
    path("", include(router.urls)),
    *run_routes(
        "coscript/runs",
        CoScriptRuns,
        "coscript-run",
        extra=(
            ("constrained-how2score", CoScriptConstrainedHow2ScoreView, "coscript-run-constrained-how2score"),
            ("(?P<pk>[^/.]+)/goals", CoScriptRunGoalsView, "coscript-run-goals"),
        ),
    ),
    *run_routes(
        "mining/runs",
        MiningRuns,
        "mining-run",
        extra=(("(?P<pk>[^/.]+)/progress", MiningRunProgressView, "mining-run-progress"),),
    ),
    *run_routes("judging/generation-runs", GenerationRuns, "generation-run"),
    *run_routes("judging/judge-runs", JudgeRuns, "judge-run"),
    *run_routes("judging/components-runs", ComponentsRuns, "components-run"),
    *run_routes("goalstep/evaluations", TaskEvaluations, "goalstep-evaluation"),
    *run_routes("llm/jobs", LLMJobs, "llm-job"),
    *view_routes("topics", TopicListView, "topic-list"),
    *view_routes("topics/(?P<slug>[^/.]+)", TopicDetailView, "topic-detail"),
    *view_routes("procedures", ProcedureListView, "procedure-list"),
    *view_routes("procedures/(?P<pk>[^/.]+)", ProcedureDetailView, "procedure-detail"),
    *view_routes("mining/splits", SplitReportListView, "split-report-list"),
    *view_routes("mining/splits/(?P<pk>[^/.]+)", SplitReportDetailView, "split-report-detail"),
    *view_routes("goalstep/leaderboards", GoalStepLeaderboardListView, "goalstep-leaderboard-list"),
    *view_routes("goalstep/leaderboards/(?P<task>[a-z_]+)", GoalStepLeaderboardView, "goalstep-leaderboard-detail"),
    *view_routes("mining/overview", MiningOverviewView, "mining-overview-list"),
    *view_routes("leaderboard/judges", CrossJudgeView, "cross-judge-list"),
    *view_routes("interval-methods", IntervalMethodsView, "interval-method-list"),
    path("", include("llm.api_urls")),
    path("", include("judging.api_urls")),
    path("", include("annotate.api_urls")),
    path("", include("prolific.api_urls")),
    *slash_and_alias("leaderboard", LeaderboardView, "leaderboard-api"),
    *slash_and_alias("leaderboard/compare", LeaderboardCompareView, "leaderboard-compare-api"),
    *slash_and_alias("studies/<slug:slug>/agreement", StudyAgreementView, "study-agreement"),
    *slash_and_alias("studies/<slug:slug>/metric-agreement", StudyMetricAgreementView, "study-metric-agreement"),
    path("schema/", SpectacularAPIView.as_view(permission_classes=[IsResearcher]), name="schema"),
    # The split view serves Swagger UI's start-up script as a file (?script): no inline script.
    path(
        "docs/",
        login_required(SpectacularSwaggerSplitView.as_view(url_name="schema", permission_classes=[IsResearcher])),
        name="api-docs",
    ),
    # Redoc builds its search index in a worker made from a blob: URL (its own script).
    path(
        "redoc/",
        csp_update({"worker-src": [SELF, "blob:"]})(
            login_required(SpectacularRedocView.as_view(url_name="schema", permission_classes=[IsResearcher]))
        ),
        name="api-redoc",
    ),
    # Last: any other path without its trailing slash is sent to the one with it, by a 308 that
    # keeps the method and the body (core/views.py); a path that names nothing either way is
    # the API's JSON 404.
    re_path(r"^(?P<route>.*[^/])$", api_trailing_slash, name="api-trailing-slash"),
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
    path("", include("prolific.urls")),
]

# A 400 page in the page frame that says what was wrong when a view raised BadRequest with a
# message (core/errors.py); 403, 404 and 500 are templates/403.html, 404.html and 500.html.
handler400 = "core.views.bad_request"
# An unmatched address under /api/ answers JSON, like the API's own 404s.
handler404 = "core.views.not_found"
