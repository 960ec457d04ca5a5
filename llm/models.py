from __future__ import annotations

from django.db import models

from llm.constants import EXECUTOR_ONLINE, OUTCOMES
from llm.run_models import FINISHED, LiveRunState, Run, RunStatus

__all__ = [
    "BatchJob",
    "EndpointRecord",
    "EndpointRoleAssignment",
    "LedgerEntry",
    "LedgerTotal",
    "LLMJob",
]


class EndpointRecord(models.Model):
    """An LLM endpoint kept as data: base URL, model, API key (by environment-variable name,
    or stored encrypted), limits and prices. Admins add, edit, test, retire and assign it to
    roles on the LLM pages (docs/llm.md, "Endpoint records"); a record is never deleted, so
    the jobs that used it keep pointing at it."""

    name = models.CharField(max_length=100, unique=True)
    base_url = models.CharField(max_length=500, help_text="OpenAI-compatible base URL, e.g. http://gpu-1:8000/v1.")
    model = models.CharField(max_length=200, help_text="Model id at the endpoint.")
    api_key_env = models.CharField(max_length=100, blank=True, help_text="Environment variable holding the API key.")
    api_key_encrypted = models.TextField(
        blank=True, help_text="The stored API key, Fernet-encrypted (llm/endpoint_keys.py)."
    )
    api_key_last4 = models.CharField(
        max_length=4, blank=True, help_text="The last characters of the stored key, shown instead of it."
    )
    max_concurrency = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: LLM_MAX_CONCURRENCY.")
    requests_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="Empty: LLM_REQUESTS_PER_MINUTE."
    )
    tokens_per_minute = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: LLM_TOKENS_PER_MINUTE.")
    price_input = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="USD per million input tokens; empty: the price table.",
    )
    price_output = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="USD per million output tokens; empty: the price table.",
    )
    context_length = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The model's context in tokens; empty: what the server's /models says (vLLM), "
        "else what its errors say.",
    )
    timeout_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seconds one request may take; empty: LLM_TIMEOUT_SECONDS, raised for a slow "
        "endpoint from its observed speed.",
    )
    disable_thinking = models.BooleanField(
        default=False,
        help_text="A hybrid reasoning model (Qwen3, How2Judge) run non-thinking: sends chat_template_kwargs "
        '{"enable_thinking": false}.',
    )
    source = models.CharField(
        max_length=300, blank=True, help_text='Where it came from: "from LLM_BASE_URL", "added by ada".'
    )
    seed_key = models.CharField(
        max_length=100,
        null=True,
        blank=True,
        unique=True,
        help_text="Set on records seeded from the environment, so seeding creates each once.",
    )
    retired = models.BooleanField(default=False, db_index=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    last_test_at = models.DateTimeField(null=True, blank=True)
    last_test_ok = models.BooleanField(null=True, blank=True)
    last_test_latency_ms = models.PositiveIntegerField(null=True, blank=True)
    last_test_message = models.TextField(blank=True, help_text="The answer's excerpt, or the error and what to do.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["retired", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def api_key_kind(self) -> str:
        """``stored``, ``env`` or ``none``."""
        if self.api_key_encrypted:
            return "stored"
        return "env" if self.api_key_env else "none"

    @property
    def api_key_label(self) -> str:
        """How pages and the API describe the key, never the key itself."""
        if self.api_key_encrypted:
            return f"saved, ending in …{self.api_key_last4}"
        if self.api_key_env:
            return f"from ${self.api_key_env}"
        return "no key"


class EndpointRoleAssignment(models.Model):
    """The endpoint record a role uses: one per role. A role without one uses its
    environment variables (config/settings/llm.py)."""

    role = models.CharField(max_length=100, unique=True)
    record = models.ForeignKey(EndpointRecord, on_delete=models.PROTECT, related_name="assignments")
    assigned_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["role"]

    def __str__(self) -> str:
        return f"{self.role} -> {self.record}"


class LedgerEntry(models.Model):
    """One keyed request and its final response: the cache and the resume mechanism.

    ``key`` hashes (model, messages, sampling parameters, schema); a call whose key has
    a finished entry is answered from here without a network call."""

    key = models.CharField(max_length=64, unique=True)
    stage = models.CharField(max_length=100, db_index=True)
    role = models.CharField(max_length=100, blank=True)
    run = models.CharField(
        max_length=200, blank=True, db_index=True, help_text="The run that paid for it, e.g. judge-run:12."
    )
    base_url = models.CharField(max_length=500)
    model = models.CharField(max_length=200, db_index=True)
    executor = models.CharField(max_length=20, default=EXECUTOR_ONLINE)
    request = models.JSONField(help_text="messages, sampling parameters and schema, as sent first")
    response = models.JSONField(null=True, blank=True, help_text="the last raw response body")
    response_text = models.TextField(blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    outcome = models.CharField(max_length=20, choices=[(o, o) for o in OUTCOMES], db_index=True)
    parsed = models.JSONField(null=True, blank=True, help_text="only for outcome ok")
    error = models.TextField(blank=True)
    path = models.CharField(max_length=20, blank=True, help_text="json_schema, json_object or text")
    attempts = models.PositiveSmallIntegerField(default=1)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, help_text="null when the model has no price"
    )
    history = models.JSONField(default=list, blank=True, help_text="earlier failed attempts at this key, oldest first")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "ledger entries"
        indexes = [
            models.Index(fields=["run", "stage", "outcome"]),
            models.Index(fields=["base_url", "model", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.stage} {self.outcome} {self.key[:12]}"


class LedgerTotal(models.Model):
    """The ledger entries of one run label, stage, model, outcome and error, summed as they
    are written (llm/ledger_totals.py, docs/llm.md "Totals kept per run"): changed in the
    transaction that writes the entries they sum, so that a run that asks as it goes (a
    mining run) reads a few rows for its cost table and outcome counts, not every entry.

    ``error``: the entry's error as grouped and shown (stripped, ``ERROR_CHARS``), empty
    for ``ok``. ``priced_usd`` sums the entries that have a price, ``n_unpriced`` counts
    those that have none (llm/costs.py). ``last_at``: when an entry was last counted here
    (ties between errors are listed the most recent first)."""

    run = models.CharField(max_length=200)
    stage = models.CharField(max_length=100)
    model = models.CharField(max_length=200)
    outcome = models.CharField(max_length=20)
    error = models.TextField(blank=True)
    n = models.BigIntegerField(default=0)
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    priced_usd = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    n_unpriced = models.BigIntegerField(default=0)
    last_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "stage", "model", "outcome", "error"], name="llm_ledger_total_key")
        ]

    def __str__(self) -> str:
        return f"{self.run} {self.stage} {self.model} {self.outcome}: {self.n}"


class BatchJob(models.Model):
    """An OpenAI Batch API job, persisted so that a restart picks up running batches."""

    class Status(models.TextChoices):
        SUBMITTED = "submitted"
        COMPLETED = "completed"  # results mapped back into the ledger
        FAILED = "failed"
        SUPERSEDED = "superseded"  # its requests without an ok answer went to a later batch (resume, Retry failed)

    job = models.ForeignKey("LLMJob", on_delete=models.CASCADE, related_name="batches")
    base_url = models.CharField(max_length=500)
    model = models.CharField(max_length=200)
    batch_id = models.CharField(max_length=200, unique=True)
    input_file_id = models.CharField(max_length=200)
    remote_status = models.CharField(max_length=40, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.SUBMITTED, db_index=True)
    requests = models.JSONField(help_text="custom_id (ledger key) -> request, for mapping back and resubmitting")
    n_requests = models.PositiveIntegerField()
    n_succeeded = models.PositiveIntegerField(default=0)
    n_failed = models.PositiveIntegerField(default=0)
    attempt = models.PositiveSmallIntegerField(default=1)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.batch_id} ({self.status})"


class LLMJob(Run, LiveRunState):
    """A list of requests executed as Celery work by one executor, resumable.

    Generation, judge and mining runs hand their requests to a job; the results land in
    the ledger as each request finishes, so a killed worker loses only what was in flight
    and a resumed job asks only for what has no finished ledger entry."""

    Status = RunStatus

    run = models.CharField(max_length=200, db_index=True)
    role = models.CharField(max_length=100)
    endpoint_overrides = models.JSONField(
        default=dict, blank=True, help_text="base_url / model / api_key_env for this run"
    )
    endpoint_record = models.ForeignKey(
        EndpointRecord,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="jobs",
        help_text="The endpoint record the job was created with; it keeps using it (its ledger keys name that endpoint).",
    )
    requests = models.JSONField(help_text="list of {stage, messages, params, schema}")
    keys = models.JSONField(default=list, help_text="ledger key of each request, in order")
    n_total = models.PositiveIntegerField(default=0)
    n_done = models.PositiveIntegerField(default=0)
    outcome_counts = models.JSONField(default=dict, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=64, blank=True, help_text="the task executing the job now")
    claim_expires = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(
        max_length=200, blank=True, help_text="the worker (host and process) that claimed it last"
    )
    # A run's job may be cut into shards (llm/shards.py): child jobs over consecutive slices
    # of its requests, each claimed with a lease by any worker; the parent aggregates them.
    parent = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="shards")
    shard_index = models.PositiveIntegerField(null=True, blank=True)
    # Not stored: the claim (``claimed_by``) the task executing this instance holds, which
    # its heartbeats renew (llm_job_execute sets it; llm/job_lifecycle.py reads it).
    claim_token: str = ""

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        if self.parent_id:
            return f"job {self.pk} (shard {self.shard_index} of job {self.parent_id}, {self.status})"
        return f"job {self.pk} ({self.run}, {self.status})"

    @property
    def projected_cost_usd(self):
        """Cost so far scaled to all requests (from the first finished ones); None once the
        job has finished (what it spent is then the whole story)."""
        if not self.n_done or self.status in FINISHED or self.n_done >= self.n_total:
            return None
        return self.cost_usd * self.n_total / self.n_done
