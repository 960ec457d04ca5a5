from django.contrib import admin

from llm.costs import job_costs
from llm.models import BatchJob, EndpointRecord, EndpointRoleAssignment, LedgerEntry, LLMJob


@admin.register(LedgerEntry)
class LedgerEntryAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "run", "stage", "model", "outcome", "path", "attempts", "cost_usd")
    list_filter = ("outcome", "stage", "model", "executor")
    search_fields = ("key", "run")
    readonly_fields = [f.name for f in LedgerEntry._meta.fields]


@admin.register(LLMJob)
class LLMJobAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "role", "executor", "status", "n_done", "n_total", "spent", "created_at")
    list_filter = ("status", "executor", "role")
    search_fields = ("run",)
    exclude = ("requests", "keys")

    @admin.display(description="cost (USD)")
    def spent(self, job: LLMJob) -> str:
        """What the job spent, unknown when a request it paid for has no price (llm/costs.py)."""
        cost = job_costs([job])[job.pk]
        if cost["cost_usd"] is None:
            return f"unknown ({cost['n_unpriced']} without a price)"
        return f"{cost['cost_usd']:.4f}"


@admin.register(BatchJob)
class BatchJobAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "batch_id",
        "job",
        "status",
        "remote_status",
        "n_requests",
        "n_succeeded",
        "n_failed",
        "attempt",
    )
    list_filter = ("status",)
    exclude = ("requests",)


@admin.register(EndpointRecord)
class EndpointRecordAdmin(admin.ModelAdmin):
    """Read-only here: records are edited on the LLM pages, where keys are encrypted and
    inputs checked (llm/endpoint_views.py)."""

    list_display = ("name", "base_url", "model", "retired", "last_test_ok", "source")
    list_filter = ("retired",)
    exclude = ("api_key_encrypted",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(EndpointRoleAssignment)
class EndpointRoleAssignmentAdmin(admin.ModelAdmin):
    list_display = ("role", "record", "assigned_at")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
