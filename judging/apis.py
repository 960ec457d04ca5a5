"""REST API of the judging app: the reward endpoint for RL trainers; the leaderboard and the
paired comparison of two models, every How2Score with its interval and coverage."""
from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from core.authentication import ApiTokenAuthentication
from core.intervals import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, MAX_RESAMPLES
from core.permissions import IsResearcher
from judging.constants import LEADERBOARD_MIN_COVERAGE
from judging.coverage import BASES, BASIS_COMMON
from judging.rewards import RewardInput, rewards_compute
from judging.models import ComponentsRun, GenerationRun, JudgeRun
from judging.selectors import (
    generation_run_list, judge_names, judge_run_score, judged_splits, leaderboard_models, leaderboard_ranking,
    model_comparison,
)
from judging.services import run_control
from llm.apis import RunActions, RunStateFields
from llm.endpoints import EndpointNotConfigured
from llm.runs import owned_run_state

MAX_BATCH = 256


class RewardItemSerializer(serializers.Serializer):
    goal = serializers.CharField()
    resources = serializers.ListField(child=serializers.CharField(), required=False, default=list)
    reference_steps = serializers.ListField(child=serializers.CharField(), min_length=1)
    completion = serializers.CharField(allow_blank=True, trim_whitespace=False)
    with_score = serializers.BooleanField(
        required=False, default=False,
        help_text="Also return the SCORE term (SCORE / 2.5, rule-based components, offline) and add it to total")


class RewardBatchSerializer(serializers.Serializer):
    items = RewardItemSerializer(many=True)

    def validate_items(self, value):
        if not value:
            raise serializers.ValidationError("give at least one item")
        if len(value) > MAX_BATCH:
            raise serializers.ValidationError(f"at most {MAX_BATCH} items per request")
        return value


class RewardSerializer(serializers.Serializer):
    how2score = serializers.IntegerField(allow_null=True, help_text="1 no_failure, 0 has_failure, null: no usable verdict")
    format = serializers.IntegerField()
    length = serializers.FloatField()
    score = serializers.FloatField(required=False, allow_null=True, help_text="Only with with_score: SCORE / 2.5 in [0, 1]")
    total = serializers.FloatField()


class RewardView(APIView):
    """POST one item, or ``{"items": [...]}`` for a batch; returns the rewards in the same shape."""

    authentication_classes = [ApiTokenAuthentication]
    permission_classes = [IsResearcher]

    @extend_schema(request=RewardItemSerializer, responses=RewardSerializer)
    def post(self, request):
        batched = isinstance(request.data, dict) and "items" in request.data
        serializer = RewardBatchSerializer(data=request.data) if batched else RewardItemSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        items = serializer.validated_data["items"] if batched else [serializer.validated_data]
        try:
            results = rewards_compute([RewardInput(**item) for item in items])
        except EndpointNotConfigured as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response({"items": results} if batched else results[0])


class _JudgedSliceQuery(serializers.Serializer):
    """A judge and a split of what it judged; each bad value is a 400 naming it."""

    split = serializers.CharField(required=False, allow_blank=True, default="",
                                  help_text="Only procedures of this split (bench, constrained, ...); empty: all")

    def validate_judge(self, value: str) -> str:
        if value not in judge_names():
            raise serializers.ValidationError(f"no judgments by a judge named {value!r}")
        return value

    @staticmethod
    def check_split(attrs) -> None:
        if attrs["split"] and attrs["split"] not in judged_splits(attrs["judge"]):
            raise serializers.ValidationError(
                {"split": [f"judge {attrs['judge']!r} has judged nothing of a split named {attrs['split']!r}"]})


class LeaderboardQuerySerializer(_JudgedSliceQuery):
    """The query of a leaderboard (page and API)."""

    judge = serializers.CharField(required=False, help_text="The judge; default: the first judge by name")
    basis = serializers.ChoiceField(choices=BASES, required=False, default=BASIS_COMMON, help_text=(
        "common: complete models ranked over the items every complete model has a usable verdict for; "
        "all: each model over all its judged items"))
    min_coverage = serializers.FloatField(required=False, default=LEADERBOARD_MIN_COVERAGE, min_value=0.0,
                                          max_value=1.0, help_text="Rows with a lower coverage are unranked")

    def validate(self, attrs):
        attrs["judge"] = attrs.get("judge") or next(iter(judge_names()), None)
        if attrs["judge"] is None:
            raise serializers.ValidationError({"judge": ["there are no judgments yet"]})
        self.check_split(attrs)
        return attrs


class CompareQuerySerializer(_JudgedSliceQuery):
    """Two models under one judge (page and API)."""

    judge = serializers.CharField(help_text="The judge")
    a = serializers.CharField(help_text="Model A (the model name, as in the leaderboard's rows)")
    b = serializers.CharField(help_text="Model B")
    resamples = serializers.IntegerField(required=False, default=BOOTSTRAP_RESAMPLES, min_value=1,
                                         max_value=MAX_RESAMPLES, help_text="Bootstrap resamples")
    seed = serializers.IntegerField(required=False, default=BOOTSTRAP_SEED, min_value=0, max_value=2**32 - 1)

    def validate(self, attrs):
        self.check_split(attrs)
        models = set(leaderboard_models(attrs["judge"], attrs["split"] or None))
        errors = {field: [f"judge {attrs['judge']!r} has judged no generation of a model named {attrs[field]!r}"
                          + (f" in split {attrs['split']!r}" if attrs["split"] else "")]
                  for field in ("a", "b") if attrs[field] not in models}
        if not errors and attrs["a"] == attrs["b"]:
            errors["b"] = ["choose a model other than a"]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class LeaderboardView(APIView):
    """GET the leaderboard of one judge: the same rows, order, intervals and coverage as the
    leaderboard page (docs/how2bench.md, "Uncertainty, coverage and the ranking rule")."""

    @extend_schema(parameters=[LeaderboardQuerySerializer], responses=OpenApiTypes.OBJECT)
    def get(self, request):
        query = LeaderboardQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        board = leaderboard_ranking(data["judge"], data["split"] or None, basis=data["basis"],
                                    min_coverage=data["min_coverage"])
        board["rows"] = [{key: row[key] for key in API_ROW_FIELDS} for row in board["rows"]]
        return Response(board)


API_ROW_FIELDS = ("model", "label", "rank", "complete", "scored_on", "how2score", "how2score_percent", "ci95",
                  "ci95_percent", "interval", "n_judged",
                  "n_unusable", "n_items", "n_items_judged", "coverage", "all_items", "common_items", "by_topic",
                  "score", "score_n")


class LeaderboardCompareView(APIView):
    """GET ``?judge=J&a=M1&b=M2``: is A better than B under this judge? Both How2Scores on the
    procedures both have a usable verdict for, and the difference A - B with a seeded paired
    bootstrap interval resampling those procedures."""

    @extend_schema(parameters=[CompareQuerySerializer], responses=OpenApiTypes.OBJECT)
    def get(self, request):
        query = CompareQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        return Response(model_comparison(data["judge"], data["a"], data["b"], data["split"] or None,
                                         resamples=data["resamples"], seed=data["seed"]))


class _OwnedRunState(RunStateFields):
    def run_state(self, run) -> dict[str, Any]:
        # One run (detail) is counted from the ledger now; a page of runs from stored counts.
        return owned_run_state(run, live=self.context.get("live", False))


class JudgeRunSerializer(_OwnedRunState, serializers.ModelSerializer):
    """A judge run with its state and its How2Score (interval, n judged, n unusable, coverage)."""

    generation_run = serializers.SlugRelatedField(slug_field="name", read_only=True)
    how2score = serializers.SerializerMethodField(help_text="judge_run_score: how2score and ci95 (Wilson) on 0-1, "
                                                            "how2score_percent and ci95_percent on 0-100, n_judged, "
                                                            "n_unusable, coverage, per topic")

    class Meta:
        model = JudgeRun
        fields = ["id", "name", "generation_run", "judge", "status", "outcomes", "n_failed", "top_errors", "reason",
                  "breaker", "prompt_hash", "executor", "created_at", "finished_at", "how2score"]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_how2score(self, run: JudgeRun) -> dict[str, Any]:
        return judge_run_score(run)


class GenerationRunSerializer(_OwnedRunState, serializers.ModelSerializer):
    """A generation run with its state; its judge runs are at /api/judging/judge-runs/."""

    model = serializers.CharField(source="language_model.name", read_only=True)

    class Meta:
        model = GenerationRun
        fields = ["id", "name", "model", "split", "status", "outcomes", "n_failed", "top_errors", "reason", "breaker",
                  "prompt_hash", "executor", "created_at", "finished_at"]


class ComponentsRunSerializer(_OwnedRunState, serializers.ModelSerializer):
    """A SCORE components run (extract_components) with its state."""

    generation_run = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = ComponentsRun
        fields = ["id", "name", "generation_run", "extractor", "status", "outcomes", "n_failed", "top_errors",
                  "reason", "breaker", "prompt_hash", "executor", "created_at", "finished_at"]


class _RunViewSet(RunActions, viewsets.ReadOnlyModelViewSet):
    """Runs of the judging app; admins drive them with the pages' run_control."""

    permission_classes = [IsResearcher]
    filterset_fields = ["status"]
    search_fields = ["name"]
    ordering_fields = ["id", "created_at"]

    def run_control(self, run, action_name: str) -> int:
        return run_control(run=run, action={"retry-failed": "retry"}.get(action_name, action_name))


class GenerationRunViewSet(_RunViewSet):
    """Generation runs, newest first, each with its state (docs/llm.md, "Run states")."""

    serializer_class = GenerationRunSerializer
    run_noun = "generation run"

    def get_queryset(self):
        return generation_run_list()


class JudgeRunViewSet(_RunViewSet):
    """Judge runs, newest first, each with its state and How2Score (docs/how2bench.md)."""

    serializer_class = JudgeRunSerializer
    run_noun = "judge run"

    def get_queryset(self):
        return JudgeRun.objects.select_related("llm_job", "generation_run").order_by("-id")


class ComponentsRunViewSet(_RunViewSet):
    """SCORE components runs, newest first, each with its state (docs/score.md)."""

    serializer_class = ComponentsRunSerializer
    run_noun = "components run"

    def get_queryset(self):
        return ComponentsRun.objects.select_related("llm_job", "generation_run").order_by("-id")
