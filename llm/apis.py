"""REST API pieces of the LLM layer shared by every app's run endpoints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import django_filters
from django.core.exceptions import ObjectDoesNotExist
from django.core.files.uploadedfile import UploadedFile
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers, status
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response
from rest_framework.reverse import reverse as api_reverse
from rest_framework.views import APIView

from core.api_lists import ListView, UtcIsoDateTimeFilter
from core.api_schema import ApiErrorSerializer
from core.app_errors import InvalidInput
from core.confirm import CONFIRM_FIELD, CONFIRM_VALUE
from core.permissions import IsAdminRole
from core.run_configs import config_max_bytes
from core.run_launch import config_error_location
from llm.costs import job_costs
from llm.endpoints import EndpointNotConfigured
from llm.models import LLMJob
from llm.runs import (
    STATUSES_SHOWN,
    RunStateConflict,
    job_owner_for,
    llm_job_control,
    llm_job_held,
    retried_phrase,
    run_action_refusal,
    run_state,
    run_state_json,
)


class RunStateFields(serializers.Serializer):
    """The state of a run as every API response gives it (llm/runs.py ``run_state_json``:
    status, outcomes, n_failed, top_errors, reason, breaker, last_heartbeat). ``status`` is
    the stored one, except ``stalled`` for a running run whose worker stopped beating.
    A serializer of runs inherits it and says how its run's state is read (``run_state``);
    it lists the fields it shows in ``Meta.fields``. (Every kind of run and LLM jobs use it.)"""

    # What Meta.fields lists for the state (a run owning one LLM job: OWNED_RUN_FIELDS).
    STATE_FIELDS = ("status", "outcomes", "n_failed", "top_errors", "reason", "breaker", "last_heartbeat")
    OWNED_RUN_FIELDS = (*STATE_FIELDS, "prompt_file", "prompt_hash", "executor", "created_at", "finished_at")

    status = serializers.SerializerMethodField(
        help_text=(
            "pending, running, paused, done, done_with_failures, cancelled, failed; or stalled: the run is running "
            "but its worker stopped beating for a lease (LLM_JOB_LEASE_SECONDS; killed, its machine lost), so "
            "resume re-queues it at once. Stalled is shown, never stored: the list filter status=running finds it."
        )
    )
    last_heartbeat = serializers.SerializerMethodField(
        help_text="When a worker last said it was at work on the active run (null: none yet, or not active)."
    )
    outcomes = serializers.SerializerMethodField(
        help_text="Requests per outcome: ok, parse_failed, truncated, refused, too_long, api_error, pending, retrying."
    )
    n_failed = serializers.SerializerMethodField(help_text="Requests without an ok answer.")
    top_errors = serializers.SerializerMethodField(
        help_text=(
            "The most frequent errors: [{error, n}]. A run's detail always carries them; a list of runs may give [] "
            "to stay cheap (it reads the counts the runs' jobs stored), so read one run for its errors."
        )
    )
    reason = serializers.SerializerMethodField(help_text="Why the run paused or failed.")
    breaker = serializers.SerializerMethodField(
        help_text="The circuit breaker's record when it paused the run "
        "(endpoint, since, last_error, reason); {} otherwise."
    )

    def run_state(self, run) -> dict[str, Any]:
        raise NotImplementedError

    def _state(self, run) -> dict[str, Any]:
        if not hasattr(run, "state_json"):
            run.state_json = run_state_json(self.run_state(run))
        return run.state_json

    @extend_schema_field(serializers.ChoiceField(choices=STATUSES_SHOWN))
    def get_status(self, run) -> str:
        return self._state(run)["status"]

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_last_heartbeat(self, run) -> str | None:
        return self._state(run)["last_heartbeat"]

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


class ConfirmSerializer(serializers.Serializer):
    """The confirmation a cancel needs, as the pages ask for it (core/confirm.py)."""

    confirm = serializers.ChoiceField(
        choices=[CONFIRM_VALUE],
        help_text=f"Must be '{CONFIRM_VALUE}': a cancelled run cannot be resumed.",
        error_messages={
            "required": f"'{CONFIRM_FIELD}' must be '{CONFIRM_VALUE}' to cancel; nothing was done.",
            "invalid_choice": f"'{CONFIRM_FIELD}' must be '{CONFIRM_VALUE}' to cancel; nothing was done.",
        },
    )


class RunActionResultSerializer(serializers.Serializer):
    action = serializers.CharField(help_text="retry-failed, resume, pause or cancel")
    detail = serializers.CharField(help_text="What was done.")
    asked_again = serializers.IntegerField(
        allow_null=True,
        help_text=(
            "retry-failed: how many failed requests are asked again (mining runs: failed documents); null otherwise."
        ),
    )
    run = serializers.DictField(help_text="The run as its detail gives it, after the action.")


def _action_schema(summary: str, description: str, *, cancel: bool = False):
    responses = {
        200: RunActionResultSerializer,
        401: OpenApiResponse(ApiErrorSerializer, description="Not logged in (no token or session)"),
        403: OpenApiResponse(ApiErrorSerializer, description="The admin role is needed"),
        404: OpenApiResponse(ApiErrorSerializer, description="No such run"),
        409: OpenApiResponse(
            ApiErrorSerializer, description="The action does not apply in the run's state; detail says why"
        ),
    }
    if cancel:
        responses[400] = OpenApiResponse(
            OpenApiTypes.OBJECT,
            description=(
                f'No {{"{CONFIRM_FIELD}": "{CONFIRM_VALUE}"}}: {{"{CONFIRM_FIELD}": [why]}}; nothing was done'
            ),
        )
    return extend_schema(
        summary=summary,
        description=description,
        request=ConfirmSerializer if cancel else None,
        filters=False,
        responses=responses,
    )


# -- filters of run lists -------------------------------------------------------------------


class RunFilter(django_filters.FilterSet):
    """What every list of runs filters on: ``status`` and the creation time (ISO 8601,
    inclusive bounds). A FilterSet of a kind of run adds its own (model, judge, ...)."""

    created_after = UtcIsoDateTimeFilter(
        field_name="created_at", lookup_expr="gte", help_text="Created at or after (ISO 8601, e.g. 2026-01-31T00:00Z)"
    )
    created_before = UtcIsoDateTimeFilter(
        field_name="created_at", lookup_expr="lte", help_text="Created at or before (ISO 8601)"
    )


# -- launching a run from its YAML configuration ----------------------------------------------

LAUNCH_SOURCE = "the configuration"
# What a launch service raises for a configuration it refuses: each is a 400 naming the line
# and field. InvalidInput covers RunConfigError, PromptError and an unknown LLM role; a role
# without an endpoint (503 elsewhere) is the configuration's fault here; the configuration
# parsers' plain ValueErrors are refusals too.
LAUNCH_ERRORS = (InvalidInput, EndpointNotConfigured, ValueError)


class ConfigField(serializers.Field):
    """The YAML text of a run configuration: a string (a JSON body, a form field) or an
    uploaded file under the same name; at most RUN_CONFIG_MAX_BYTES, UTF-8."""

    default_error_messages = {
        "type": "give the YAML text of the run's configuration, or upload it as a file",
        "size": "larger than {limit:,} bytes (RUN_CONFIG_MAX_BYTES)",
        "encoding": "not UTF-8 text",
        "empty": "the configuration is empty",
    }

    def to_internal_value(self, data) -> dict[str, str]:
        limit = config_max_bytes()
        if isinstance(data, UploadedFile):
            raw = data.read(limit + 1)
            if len(raw) > limit:
                self.fail("size", limit=limit)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.fail("encoding")
            name = "".join(c for c in (data.name or "") if c.isprintable())[:100]
            source = f"{name or 'the uploaded file'}"
        elif isinstance(data, str):
            if len(data.encode("utf-8", "surrogatepass")) > limit:
                self.fail("size", limit=limit)
            text, source = data, LAUNCH_SOURCE
        else:
            self.fail("type")
        if not text.strip():
            self.fail("empty")
        return {"text": text, "source": source}

    def to_representation(self, value) -> str:
        return value["text"] if isinstance(value, dict) else str(value)


@extend_schema_field(
    {"type": "string", "minLength": 1, "description": "The run's YAML configuration (text, or a file upload)"}
)
class _DocumentedConfigField(ConfigField):
    pass


class RunLaunchSerializer(serializers.Serializer):
    """``config``: the YAML the command reads from a file (``--config FILE.yaml``), as text in
    a JSON body or as an uploaded file (multipart) under the same name."""

    config = _DocumentedConfigField(help_text="The run's YAML configuration: the same text the command takes as a file")


class RunLaunchResultSerializer(serializers.Serializer):
    runs = serializers.ListField(
        child=serializers.DictField(),
        help_text=(
            "The runs started (usually one; a reference-shape bench configuration starts one per model), each as its "
            "detail gives it"
        ),
    )
    notes = serializers.ListField(
        child=serializers.CharField(), help_text=("What the launch said on the way (a reference configuration's notes)")
    )


class LaunchErrorSerializer(ApiErrorSerializer):
    config = serializers.ListField(child=serializers.CharField(), help_text="Why nothing was started")
    line = serializers.IntegerField(
        allow_null=True, required=False, help_text="The configuration's line the refusal is about, when known"
    )
    key = serializers.CharField(
        allow_null=True,
        required=False,
        help_text="The configuration's key (dotted: stages.rewrite.temperature), when known",
    )


@dataclass
class Launched:
    """What a viewset's ``launch_runs`` started."""

    runs: list[Any]
    notes: list[str] = field(default_factory=list)


def launch_error_body(text: str, source: str, exc: BaseException) -> dict[str, Any]:
    """A refused launch as a 400 body (code ``config_invalid``): the message with its line under
    ``config``, and the line and the configuration's key it is about."""
    message = str(exc)
    if not message.startswith(source):
        message = f"{source}: {message}"
    where = config_error_location(text, message, source=source)
    refusal = InvalidInput(
        fields={"config": where["message"]}, code="config_invalid", extra={"line": where["line"], "key": where["field"]}
    )
    return refusal.body()


def launch_schema(
    *,
    kind: str,
    command: str,
    example: str,
    description: str = "",
    request: type[serializers.Serializer] = RunLaunchSerializer,
):
    """The OpenAPI description of POST on a collection of runs: a minimal YAML example."""
    return extend_schema(
        summary=f"Launch {kind}",
        description=(
            f"Start {kind} from a YAML configuration (admins), exactly as `{command}` does with a file: the "
            'same parsing, the same refusals, the same Celery task. Send `{"config": "<yaml>"}` as '
            "JSON, or upload the file as `config` (multipart). A refused configuration is a 400 naming the "
            "line and the key, and nothing is stored. " + description
        ),
        request={"application/json": request, "multipart/form-data": request},
        responses={
            201: RunLaunchResultSerializer,
            400: OpenApiResponse(LaunchErrorSerializer, description="The configuration was refused; nothing stored"),
            401: OpenApiResponse(ApiErrorSerializer, description="Not logged in (no token or session)"),
            403: OpenApiResponse(ApiErrorSerializer, description="The admin role is needed"),
        },
        examples=[OpenApiExample("Minimal configuration", value={"config": example}, request_only=True)],
        filters=False,
    )


class RunCollection(APIView):
    """A collection of runs in the API, as one class per kind of run: what its views share
    (rows, serializers, filters, permissions) and what each kind defines (``get_queryset``,
    ``run_control``, ``launch_runs``). ``run_views`` makes its views from it: the list (``GET``;
    ``POST`` launches, when ``launch`` is given), the detail, and the four controls of a run,
    for admins, each calling the service the run's page calls: ``retry-failed`` (exactly the
    requests without an ``ok`` answer are asked again), ``resume``, ``pause`` and ``cancel``
    (only with ``{"confirm": "yes"}``). An action that does not apply in the run's state
    answers 409 with the reason. A kind's extra routes (a run's progress, ...) are views
    deriving from its collection and ``APIView``."""

    serializer_class: type[serializers.BaseSerializer[Any]]
    # One run's serializer (its detail, after an action) when it differs from the list's.
    detail_serializer_class: type[serializers.BaseSerializer[Any]] | None = None
    run_noun = "run"
    basename = ""  # the URLs' names: <basename>-list, -detail, ...
    # The OpenAPI description of the launch (``launch_schema``'s arguments); None: no launch.
    launch: dict[str, Any] | None = None
    launch_errors: tuple[type[BaseException], ...] = LAUNCH_ERRORS
    launch_serializer_class: type[serializers.Serializer] = RunLaunchSerializer

    def get_queryset(self) -> QuerySet[Any]:
        raise NotImplementedError

    def run_label(self, run) -> str:
        return f"{self.run_noun} {run}"

    def run_held(self, run) -> bool:
        """Whether a worker holds the run now (resuming it is refused then): its LLM job's
        lease, or the job's own for a plain job."""
        return llm_job_held(run if isinstance(run, LLMJob) else getattr(run, "llm_job", None))

    def run_control(self, run, action_name: str) -> int | None:
        raise NotImplementedError

    def launch_runs(self, *, config_text: str, source: str, data: dict[str, Any]) -> Launched:
        raise NotImplementedError

    def get_object(self) -> Any:
        """The run the URL names (404 when there is none)."""
        run = get_object_or_404(self.get_queryset(), pk=self.kwargs["pk"])
        self.check_object_permissions(self.request, run)
        return run

    def run_data(self, run, *, detail: bool = True, live: bool = True) -> Any:
        """One run as its detail gives it (``detail=False``: as the list does); ``live``: its
        state read from the ledger."""
        serializer_class = (detail and self.detail_serializer_class) or self.serializer_class
        context = {"request": self.request, "format": self.format_kwarg, "view": self, "live": live}
        return serializer_class(run, context=context).data


# No docstrings on the views' handlers: the schema describes each endpoint by its collection's
# docstring, or by the schema given with the handler.
class RunListView(RunCollection, ListView):
    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        return self.serializer_class

    def get_permissions(self):
        if self.request is not None and self.request.method == "POST":
            return [IsAdminRole()]
        return super().get_permissions()

    def get(self, request, format=None):
        return self.list_response(request)


class RunLaunchListView(RunListView):
    def post(self, request, format=None):
        serializer = self.launch_serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        config = serializer.validated_data["config"]
        try:
            launched = self.launch_runs(
                config_text=config["text"], source=config["source"], data=serializer.validated_data
            )
        except self.launch_errors as exc:
            return Response(
                launch_error_body(config["text"], config["source"], exc), status=status.HTTP_400_BAD_REQUEST
            )
        # Read back as the list reads them (its annotations), with the live state of a detail.
        queryset = self.get_queryset()
        runs = [self.run_data(queryset.get(pk=run.pk), detail=False) for run in launched.runs]
        headers = (
            {"Location": api_reverse(f"{self.basename}-detail", args=[launched.runs[0].pk], request=request)}
            if runs
            else {}
        )
        return Response({"runs": runs, "notes": launched.notes}, status=status.HTTP_201_CREATED, headers=headers)


class RunDetailView(RunCollection):
    def get(self, request, pk=None, format=None):
        return Response(self.run_data(self.get_object()))


class RunActionView(RunCollection):
    permission_classes = [IsAdminRole]
    action_name = ""

    def post(self, request, pk=None, format=None):
        run = self.get_object()
        if self.action_name == "cancel":
            ConfirmSerializer(data=request.data).is_valid(raise_exception=True)
        refusal = run_action_refusal(self.action_name, run.status, held=self.run_held(run))
        if refusal is not None:
            raise RunStateConflict(f"{self.run_label(run)} is {run.status}; {refusal}")
        asked_again = self.run_control(run, self.action_name)  # its refusals are Conflicts (409)
        run = self.get_object()
        retry = self.action_name == "retry-failed"
        detail = (
            f"{self.run_label(run)}: {retried_phrase(asked_again or 0)}"
            if retry
            else f"{self.run_label(run)}: {self.action_name} requested"
        )
        return Response(
            {
                "action": self.action_name,
                "detail": detail,
                "asked_again": asked_again if retry else None,
                "run": self.run_data(run),
            }
        )


RUN_ACTION_SCHEMAS = {
    "retry-failed": _action_schema(
        "Retry failed",
        "Ask exactly the run's requests without an ok answer again (admins), as the "
        "run page's Retry failed does; the run is queued again. 409 while it is pending or running.",
    ),
    "resume": _action_schema(
        "Resume",
        "Continue a paused, failed or interrupted run (admins); requests without an ok "
        "answer are asked again. 409 for a finished or cancelled run.",
    ),
    "pause": _action_schema(
        "Pause",
        "Pause a pending or running run (admins); work in flight stops within seconds and "
        "what was answered is kept. 409 in any other state.",
    ),
    "cancel": _action_schema(
        "Cancel",
        f"Cancel a run (admins); a cancelled run cannot be resumed, so the body must be "
        f'{{"{CONFIRM_FIELD}": "{CONFIRM_VALUE}"}} (400 otherwise). 409 for a finished or cancelled run.',
        cancel=True,
    ),
}


def run_views(collection: type[RunCollection], basename: str) -> dict[str, type[APIView]]:
    """The views of a collection of runs by route: ``""`` the list (with the launch when the
    collection has one), ``"<pk>"`` the detail, and each control under its name; ``basename``
    names the URLs (``<basename>-list``, ``-detail``, ``-pause``, ...)."""

    def make(name: str, base: type[APIView], namespace: dict[str, Any]) -> type[APIView]:
        attrs = {"__module__": collection.__module__, "__doc__": collection.__doc__, "basename": basename}
        return type(f"{collection.__name__}{name}", (base, collection), {**attrs, **namespace})

    views: dict[str, type[APIView]] = {}
    list_schemas = {"get": extend_schema(responses=collection.serializer_class(many=True))}
    if collection.launch is None:
        views[""] = extend_schema_view(**list_schemas)(make("List", RunListView, {}))
    else:
        list_schemas["post"] = launch_schema(request=collection.launch_serializer_class, **collection.launch)
        views[""] = extend_schema_view(**list_schemas)(make("List", RunLaunchListView, {}))
    detail_schema = extend_schema(responses=collection.detail_serializer_class or collection.serializer_class)
    views["<pk>"] = extend_schema_view(get=detail_schema)(make("Detail", RunDetailView, {}))
    for action_name, schema in RUN_ACTION_SCHEMAS.items():

        def post(self, request, pk=None, format=None):
            return RunActionView.post(self, request, pk=pk, format=format)

        title = action_name.title().replace("-", "")
        views[action_name] = make(title, RunActionView, {"action_name": action_name, "post": schema(post)})
    return views


# -- LLM jobs --------------------------------------------------------------------------------


class LLMJobSerializer(RunStateFields, serializers.ModelSerializer):
    """An LLM job with its state; ``owner``: the run it belongs to (empty for a plain job),
    through which it is resumed and retried."""

    owner = serializers.SerializerMethodField(
        help_text="The run that owns the job, e.g. 'judge run j'; empty for a plain job."
    )
    cost_usd = serializers.SerializerMethodField(
        help_text="What the job spent in USD; null when unknown: any request it paid for has no price "
        "(a local server, a model without a price), never 0 (llm/costs.py)."
    )
    requests_without_price = serializers.SerializerMethodField(
        help_text="How many of the requests the job paid for have no price (0 when cost_usd is known)."
    )

    class Meta:
        model = LLMJob
        fields = [
            "id",
            "run",
            "owner",
            "role",
            "executor",
            "concurrency",
            "budget_usd",
            *RunStateFields.STATE_FIELDS,
            "n_total",
            "n_done",
            "cost_usd",
            "requests_without_price",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def run_state(self, job: LLMJob) -> dict[str, Any]:
        return run_state(
            status=job.status, jobs=[job], reason=job.pause_reason or job.error, live=self.context.get("live", False)
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._job_costs: dict[int, dict[str, Any]] = {}

    def _cost(self, job: LLMJob) -> dict[str, Any]:
        """What the job spent (llm/costs.py), read once per job for its two fields; exact in
        a list too (a label is shared by a job's shards and by a mining run's waves)."""
        if job.pk not in self._job_costs:
            self._job_costs.update(job_costs([job]))
        return self._job_costs[job.pk]

    @extend_schema_field(serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True))
    def get_cost_usd(self, job: LLMJob) -> str | None:
        cost = self._cost(job)["cost_usd"]
        return (
            None if cost is None else serializers.DecimalField(max_digits=12, decimal_places=6).to_representation(cost)
        )

    @extend_schema_field(OpenApiTypes.INT)
    def get_requests_without_price(self, job: LLMJob) -> int:
        return self._cost(job)["n_unpriced"]

    @extend_schema_field(OpenApiTypes.STR)
    def get_owner(self, job: LLMJob) -> str:
        owner = job_owner_for(job)
        try:
            return owner.describe(job) if owner else ""
        except ObjectDoesNotExist:  # the owning run was deleted: the job stands alone
            return ""


class LLMJobFilter(RunFilter):
    class Meta:
        model = LLMJob
        fields = ["status", "run", "role", "executor"]


class LLMJobs(RunCollection):
    """LLM jobs, newest first, each with its state (docs/llm.md, "Run states"); admins only,
    like the LLM pages. A job owned by a run is resumed and retried through its run. Jobs are
    started by the runs that own them (and by services), so this collection has no launch."""

    serializer_class = LLMJobSerializer
    permission_classes = [IsAdminRole]
    filterset_class = LLMJobFilter
    ordering_fields = ["id", "created_at"]
    run_noun = "LLM job"

    def run_label(self, job: LLMJob) -> str:
        return f"LLM job {job.pk}"

    def get_queryset(self):
        return LLMJob.objects.defer("requests").order_by("-id")

    def run_control(self, job: LLMJob, action_name: str) -> int:
        return llm_job_control(job=job, action={"retry-failed": "retry"}.get(action_name, action_name))
