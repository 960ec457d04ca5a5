from django.contrib import admin

from llm.models import BatchJob, LedgerEntry, LLMJob


@admin.register(LedgerEntry)
class LedgerEntryAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "run", "stage", "model", "outcome", "path", "attempts", "cost_usd")
    list_filter = ("outcome", "stage", "model", "executor")
    search_fields = ("key", "run")
    readonly_fields = [f.name for f in LedgerEntry._meta.fields]


@admin.register(LLMJob)
class LLMJobAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "role", "executor", "status", "n_done", "n_total", "cost_usd", "created_at")
    list_filter = ("status", "executor", "role")
    search_fields = ("run",)
    exclude = ("requests", "keys")


@admin.register(BatchJob)
class BatchJobAdmin(admin.ModelAdmin):
    list_display = ("id", "batch_id", "job", "status", "remote_status", "n_requests", "n_succeeded", "n_failed", "attempt")
    list_filter = ("status",)
    exclude = ("requests",)
