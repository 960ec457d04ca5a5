"""Studies, items, annotators, assignments and annotations (How2Everything §4.3, App. C.1).

Structure only; the workflows (reserving, saving drafts, submitting, screening) are in
annotate/studies/ and annotate/participation/ (services and selectors). The review's decisions
and gold labels are defined with the review (annotate/review/models.py)."""

from __future__ import annotations

import hashlib
import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from annotate import constants as C
from annotate.kinds import KindNotInstalled, kind_choices, kind_get
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION, answer_summary_default
from annotate.participation.allocation import POLICY_FIXED, POLICY_LABELS
from annotate.participation.flags import BROKEN_REASONS, FLAG_BROKEN, FLAGS

# The review's models (annotate/review/models.py) are the app's too: Django registers them from here.
from annotate.review.models import AnnotationReview, GoldLabel  # noqa: F401
from annotate.review.rules import DECISIONS
from mining.models import CorpusImportStatus as ImportStatus


def text_hash(steps: list[str]) -> str:
    """Hash of a numbered list of steps as shown to the annotator (provenance)."""
    return hashlib.sha256("\n".join(f"{n}. {s}" for n, s in enumerate(steps, start=1)).encode("utf-8")).hexdigest()


class GuidelineVersion(models.Model):
    """The instructions and codebook an annotator was trained and qualified on.

    Identified by content: two studies with the same kind, instructions and codebook share
    a version, so passing the qualification once is enough for both (§4.3)."""

    # The registry's kinds when asked (a callable): a kind registered at run time is valid too.
    kind = models.CharField(max_length=50, choices=kind_choices)
    label = models.CharField(max_length=100, unique=True, help_text="e.g. critical_failure-v2")
    instructions = models.TextField()
    codebook_version = models.CharField(max_length=50, blank=True)
    content_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "id"]

    def __str__(self) -> str:
        return self.label

    @staticmethod
    def hash_of(kind: str, instructions: str, codebook_version: str) -> str:
        return hashlib.sha256(f"{kind}\x1f{codebook_version}\x1f{instructions}".encode()).hexdigest()


class Study(models.Model):
    # The registry's kinds when asked (a callable): a kind registered at run time is valid too.
    kind = models.CharField(max_length=50, choices=kind_choices)
    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    round = models.PositiveSmallIntegerField(default=1, help_text="Pilot round number (1 = first).")
    first_round = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="later_rounds",
        help_text="The study this round was cloned from (empty for the first round).",
    )
    guideline_version = models.ForeignKey(GuidelineVersion, on_delete=models.PROTECT, related_name="studies")
    annotators_per_item = models.PositiveSmallIntegerField(default=C.ANNOTATORS_PER_ITEM_DEFAULT)
    min_seconds = models.PositiveIntegerField(default=C.MIN_SECONDS_DEFAULT)
    lease_minutes = models.PositiveIntegerField(default=C.LEASE_MINUTES_DEFAULT)
    training_enabled = models.BooleanField(default=True)
    qualification_enabled = models.BooleanField(default=True)
    qualification_pass = models.PositiveSmallIntegerField(default=0, help_text="Correct gold items needed to pass.")
    attention_check_rate = models.FloatField(default=C.ATTENTION_CHECK_RATE_DEFAULT)
    attention_max_failures = models.PositiveSmallIntegerField(default=C.ATTENTION_MAX_FAILURES_DEFAULT)
    max_items_per_annotator = models.PositiveIntegerField(null=True, blank=True)
    min_annotations_for_majority = models.PositiveSmallIntegerField(
        default=C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT,
        validators=[
            MinValueValidator(C.MIN_ANNOTATIONS_FOR_MAJORITY_MIN),
            MaxValueValidator(C.MIN_ANNOTATIONS_FOR_MAJORITY_MAX),
        ],
        help_text="Non-excluded annotations an item needs for a human majority (at least 2); items with fewer are "
        "left out of judge-human agreement and counted (docs/agreement.md).",
    )
    items_per_page = models.PositiveSmallIntegerField(
        default=1, help_text="Items shown on one page (multiple-choice studies); 1 = one at a time."
    )
    completion_code = models.CharField(max_length=64)
    screened_out_code = models.CharField(max_length=64)
    payment_per_item = models.DecimalField(
        max_digits=8,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="USD paid per annotated item; with the median active time it gives the implied hourly pay.",
    )
    is_open = models.BooleanField(default=True, help_text="Closed studies accept no new annotators.")
    prolific_study_id = models.CharField(
        max_length=100,
        blank=True,
        help_text="Prolific's id of this study: when set, the entry URL's STUDY_ID must equal it.",
    )
    allow_other_pids = models.BooleanField(
        default=False,
        help_text="Accept participant ids that do not look like Prolific's (24 hexadecimal characters): "
        "for demos, pilots with colleagues and tests.",
    )
    # How the study spends its annotators (annotate/participation/allocation.py, docs/annotation.md).
    allocation_policy = models.CharField(
        max_length=20,
        choices=[(key, label) for key, label in POLICY_LABELS.items()],
        default=POLICY_FIXED,
        help_text="fixed: k annotators per item; dynamic: k, then more while the item is undecided; active: "
        "dynamic k with new items drawn where they narrow the PPI++ How2Score interval most.",
    )
    max_annotators_per_item = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Dynamic k: the most annotators an item gets (annotators per item is the least); None under fixed k.",
    )
    target_interval_width = models.FloatField(
        null=True,
        blank=True,
        help_text="The PPI++ How2Score interval width (0-1) at which the study stops offering items.",
    )
    target_reached_at = models.DateTimeField(
        null=True, blank=True, help_text="When the interval first reached the target width (the study stopped)."
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return self.name

    @property
    def round_root(self) -> Study:
        return self.first_round or self


class ItemRole(models.TextChoices):
    MAIN = ROLE_MAIN, "Main pool"
    ATTENTION = ROLE_ATTENTION, "Attention check"
    QUALIFICATION = ROLE_QUALIFICATION, "Qualification"


class StudyItem(models.Model):
    """One goal with its reference (L1) and candidate (L2) steps, as shown to annotators."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    item_id = models.CharField(max_length=200)
    role = models.CharField(max_length=20, choices=ItemRole.choices, default=ItemRole.MAIN)
    position = models.PositiveIntegerField(default=0)
    topic = models.CharField(max_length=100, blank=True)
    goal = models.TextField()
    reference_steps = models.JSONField(default=list)
    candidate_steps = models.JSONField(default=list)
    expected = models.JSONField(
        null=True,
        blank=True,
        help_text="The known answer in the kind's shape (checks and gold items; multiple choice: every item's "
        "label); read by the kind only.",
    )
    explanation = models.TextField(blank=True)
    source = models.JSONField(
        default=dict, blank=True, help_text="Where the item came from (generation, judgment, file)."
    )
    l1_hash = models.CharField(max_length=64, editable=False)
    l2_hash = models.CharField(max_length=64, editable=False)

    class Meta:
        ordering = ["study_id", "role", "position"]
        constraints = [models.UniqueConstraint(fields=["study", "item_id"], name="one_item_id_per_study")]
        indexes = [models.Index(fields=["study", "role", "position"])]

    def __str__(self) -> str:
        return f"{self.item_id} ({self.role})"

    def save(self, *args, **kwargs) -> None:
        self.l1_hash = text_hash(self.reference_steps)
        self.l2_hash = text_hash(self.candidate_steps)
        super().save(*args, **kwargs)


class Annotator(models.Model):
    """A Prolific participant, identified by PROLIFIC_PID across studies. Never a user account."""

    pid = models.CharField(max_length=C.PID_MAX_LENGTH, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.pid


class ParticipationState(models.TextChoices):
    CONSENT = "consent", "Reading the guidelines"
    TRAINING = "training", "Training"
    QUALIFICATION = "qualification", "Qualification test"
    ANNOTATING = "annotating", "Annotating"
    COMPLETED = "completed", "Completed"
    SCREENED_OUT = "screened_out", "Screened out"
    RETURNED = "returned", "Returned (slots released)"


FINISHED_STATES = (ParticipationState.COMPLETED, ParticipationState.SCREENED_OUT, ParticipationState.RETURNED)


class Participation(models.Model):
    """One annotator in one study: where they are on the path, and their Prolific session."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participations")
    annotator = models.ForeignKey(Annotator, on_delete=models.PROTECT, related_name="participations")
    prolific_study_id = models.CharField(max_length=100, blank=True)
    prolific_session_id = models.CharField(max_length=100, blank=True)
    sessions_seen = models.JSONField(
        default=list, blank=True, help_text="Every (STUDY_ID, SESSION_ID) they arrived with."
    )
    state = models.CharField(max_length=20, choices=ParticipationState.choices, default=ParticipationState.CONSENT)
    state_reason = models.CharField(max_length=200, blank=True)
    consented_at = models.DateTimeField(null=True, blank=True)
    training_progress = models.JSONField(default=dict, blank=True)
    training_completed_at = models.DateTimeField(null=True, blank=True)
    attention_failures = models.PositiveIntegerField(default=0)
    attention_passed = models.PositiveIntegerField(default=0)
    excluded = models.BooleanField(default=False)
    exclusion_reason = models.CharField(max_length=200, blank=True)
    attention_seed = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="Seed of this participant's attention-check positions and order (annotate/participation/attention_plan.py).",
    )
    is_test = models.BooleanField(
        default=False,
        help_text="A researcher's test run (started from the study page): its annotations are stored but left out "
        "of k, progress, reports, agreement, exports and the API unless asked for (docs/annotation.md).",
    )
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study_id", "started_at"]
        constraints = [models.UniqueConstraint(fields=["study", "annotator"], name="one_participation_per_study")]

    def __str__(self) -> str:
        return f"{self.annotator_id} in {self.study_id}"

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


class Qualification(models.Model):
    """The result of a qualification test, remembered per guideline version (no retry)."""

    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="qualifications")
    guideline_version = models.ForeignKey(GuidelineVersion, on_delete=models.PROTECT, related_name="qualifications")
    study = models.ForeignKey(Study, null=True, on_delete=models.SET_NULL, related_name="qualifications_taken")
    passed = models.BooleanField()
    n_correct = models.PositiveSmallIntegerField()
    n_total = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["annotator", "guideline_version"], name="one_qualification_per_guideline_version"
            )
        ]

    def __str__(self) -> str:
        return f"{self.annotator_id} on {self.guideline_version_id}: {'passed' if self.passed else 'failed'}"


class AssignmentStatus(models.TextChoices):
    RESERVED = "reserved", "Reserved"
    SUBMITTED = "submitted", "Submitted"
    EXPIRED = "expired", "Lease expired"
    RELEASED = "released", "Released by a researcher"


class Assignment(models.Model):
    """An item reserved for one annotator under a lease, with the server's record of what they
    did on the page (goal acknowledgement, step openings, clicks) and their draft."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="assignments")
    item = models.ForeignKey(StudyItem, on_delete=models.CASCADE, related_name="assignments")
    participation = models.ForeignKey(Participation, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(Annotator, on_delete=models.PROTECT, related_name="assignments")
    role = models.CharField(max_length=20, choices=ItemRole.choices)
    status = models.CharField(max_length=20, choices=AssignmentStatus.choices, default=AssignmentStatus.RESERVED)
    surplus = models.BooleanField(default=False, help_text="Submitted after the item already had its k annotations.")
    is_test = models.BooleanField(
        default=False, help_text="Held by a test participant (Participation.is_test): never counts toward k."
    )
    reserved_at = models.DateTimeField()
    lease_expires_at = models.DateTimeField()
    first_served_at = models.DateTimeField(null=True, blank=True)
    goal_acknowledged_at = models.DateTimeField(null=True, blank=True)
    steps_opened = models.JSONField(default=dict, blank=True, help_text='{"L1.1": "<server time>", ...}')
    click_log = models.JSONField(default=list, blank=True)
    draft = models.JSONField(default=dict, blank=True)
    draft_seq = models.PositiveIntegerField(default=0)
    draft_saved_at = models.DateTimeField(null=True, blank=True)
    active_seconds = models.FloatField(default=0.0)
    last_activity_at = models.DateTimeField(null=True, blank=True)
    activity_seen_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The server's time of the first save with an event or a draft (until then the lease is short).",
    )
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["reserved_at", "id"]
        constraints = [
            # Nobody sees an item twice.
            models.UniqueConstraint(fields=["item", "annotator"], name="one_assignment_per_item_and_annotator"),
        ]
        indexes = [
            models.Index(fields=["item", "status"]),
            models.Index(fields=["participation", "status"]),
            models.Index(fields=["study", "status"]),
        ]

    def __str__(self) -> str:
        return f"{self.item_id} for {self.annotator_id} ({self.status})"


class Annotation(models.Model):
    """A submitted answer with its full provenance. Never deleted; excluded rows stay stored."""

    assignment = models.OneToOneField(Assignment, on_delete=models.PROTECT, related_name="annotation")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="annotations")
    item = models.ForeignKey(StudyItem, on_delete=models.CASCADE, related_name="annotations")
    participation = models.ForeignKey(Participation, on_delete=models.CASCADE, related_name="annotations")
    annotator = models.ForeignKey(Annotator, on_delete=models.PROTECT, related_name="annotations")
    source = models.CharField(max_length=20, choices=ItemRole.choices)
    has_failure = models.BooleanField(
        null=True, help_text="Critical-failure studies; None for multiple choice and constraint faithfulness."
    )
    failures = models.JSONField(default=list, blank=True)
    comments = models.TextField(blank=True)
    answer = models.JSONField(default=dict, blank=True, help_text="The kind's full cleaned answer.")
    guideline_version = models.CharField(max_length=100)
    l1_hash = models.CharField(max_length=64)
    l2_hash = models.CharField(max_length=64)
    interface_version = models.CharField(max_length=50)
    first_served_at = models.DateTimeField()
    submitted_at = models.DateTimeField()
    wall_seconds = models.FloatField()
    active_seconds = models.FloatField()
    goal_acknowledged_at = models.DateTimeField(null=True, blank=True)
    steps_opened = models.JSONField(default=dict, blank=True)
    click_log = models.JSONField(default=list, blank=True)
    surplus = models.BooleanField(default=False)
    is_test = models.BooleanField(
        default=False,
        help_text="By a test participant (Participation.is_test): left out of k, reports, agreement, "
        "exports and the API unless asked for.",
    )
    late = models.BooleanField(default=False, help_text="Submitted after the lease had expired.")
    correct = models.BooleanField(
        null=True, blank=True, help_text="Attention check / qualification: matched the known answer."
    )
    excluded = models.BooleanField(default=False)
    exclusion_reason = models.CharField(max_length=200, blank=True)
    submission_id = models.CharField(max_length=64, blank=True)
    # The annotator's flag (annotate/participation/flags.py): "broken" is counted apart and left
    # out of every statistic (annotations_counted); "unsure" is counted and kept in them.
    flag = models.CharField(
        max_length=10,
        blank=True,
        default="",
        choices=[("", "None"), *FLAGS.items()],
        help_text="broken: left out of agreement and counted apart; unsure: counted, kept in agreement.",
    )
    flag_reason = models.CharField(
        max_length=20, blank=True, default="", choices=[("", "None"), *BROKEN_REASONS.items()]
    )
    flag_note = models.TextField(blank=True, default="")
    # The researcher's latest review decision (annotate/review/rules.py; its history is
    # AnnotationReview): "reject" leaves the counted set (annotations_counted); "correct" puts
    # the reviewer's answer in answer/has_failure/failures and keeps the annotator's own in
    # submitted_answer.
    review = models.CharField(
        max_length=10,
        blank=True,
        default="",
        choices=[("", "Not reviewed"), *DECISIONS.items()],
        help_text="The latest review decision: reject leaves the counted set; correct counts with the correction.",
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    submitted_answer = models.JSONField(
        null=True,
        blank=True,
        help_text='While a correction stands: the annotator\'s own answer ({"answer", "has_failure", "failures"}).',
    )

    class Meta:
        ordering = ["study_id", "submitted_at", "id"]
        indexes = [models.Index(fields=["study", "source"]), models.Index(fields=["item"])]

    def __str__(self) -> str:
        return f"{self.annotator_id} on {self.item_id}: {self.label}"

    @property
    def broken(self) -> bool:
        return self.flag == FLAG_BROKEN

    @property
    def label(self) -> str:
        """The answer in one line, as the study's kind summarizes it (``StudyKind.summary``:
        "has_failure", "choice 2", "rating 4"); "flagged broken" for a broken flag. A kind no
        longer installed: each answered field with its value."""
        if self.broken:
            return "flagged broken"
        try:
            kind = kind_get(self.study.kind)
        except KindNotInstalled:
            return answer_summary_default(self.answer if isinstance(self.answer, dict) else {})
        return kind.summary(self.answer)


class StudyImport(models.Model):
    """A study created from an uploaded items file too large to read in the request: the
    file waits under ``VAR_DIR/uploads/studies`` and a worker creates the study
    (``annotate/studies/imports.py``, the task ``annotate.study_import_run``). The same life
    cycle as a corpus upload (``mining.CorpusImport``): queued, running, then done or failed."""

    status = models.CharField(max_length=10, choices=ImportStatus.choices, default=ImportStatus.QUEUED)
    study_name = models.CharField(max_length=200)
    kind = models.CharField(max_length=40)
    file_name = models.CharField(max_length=500, help_text="Name of the upload in the uploads storage.")
    original_name = models.CharField(max_length=500)
    size_bytes = models.BigIntegerField(default=0)
    options = models.JSONField(default=dict, help_text="The form's settings, as study_create takes them.")
    problems = models.JSONField(default=list, blank=True, help_text="File-line-field errors, or the settings refused.")
    error = models.TextField(blank=True)
    study = models.ForeignKey(Study, null=True, blank=True, on_delete=models.SET_NULL, related_name="imports")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.original_name} -> {self.study_name} ({self.status})"


class Rubric(models.Model):
    """A study kind defined as data (annotate/kinds/rubric/): the checked rubric, as
    ``rubric_parse`` reads it again, registered as the kind ``rubric:<key>``. Never edited:
    studies keep their answers in its questions' shape, so a changed rubric is a new key."""

    key = models.CharField(max_length=32, unique=True)
    title = models.CharField(max_length=200)
    definition = models.JSONField(help_text="The checked rubric (key, title, instructions, questions).")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return f"rubric {self.key}"
