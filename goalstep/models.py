"""Stored task sets, their items, and model evaluations on them (Zhang et al. 2020, §3-4).

Structure only; construction is in goalstep/items.py, the workflows in goalstep/services.py."""

from __future__ import annotations

from django.db import models

from goalstep.constants import TASKS
from judging.models import LanguageModel
from llm.models import LLMJob
from llm.run_models import PromptedRun

TASK_CHOICES = [(task, task.replace("_", " ")) for task in TASKS]


class TaskSet(models.Model):
    """One build of a task from a split: its parameters, its filter report and its items."""

    task = models.CharField(max_length=20, choices=TASK_CHOICES, db_index=True)
    split = models.CharField(max_length=8, help_text="The procedure split the items come from (bench or train).")
    seed = models.BigIntegerField(default=0)
    limit = models.PositiveIntegerField(null=True, blank=True)
    filters = models.JSONField(default=dict, help_text="The App. D filter settings used.")
    embedding_model = models.CharField(max_length=500, blank=True)
    report = models.JSONField(default=dict, help_text="What each stage removed, and the candidates-only baselines.")
    n_items = models.PositiveIntegerField(default=0)
    output_file = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.task} / {self.split} (set {self.pk}, {self.n_items} items)"


class TaskItem(models.Model):
    """A multiple-choice item: a prompt, its candidates and the 0-based index of the right one."""

    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="items")
    item_id = models.CharField(max_length=100)
    position = models.PositiveIntegerField()
    prompt = models.TextField()
    candidates = models.JSONField(default=list)
    label = models.PositiveSmallIntegerField()
    topic = models.CharField(max_length=100, blank=True)
    source_procedure_ids = models.JSONField(default=list)

    class Meta:
        ordering = ["task_set_id", "position"]
        constraints = [models.UniqueConstraint(fields=["task_set", "item_id"], name="one_item_id_per_task_set")]

    def __str__(self) -> str:
        return self.item_id


class TaskEvaluation(PromptedRun):
    """A registered model answering every item of a task set through the LLM layer."""

    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="evaluations")
    language_model = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="goalstep_evaluations")
    llm_job = models.OneToOneField(
        LLMJob, on_delete=models.SET_NULL, null=True, blank=True, related_name="goalstep_evaluation"
    )
    item_ids = models.JSONField(default=list, help_text="TaskItem ids in request order.")

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.language_model} on {self.task_set}"


class TaskPrediction(models.Model):
    """A model's answer to one item: the chosen index, or None when the completion named
    several candidates (``ambiguous``) or none (``unparseable``): counted, never guessed,
    never scored."""

    evaluation = models.ForeignKey(TaskEvaluation, on_delete=models.CASCADE, related_name="predictions")
    item = models.ForeignKey(TaskItem, on_delete=models.CASCADE, related_name="predictions")
    outcome = models.CharField(
        max_length=20, help_text="The LLM call's outcome, or how its answer read: ok, ambiguous or unparseable."
    )
    choice = models.SmallIntegerField(null=True, blank=True)
    correct = models.BooleanField(null=True, blank=True)
    completion = models.TextField(blank=True)
    provenance = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["evaluation_id", "item_id"]
        constraints = [models.UniqueConstraint(fields=["evaluation", "item"], name="one_prediction_per_item")]

    def __str__(self) -> str:
        return f"{self.evaluation_id}/{self.item_id}: {self.choice}"
