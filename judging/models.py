from __future__ import annotations

from django.db import models

from llm.models import LLMJob
from llm.run_models import PromptedRun
from mining.models import Procedure

# A run's status follows its LLM job's: the same six states.
RunStatus = LLMJob.Status


class EndpointOverrides(models.Model):
    """Where a model or judge differs from its role's endpoint (keys stay in the environment)."""

    base_url = models.CharField(max_length=500, blank=True, help_text="Overrides the role's base URL.")
    model = models.CharField(
        max_length=200, blank=True, help_text="Model id at the endpoint; default: the role's model."
    )
    api_key_env = models.CharField(max_length=100, blank=True, help_text="Environment variable holding the API key.")

    class Meta:
        abstract = True

    def endpoint_overrides(self) -> dict[str, str]:
        overrides = {"base_url": self.base_url, "model": self.model, "api_key_env": self.api_key_env}
        return {k: v for k, v in overrides.items() if v}


class PromptStyle(models.TextChoices):
    BASE = "base", "base (few-shot completion, stop at a blank line)"
    INST = "inst", "instruct (chat, instruction suffix)"


class StepParser(models.TextChoices):
    """How a generation run reads the steps of its completions (judging/steps.py)."""

    PRODUCT = "product", "product (judging/steps.py)"
    REFERENCE = "reference", "reference CLI's"
    FILE = "file", "as the imported file gave them"


class LanguageModel(EndpointOverrides):
    """A model registered for generation runs, with its endpoint and decoding (How2Everything App. D.1)."""

    name = models.CharField(max_length=200, unique=True, help_text="Shown on the leaderboard, e.g. qwen3-8b-instruct.")
    role = models.CharField(max_length=100, default="generate", help_text="LLM role whose endpoint it uses.")
    prompt_style = models.CharField(max_length=8, choices=PromptStyle.choices, default=PromptStyle.INST)
    reasoning = models.BooleanField(
        default=False, help_text="A reasoning (thinking) endpoint: sampled at temperature 0.6."
    )
    max_tokens = models.PositiveIntegerField(default=1024)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class GenerationRun(PromptedRun):
    """One model generating procedures for a split (or a topic-stratified sample of it)."""

    name = models.CharField(max_length=200, unique=True)
    language_model = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="runs")
    split = models.CharField(max_length=16, default="bench")
    sample_per_topic = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: the whole split.")
    seed = models.IntegerField(default=0)
    llm_job = models.OneToOneField(
        LLMJob, on_delete=models.SET_NULL, null=True, blank=True, related_name="generation_run"
    )
    procedure_ids = models.JSONField(default=list, help_text="The sampled procedures, in request order.")
    step_parser = models.CharField(
        max_length=16,
        choices=StepParser.choices,
        default=StepParser.PRODUCT,
        help_text="How the completions' steps are read: the product's parser or the reference CLI's.",
    )
    # A run started from a reference CLI bench configuration: its generator's (evaluator's)
    # settings as the reference resolves them (backend, provider, model, decoding, vLLM
    # overrides), from which the reference's generator_id / judge_id, record fields and
    # manifests are written (judging/reference_outputs.py). Empty for any other run.
    reference_settings = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name


class JudgeRun(EndpointOverrides, PromptedRun):
    """One judge scoring every generation of a generation run with How2Score (§4)."""

    name = models.CharField(max_length=200, unique=True)
    generation_run = models.ForeignKey(GenerationRun, on_delete=models.CASCADE, related_name="judge_runs")
    judge = models.CharField(
        max_length=200, help_text="The judge's name on judgments and leaderboards, e.g. how2judge."
    )
    role = models.CharField(max_length=100, default="how2score_judge")
    temperature = models.FloatField(default=0.0, help_text="0 (greedy) for scoring; above 0 to sample a teacher twice.")
    seed = models.IntegerField(null=True, blank=True, help_text="Sent to the endpoint; distinguishes repeated samples.")
    llm_job = models.OneToOneField(LLMJob, on_delete=models.SET_NULL, null=True, blank=True, related_name="judge_run")
    # A run started from a reference CLI bench configuration: its generator's (evaluator's)
    # settings as the reference resolves them (backend, provider, model, decoding, vLLM
    # overrides), from which the reference's generator_id / judge_id, record fields and
    # manifests are written (judging/reference_outputs.py). Empty for any other run.
    reference_settings = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name


class Generation(models.Model):
    """A model's procedure for a benchmark goal (How2Everything §5): the L2 of How2Score."""

    procedure = models.ForeignKey(Procedure, on_delete=models.CASCADE, related_name="generations")
    run = models.ForeignKey(GenerationRun, on_delete=models.CASCADE, null=True, blank=True, related_name="generations")
    model = models.CharField(max_length=200, help_text="Model identifier, e.g. gemini-2.5-pro.")
    outcome = models.CharField(max_length=20, default="ok", help_text="The LLM call's outcome; only ok is judged.")
    model_label = models.CharField(max_length=200, blank=True, help_text="Display name.")
    predicted_steps = models.JSONField(default=list, help_text="Parsed steps, ordered.")
    model_completion = models.TextField(blank=True, help_text="Raw completion, when known.")
    gen_tokens = models.PositiveIntegerField(null=True, blank=True, help_text="o200k_base tokens of the parsed steps.")
    provenance = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["procedure_id", "model"]
        indexes = [models.Index(fields=["model"])]
        constraints = [
            models.UniqueConstraint(fields=["run", "procedure"], name="one_generation_per_run_and_procedure")
        ]

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
    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, null=True, blank=True, related_name="judgments")
    judge = models.CharField(max_length=200)
    outcome = models.CharField(max_length=20, default="ok", help_text="ok, or why there is no verdict (never scored).")
    has_failure = models.BooleanField(null=True, help_text="None when the judge gave no usable answer.")
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
        if self.has_failure is None:
            return self.outcome
        return "has_failure" if self.has_failure else "no_failure"


class ComponentsRun(PromptedRun):
    """An ``extract_components`` run: the (action, objects, parameters) of every step of a
    generation run's references and generations, for SCORE (docs/score.md). Step lists
    already extracted by the same extractor are not sent again."""

    name = models.CharField(max_length=200, unique=True)
    generation_run = models.ForeignKey(GenerationRun, on_delete=models.CASCADE, related_name="components_runs")
    role = models.CharField(max_length=100, default="extract_components")
    extractor = models.CharField(
        max_length=300, help_text="llm:<model>@<prompt hash prefix>: what the stored components are keyed by."
    )
    steps_hashes = models.JSONField(default=list, help_text="The step lists sent, in request order.")
    llm_job = models.OneToOneField(
        LLMJob, on_delete=models.SET_NULL, null=True, blank=True, related_name="components_run"
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name


class ComponentExtraction(models.Model):
    """The components of one list of steps by one extractor, stored once and reused by
    every SCORE that needs them (a reference shared by many runs is extracted once)."""

    steps_hash = models.CharField(max_length=64, help_text="SHA-256 of the JSON list of step strings.")
    extractor = models.CharField(max_length=300)
    steps = models.JSONField(default=list)
    components = models.JSONField(
        default=list, help_text="[{action, objects, parameters}], one per step; empty unless ok."
    )
    outcome = models.CharField(max_length=20, default="ok", help_text="ok, or why there are no components.")
    error = models.TextField(blank=True)
    prompt_hash = models.CharField(max_length=64, blank=True)
    ledger_key = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["steps_hash", "extractor"], name="one_extraction_per_steps_and_extractor")
        ]

    def __str__(self) -> str:
        return f"{self.extractor}: {self.steps_hash[:12]} ({self.outcome})"
