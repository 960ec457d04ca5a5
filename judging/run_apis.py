"""The judging app's collections of runs in the REST API (``llm.run_apis.RunCollection``): generation runs, judge runs and components runs, each with its serializer, its filters, its controls and its launch from a YAML configuration."""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.permissions import IsResearcher
from judging.models import ComponentsRun, GenerationRun, JudgeRun
from judging.run_launch import bench_generate_launch, bench_judge_launch, components_launch
from judging.score_selectors import generation_run_score
from judging.selectors import generation_run_list, judge_run_score
from llm.run_apis import RunCollection, RunFilter, RunStateFields
from llm.run_launch_apis import Launched
from llm.runs import owned_run_state


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
