"""The review's models: a researcher's decisions on annotations and the gold labels that settle
disagreements (docs/annotation.md, "Review and adjudication"). Part of the annotate app: its
models module imports them, so Django registers them with the app's others; they name the
study, item and annotation they belong to by label, as that module imports this one."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotate.review.rules import DECISIONS, REJECTION_CATEGORIES


class AnnotationReview(models.Model):
    """One review decision on one annotation (annotate/review/rules.py). Never edited: a new
    decision is a new row, the latest counts (mirrored on ``Annotation.review``)."""

    annotation = models.ForeignKey("annotate.Annotation", on_delete=models.CASCADE, related_name="reviews")
    study = models.ForeignKey("annotate.Study", on_delete=models.CASCADE, related_name="annotation_reviews")
    decision = models.CharField(max_length=10, choices=list(DECISIONS.items()))
    reason = models.TextField(
        blank=True, help_text="A rejection: the message the participant reads on Prolific; otherwise a note."
    )
    rejection_category = models.CharField(
        max_length=30, blank=True, choices=[("", "None"), *REJECTION_CATEGORIES.items()]
    )
    corrected_answer = models.JSONField(
        null=True, blank=True, help_text="A correction: the answer in the kind's shape, cleaned as a submit is."
    )
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["annotation_id", "created_at", "id"]
        indexes = [models.Index(fields=["study", "decision"])]

    def __str__(self) -> str:
        return f"{self.decision} of annotation {self.annotation_id}"


class GoldLabel(models.Model):
    """An item's adjudicated answer, in its kind's shape (cleaned as a submitted answer is),
    with the adjudicator's note and the annotations it settled. One per item; a new
    adjudication replaces it and the earlier versions stay in ``history``."""

    item = models.OneToOneField("annotate.StudyItem", on_delete=models.CASCADE, related_name="gold_label")
    study = models.ForeignKey("annotate.Study", on_delete=models.CASCADE, related_name="gold_labels")
    answer = models.JSONField(help_text="The gold answer in the kind's shape.")
    has_failure = models.BooleanField(null=True, help_text="The kind's has_failure label of the answer, if it has one.")
    note = models.TextField()
    adjudicator = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    settled = models.ManyToManyField("annotate.Annotation", blank=True, related_name="gold_labels")
    history = models.JSONField(default=list, blank=True, help_text="Earlier versions: answer, note, adjudicator, time.")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["study_id", "item_id"]

    def __str__(self) -> str:
        return f"gold label of {self.item_id}"
