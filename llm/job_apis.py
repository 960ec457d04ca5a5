"""The LLM jobs in the REST API: ``LLMJobs``, the collection of jobs (list, detail and controls, for admins), with the job's serializer (its state, costs and the run that owns it) and filters."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.permissions import IsAdminRole
from llm.costs import job_costs
from llm.models import LLMJob
from llm.run_apis import RunCollection, RunFilter, RunStateFields
from llm.run_lifecycle import job_owner_for
from llm.runs import run_state


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

    def get_queryset(self):
        return LLMJob.objects.defer("requests").order_by("-id")
