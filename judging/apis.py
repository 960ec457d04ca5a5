"""REST API of the judging app: the reward endpoint for RL trainers; the leaderboard and the
paired comparison of two models, every How2Score with its interval and coverage."""

from __future__ import annotations

import math
from typing import Any

import django_filters
from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.authentication import ApiTokenAuthentication
from core.intervals import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, MAX_RESAMPLES
from core.parsers import StrictJSONParser
from core.permissions import IsResearcher
from core.serializer_fields import StrictBooleanField, StrictCharField
from judging.constants import LEADERBOARD_MIN_COVERAGE
from judging.coverage import BASES, BASIS_COMMON
from judging.models import ComponentsRun, GenerationRun, JudgeRun
from judging.rewards import (
    REASON_DEADLINE,
    STATUS_CACHED,
    STATUS_FAILED,
    STATUS_JUDGED,
    STATUS_NO_STEPS,
    TOTAL_WITHOUT_VERDICT_CHOICES,
    TOTAL_WITHOUT_VERDICT_COMPONENTS,
    TOTAL_WITHOUT_VERDICT_NULL,
    RewardInput,
    rewards_compute,
)
from judging.run_launch import bench_generate_launch, bench_judge_launch, components_launch
from judging.score_selectors import generation_run_score
from judging.selectors import (
    cross_judge_rankings,
    generation_run_list,
    judge_names,
    judge_run_score,
    judged_splits,
    leaderboard_models,
    leaderboard_ranking,
    model_comparison,
)
from judging.services import run_control
from llm.run_apis import RunCollection, RunFilter, RunStateFields
from llm.run_launch_apis import Launched
from llm.runs import owned_run_state

# Bounds of one reward item: beyond them a field is a 400 naming the item and the field.
REWARD_MAX_TEXT_CHARS = 100_000  # the goal, the completion
REWARD_MAX_STEP_CHARS = 10_000  # one reference step, one resource
REWARD_MAX_STEPS = 200  # reference steps, resources


class RewardItemSerializer(serializers.Serializer):
    goal = StrictCharField(max_length=REWARD_MAX_TEXT_CHARS)
    resources = serializers.ListField(
        child=StrictCharField(max_length=REWARD_MAX_STEP_CHARS),
        required=False,
        default=list,
        max_length=REWARD_MAX_STEPS,
    )
    reference_steps = serializers.ListField(
        child=StrictCharField(max_length=REWARD_MAX_STEP_CHARS), min_length=1, max_length=REWARD_MAX_STEPS
    )
    completion = StrictCharField(allow_blank=True, trim_whitespace=False, max_length=REWARD_MAX_TEXT_CHARS)
    with_score = StrictBooleanField(
        required=False,
        default=False,
        help_text="Also return the SCORE term (SCORE / 2.5, rule-based components, offline) and add it to total",
    )


class RewardBatchSerializer(serializers.Serializer):
    """A batch: ``{"items": [...]}``, or the bare list (the view wraps it). Its size is
    checked before any item is read; a bad item's errors are keyed by its position."""

    items = RewardItemSerializer(many=True)

    def to_internal_value(self, data):
        items = data.get("items") if isinstance(data, dict) else None
        if isinstance(items, list):
            limit = settings.REWARD_MAX_BATCH
            if not items:
                raise serializers.ValidationError({"items": ["give at least one item"]})
            if len(items) > limit:
                raise serializers.ValidationError(
                    {
                        "items": [
                            f"at most {limit} items per request (REWARD_MAX_BATCH); this one has {len(items)}: "
                            f"split it into several requests"
                        ]
                    }
                )
        return super().to_internal_value(data)


@extend_schema_field(
    {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": settings.REWARD_DEADLINE_SECONDS}
)
class _DeadlineField(serializers.FloatField):
    """Seconds above 0 and at most REWARD_DEADLINE_SECONDS; the schema says both bounds."""


class RewardQuerySerializer(serializers.Serializer):
    """The query of a reward request, whichever form its body has; a bad value is a 400
    naming it, before anything is judged."""

    deadline_seconds = _DeadlineField(
        required=False,
        help_text=(
            "How long the judge may take, in seconds: above 0 and at most REWARD_DEADLINE_SECONDS (the default). "
            f"Items not answered by then are failed with reason {REASON_DEADLINE!r}; the response comes by then"
        ),
    )
    total_without_verdict = serializers.ChoiceField(
        choices=TOTAL_WITHOUT_VERDICT_CHOICES,
        required=False,
        default=TOTAL_WITHOUT_VERDICT_NULL,
        help_text=(
            f"total of an item without a verdict (how2score null): {TOTAL_WITHOUT_VERDICT_NULL} (the default) "
            f"or {TOTAL_WITHOUT_VERDICT_COMPONENTS}, the sum of the other terms (format + length, + score)"
        ),
    )

    def validate_deadline_seconds(self, value: float) -> float:
        limit = settings.REWARD_DEADLINE_SECONDS
        if not math.isfinite(value) or value <= 0:
            raise serializers.ValidationError(f"a number of seconds above 0 and at most {limit}")
        if value > limit:
            raise serializers.ValidationError(
                f"at most {limit} seconds (REWARD_DEADLINE_SECONDS, the deadline when none is given)"
            )
        return value


class RewardSerializer(serializers.Serializer):
    how2score = serializers.IntegerField(
        allow_null=True, help_text="1 no_failure, 0 has_failure, null: no usable verdict"
    )
    format = serializers.IntegerField()
    length = serializers.FloatField()
    score = serializers.FloatField(
        required=False, allow_null=True, help_text="Only with with_score: SCORE / 2.5 in [0, 1]"
    )
    total = serializers.FloatField(
        allow_null=True,
        help_text=(
            "how2score + format + length (+ score); null when there is no verdict (how2score null), "
            "unless total_without_verdict=components asked for the sum of the other terms"
        ),
    )
    status = serializers.ChoiceField(
        choices=[STATUS_JUDGED, STATUS_CACHED, STATUS_NO_STEPS, STATUS_FAILED],
        help_text=(
            "judged: the judge answered now; cached: the ledger held its answer; no_steps: nothing to follow, "
            "How2Score 0 without a judge call; failed: no usable verdict (see reason; deadline: not answered by the "
            "request's deadline). In the one-item and "
            '{"items": [...]} forms only a failed item carries it'
        ),
    )
    reason = serializers.CharField(
        required=False,
        help_text=f"Only when failed: why there is no verdict ({REASON_DEADLINE!r}: the deadline came first)",
    )


def _old_form(result: dict) -> dict:
    """An item of the one-item and ``{"items": [...]}`` forms: as before, plus status and
    reason on a failed item (so a failure is never mistaken for a verdict)."""
    if result["status"] == STATUS_FAILED:
        return result
    return {key: value for key, value in result.items() if key not in ("status", "reason")}


class RewardView(APIView):
    """POST a list of items (an RL trainer's batch) and get the list of rewards in the same
    order, each with its status; or one item, or ``{"items": [...]}``, answered in the same
    shape (docs/how2bench.md, "Rewards for RL")."""

    authentication_classes = [ApiTokenAuthentication]
    permission_classes = [IsResearcher]
    # JSON only: a form cannot carry a list of items.
    parser_classes = [StrictJSONParser]

    @extend_schema(
        request=RewardItemSerializer(many=True, min_length=1),  # type: ignore[call-arg]  # an empty batch is refused
        parameters=[RewardQuerySerializer],
        responses=RewardSerializer(many=True),
    )
    def post(self, request):
        # A plain dict: a parameter sent empty is refused, not read as its default.
        query = RewardQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        data = request.data
        shape = "list" if isinstance(data, list) else "items" if isinstance(data, dict) and "items" in data else "one"
        serializer = (
            RewardBatchSerializer(data={"items": data})
            if shape == "list"
            else RewardBatchSerializer(data=data)
            if shape == "items"
            else RewardItemSerializer(data=data)
        )
        serializer.is_valid(raise_exception=True)
        items = serializer.validated_data["items"] if shape != "one" else [serializer.validated_data]
        results = rewards_compute(  # EndpointNotConfigured: a 503
            [RewardInput(**item) for item in items],
            deadline_seconds=query.validated_data.get("deadline_seconds"),
            total_without_verdict=query.validated_data["total_without_verdict"],
        )
        if shape == "list":
            return Response(results)
        if shape == "one":
            return Response(_old_form(results[0]))
        failed = [{"index": i, "reason": r["reason"]} for i, r in enumerate(results) if r["status"] == STATUS_FAILED]
        return Response({"items": [_old_form(r) for r in results], "failed": failed})


class _JudgedSliceQuery(serializers.Serializer):
    """A judge and a split of what it judged; each bad value is a 400 naming it."""

    split = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Only procedures of this split (bench, constrained, ...); empty: all",
    )

    def validate_judge(self, value: str) -> str:
        if value and value not in judge_names():  # empty: the default judge (the leaderboard)
            raise serializers.ValidationError(f"no judgments by a judge named {value!r}")
        return value

    @staticmethod
    def check_split(attrs) -> None:
        if attrs["split"] and attrs["split"] not in judged_splits(attrs["judge"]):
            raise serializers.ValidationError(
                {"split": [f"judge {attrs['judge']!r} has judged nothing of a split named {attrs['split']!r}"]}
            )


class LeaderboardQuerySerializer(_JudgedSliceQuery):
    """The query of a leaderboard (page and API)."""

    judge = serializers.CharField(
        required=False, allow_blank=True, help_text="The judge; default (also when empty): the first judge by name"
    )
    basis = serializers.ChoiceField(
        choices=BASES,
        required=False,
        default=BASIS_COMMON,
        help_text=(
            "common: complete models ranked over the items every complete model has a usable verdict for; "
            "all: each model over all its judged items"
        ),
    )
    min_coverage = serializers.FloatField(
        required=False,
        default=LEADERBOARD_MIN_COVERAGE,
        min_value=0.0,
        max_value=1.0,
        help_text="Rows with a lower coverage are unranked",
    )

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
    resamples = serializers.IntegerField(
        required=False,
        default=BOOTSTRAP_RESAMPLES,
        min_value=1,
        max_value=MAX_RESAMPLES,
        help_text="Bootstrap resamples (used when a procedure holds several generations of a model)",
    )
    seed = serializers.IntegerField(required=False, default=BOOTSTRAP_SEED, min_value=0, max_value=2**32 - 1)

    def validate(self, attrs):
        self.check_split(attrs)
        models = set(leaderboard_models(attrs["judge"], attrs["split"] or None))
        errors = {
            field: [
                f"judge {attrs['judge']!r} has judged no generation of a model named {attrs[field]!r}"
                + (f" in split {attrs['split']!r}" if attrs["split"] else "")
            ]
            for field in ("a", "b")
            if attrs[field] not in models
        }
        if not errors and attrs["a"] == attrs["b"]:
            errors["b"] = ["choose a model other than a"]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class LeaderboardView(APIView):
    """GET the leaderboard of one judge: the same rows, order, intervals and coverage as the
    leaderboard page (docs/how2bench.md, "Uncertainty, coverage and the ranking rule")."""

    empty_query_value_is_default = True  # ?min_coverage= as the page's empty field: the default

    @extend_schema(parameters=[LeaderboardQuerySerializer], responses=OpenApiTypes.OBJECT)
    def get(self, request):
        query = LeaderboardQuerySerializer(data=request.query_params)  # an empty value: its default
        query.is_valid(raise_exception=True)
        data = query.validated_data
        board = leaderboard_ranking(
            data["judge"], data["split"] or None, basis=data["basis"], min_coverage=data["min_coverage"]
        )
        board["rows"] = [{key: row[key] for key in API_ROW_FIELDS} for row in board["rows"]]
        return Response(board)


API_ROW_FIELDS = (
    "model",
    "label",
    "step_parsers",
    "rank",
    "tied",
    "rank_interval",
    "complete",
    "scored_on",
    "how2score",
    "how2score_percent",
    "ci95",
    "ci95_percent",
    "interval",
    "n_judged",
    "n_unusable",
    "n_items",
    "n_items_judged",
    "coverage",
    "all_items",
    "common_items",
    "by_topic",
    "score",
    "score_n",
    "score_ci95",
    "score_not_estimable",
    "score_interval_name",
    "score_approximate",
    # The score corrected for the judge's errors against human labels (the page's Calibrated
    # column): None without a human majority for this judge.
    "calibrated",
)


class LeaderboardCompareView(APIView):
    """GET ``?judge=J&a=M1&b=M2``: is A better than B under this judge? Both How2Scores on the
    procedures both have a usable verdict for, the difference A - B with Newcombe's paired
    interval (a seeded paired BCa bootstrap when a procedure holds several generations), the
    exact McNemar (or sign) test's p-value, that p adjusted by Holm over every pair of models
    the leaderboard offers, and the decision (docs/how2bench.md)."""

    @extend_schema(parameters=[CompareQuerySerializer], responses=OpenApiTypes.OBJECT)
    def get(self, request):
        query = CompareQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        data = query.validated_data
        return Response(
            model_comparison(
                data["judge"],
                data["a"],
                data["b"],
                data["split"] or None,
                resamples=data["resamples"],
                seed=data["seed"],
            )
        )


class CrossJudgeView(APIView):
    """The cross-judge page's numbers: the complete models' How2Scores and ranks under each
    judge on the procedures every judge judged, the models left out and why, and the rank
    correlations between judges with their bootstrap intervals."""

    class FilterSerializer(serializers.Serializer):
        """The judges to compare (default: every judge) and a split (page and API)."""

        judge = serializers.ListField(
            child=serializers.CharField(),
            required=False,
            default=list,
            help_text="A judge to compare; repeat the parameter (default: every judge)",
        )
        split = serializers.CharField(
            required=False, allow_blank=True, default="", help_text="Only procedures of this split; empty: all"
        )

        def to_internal_value(self, data):
            if hasattr(data, "getlist"):  # ?judge=a&judge=b
                data = {"judge": data.getlist("judge"), **({"split": data["split"]} if "split" in data else {})}
            return super().to_internal_value(data)

        def validate_judge(self, value: list[str]) -> list[str]:
            available = judge_names()
            unknown = [judge for judge in value if judge not in available]
            if unknown:
                raise serializers.ValidationError(f"no judgments by a judge named {unknown[0]!r}")
            return list(dict.fromkeys(value)) or list(available)

        def validate_split(self, value: str) -> str:
            if value and value not in judged_splits():
                raise serializers.ValidationError(f"nothing of a split named {value!r} was judged")
            return value

    @extend_schema(
        summary="Rankings under several judges",
        parameters=[FilterSerializer],
        responses=OpenApiTypes.OBJECT,
        description=(
            "cross_judge_rankings, as the cross-judge page shows it: the complete models (coverage >= 95 % "
            "under every judge) scored and ranked under each judge on the procedures every judge judged "
            "usably for all of them (common_estimates, ranks, n_common_items), the models left out and the "
            "judges they fall short under (incomplete_models, left_out), every model's score over its own "
            "judged procedures (estimates[judge][model]: how2score, ci95, n_judged, n_unusable, coverage), "
            "table rows per model, and pairs of judges with n_models, kendall_tau, spearman and their BCa "
            "bootstrap intervals, null with a reason when not estimable (docs/how2bench.md)."
        ),
    )
    def get(self, request: Request, format: str | None = None) -> Response:
        query = self.FilterSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        return Response(cross_judge_rankings(data["judge"], data["split"] or None))


class _OwnedRunState(RunStateFields):
    def run_state(self, run) -> dict[str, Any]:
        # One run (detail) is counted from the ledger now; a page of runs from stored counts.
        return owned_run_state(run, live=self.context.get("live", False))


class JudgeRunSerializer(_OwnedRunState, serializers.ModelSerializer):
    """A judge run with its state and its How2Score (interval, n judged, n unusable, coverage)."""

    generation_run: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="name", read_only=True)
    how2score = serializers.SerializerMethodField(
        help_text="judge_run_score: how2score and ci95 (Wilson) on 0-1, "
        "how2score_percent and ci95_percent on 0-100, n_judged, "
        "n_unusable, coverage, per topic"
    )

    class Meta:
        model = JudgeRun
        fields = [
            "id",
            "name",
            "generation_run",
            "judge",
            *RunStateFields.OWNED_RUN_FIELDS,
            "how2score",
        ]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_how2score(self, run: JudgeRun) -> dict[str, Any]:
        return judge_run_score(run)


class GenerationRunSerializer(_OwnedRunState, serializers.ModelSerializer):
    """A generation run with its state; its judge runs are at /api/judging/judge-runs/."""

    model = serializers.CharField(source="language_model.name", read_only=True)
    score = serializers.SerializerMethodField(
        help_text=(
            "The run page's SCORE summary (generation_run_score: mean with its interval and n over the usable "
            "generations, per component, the extractor); in a run's detail, null in lists (it reads every generation)"
        )
    )

    class Meta:
        model = GenerationRun
        fields = [
            "id",
            "name",
            "model",
            "split",
            "step_parser",
            *RunStateFields.OWNED_RUN_FIELDS,
            "score",
        ]

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_score(self, run: GenerationRun) -> dict[str, Any] | None:
        return generation_run_score(run) if self.context.get("live") else None


class ComponentsRunSerializer(_OwnedRunState, serializers.ModelSerializer):
    """A SCORE components run (extract_components) with its state."""

    generation_run: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = ComponentsRun
        fields = [
            "id",
            "name",
            "generation_run",
            "extractor",
            *RunStateFields.OWNED_RUN_FIELDS,
        ]


class GenerationRunFilter(RunFilter):
    model = django_filters.CharFilter(field_name="language_model__name", help_text="The model's registered name")

    class Meta:
        model = GenerationRun
        fields = ["status", "model", "split", "executor"]


class JudgeRunFilter(RunFilter):
    generation_run = django_filters.CharFilter(
        field_name="generation_run__name", help_text="The judged generation run's name"
    )
    model = django_filters.CharFilter(
        field_name="generation_run__language_model__name", help_text="The judged model's registered name"
    )

    class Meta:
        model = JudgeRun
        fields = ["status", "judge", "generation_run", "model", "executor"]


class ComponentsRunFilter(RunFilter):
    generation_run = django_filters.CharFilter(field_name="generation_run__name", help_text="The generation run's name")

    class Meta:
        model = ComponentsRun
        fields = ["status", "generation_run", "extractor", "executor"]


class _JudgingRuns(RunCollection):
    """Runs of the judging app; admins launch them from their YAML (``POST``, the service
    ``bench_run`` uses) and drive them with the pages' run_control."""

    permission_classes = [IsResearcher]
    search_fields = ["name"]
    ordering_fields = ["id", "created_at"]

    def run_control(self, run, action_name: str) -> int:
        return run_control(run=run, action={"retry-failed": "retry"}.get(action_name, action_name))


GENERATION_EXAMPLE = """name: qwen3-8b-bench
model: qwen3-8b
split: bench
sample_per_topic: 10
"""
JUDGE_EXAMPLE = """name: qwen3-8b-bench--how2judge
generation_run: qwen3-8b-bench
judge: how2judge
"""
COMPONENTS_EXAMPLE = """generation_run: qwen3-8b-bench
"""
_SERVER_FILES = (
    "A configuration in the reference CLI's shape is translated as `bench_run` translates it (one run "
    "per model, its notes in `notes`); its `inputs` and `paths.generations` name files on the server "
    "and are refused here (`bench_run` reads them), and its output files are written by `bench_run "
    "--wait`."
)


class GenerationRuns(_JudgingRuns):
    """Generation runs, newest first, each with its state (docs/llm.md, "Run states")."""

    serializer_class = GenerationRunSerializer
    filterset_class = GenerationRunFilter
    run_noun = "generation run"
    launch = dict(
        kind="a generation run",
        command="manage.py bench_run generate --config FILE.yaml",
        example=GENERATION_EXAMPLE,
        description="`model` is a registered model's name, or a mapping (name, base_url, model, ...) that registers "
        "or updates it. " + _SERVER_FILES,
    )

    def get_queryset(self):
        return generation_run_list()

    def launch_runs(self, *, config_text: str, source: str, data: dict[str, Any]) -> Launched:
        launch = bench_generate_launch(config_text=config_text, source=source, server_files=False)
        return Launched(runs=launch.runs, notes=launch.notes)


class JudgeRuns(_JudgingRuns):
    """Judge runs, newest first, each with its state and How2Score (docs/how2bench.md)."""

    serializer_class = JudgeRunSerializer
    filterset_class = JudgeRunFilter
    run_noun = "judge run"
    launch = dict(
        kind="a judge run",
        command="manage.py bench_run judge --config FILE.yaml",
        example=JUDGE_EXAMPLE,
        description=_SERVER_FILES,
    )

    def get_queryset(self):
        return JudgeRun.objects.select_related("llm_job", "generation_run").order_by("-id")

    def launch_runs(self, *, config_text: str, source: str, data: dict[str, Any]) -> Launched:
        launch = bench_judge_launch(config_text=config_text, source=source, server_files=False)
        return Launched(runs=launch.runs, notes=launch.notes)


class ComponentsRuns(_JudgingRuns):
    """SCORE components runs, newest first, each with its state (docs/score.md)."""

    serializer_class = ComponentsRunSerializer
    filterset_class = ComponentsRunFilter
    run_noun = "components run"
    launch = dict(
        kind="a components run",
        command="manage.py bench_run components --config FILE.yaml",
        example=COMPONENTS_EXAMPLE,
        description="Keys: generation_run (required), name, prompt_file, executor, concurrency, budget_usd.",
    )

    def get_queryset(self):
        return ComponentsRun.objects.select_related("llm_job", "generation_run").order_by("-id")

    def launch_runs(self, *, config_text: str, source: str, data: dict[str, Any]) -> Launched:
        return Launched(runs=[components_launch(config_text=config_text, source=source)])
