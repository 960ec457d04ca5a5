from django.contrib import admin

from judging.models import Generation, Judgment


class JudgmentInline(admin.TabularInline):
    model = Judgment
    extra = 0


@admin.register(Generation)
class GenerationAdmin(admin.ModelAdmin):
    list_display = ("id", "model", "procedure", "created_at")
    list_filter = ("model",)
    search_fields = ("procedure__goal", "model")
    raw_id_fields = ("procedure",)
    inlines = [JudgmentInline]


@admin.register(Judgment)
class JudgmentAdmin(admin.ModelAdmin):
    list_display = ("id", "judge", "has_failure", "generation", "created_at")
    list_filter = ("judge", "has_failure")
    raw_id_fields = ("generation",)
