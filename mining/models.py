from __future__ import annotations

import hashlib
from typing import Any

from django.db import models
from django.utils import timezone

from llm.models import LLMJob
from llm.run_models import LiveRunState, Run


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
    # Chosen CoScript scripts (coscript app, docs/coscript.md): a benchmark slice of its own,
    # never part of the How2Bench / How2Train split.
    CONSTRAINED = "constrained", "Constrained (CoScript)"


def procedure_identity(source_example_id: str, goal: str) -> str:
    """Identity of a procedure: its source document id and its goal (re-imports match on it)."""
    return hashlib.sha256(f"{source_example_id}\x1f{goal}".encode()).hexdigest()


class Procedure(models.Model):
    """A goal-conditioned procedure: goal, resources and ordered steps (How2Everything §3)."""

    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="procedures")
    goal = models.TextField()
    resources = models.JSONField(default=list, blank=True, help_text="Ordered list of strings.")
    steps = models.JSONField(default=list, help_text="Ordered list of strings; shown numbered from 1.")
    source_example_id = models.CharField(max_length=512, blank=True, db_index=True)
    source_url = models.TextField(blank=True)
    split = models.CharField(max_length=16, choices=Split.choices, default=Split.NONE, db_index=True)
    provenance = models.JSONField(default=dict, blank=True)
    # Every mining run that produced it: a procedure is stored once per (document, goal), so a
    # second run over the same documents finds the stored one (provenance names the first run).
    mining_runs: models.ManyToManyField[MiningRun, Any] = models.ManyToManyField(
        "MiningRun",
        related_name="procedures",
        blank=True,
        help_text="The mining runs whose documents became this procedure (the first is in provenance).",
    )
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


def text_hash(text: str) -> str:
    """SHA-256 of a document's text: identical texts (in any corpus) share it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Corpus(models.Model):
    """A named collection of web documents that mining runs sample from (How2Everything §3.1)."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    n_documents = models.PositiveIntegerField(default=0, help_text="Kept up to date by the import service.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "corpora"

    def __str__(self) -> str:
        return self.name


class Document(models.Model):
    """One source document. Its text is stored here once; stage results refer to the document."""

    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="documents")
    doc_id = models.CharField(max_length=512, help_text="The id the document has in its source file.")
    url = models.TextField(blank=True)
    topic = models.ForeignKey(
        Topic,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="documents",
        help_text="Empty when the source gave no topic.",
    )
    text = models.TextField()
    text_hash = models.CharField(max_length=64, db_index=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["corpus", "doc_id"], name="document_unique_doc_id_per_corpus")]
        indexes = [models.Index(fields=["corpus", "topic"])]

    def __str__(self) -> str:
        return f"{self.corpus_id}:{self.doc_id}"

    def save(self, *args, **kwargs) -> None:
        self.text_hash = text_hash(self.text)
        super().save(*args, **kwargs)


class CorpusImportStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class CorpusImport(models.Model):
    """One upload from the web page: the stored file, the options, and the import's report."""

    corpus_name = models.CharField(max_length=200)
    corpus = models.ForeignKey(Corpus, on_delete=models.SET_NULL, null=True, blank=True, related_name="imports")
    file_name = models.CharField(max_length=500, help_text="Name of the upload in the uploads storage.")
    original_name = models.CharField(max_length=500)
    size_bytes = models.BigIntegerField(default=0)
    options = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=CorpusImportStatus.choices, default=CorpusImportStatus.QUEUED)
    report = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.corpus_name} ← {self.original_name}"


class SplitReport(models.Model):
    """One How2Bench / How2Train split with its similarity report (How2Everything App. E.1)."""

    created_at = models.DateTimeField(auto_now_add=True)
    embedding_model = models.CharField(max_length=500)
    per_topic = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    tau = models.FloatField()
    n_procedures = models.PositiveIntegerField()
    n_bench = models.PositiveIntegerField()
    n_train = models.PositiveIntegerField()
    topics = models.JSONField(
        default=list, help_text="Per topic: procedures, bench, dropped candidates, whether the topic ran out."
    )
    records = models.JSONField(default=list, help_text="Per bench procedure: nearest train procedure and cosine.")
    dropped = models.JSONField(default=list, help_text="Per dropped candidate: its nearest neighbour and cosine.")
    report_file = models.CharField(max_length=1000, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"split {self.pk}: {self.n_bench} bench / {self.n_train} train"


# A run's status has the same states as every run's (llm.models.RunStatus): ``done`` only
# when every document passed or was rejected by a stage's decision, ``done_with_failures``
# when some ended failed (their stage calls had no usable answer).
MiningRunStatus = LLMJob.Status


class MiningRun(Run, LiveRunState):
    """One How2Mine run over a corpus (How2Everything §3): which documents it samples per
    topic, and how each of the six stages is asked (prompt file, endpoint, sampling)."""

    name = models.CharField(max_length=200, unique=True)
    corpus = models.ForeignKey(Corpus, on_delete=models.PROTECT, related_name="mining_runs")
    topics = models.ManyToManyField(Topic, related_name="mining_runs")
    candidates_per_topic = models.PositiveIntegerField(help_text="Most documents sampled per topic (the budget).")
    desired_valid_per_topic = models.PositiveIntegerField(
        null=True, blank=True, help_text="Stop sampling a topic once it has this many procedures."
    )
    extract_batch_size = models.PositiveIntegerField(
        default=0, help_text="Documents sampled per topic at a time; 0: all candidates at once."
    )
    seed = models.BigIntegerField(default=0)
    min_steps = models.PositiveSmallIntegerField(default=5)
    max_steps = models.PositiveSmallIntegerField(default=15)
    stages = models.JSONField(
        default=dict, help_text="Per LLM stage: prompt file and hash, role, endpoint overrides, sampling parameters."
    )
    workers = models.PositiveSmallIntegerField(default=1, help_text="Celery tasks working on the run at once.")
    failure_retries = models.PositiveSmallIntegerField(
        default=1, help_text="Automatic retries of a document whose stage call failed (beyond the client's own)."
    )
    config = models.JSONField(default=dict, blank=True, help_text="The configuration as given.")
    batch_job_ids = models.JSONField(default=list, blank=True, help_text="Batch API: the LLM jobs of the current wave.")
    created_by = models.CharField(max_length=150, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    counters_built = models.BooleanField(
        default=True,
        help_text="Its counters (MiningRunCounter) hold every stage result; false for a run made before they "
        "were kept, until its first read counts them from its rows (mining/run_counters.py).",
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name

    def owned_jobs(self) -> list[LLMJob]:
        """The LLM jobs of its current Batch API wave (a run walking online owns none)."""
        return list(LLMJob.objects.filter(pk__in=self.batch_job_ids or []))

    @property
    def ledger_run(self) -> str:
        """The tag its requests carry in the LLM ledger."""
        return f"mining-run:{self.pk}"

    def prompt_hashes(self) -> dict[str, str]:
        return {stage: spec.get("prompt_hash", "") for stage, spec in self.stages.items()}

    @property
    def pools_documents(self) -> bool:
        """The reference's no-topics mode: the run's one topic is a pseudo-topic under which
        every document of its corpus is sampled (``candidates_per_topic`` is the total
        budget), and each procedure keeps its document's own topic."""
        return bool(((self.config or {}).get("reference") or {}).get("pooled"))

    def documents_for_sampling(self, topic_ids: list[int]) -> models.QuerySet[Document]:
        """The corpus documents the run samples for these topics: those present when the run
        was created, of these topics (or all of them when the run pools its documents)."""
        documents = self.corpus.documents.filter(pk__lte=(self.config or {}).get("max_document_id", 0))
        return documents if self.pools_documents else documents.filter(topic_id__in=topic_ids)


class CandidateStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # some stage still to run
    PASSED = "passed", "Passed"  # became a procedure
    REJECTED = "rejected", "Rejected"  # a stage rejected it (a genuine rejection)
    FAILED = "failed", "Failed"  # a stage call failed (parse_failed, truncated, refused, too_long, api_error)


class MiningCandidate(models.Model):
    """A document sampled by a run, and how far it got."""

    run = models.ForeignKey(MiningRun, on_delete=models.CASCADE, related_name="candidates")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="mining_candidates")
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="+")
    sample_round = models.PositiveIntegerField(
        default=0, help_text="0 for the first documents of a topic, 1 for the next batch, ..."
    )
    status = models.CharField(
        max_length=10, choices=CandidateStatus.choices, default=CandidateStatus.PENDING, db_index=True
    )
    stage = models.CharField(max_length=40, blank=True, help_text="The last stage with a result.")
    reason = models.TextField(blank=True, help_text="The rejection reason or the failure.")
    failures = models.PositiveSmallIntegerField(default=0, help_text="Failed attempts so far.")
    procedure = models.ForeignKey(Procedure, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    claim = models.CharField(max_length=64, blank=True, db_index=True, help_text="The worker processing it now.")
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True)
    cpu_ms = models.FloatField(
        null=True,
        blank=True,
        help_text="Worker CPU its walks took (ms; its share of its chunk's claim included); empty until a walk ends.",
    )

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["run", "document"], name="candidate_unique_document_per_run")]
        indexes = [models.Index(fields=["run", "status", "claim"]), models.Index(fields=["run", "topic", "status"])]

    def __str__(self) -> str:
        return f"run {self.run_id} doc {self.document_id} ({self.status})"


class StageResult(models.Model):
    """One stage's result for one candidate: the status, the stage's reason, its answer and
    the draft after it, and the request it came from (the key of the LLM ledger entry, or
    a hash of the heuristics' input), so a changed prompt or model is noticed."""

    candidate = models.ForeignKey(MiningCandidate, on_delete=models.CASCADE, related_name="stage_results")
    run = models.ForeignKey(MiningRun, on_delete=models.CASCADE, related_name="stage_results")
    stage = models.CharField(max_length=40)
    status = models.CharField(
        max_length=20, db_index=True
    )  # passed, rejected, parse_failed, truncated, refused, too_long, api_error
    reason = models.TextField(blank=True)
    answer = models.JSONField(
        null=True, blank=True, help_text="The stage's parsed answer (or the heuristics' figures)."
    )
    draft = models.JSONField(default=dict, blank=True, help_text="goal, steps, resources after this stage.")
    request_key = models.CharField(max_length=64)
    prompt_hash = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=200, blank=True)
    cached = models.BooleanField(default=False, help_text="Answered from the ledger: paid for earlier.")
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(
        default=timezone.now,
        db_index=True,
        help_text="When the stage decided (a walk writes its results together when it ends).",
    )

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["candidate", "stage"], name="stage_result_unique_per_candidate")]
        indexes = [models.Index(fields=["run", "stage", "status"])]

    def __str__(self) -> str:
        return f"{self.stage} {self.status}"


class CounterScope(models.TextChoices):
    STAGE = "stage", "Stage results"
    DOCUMENT = "document", "Documents"
    CORPUS = "corpus", "Documents the run can sample"


class MiningRunCounter(models.Model):
    """Counts kept as a run goes (mining/run_counters.py), changed in the transaction that
    writes what they count, so that a run's page reads a few hundred rows instead of every
    stage result (docs/mining.md, "Counts kept as the run goes").

    ``stage`` scope: the stage results of the run's documents of ``topic`` by stage, status
    and their document's status (the funnel). ``document`` scope: the run's documents of
    ``topic`` by status (and, rejected ones, the stage and reason code that rejected them),
    with the sum and the sum of squares of each document's cost (the cost projection) and
    of the CPU its walks took (those whose walk ended). ``corpus`` scope: the corpus
    documents of ``topic`` the run can sample (its planned documents), in ``n``."""

    run = models.ForeignKey(MiningRun, on_delete=models.CASCADE, related_name="counters")
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=10, choices=CounterScope.choices)
    stage = models.CharField(max_length=40, blank=True)
    status = models.CharField(max_length=20, blank=True, help_text="The stage result's status (stage scope).")
    candidate_status = models.CharField(max_length=10, choices=CandidateStatus.choices)
    reason = models.TextField(blank=True, help_text="A rejected document's reason code (document scope).")
    n = models.BigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    cost_usd_squares = models.DecimalField(
        max_digits=36, decimal_places=12, default=0, help_text="Sum of each document's cost squared (document scope)."
    )
    # db_default: code from before these columns (a worker not yet upgraded) can still write a counter
    cpu_us = models.BigIntegerField(
        default=0,
        db_default=0,
        help_text="Sum of the CPU each document's walks took, in microseconds (document scope).",
    )
    n_cpu = models.BigIntegerField(
        default=0, db_default=0, help_text="Documents whose walk ended, with a CPU time (document scope)."
    )

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "topic", "scope", "stage", "status", "candidate_status", "reason"],
                name="mining_run_counter_unique_key",
            )
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.scope} {self.stage} {self.status} {self.candidate_status}: {self.n}"
