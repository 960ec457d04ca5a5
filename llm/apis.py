"""REST API pieces of the LLM layer shared by every app's run endpoints."""
from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.confirm import CONFIRM_FIELD, CONFIRM_VALUE
from core.permissions import IsAdminRole
from llm.models import FINISHED, LLMJob, RunStatus
from llm.runs import job_owner_for, llm_job_control, run_state, run_state_json


class RunStateFields(serializers.Serializer):
    """The state of a run as every API response gives it (llm/runs.py ``run_state_json``:
    outcomes, n_failed, top_errors, reason, breaker; ``status`` is the run's own field).
    A serializer of runs inherits it and says how its run's state is read (``run_state``);
    it lists the fields it shows in ``Meta.fields``. (Every kind of run and LLM jobs use it.)"""

    outcomes = serializers.SerializerMethodField(help_text="Requests per outcome: ok, parse_failed, truncated, "
                                                           "refused, api_error, pending, retrying.")
    n_failed = serializers.SerializerMethodField(help_text="Requests without an ok answer.")
    top_errors = serializers.SerializerMethodField(help_text=(
        "The most frequent errors: [{error, n}]. A run's detail always carries them; a list of runs may give [] "
        "to stay cheap (it reads the counts the runs' jobs stored), so read one run for its errors."))
    reason = serializers.SerializerMethodField(help_text="Why the run paused or failed.")
    breaker = serializers.SerializerMethodField(help_text="The circuit breaker's record when it paused the run "
                                                          "(endpoint, since, last_error, reason); {} otherwise.")

    def run_state(self, run) -> dict[str, Any]:
        raise NotImplementedError

    def _state(self, run) -> dict[str, Any]:
        if not hasattr(run, "state_json"):
            run.state_json = run_state_json(self.run_state(run))
        return run.state_json

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_outcomes(self, run) -> dict[str, int]:
        return self._state(run)["outcomes"]

    @extend_schema_field(OpenApiTypes.INT)
    def get_n_failed(self, run) -> int:
        return self._state(run)["n_failed"]

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_top_errors(self, run) -> list[dict[str, Any]]:
        return self._state(run)["top_errors"]

    @extend_schema_field(OpenApiTypes.STR)
    def get_reason(self, run) -> str:
        return self._state(run)["reason"]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_breaker(self, run) -> dict[str, Any]:
        return self._state(run)["breaker"]


# -- driving a run: POST retry-failed, resume, pause, cancel ----------------------------------

ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING)
LIVE_ACTIONS = ("retrieve", "retry_failed", "resume", "pause", "cancel")  # a run's own state, read from the ledger


def run_action_refusal(action_name: str, run_status: str) -> str | None:
    """Why an action does not apply to a run in this status (None: it applies). Pause and
    cancel change nothing outside their states, so the API says so instead of answering 200."""
    if run_status == RunStatus.CANCELLED:
        return "a cancelled run cannot be resumed, paused or retried (start a new run)"
    if action_name == "pause" and run_status not in ACTIVE:
        return "only a pending or running run can be paused"
    if action_name == "cancel" and run_status in FINISHED:
        return "a finished run has nothing to cancel"
    if action_name == "retry-failed" and run_status in ACTIVE:
        return "its failures are retried once it has stopped (pause it, or wait until it finishes)"
    return None


class ConfirmSerializer(serializers.Serializer):
    """The confirmation a cancel needs, as the pages ask for it (core/confirm.py)."""

    confirm = serializers.ChoiceField(
        choices=[CONFIRM_VALUE], help_text=f"Must be '{CONFIRM_VALUE}': a cancelled run cannot be resumed.",
        error_messages={"required": f"'{CONFIRM_FIELD}' must be '{CONFIRM_VALUE}' to cancel; nothing was done.",
                        "invalid_choice": f"'{CONFIRM_FIELD}' must be '{CONFIRM_VALUE}' to cancel; nothing was done."})


class RunActionResultSerializer(serializers.Serializer):
    action = serializers.CharField(help_text="retry-failed, resume, pause or cancel")
    detail = serializers.CharField(help_text="What was done.")
    asked_again = serializers.IntegerField(allow_null=True, help_text=(
        "retry-failed: how many failed requests are asked again (mining runs: failed documents); null otherwise."))
    run = serializers.DictField(help_text="The run as its detail gives it, after the action.")


class RunErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


def _action_schema(summary: str, description: str, *, cancel: bool = False):
    responses = {
        200: RunActionResultSerializer,
        401: OpenApiResponse(RunErrorSerializer, description="Not logged in (no token or session)"),
        403: OpenApiResponse(RunErrorSerializer, description="The admin role is needed"),
        404: OpenApiResponse(RunErrorSerializer, description="No such run"),
        409: OpenApiResponse(RunErrorSerializer, description="The action does not apply in the run's state; "
                                                             "detail says why"),
    }
    if cancel:
        responses[400] = OpenApiResponse(OpenApiTypes.OBJECT, description=(
            f'No {{"{CONFIRM_FIELD}": "{CONFIRM_VALUE}"}}: {{"{CONFIRM_FIELD}": [why]}}; nothing was done'))
    return extend_schema(summary=summary, description=description, request=ConfirmSerializer if cancel else None,
                         filters=False, responses=responses)


class RunActions:
    """The four controls of a run in its API, for admins, each calling the service the run's
    page calls (``run_control``, defined per kind of run): ``retry-failed`` (exactly the
    requests without an ``ok`` answer are asked again), ``resume``, ``pause`` and ``cancel``
    (only with ``{"confirm": "yes"}``). An action that does not apply in the run's state
    answers 409 with the reason. Mixed into a viewset of runs (before the viewset class)."""

    run_noun = "run"

    def run_label(self, run) -> str:
        return f"{self.run_noun} {run}"

    def run_control(self, run, action_name: str) -> int | None:
        raise NotImplementedError

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "live": self.action in LIVE_ACTIONS}

    def _act(self, request, action_name: str) -> Response:
        run = self.get_object()
        if action_name == "cancel":
            ConfirmSerializer(data=request.data).is_valid(raise_exception=True)
        refusal = run_action_refusal(action_name, run.status)
        if refusal is not None:
            return Response({"detail": f"{self.run_label(run)} is {run.status}; {refusal}"},
                            status=status.HTTP_409_CONFLICT)
        try:
            asked_again = self.run_control(run, action_name)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        run = self.get_object()
        retry = action_name == "retry-failed"
        detail = (f"{self.run_label(run)}: {asked_again} failed will be asked again" if retry
                  else f"{self.run_label(run)}: {action_name} requested")
        return Response({"action": action_name, "detail": detail, "asked_again": asked_again if retry else None,
                         "run": self.get_serializer(run).data})

    # ``format``: the router's format-suffix routes (``.../pause.json``) pass it.
    @_action_schema("Retry failed", "Ask exactly the run's requests without an ok answer again (admins), as the "
                    "run page's Retry failed does; the run is queued again. 409 while it is pending or running.")
    @action(detail=True, methods=["post"], url_path="retry-failed", permission_classes=[IsAdminRole],
            filter_backends=[])
    def retry_failed(self, request, pk=None, format=None):
        return self._act(request, "retry-failed")

    @_action_schema("Resume", "Continue a paused, failed or interrupted run (admins); requests without an ok "
                    "answer are asked again. 409 for a finished or cancelled run.")
    @action(detail=True, methods=["post"], permission_classes=[IsAdminRole], filter_backends=[])
    def resume(self, request, pk=None, format=None):
        return self._act(request, "resume")

    @_action_schema("Pause", "Pause a pending or running run (admins); work in flight stops within seconds and "
                    "what was answered is kept. 409 in any other state.")
    @action(detail=True, methods=["post"], permission_classes=[IsAdminRole], filter_backends=[])
    def pause(self, request, pk=None, format=None):
        return self._act(request, "pause")

    @_action_schema("Cancel", f'Cancel a run (admins); a cancelled run cannot be resumed, so the body must be '
                    f'{{"{CONFIRM_FIELD}": "{CONFIRM_VALUE}"}} (400 otherwise). 409 for a finished or cancelled run.',
                    cancel=True)
    @action(detail=True, methods=["post"], permission_classes=[IsAdminRole], filter_backends=[])
    def cancel(self, request, pk=None, format=None):
        return self._act(request, "cancel")


# -- LLM jobs --------------------------------------------------------------------------------


class LLMJobSerializer(RunStateFields, serializers.ModelSerializer):
    """An LLM job with its state; ``owner``: the run it belongs to (empty for a plain job),
    through which it is resumed and retried."""

    owner = serializers.SerializerMethodField(help_text="The run that owns the job, e.g. 'judge run j'; "
                                                        "empty for a plain job.")

    class Meta:
        model = LLMJob
        fields = ["id", "run", "owner", "role", "executor", "concurrency", "budget_usd", "status", "outcomes",
                  "n_failed", "top_errors", "reason", "breaker", "n_total", "n_done", "cost_usd", "created_at",
                  "started_at", "finished_at"]

    def run_state(self, job: LLMJob) -> dict[str, Any]:
        return run_state(status=job.status, jobs=[job], reason=job.pause_reason or job.error,
                         live=self.context.get("live", False))

    @extend_schema_field(OpenApiTypes.STR)
    def get_owner(self, job: LLMJob) -> str:
        owner = job_owner_for(job)
        try:
            return owner.describe(job) if owner else ""
        except ObjectDoesNotExist:  # the owning run was deleted: the job stands alone
            return ""


class LLMJobViewSet(RunActions, viewsets.ReadOnlyModelViewSet):
    """LLM jobs, newest first, each with its state (docs/llm.md, "Run states"); admins only,
    like the LLM pages. A job owned by a run is resumed and retried through its run."""

    serializer_class = LLMJobSerializer
    permission_classes = [IsAdminRole]
    filterset_fields = ["status", "run"]
    ordering_fields = ["id", "created_at"]
    run_noun = "LLM job"

    def run_label(self, job: LLMJob) -> str:
        return f"LLM job {job.pk}"

    def get_queryset(self):
        return LLMJob.objects.defer("requests").order_by("-id")

    def run_control(self, job: LLMJob, action_name: str) -> int:
        return llm_job_control(job=job, action={"retry-failed": "retry"}.get(action_name, action_name))
