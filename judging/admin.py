from django.contrib import admin

from judging.models import (
    ComponentExtraction,
    ComponentsRun,
    Generation,
    GenerationRun,
    JudgeRun,
    Judgment,
    LanguageModel,
)


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


@admin.register(LanguageModel)
class LanguageModelAdmin(admin.ModelAdmin):
    list_display = ("name", "role", "model", "prompt_style", "reasoning", "max_tokens")


@admin.register(GenerationRun)
class GenerationRunAdmin(admin.ModelAdmin):
    list_display = ("name", "language_model", "split", "status", "created_at")
    list_filter = ("status",)
    exclude = ("procedure_ids",)
    raw_id_fields = ("llm_job",)


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ("name", "judge", "generation_run", "status", "created_at")
    list_filter = ("status", "judge")
    raw_id_fields = ("llm_job",)


@admin.register(ComponentsRun)
class ComponentsRunAdmin(admin.ModelAdmin):
    list_display = ("name", "generation_run", "extractor", "status", "created_at")
    list_filter = ("status",)
    exclude = ("steps_hashes",)
    raw_id_fields = ("llm_job", "generation_run")


@admin.register(ComponentExtraction)
class ComponentExtractionAdmin(admin.ModelAdmin):
    list_display = ("id", "extractor", "outcome", "steps_hash", "created_at")
    list_filter = ("extractor", "outcome")
    search_fields = ("steps_hash",)
