"""A collection of runs in the REST API, shared by every app's run endpoints: ``RunStateFields`` (a run's state as every response gives it), ``RunFilter`` (what every list of runs filters on), ``RunCollection`` (one class per kind of run) and ``run_views``, which makes a collection's list (and launch), detail and four controls."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, status
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response
from rest_framework.reverse import reverse as api_reverse
from rest_framework.views import APIView

from core.api_lists import ListView, UtcIsoDateTimeFilter
from core.permissions import IsAdminRole
from llm.run_action_apis import RUN_ACTION_SCHEMAS, ConfirmSerializer
from llm.run_launch_apis import LAUNCH_ERRORS, Launched, RunLaunchSerializer, launch_error_body, launch_schema
from llm.run_lifecycle import run_control, run_label
from llm.runs import STATUSES_SHOWN, retried_phrase, run_state_json


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


class RunFilter(django_filters.FilterSet):
    """What every list of runs filters on: ``status`` and the creation time (ISO 8601,
    inclusive bounds). A FilterSet of a kind of run adds its own (model, judge, ...)."""

    created_after = UtcIsoDateTimeFilter(
        field_name="created_at", lookup_expr="gte", help_text="Created at or after (ISO 8601, e.g. 2026-01-31T00:00Z)"
    )
    created_before = UtcIsoDateTimeFilter(
        field_name="created_at", lookup_expr="lte", help_text="Created at or before (ISO 8601)"
    )


class RunCollection(APIView):
    """A collection of runs in the API, as one class per kind of run: what its views share
    (rows, serializers, filters, permissions) and what each kind defines (``get_queryset``,
    ``launch_runs``). ``run_views`` makes its views from it: the list (``GET``; ``POST``
    launches, when ``launch`` is given), the detail, and the four controls of a run, for
    admins, each through the one entry point the run's page calls
    (llm/run_lifecycle.py, ``run_control``): ``retry-failed`` (exactly the requests without
    an ``ok`` answer are asked again), ``resume``, ``pause`` and ``cancel`` (only with
    ``{"confirm": "yes"}``). An action that does not apply in the run's state answers 409
    with the reason the page gives. A kind's extra routes (a run's progress, ...) are views
    deriving from its collection and ``APIView``."""

    serializer_class: type[serializers.BaseSerializer[Any]]
    # One run's serializer (its detail, after an action) when it differs from the list's.
    detail_serializer_class: type[serializers.BaseSerializer[Any]] | None = None
    basename = ""  # the URLs' names: <basename>-list, -detail, ...
    # The OpenAPI description of the launch (``launch_schema``'s arguments); None: no launch.
    launch: dict[str, Any] | None = None
    launch_errors: tuple[type[BaseException], ...] = LAUNCH_ERRORS
    launch_serializer_class: type[serializers.Serializer] = RunLaunchSerializer

    def get_queryset(self) -> QuerySet[Any]:
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
        asked_again = run_control(run, self.action_name)  # its refusals are RunStateConflicts (409)
        run = self.get_object()
        retry = self.action_name == "retry-failed"
        detail = (
            f"{run_label(run)}: {retried_phrase(asked_again)}"
            if retry
            else f"{run_label(run)}: {self.action_name} requested"
        )
        return Response(
            {
                "action": self.action_name,
                "detail": detail,
                "asked_again": asked_again if retry else None,
                "run": self.run_data(run),
            }
        )


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
