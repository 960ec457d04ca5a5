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
