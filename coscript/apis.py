"""REST API of constrained planning: runs with their phases and report, and a run's specific
goals with their candidate scripts (read: researchers and admins); a run's controls (admins)."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, viewsets
from rest_framework.decorators import action

from core.permissions import IsResearcher
from coscript.constants import CONSTRAINT_TYPES
from coscript.models import CandidateScript, CoScriptRun, SpecificGoal
from coscript.selectors import (
    KEPT_FILTERS, REVIEW_FILTERS, coscript_report, coscript_run_detail, coscript_run_list, coscript_run_state,
    run_kept_rate, specific_goal_list,
)
from coscript.services import coscript_run_cancel, coscript_run_pause, coscript_run_resume, coscript_run_retry_failed
from llm.apis import RunActions, RunStateFields


class CoScriptRunSerializer(RunStateFields, serializers.ModelSerializer):
    model = serializers.CharField(source="language_model.name", read_only=True)
    n_goals = serializers.IntegerField(read_only=True, help_text="Specific goals stored.")
    n_candidates = serializers.IntegerField(read_only=True, help_text="Candidate scripts stored.")
    kept_rate = serializers.SerializerMethodField(help_text="Candidates kept / candidates, from the last filter; "
                                                            "null before filtering.")
    kept_rate_ci95 = serializers.SerializerMethodField(help_text="The kept rate's 95% Wilson interval [low, high]; "
                                                                 "null before filtering.")
    kept_rate_n = serializers.SerializerMethodField(help_text="Candidates the kept rate is computed over.")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    live_state = False  # lists: the counts the phases' jobs stored when they last stopped; a detail: the ledger's

    class Meta:
        model = CoScriptRun
        fields = ["id", "name", "model", "split", "limit", "seed", "k", "filter_mode", "keyword_bonus",
                  "embedding_model", "screen", "executor", "concurrency", "budget_usd", "phase", "status", "outcomes",
                  "n_failed", "top_errors", "reason", "breaker", "error", "n_goals", "n_candidates", "kept_rate", "kept_rate_ci95", "kept_rate_n", "created_by", "created_at",
                  "finished_at"]

    def run_state(self, run: CoScriptRun) -> dict:
        return coscript_run_state(run, live=self.live_state)

    @extend_schema_field(OpenApiTypes.FLOAT)
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
    cost_usd = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    outcomes = serializers.DictField(child=serializers.IntegerField(), help_text="ok, parse_failed, api_error, ...")


class PromptSerializer(serializers.Serializer):
    stage = serializers.CharField()
    path = serializers.CharField()
    sha256 = serializers.CharField()


class CoScriptRunDetailSerializer(CoScriptRunSerializer):
    prompts = serializers.SerializerMethodField()
    jobs = serializers.SerializerMethodField()
    live_state = True
    report = serializers.SerializerMethodField(help_text=(
        "goals (abstract_goals, requests, specific_goals, by_type, dropped), screen (cleared, sensitive, "
        "unreadable, flagged), scripts (candidates, outcomes), filter (mode, by_type and total with goals, "
        "goals_with_script, candidates, kept, kept_rate, kept_rate_ci95, goal_rate, goal_rate_ci95 (95% Wilson "
        "intervals; n: candidates, goals), kept_share, goal_share, reasons; keyword_bonus, embedding_model)."))

    class Meta(CoScriptRunSerializer.Meta):
        fields = [*CoScriptRunSerializer.Meta.fields, "abstract_ids", "prompts", "jobs", "report"]

    @extend_schema_field(PromptSerializer(many=True))
    def get_prompts(self, run: CoScriptRun) -> list[dict]:
        return [{"stage": stage, "path": spec.get("path", ""), "sha256": spec.get("sha256", "")}
                for stage, spec in sorted(run.prompts.items())]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_report(self, run: CoScriptRun) -> dict:
        return coscript_report(run)

    @extend_schema_field(PhaseJobSerializer(many=True))
    def get_jobs(self, run: CoScriptRun) -> list[dict]:
        return PhaseJobSerializer(coscript_run_detail(run)["jobs"], many=True).data


class CandidateScriptSerializer(serializers.ModelSerializer):
    steps = serializers.ListField(child=serializers.CharField(), help_text="Ordered; step 1 first.")
    scores = serializers.JSONField(help_text="keyword_share, target_score, best_sibling_score, best_sibling_goal, "
                                             "similarities (goal id -> cosine).")

    class Meta:
        model = CandidateScript
        fields = ["index", "outcome", "steps", "kept", "reason", "selected", "scores"]


class SpecificGoalSerializer(serializers.ModelSerializer):
    reviewed_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    candidates = CandidateScriptSerializer(many=True, read_only=True)

    class Meta:
        model = SpecificGoal
        fields = ["id", "abstract_goal", "abstract_procedure", "topic", "constraint_type", "constraint",
                  "specific_goal", "sensitive", "review", "reviewed_by", "reviewed_at", "benchmark_procedure",
                  "candidates"]


class CoScriptRunViewSet(RunActions, viewsets.ReadOnlyModelViewSet):
    """CoScript runs, newest first; a run's detail has its prompts, phases and report.
    Admins drive a run as its page does (retry-failed: the stopped phase's failed requests)."""

    permission_classes = [IsResearcher]
    filterset_fields = ["status", "phase"]
    search_fields = ["name"]
    ordering_fields = ["id", "created_at"]
    run_noun = "CoScript run"

    def get_queryset(self):
        return coscript_run_list()

    def get_serializer_class(self):
        if self.action == "goals":
            return SpecificGoalSerializer
        if self.detail:  # one run: the detail, also after an action
            return CoScriptRunDetailSerializer
        return CoScriptRunSerializer

    def run_control(self, run: CoScriptRun, action_name: str) -> int | None:
        return {"retry-failed": coscript_run_retry_failed, "resume": coscript_run_resume, "pause": coscript_run_pause,
                "cancel": coscript_run_cancel}[action_name](run=run)

    @extend_schema(
        responses=SpecificGoalSerializer(many=True),
        parameters=[
            OpenApiParameter("constraint_type", str, enum=list(CONSTRAINT_TYPES)),
            OpenApiParameter("kept", str, enum=list(KEPT_FILTERS),
                             description="yes: goals with a chosen script; no: goals without one"),
            OpenApiParameter("review", str, enum=list(REVIEW_FILTERS)),
            OpenApiParameter("q", str, description="Words of the specific goal, constraint or abstract goal"),
        ],
    )
    @action(detail=True, methods=["get"], filter_backends=[])
    def goals(self, request, pk=None, format=None):  # format: the router's suffix route (goals.json)
        """The run's specific goals with their candidate scripts and the filter's verdicts, paginated."""
        run = self.get_object()
        params = request.query_params
        goals = specific_goal_list(run=run, constraint_type=params.get("constraint_type", ""),
                                   kept=params.get("kept", ""), review=params.get("review", ""), q=params.get("q", ""))
        page = self.paginate_queryset(goals)
        return self.get_paginated_response(SpecificGoalSerializer(page, many=True).data)
