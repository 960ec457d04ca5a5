"""The link between a study and its Prolific study, the submissions seen there, every request
to Prolific and its answer, bonus batches, and each researcher's saved token (encrypted).

Structure only: the workflows are in prolific/*_services.py, the reads in prolific/selectors.py."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotate.models import Participation, Study


class ProlificCredential(models.Model):
    """A researcher's Prolific API token, encrypted with a key derived from SECRET_KEY
    (prolific/crypto.py). Only its last four characters are ever shown again."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="prolific_credential")
    token_encrypted = models.TextField()
    last4 = models.CharField(max_length=4)
    saved_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"Prolific token of {self.user_id} ending in …{self.last4}"


class ProlificStudyLink(models.Model):
    """An annotate study published to Prolific: the draft's numbers and Prolific's study id."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="prolific_link")
    prolific_id = models.CharField(
        max_length=100, blank=True, help_text="Prolific's study id (empty until the draft exists)."
    )
    status = models.CharField(max_length=40, blank=True, help_text="The study's status on Prolific, as last seen.")
    status_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When that status held (a poll's start or an event's time): older news never overwrites it.",
    )
    name = models.CharField(max_length=200)
    external_study_url = models.TextField()
    places = models.PositiveIntegerField()
    reward_cents = models.PositiveIntegerField()
    estimated_minutes = models.PositiveIntegerField()
    items_per_annotator = models.PositiveIntegerField()
    published_at = models.DateTimeField(null=True, blank=True, help_text="When the PUBLISH transition was accepted.")
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, help_text="The last failure talking to Prolific, with what to do.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Whose token the scheduled sync uses.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.study_id} -> {self.prolific_id or '(no draft)'}"


class ProlificSubmission(models.Model):
    """One submission seen on Prolific, beside the product's participant (when they arrived)."""

    link = models.ForeignKey(ProlificStudyLink, on_delete=models.CASCADE, related_name="submissions")
    submission_id = models.CharField(max_length=100)
    participant_id = models.CharField(max_length=100)
    status = models.CharField(max_length=40)
    status_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When that status held (a poll's start or an event's time): older news never overwrites it.",
    )
    started_at = models.CharField(max_length=40, blank=True, help_text="As Prolific wrote it.")
    participation = models.ForeignKey(
        Participation, null=True, blank=True, on_delete=models.SET_NULL, related_name="prolific_submissions"
    )
    slots_released = models.PositiveIntegerField(default=0, help_text="Reserved slots released when they left.")
    reviewed_action = models.CharField(max_length=30, blank=True)
    review_claimed_at = models.DateTimeField(null=True, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.CharField(max_length=300, blank=True)
    bonus_paid_cents = models.PositiveIntegerField(default=0)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["link_id", "first_seen_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["link", "submission_id"], name="one_row_per_prolific_submission")
        ]
        indexes = [models.Index(fields=["link", "status"]), models.Index(fields=["link", "participant_id"])]

    def __str__(self) -> str:
        return f"{self.submission_id} ({self.status})"


class ProlificRequest(models.Model):
    """One request to Prolific and its answer (or the failure), as logged on the study. The
    token is never stored: bodies are masked and cut to an excerpt."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="prolific_requests")
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=300)
    attempt = models.PositiveSmallIntegerField(default=1)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Empty when no answer came.")
    request_excerpt = models.TextField(blank=True)
    response_excerpt = models.TextField(blank=True)
    error = models.CharField(max_length=300, blank=True)
    seconds = models.FloatField(default=0.0)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["study", "-at"])]

    def __str__(self) -> str:
        return f"{self.method} {self.path} -> {self.status_code}"


class BonusState(models.TextChoices):
    PREVIEW = "preview", "Previewed, not paid"
    PAYING = "paying", "Paying"
    PAID = "paid", "Paid"
    FAILED = "failed", "Failed (nothing was paid)"
    UNCERTAIN = "uncertain", "Unknown: check Prolific before paying again"


class ProlificBonusBatch(models.Model):
    """Bonuses by a rule: previewed (who gets how much, the total), then paid once."""

    link = models.ForeignKey(ProlificStudyLink, on_delete=models.CASCADE, related_name="bonus_batches")
    rule = models.JSONField(help_text='{"per_item": "0.10", "quota": 10}')
    rows = models.JSONField(default=list, help_text='[{"participant_id", "submission_id", "items", "amount_cents"}]')
    n_participants = models.PositiveIntegerField(default=0)
    total_cents = models.PositiveIntegerField(default=0, help_text="Bonuses alone, before Prolific's fees.")
    state = models.CharField(max_length=20, choices=BonusState.choices, default=BonusState.PREVIEW)
    prolific_bonus_id = models.CharField(max_length=100, blank=True)
    prolific_total_cents = models.IntegerField(null=True, blank=True, help_text="Prolific's total with fees.")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    paid_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # One Prolific bulk bonus payment belongs to one batch: it is never paid through two.
            models.UniqueConstraint(
                fields=["prolific_bonus_id"],
                condition=~models.Q(prolific_bonus_id=""),
                name="one_batch_per_prolific_bonus_payment",
            )
        ]

    def __str__(self) -> str:
        return f"bonus batch {self.pk} ({self.state})"


class ProlificBonusPayIntent(models.Model):
    """The one call to Prolific's pay endpoint a batch may ever make, recorded (committed)
    before the call: one row per batch (the one-to-one key), so a second call cannot be
    recorded and is never made. It keeps each participant's bonuses as Prolific showed them just
    before the call, so a payment without a clear answer is settled by reading Prolific again
    (``prolific_bonus_reconcile``), never by paying again."""

    batch = models.OneToOneField(ProlificBonusBatch, on_delete=models.CASCADE, related_name="pay_intent")
    prolific_bonus_id = models.CharField(max_length=100)
    baseline = models.JSONField(
        default=dict, help_text='{"<submission_id>": [bonus amounts in cents Prolific listed before the call]}'
    )
    called_at = models.DateTimeField(auto_now_add=True)
    answered_status = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Empty: no answer came.")
    outcome = models.CharField(max_length=20, blank=True, help_text="paid, refused, unknown")
    reconciled_at = models.DateTimeField(null=True, blank=True)
    reconcile_note = models.CharField(max_length=300, blank=True)

    def __str__(self) -> str:
        return f"pay {self.prolific_bonus_id} for batch {self.batch_id} ({self.outcome or 'sent'})"


class ProlificWebhookSecret(models.Model):
    """A workspace's webhook secret (Prolific keeps one per workspace; creating another replaces
    it), encrypted like the API tokens. Every event's signature is checked against it."""

    workspace_id = models.CharField(max_length=100, unique=True)
    secret_encrypted = models.TextField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"webhook secret of workspace {self.workspace_id}"


class ProlificWebhookSubscription(models.Model):
    """A subscription made from the product: one event type of a workspace sent to this
    server's webhook address, confirmed with the secret Prolific answered."""

    workspace_id = models.CharField(max_length=100)
    event_type = models.CharField(max_length=100)
    subscription_id = models.CharField(max_length=100, unique=True)
    target_url = models.TextField()
    confirmed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workspace_id", "event_type"]

    def __str__(self) -> str:
        return f"{self.event_type} of {self.workspace_id} -> {self.target_url}"


class ProlificWebhookEvent(models.Model):
    """One event received from Prolific, once: its id (X-Event-ID) is unique, so a redelivery
    is recognised and answered without being applied again."""

    event_id = models.CharField(max_length=100, unique=True)
    event_type = models.CharField(max_length=100)
    resource_id = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=40, blank=True)
    sent_at = models.DateTimeField(help_text="The event's time (X-Timestamp, at most the signed request time).")
    received_at = models.DateTimeField(auto_now_add=True)
    outcome = models.CharField(max_length=20)
    detail = models.CharField(max_length=300, blank=True)
    link = models.ForeignKey(
        ProlificStudyLink, null=True, blank=True, on_delete=models.SET_NULL, related_name="webhook_events"
    )

    class Meta:
        ordering = ["-received_at", "-id"]

    def __str__(self) -> str:
        return f"{self.event_type} {self.resource_id} ({self.outcome})"
