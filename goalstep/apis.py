"""REST API of goal-step evaluations: each with its state and accuracy (read: researchers
and admins), and the controls of a run (admins), through the services the leaderboard page
uses."""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.app_errors import InvalidInput, NotFound
from core.permissions import IsResearcher
from goalstep.constants import TASKS
from goalstep.models import TaskEvaluation
from goalstep.run_launch import task_evaluation_launch
from goalstep.selectors import leaderboard, task_evaluation_accuracy, task_evaluation_state
from llm.run_apis import RunCollection, RunFilter, RunStateFields
from llm.run_launch_apis import Launched


class TaskEvaluationSerializer(RunStateFields, serializers.ModelSerializer):
    """A model's evaluation on a task set, with its state and accuracy."""

    task = serializers.CharField(
        source="task_set.task", read_only=True, help_text="step_inference, goal_inference or step_ordering"
    )
    model = serializers.CharField(source="language_model.name", read_only=True)
    accuracy = serializers.SerializerMethodField(
        help_text=(
            "task_evaluation_accuracy: accuracy = correct / readable (answers naming exactly one candidate) with "
            "its 95% Wilson interval, per topic, and what it leaves out: ambiguous (answers naming two or more "
            "candidates), unparseable (naming none), n_unusable by outcome, n_unanswered; docs/goalstep.md."
        )
    )

    class Meta:
        model = TaskEvaluation
        fields = [
            "id",
            "task",
            "task_set",
            "model",
            *RunStateFields.OWNED_RUN_FIELDS,
            "accuracy",
        ]

    def run_state(self, evaluation: TaskEvaluation) -> dict[str, Any]:
        return task_evaluation_state(evaluation, live=self.context.get("live", False))

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_accuracy(self, evaluation: TaskEvaluation) -> dict[str, Any]:
        return task_evaluation_accuracy(evaluation)


class TaskEvaluationFilter(RunFilter):
    task = django_filters.ChoiceFilter(
        field_name="task_set__task",
        choices=[(t, t) for t in TASKS],
        help_text="step_inference, goal_inference or step_ordering",
    )
    model = django_filters.CharFilter(field_name="language_model__name", help_text="The model's registered name")

    class Meta:
        model = TaskEvaluation
        fields = ["status", "task_set", "task_set__task", "task", "model", "executor"]


EVALUATION_EXAMPLE = """task_set: 1
model: qwen3-8b
"""


class TaskEvaluations(RunCollection):
    """Goal-step evaluations, newest first, each with its state (docs/goalstep.md); admins
    launch one from its YAML (``POST``) as ``goalstep_evaluate --config`` does."""

    serializer_class = TaskEvaluationSerializer
    permission_classes = [IsResearcher]
    filterset_class = TaskEvaluationFilter
    ordering_fields = ["id", "created_at"]
    launch = dict(
        kind="a goal-step evaluation",
        command="manage.py goalstep_evaluate --config FILE.yaml",
        example=EVALUATION_EXAMPLE,
        description="Keys: task_set (its id), model (a registered model's name), and "
        "optionally prompt_file, executor, concurrency, budget_usd.",
    )

    def get_queryset(self):
        return TaskEvaluation.objects.select_related("llm_job", "task_set", "language_model").order_by("-id")

    def launch_runs(self, *, config_text: str, source: str, data: dict[str, Any]) -> Launched:
        return Launched(runs=[task_evaluation_launch(config_text=config_text, source=source)])


def _leaderboard_json(board: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for row in board["rows"]:
        data = {key: value for key, value in row.items() if key not in ("evaluation", "state")}
        rows.append({"evaluation": row["evaluation"].pk, "status": row["evaluation"].status, **data})
    chosen = board["task_set"]
    return {
        "task": board["task"],
        "task_set": chosen.pk if chosen else None,
        "task_sets": [s.pk for s in board["task_sets"]],
        "rows": rows,
        "topics": board["topics"],
        "paper_roberta": board["paper_roberta"],
        "paper_human": board["paper_human"],
        "human": board["human"],
    }


class GoalStepLeaderboardListView(APIView):
    """The goal-step leaderboards, one per task, with the same rows and numbers as the
    leaderboard pages (goalstep.selectors.leaderboard)."""

    permission_classes = [IsResearcher]

    @extend_schema(
        operation_id="goalstep_leaderboards_list",
        summary="Goal-step leaderboards",
        description="One leaderboard per task (its chosen task set: the newest with an evaluation).",
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request, format: str | None = None) -> Response:
        return Response({"results": [_leaderboard_json(leaderboard(task)) for task in TASKS]})


class GoalStepLeaderboardView(APIView):
    """One task's goal-step leaderboard, of its newest evaluated task set or the one chosen."""

    permission_classes = [IsResearcher]

    class FilterSerializer(serializers.Serializer):
        set = serializers.RegexField(
            r"^[0-9]{1,18}$",
            required=False,
            error_messages={"invalid": "a task set's id (a whole number)", "blank": "a task set's id (a whole number)"},
            help_text="The task set (default: the newest with an evaluation)",
        )

    @extend_schema(
        summary="A goal-step leaderboard",
        responses=OpenApiTypes.OBJECT,
        parameters=[
            OpenApiParameter("task", str, OpenApiParameter.PATH, enum=list(TASKS)),
            OpenApiParameter("set", int, description="The task set (default: the newest with an evaluation)"),
        ],
        description="The leaderboard page's rows, best first: accuracy = correct / readable with its 95% Wilson "
        "interval (n = readable), per topic, what it leaves out (ambiguous, unparseable, unusable by outcome, "
        "unanswered), and "
        "beside them the validated set's human accuracy and the paper's figures (docs/goalstep.md).",
    )
    def get(self, request: Request, task: str, format: str | None = None) -> Response:
        if task not in TASKS:
            raise NotFound(f"unknown task {task!r}; one of {', '.join(TASKS)}")
        query = self.FilterSerializer(data=request.query_params.dict())  # a plain dict: an empty set= is refused
        query.is_valid(raise_exception=True)
        chosen = query.validated_data.get("set")
        board = leaderboard(task, task_set_id=int(chosen) if chosen else None)
        if chosen and (board["task_set"] is None or board["task_set"].pk != int(chosen)):
            raise InvalidInput(fields={"set": f"no task set {chosen} of task {task}"})
        return Response(_leaderboard_json(board))
