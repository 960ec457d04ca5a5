from django.contrib import admin

from mining.models import Procedure, Topic


@admin.register(Topic)
class TopicAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "position")
    prepopulated_fields = {"slug": ("name",)}


@admin.register(Procedure)
class ProcedureAdmin(admin.ModelAdmin):
    list_display = ("id", "goal", "topic", "split", "source_example_id", "created_at")
    list_filter = ("split", "topic")
    search_fields = ("goal", "source_example_id")
    readonly_fields = ("identity", "created_at", "updated_at")
