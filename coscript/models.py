"""Constrained planning runs (CoScript, Yuan et al. 2023, §4-5): specific goals derived from
mined abstract goals, candidate scripts over-generated for them, and the filter's verdicts.

Structure only; the workflow is in coscript/run_services.py,
phase_services.py and result_services.py."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from coscript.constants import CONSTRAINT_TYPES, DEFAULT_FILTER_MODE, DEFAULT_K, FILTER_MODES, KEYWORD_BONUS
from judging.models import LanguageModel
from llm.models import LLMJob
from llm.run_models import Run
from mining.models import Procedure

CONSTRAINT_TYPE_CHOICES = [(t, t) for t in CONSTRAINT_TYPES]


class Phase(models.TextChoices):
    """Where a run is: each phase is one LLM job (the filter runs locally)."""

    GOALS = "goals", "specific goals"
    SCREEN = "screen", "sensitive-domain screen"
    SCRIPTS = "scripts", "candidate scripts"
    FILTER = "filter", "filter"
    DONE = "done", "done"


class CoScriptRun(Run):
    """One pass of Figure 2: abstract goals -> specific goals -> K scripts each -> filter."""

    name = models.CharField(max_length=200, unique=True)
    language_model = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="coscript_runs")
    split = models.CharField(
        max_length=16, blank=True, help_text="The split the abstract goals come from; empty: every procedure."
    )
    limit = models.PositiveIntegerField(null=True, blank=True, help_text="Abstract goals drawn (seeded); empty: all.")
    seed = models.BigIntegerField(default=0)
    k = models.PositiveSmallIntegerField(default=DEFAULT_K, help_text="Candidate scripts per specific goal.")
    filter_mode = models.CharField(max_length=20, default=DEFAULT_FILTER_MODE, choices=[(m, m) for m in FILTER_MODES])
    keyword_bonus = models.FloatField(default=KEYWORD_BONUS)
    embedding_model = models.CharField(max_length=500, blank=True)
    screen = models.BooleanField(default=True, help_text="Screen specific goals for medical and legal domains.")
    prompts = models.JSONField(default=dict, help_text="Per stage: the prompt file and its SHA-256.")
    abstract_ids = models.JSONField(default=list, help_text="Procedure ids of the abstract goals, in request order.")
    phase = models.CharField(max_length=10, choices=Phase.choices, default=Phase.GOALS)
    goals_job = models.OneToOneField(LLMJob, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    screen_job = models.OneToOneField(LLMJob, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    scripts_job = models.OneToOneField(LLMJob, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    report = models.JSONField(
        default=dict, blank=True, help_text="What each phase produced and dropped; the filter's kept rates per type."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name

    def owned_jobs(self) -> list[LLMJob]:
        """The jobs of its phases so far (pause and cancel act on all of them)."""
        return [job for _, job in self.jobs if job is not None]

    @property
    def jobs(self) -> list[tuple[str, LLMJob | None]]:
        return [
            (Phase.GOALS.label, self.goals_job),
            (Phase.SCREEN.label, self.screen_job),
            (Phase.SCRIPTS.label, self.scripts_job),
        ]


class Review(models.TextChoices):
    """The sensitive-domain review list (App. C.2: flagged goals were removed by hand)."""

    NOT_NEEDED = "", "not flagged"
    PENDING = "pending", "waiting for review"
    APPROVED = "approved", "approved by a reviewer"
    REMOVED = "removed", "removed by a reviewer"


class SpecificGoal(models.Model):
    """A specific goal: an abstract goal plus one constraint of one type (§3, Table 1)."""

    run = models.ForeignKey(CoScriptRun, on_delete=models.CASCADE, related_name="goals")
    abstract_procedure = models.ForeignKey(
        Procedure, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    abstract_goal = models.TextField()
    topic = models.CharField(max_length=100, blank=True)
    constraint_type = models.CharField(max_length=10, choices=CONSTRAINT_TYPE_CHOICES)
    constraint = models.CharField(max_length=200)
    specific_goal = models.TextField()
    goal_key = models.CharField(max_length=64, help_text="SHA-256 of the normalised specific goal (de-duplication).")
    sensitive = models.BooleanField(
        null=True, blank=True, help_text="The screen's answer; empty when unscreened or unreadable."
    )
    review = models.CharField(
        max_length=10, choices=Review.choices, default=Review.NOT_NEEDED, blank=True, db_index=True
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    benchmark_procedure = models.ForeignKey(
        Procedure,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The constrained procedure it became.",
    )
    provenance = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run_id", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "goal_key"], name="one_specific_goal_per_run")]

    def __str__(self) -> str:
        return self.specific_goal

    @property
    def exportable(self) -> bool:
        """Not held back by the sensitive-domain review."""
        return self.review in (Review.NOT_NEEDED, Review.APPROVED)


class CandidateScript(models.Model):
    """One of the K scripts over-generated for a specific goal, with the filter's verdict."""

    goal = models.ForeignKey(SpecificGoal, on_delete=models.CASCADE, related_name="candidates")
    index = models.PositiveSmallIntegerField()
    outcome = models.CharField(max_length=20)
    steps = models.JSONField(default=list)
    completion = models.TextField(blank=True)
    kept = models.BooleanField(null=True, blank=True, help_text="The filter's verdict; empty before filtering.")
    reason = models.CharField(max_length=20, blank=True)
    selected = models.BooleanField(default=False, help_text="The goal's script in the dataset.")
    scores = models.JSONField(default=dict, blank=True)
    provenance = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["goal_id", "index"]
        constraints = [models.UniqueConstraint(fields=["goal", "index"], name="one_candidate_per_index")]

    def __str__(self) -> str:
        return f"{self.goal} #{self.index}"
