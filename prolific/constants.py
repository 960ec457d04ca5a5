"""Prolific's vocabulary (its public API reference: studies, submissions, bonuses) and the
product's own choices for the integration (docs/prolific.md)."""

from __future__ import annotations

# Submission statuses as Prolific spells them (the submission object's ``status``).
RESERVED = "RESERVED"
ACTIVE = "ACTIVE"
TIMED_OUT = "TIMED-OUT"
AWAITING_REVIEW = "AWAITING REVIEW"
APPROVED = "APPROVED"
RETURNED = "RETURNED"
REJECTED = "REJECTED"
SCREENED_OUT = "SCREENED OUT"
PARTIALLY_APPROVED = "PARTIALLY APPROVED"
SUBMISSION_STATUSES = (
    RESERVED,
    ACTIVE,
    TIMED_OUT,
    AWAITING_REVIEW,
    APPROVED,
    RETURNED,
    REJECTED,
    SCREENED_OUT,
    PARTIALLY_APPROVED,
)
# A participant who left without finishing: their reserved slots go back to the pool.
LEFT_STATUSES = (RETURNED, TIMED_OUT)
# Already decided on Prolific: never reviewed again.
DECIDED_STATUSES = (APPROVED, REJECTED, SCREENED_OUT, PARTIALLY_APPROVED)

# Study statuses (the study object's ``status``); a linked study is synced until it is over.
STUDY_UNPUBLISHED = "UNPUBLISHED"
STUDY_ACTIVE = "ACTIVE"
STUDY_PUBLISHING = "PUBLISHING"  # ours: the PUBLISH transition is in flight (never Prolific's)
STUDY_COMPLETED = "COMPLETED"

# Completion codes the product issues, as code types with the action Prolific takes: every
# submission waits for the product's review (approve the completed, the screened out by policy).
CODE_COMPLETED = "COMPLETED"
CODE_SCREENED_OUT = "SCREENED_OUT"
ACTION_MANUALLY_REVIEW = "MANUALLY_REVIEW"

# The reviewed action the product records for a submission.
REVIEW_APPROVE = "approve"
REVIEW_REJECT = "reject"
REVIEW_ON_PROLIFIC = "decided_on_prolific"

# What happens to screened-out participants: approved (paid) by default, the fair choice since
# they spent time on the guidelines and the qualification; or rejected, only where Prolific's
# rules allow it (failed attention checks), with a message of at least REJECT_MESSAGE_MIN_LENGTH
# characters and a rejection category.
POLICY_APPROVE = "approve"
POLICY_REJECT = "reject"
POLICIES = (POLICY_APPROVE, POLICY_REJECT)
REJECT_MESSAGE_MIN_LENGTH = 100
REJECT_MESSAGE_MAX_LENGTH = 2000
REJECTION_CATEGORY_FAILED_CHECK = "FAILED_CHECK"
DEFAULT_REJECT_MESSAGE = (
    "Your submission was not accepted because you missed more of the attention checks placed among the items than "
    "the study allows, as the study's guidelines explained before you started. Thank you for your time."
)

# A review or a bonus payment claimed by a request that then died is claimable again after this.
CLAIM_STALE_SECONDS = 600

# Bounds of what is stored and shown.
LOG_EXCERPT_CHARS = 600
SUBMISSION_PAGES_MAX = 200  # pages of submissions read in one sync (Prolific pages by 200 or fewer)
BONUS_MAX_PER_PARTICIPANT = 100  # in the study's currency, per participant per batch
TOKEN_MAX_LENGTH = 500

# Webhooks (Prolific's API reference, "Webhooks"): events are sent at least once, in no
# guaranteed order, to subscriptions of a workspace. Each request carries the event's id
# (X-Event-ID, the same on every redelivery), the time the event was sent (X-Timestamp), and a
# signature: base64 of HMAC-SHA256 under the workspace's secret over the request timestamp
# (X-Prolific-Request-Timestamp, UNIX seconds) followed by the raw body.
HEADER_SIGNATURE = "X-Prolific-Request-Signature"
HEADER_REQUEST_TIMESTAMP = "X-Prolific-Request-Timestamp"
HEADER_EVENT_ID = "X-Event-ID"
HEADER_EVENT_TIMESTAMP = "X-Timestamp"
HEADER_HOOK_SECRET = "X-Hook-Secret"  # answered when a subscription is created, sent back to confirm it
EVENT_SUBMISSION_STATUS = "submission.status.change"
EVENT_STUDY_STATUS = "study.status.change"
# The events the product subscribes to and applies; any other type is stored and answered 2xx.
WEBHOOK_EVENT_TYPES = (EVENT_SUBMISSION_STATUS, EVENT_STUDY_STATUS)

# What became of a received event (ProlificWebhookEvent.outcome).
EVENT_APPLIED = "applied"
EVENT_STALE = "stale"  # older than the status already known: kept, not applied
EVENT_UNMATCHED = "unmatched"  # no linked study or submission here: the poll reconciles it
EVENT_IGNORED = "ignored"  # a type the product does not act on

# When two statuses of one submission carry the same time, the one further along wins: a
# submission moves forward (reserved, active, then left or awaiting review, then decided).
SUBMISSION_STATUS_RANK = {
    RESERVED: 0,
    ACTIVE: 1,
    TIMED_OUT: 2,
    RETURNED: 2,
    AWAITING_REVIEW: 3,
    APPROVED: 4,
    REJECTED: 4,
    SCREENED_OUT: 4,
    PARTIALLY_APPROVED: 4,
}
