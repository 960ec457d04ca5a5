"""REST API of constrained planning: runs with their phases and report, and a run's specific
goals with their candidate scripts (read: researchers and admins); a run's controls (admins)."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_lists import ListView
from core.permissions import IsResearcher
from coscript.constants import CONSTRAINT_TYPES
from coscript.models import CandidateScript, CoScriptRun, SpecificGoal
from coscript.run_launch import coscript_launch
from coscript.selectors import (
    GOAL_QUERY_MAX_CHARS,
    KEPT_FILTERS,
    REVIEW_FILTERS,
    constrained_how2score,
    coscript_report,
    coscript_run_detail,
    coscript_run_list,
    coscript_run_state,
    filter_specific_goals,
    run_kept_rate,
    specific_goal_list,
)
from judging.constants import LEADERBOARD_MIN_COVERAGE
from llm.run_apis import RunCollection, RunFilter, RunStateFields
from llm.run_launch_apis import LAUNCH_ERRORS, Launched
from mining.embeddings import EmbeddingModelUnavailable


class CoScriptRunSerializer(RunStateFields, serializers.ModelSerializer):
    model = serializers.CharField(source="language_model.name", read_only=True)
    n_goals = serializers.IntegerField(read_only=True, help_text="Specific goals stored.")
    n_candidates = serializers.IntegerField(read_only=True, help_text="Candidate scripts stored.")
    kept_rate = serializers.SerializerMethodField(
        help_text="Candidates kept / candidates, from the last filter; null before filtering."
    )
    kept_rate_ci95 = serializers.SerializerMethodField(
        help_text="The kept rate's 95% Wilson interval [low, high]; null before filtering."
    )
    kept_rate_n = serializers.SerializerMethodField(help_text="Candidates the kept rate is computed over.")
    created_by: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)
    live_state = False  # lists: the counts the phases' jobs stored when they last stopped; a detail: the ledger's

    class Meta:
        model = CoScriptRun
        fields = [
            "id",
            "name",
            "model",
            "split",
            "limit",
            "seed",
            "k",
            "filter_mode",
            "keyword_bonus",
            "embedding_model",
            "screen",
            "executor",
            "concurrency",
            "budget_usd",
            "phase",
            *RunStateFields.STATE_FIELDS,
            "error",
            "n_goals",
            "n_candidates",
            "kept_rate",
            "kept_rate_ci95",
            "kept_rate_n",
            "created_by",
            "created_at",
            "finished_at",
        ]

    def run_state(self, run: CoScriptRun) -> dict:
        return coscript_run_state(run, live=self.live_state)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_kept_rate(self, run: CoScriptRun) -> float | None:
        return run_kept_rate(run)["share"]

    @extend_schema_field(serializers.ListField(child=serializers.FloatField(), allow_null=True))
    def get_kept_rate_ci95(self, run: CoScriptRun) -> list[float] | None:
        return run_kept_rate(run)["ci95"]

    @extend_schema_field(OpenApiTypes.INT)
    def get_kept_rate_n(self, run: CoScriptRun) -> int:
        return run_kept_rate(run)["n"]


class PhaseJobSerializer(serializers.Serializer):
    phase = serializers.CharField(help_text="goals, screen or scripts")
    state = serializers.CharField(help_text="The LLM job's status; skipped (screen off), waiting, or not needed.")
    n_done = serializers.IntegerField()
    n_total = serializers.IntegerField()
    cost_usd = serializers.DecimalField(
        max_digits=12,
        decimal_places=6,
        allow_null=True,
        help_text="What the phase spent; null when it has no job yet, or when any request it paid for has no "
        "price (unknown, never 0).",
    )
    requests_without_price = serializers.IntegerField(help_text="Requests the phase paid for that have no price.")
    outcomes = serializers.DictField(child=serializers.IntegerField(), help_text="ok, parse_failed, api_error, ...")


class PromptSerializer(serializers.Serializer):
    stage = serializers.CharField()
    path = serializers.CharField()
    sha256 = serializers.CharField()


class CoScriptRunDetailSerializer(CoScriptRunSerializer):
    prompts = serializers.SerializerMethodField()
    jobs = serializers.SerializerMethodField()
    live_state = True
    report = serializers.SerializerMethodField(
        help_text=(
            "goals (abstract_goals, requests, specific_goals, by_type, dropped: pairs by reason, answers_dropped: "
            "ok answers that gave no specific goal by reason, no_constraint_pair or pairs_dropped), screen (cleared, "
            "sensitive, "
            "unreadable, flagged), scripts (candidates, outcomes), filter (mode, by_type and total with goals, "
            "goals_with_script, candidates, kept, kept_rate, kept_rate_ci95, goal_rate, goal_rate_ci95 (95% Wilson "
            "intervals; n: candidates, goals), kept_share, goal_share, reasons; keyword_bonus, embedding_model)."
        )
    )

    class Meta(CoScriptRunSerializer.Meta):
        fields = [*CoScriptRunSerializer.Meta.fields, "abstract_ids", "prompts", "jobs", "report"]

    @extend_schema_field(PromptSerializer(many=True))
    def get_prompts(self, run: CoScriptRun) -> list[dict]:
        return [
            {"stage": stage, "path": spec.get("path", ""), "sha256": spec.get("sha256", "")}
            for stage, spec in sorted(run.prompts.items())
        ]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_report(self, run: CoScriptRun) -> dict:
        return coscript_report(run)

    @extend_schema_field(PhaseJobSerializer(many=True))
    def get_jobs(self, run: CoScriptRun) -> list[dict]:
        return list(PhaseJobSerializer(coscript_run_detail(run)["jobs"], many=True).data)


class CandidateScriptSerializer(serializers.ModelSerializer):
    steps = serializers.ListField(child=serializers.CharField(), help_text="Ordered; step 1 first.")
    scores = serializers.JSONField(
        help_text="keyword_share, target_score, best_sibling_score, best_sibling_goal, "
        "similarities (goal id -> cosine)."
    )

    class Meta:
        model = CandidateScript
        fields = ["index", "outcome", "steps", "kept", "reason", "selected", "scores"]


class SpecificGoalSerializer(serializers.ModelSerializer):
    reviewed_by: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)
    candidates = CandidateScriptSerializer(many=True, read_only=True)

    class Meta:
        model = SpecificGoal
        fields = [
            "id",
            "abstract_goal",
            "abstract_procedure",
            "topic",
            "constraint_type",
            "constraint",
            "specific_goal",
            "sensitive",
            "review",
            "reviewed_by",
            "reviewed_at",
            "benchmark_procedure",
            "candidates",
        ]


class CoScriptRunFilter(RunFilter):
    model = django_filters.CharFilter(field_name="language_model__name", help_text="The model's registered name")

    class Meta:
        model = CoScriptRun
        fields = ["status", "phase", "model", "split", "filter_mode", "executor"]


COSCRIPT_EXAMPLE = """name: plan-1
model: qwen3-8b
split: bench
limit: 20
k: 2
"""


class ConstrainedQuerySerializer(serializers.Serializer):
    min_coverage = serializers.FloatField(
        required=False,
        default=LEADERBOARD_MIN_COVERAGE,
        min_value=0.0,
        max_value=1.0,
        help_text="Rows and cells with a lower coverage are not complete (unranked)",
    )


class CoScriptRuns(RunCollection):
    """CoScript runs, newest first; a run's detail has its prompts, phases and report.
    Admins launch a run from its YAML (``POST``) and drive it as its page does (retry-failed:
    the stopped phase's failed requests)."""

    serializer_class = CoScriptRunSerializer
    detail_serializer_class = CoScriptRunDetailSerializer  # one run: the detail, also after an action
    permission_classes = [IsResearcher]
    filterset_class = CoScriptRunFilter
    launch_errors = (*LAUNCH_ERRORS, EmbeddingModelUnavailable)
    search_fields = ["name"]
    ordering_fields = ["id", "created_at"]
    launch = dict(
        kind="a CoScript run",
        command="manage.py coscript_run start --config FILE.yaml",
        example=COSCRIPT_EXAMPLE,
        description="Keys: name, model (a registered model's name, or a mapping name/base_url/model/api_key_env/"
        "prompt_style that registers or updates it), split, limit, seed, k, filter_mode, keyword_bonus, "
        "screen, executor, concurrency, budget_usd. `embedding_model` and `prompts_dir` name things on the "
        "server and are refused here (`coscript_run` takes them).",
    )

    def get_queryset(self):
        return coscript_run_list()

    def launch_runs(self, *, config_text: str, source: str, data: dict[str, Any]) -> Launched:
        return Launched(
            runs=[
                coscript_launch(
                    config_text=config_text, source=source, created_by=self.request.user, server_files=False
                )
            ]
        )


class CoScriptConstrainedHow2ScoreView(CoScriptRuns):
    """How2Score of the constrained slice."""

    @extend_schema(
        summary="How2Score of the constrained slice",
        parameters=[ConstrainedQuerySerializer],
        responses=OpenApiTypes.OBJECT,
        description="The CoScript page's table (constrained_how2score): per judge and model, How2Score on the "
        "constrained split with its 95% Wilson interval, n judged, n unusable, coverage, rank (complete "
        "rows only), and the same per constraint type (docs/coscript.md).",
    )
    def get(self, request: Request, format: str | None = None) -> Response:
        query = ConstrainedQuerySerializer(data=request.query_params.dict())  # empty values are refused
        query.is_valid(raise_exception=True)
        return Response(
            {
                "min_coverage": query.validated_data["min_coverage"],
                "rows": constrained_how2score(min_coverage=query.validated_data["min_coverage"]),
            }
        )


class SpecificGoalFilter(django_filters.FilterSet):
    """The goal table's filters, with the choices of the run page's ``GoalFilterForm``; a value
    outside them is a 400 naming the parameter. Each filters as ``filter_specific_goals``."""

    constraint_type = django_filters.ChoiceFilter(
        choices=[(t, t) for t in CONSTRAINT_TYPES], method="filter_goals", help_text="The constraint's type"
    )
    kept = django_filters.ChoiceFilter(
        choices=list(KEPT_FILTERS.items()),
        method="filter_goals",
        help_text="yes: goals with a chosen script; no: goals without one",
    )
    review = django_filters.ChoiceFilter(
        choices=[(k, v.label) for k, v in REVIEW_FILTERS.items()],
        method="filter_goals",
        help_text="The sensitive-domain review state",
    )
    q = django_filters.CharFilter(
        method="filter_goals",
        max_length=GOAL_QUERY_MAX_CHARS,
        help_text="Words of the specific goal, constraint or abstract goal",
    )

    class Meta:
        model = SpecificGoal
        fields = ["constraint_type", "kept", "review", "q"]

    def filter_goals(self, queryset: QuerySet[SpecificGoal], name: str, value: str) -> QuerySet[SpecificGoal]:
        return filter_specific_goals(queryset, **{name: value})


class CoScriptRunGoalsView(ListView):
    """A CoScript run's specific goals."""

    permission_classes = [IsResearcher]
    serializer_class = SpecificGoalSerializer
    filterset_class = SpecificGoalFilter
    filter_backends = [DjangoFilterBackend]  # the filter set's parameters only (no search, no ordering)

    def rows(self) -> QuerySet[SpecificGoal]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no run
            return SpecificGoal.objects.none()
        run = get_object_or_404(CoScriptRun.objects.all(), pk=self.kwargs["pk"])
        self.check_object_permissions(self.request, run)
        return specific_goal_list(run=run)

    @extend_schema(
        responses=SpecificGoalSerializer(many=True),
        parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH, description="The CoScript run's id")],
    )
    def get(self, request: Request, pk: str, format: str | None = None) -> Response:
        """The run's specific goals with their candidate scripts and the filter's verdicts, paginated."""
        return self.list_response(request)
