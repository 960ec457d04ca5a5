from django.contrib import admin

from annotate.models import (
    Annotation,
    Annotator,
    Assignment,
    GuidelineVersion,
    Participation,
    Qualification,
    Study,
    StudyItem,
)


@admin.register(GuidelineVersion)
class GuidelineVersionAdmin(admin.ModelAdmin):
    list_display = ("label", "kind", "codebook_version", "created_at")
    readonly_fields = ("content_hash",)


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "kind", "round", "annotators_per_item", "min_seconds", "is_open", "created_at")
    list_filter = ("kind", "is_open")
    search_fields = ("slug", "name")
    raw_id_fields = ("first_round", "guideline_version", "created_by")


@admin.register(StudyItem)
class StudyItemAdmin(admin.ModelAdmin):
    list_display = ("item_id", "study", "role", "position", "topic")
    list_filter = ("role",)
    search_fields = ("item_id", "goal")
    raw_id_fields = ("study",)


@admin.register(Annotator)
class AnnotatorAdmin(admin.ModelAdmin):
    list_display = ("pid", "created_at")
    search_fields = ("pid",)


@admin.register(Participation)
class ParticipationAdmin(admin.ModelAdmin):
    list_display = ("annotator", "study", "state", "attention_failures", "excluded", "is_test", "started_at")
    list_filter = ("state", "excluded", "is_test")
    raw_id_fields = ("study", "annotator")


@admin.register(Qualification)
class QualificationAdmin(admin.ModelAdmin):
    list_display = ("annotator", "guideline_version", "passed", "n_correct", "n_total", "created_at")
    raw_id_fields = ("annotator", "guideline_version", "study")


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ("public_id", "study", "item", "annotator", "role", "status", "surplus", "lease_expires_at")
    list_filter = ("status", "role", "surplus", "is_test")
    raw_id_fields = ("study", "item", "participation", "annotator")


@admin.register(Annotation)
class AnnotationAdmin(admin.ModelAdmin):
    list_display = ("id", "study", "item", "annotator", "source", "has_failure", "surplus", "excluded", "submitted_at")
    list_filter = ("source", "has_failure", "surplus", "excluded", "is_test")
    raw_id_fields = ("assignment", "study", "item", "participation", "annotator")

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # annotations are never deleted; exclude them instead
