"""REST API of goal-step evaluations: each with its state and accuracy (read: researchers
and admins), and the controls of a run (admins), through the services the leaderboard page
uses."""
from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, viewsets

from core.permissions import IsResearcher
from goalstep.models import TaskEvaluation
from goalstep.selectors import task_evaluation_accuracy, task_evaluation_state
from goalstep.services import task_evaluation_resume, task_evaluation_retry_failed
from llm.apis import RunActions, RunStateFields
from llm.runs import owned_run_cancel, owned_run_pause


class TaskEvaluationSerializer(RunStateFields, serializers.ModelSerializer):
    """A model's evaluation on a task set, with its state and accuracy."""

    task = serializers.CharField(source="task_set.task", read_only=True, help_text="step_inference, goal_inference "
                                                                                   "or step_ordering")
    model = serializers.CharField(source="language_model.name", read_only=True)
    accuracy = serializers.SerializerMethodField(help_text=(
        "task_evaluation_accuracy: accuracy with n and its 95% Wilson interval, per topic, and what it leaves out "
        "(n_unusable by outcome, n_unanswered); docs/goalstep.md."))

    class Meta:
        model = TaskEvaluation
        fields = ["id", "task", "task_set", "model", "status", "outcomes", "n_failed", "top_errors", "reason",
                  "breaker", "prompt_hash", "executor", "created_at", "finished_at", "accuracy"]

    def run_state(self, evaluation: TaskEvaluation) -> dict[str, Any]:
        return task_evaluation_state(evaluation, live=self.context.get("live", False))

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_accuracy(self, evaluation: TaskEvaluation) -> dict[str, Any]:
        return task_evaluation_accuracy(evaluation)


class TaskEvaluationViewSet(RunActions, viewsets.ReadOnlyModelViewSet):
    """Goal-step evaluations, newest first, each with its state (docs/goalstep.md)."""

    serializer_class = TaskEvaluationSerializer
    permission_classes = [IsResearcher]
    filterset_fields = ["status", "task_set", "task_set__task"]
    ordering_fields = ["id", "created_at"]
    run_noun = "evaluation of"

    def get_queryset(self):
        return TaskEvaluation.objects.select_related("llm_job", "task_set", "language_model").order_by("-id")

    def run_control(self, evaluation: TaskEvaluation, action_name: str) -> int | None:
        if action_name == "retry-failed":
            return task_evaluation_retry_failed(evaluation=evaluation)
        if action_name == "resume":
            return task_evaluation_resume(evaluation=evaluation)
        return {"pause": owned_run_pause, "cancel": owned_run_cancel}[action_name](evaluation)
