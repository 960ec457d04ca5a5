from __future__ import annotations

import hashlib

from django.db import models


class Topic(models.Model):
    """One of the 14 WebOrganizer topics (seeded by a migration), or a user-created one."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    position = models.PositiveSmallIntegerField(default=0, help_text="Display order.")

    class Meta:
        ordering = ["position", "name"]

    def __str__(self) -> str:
        return self.name


class Split(models.TextChoices):
    BENCH = "bench", "How2Bench"
    TRAIN = "train", "How2Train"
    NONE = "none", "No split"


def procedure_identity(source_example_id: str, goal: str) -> str:
    """Identity of a procedure: its source document id and its goal (re-imports match on it)."""
    return hashlib.sha256(f"{source_example_id}\x1f{goal}".encode("utf-8")).hexdigest()


class Procedure(models.Model):
    """A goal-conditioned procedure: goal, resources and ordered steps (How2Everything §3)."""

    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="procedures")
    goal = models.TextField()
    resources = models.JSONField(default=list, blank=True, help_text="Ordered list of strings.")
    steps = models.JSONField(default=list, help_text="Ordered list of strings; shown numbered from 1.")
    source_example_id = models.CharField(max_length=512, blank=True, db_index=True)
    source_url = models.TextField(blank=True)
    split = models.CharField(max_length=8, choices=Split.choices, default=Split.NONE, db_index=True)
    provenance = models.JSONField(default=dict, blank=True)
    identity = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["topic", "split"])]

    def __str__(self) -> str:
        return self.goal[:80]

    def save(self, *args, **kwargs) -> None:
        self.identity = procedure_identity(self.source_example_id, self.goal)
        super().save(*args, **kwargs)

    @property
    def numbered_steps(self) -> list[tuple[int, str]]:
        return list(enumerate(self.steps, start=1))

    @property
    def n_steps(self) -> int:
        return len(self.steps)
