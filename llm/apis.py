"""REST API pieces of the LLM layer shared by every app's run endpoints."""
from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from llm.runs import run_state_json


class RunStateFields(serializers.Serializer):
    """The state of a run as every API response gives it (llm/runs.py ``run_state_json``:
    outcomes, n_failed, top_errors, reason, breaker; ``status`` is the run's own field).
    A serializer of runs inherits it and says how its run's state is read (``run_state``);
    it lists the fields it shows in ``Meta.fields``. (Mining, generation, judge and CoScript runs use it.)"""

    outcomes = serializers.SerializerMethodField(help_text="Requests per outcome: ok, parse_failed, truncated, "
                                                           "refused, api_error, pending, retrying.")
    n_failed = serializers.SerializerMethodField(help_text="Requests without an ok answer.")
    top_errors = serializers.SerializerMethodField(help_text="The most frequent errors: [{error, n}].")
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
