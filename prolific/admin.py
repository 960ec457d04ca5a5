from django.contrib import admin

from prolific.models import ProlificBonusBatch, ProlificRequest, ProlificStudyLink, ProlificSubmission


@admin.register(ProlificStudyLink)
class ProlificStudyLinkAdmin(admin.ModelAdmin):
    list_display = ("study", "prolific_id", "status", "places", "reward_cents", "published_at", "last_synced_at")
    readonly_fields = ("created_at",)


@admin.register(ProlificSubmission)
class ProlificSubmissionAdmin(admin.ModelAdmin):
    list_display = ("submission_id", "participant_id", "status", "reviewed_action", "bonus_paid_cents")
    list_filter = ("status", "reviewed_action")


@admin.register(ProlificRequest)
class ProlificRequestAdmin(admin.ModelAdmin):
    list_display = ("at", "study", "method", "path", "status_code", "error")


@admin.register(ProlificBonusBatch)
class ProlificBonusBatchAdmin(admin.ModelAdmin):
    list_display = ("link", "state", "n_participants", "total_cents", "paid_at")
