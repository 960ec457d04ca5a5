from __future__ import annotations

from django.db import models

from mining.models import Procedure


class Generation(models.Model):
    """A model's procedure for a benchmark goal (How2Everything §5): the L2 of How2Score."""

    procedure = models.ForeignKey(Procedure, on_delete=models.CASCADE, related_name="generations")
    model = models.CharField(max_length=200, help_text="Model identifier, e.g. gemini-2.5-pro.")
    model_label = models.CharField(max_length=200, blank=True, help_text="Display name.")
    predicted_steps = models.JSONField(default=list, help_text="Parsed steps, ordered.")
    model_completion = models.TextField(blank=True, help_text="Raw completion, when known.")
    provenance = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["procedure_id", "model"]
        indexes = [models.Index(fields=["model"])]

    def __str__(self) -> str:
        return f"{self.model} on procedure {self.procedure_id}"

    @property
    def display_name(self) -> str:
        return self.model_label or self.model


class Judgment(models.Model):
    """A How2Score verdict (§4): has_failure iff the judge listed at least one critical failure.

    ``critical_failures`` holds ``[{"failure": str, "L1_steps": [int], "L2_steps": [int]}]``
    with 1-based step numbers into the reference (L1) and the generation (L2)."""

    generation = models.ForeignKey(Generation, on_delete=models.CASCADE, related_name="judgments")
    judge = models.CharField(max_length=200)
    has_failure = models.BooleanField()
    critical_failures = models.JSONField(default=list, blank=True)
    reasoning = models.TextField(blank=True)
    provenance = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["generation_id", "judge"]
        constraints = [
            models.UniqueConstraint(fields=["generation", "judge"], name="one_judgment_per_judge_and_generation")
        ]

    def __str__(self) -> str:
        return f"{self.judge}: {self.label}"

    @property
    def label(self) -> str:
        return "has_failure" if self.has_failure else "no_failure"
