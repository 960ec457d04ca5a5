"""The leaderboards in the REST API: the leaderboard of a judged slice (``LeaderboardView``), the paired comparison of two models (``LeaderboardCompareView``) and the rankings of one generation set by several judges (``CrossJudgeView``), every How2Score with its interval and coverage. The query serializers are shared with the leaderboard pages."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.intervals import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, MAX_RESAMPLES
from judging.calibration import HUMAN_MAJORITY, HUMAN_SOURCES
from judging.constants import LEADERBOARD_MIN_COVERAGE
from judging.coverage import BASES, BASIS_COMMON
from judging.cross_judge_selectors import cross_judge_rankings
from judging.leaderboard_selectors import leaderboard_models, leaderboard_ranking, model_comparison
from judging.selectors import judge_names, judged_splits


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
    human = serializers.ChoiceField(
        choices=list(HUMAN_SOURCES),
        required=False,
        default=HUMAN_MAJORITY,
        help_text="The human label the calibrated score is estimated against: "
        + "; ".join(f"{key}: {text}" for key, text in HUMAN_SOURCES.items()),
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
            data["judge"],
            data["split"] or None,
            basis=data["basis"],
            min_coverage=data["min_coverage"],
            human_source=data["human"],
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
