"""The rules of a review decision and a gold label. Pure Python, no Django: the values, their
names and the checks shared by the services, the API and the pages.

A decision is one of ``DECISIONS``; the latest decision on an annotation is the one that counts
(earlier ones stay stored as its history):

* **accept**: the annotation counts as the annotator submitted it.
* **reject**: the annotation leaves the counted set (``LEFT_OUT_FLAGS`` "rejected",
  annotate/stats/records.py), and its participant is rejected on Prolific with the reason and
  the category. Prolific asks for a message of at least ``REJECT_MESSAGE_MIN_LENGTH``
  characters, which the participant reads, and one of its ``REJECTION_CATEGORIES``.
* **correct**: the annotation counts with the researcher's answer, cleaned by the kind as a
  submitted answer is; the annotator's own answer is kept (``Annotation.submitted_answer``)
  and the correction attributed to its reviewer."""

from __future__ import annotations

from typing import Any, Final

from annotate.kinds.base import FieldError

DECISION_ACCEPT: Final = "accept"
DECISION_REJECT: Final = "reject"
DECISION_CORRECT: Final = "correct"
DECISIONS: Final = {
    DECISION_ACCEPT: "Accepted",
    DECISION_REJECT: "Rejected",
    DECISION_CORRECT: "Corrected",
}

# Prolific's rejection message: "at least 100 characters" and at most its field's length
# (Prolific API, "Approve or reject a submission"; the same bounds as prolific_review's policy).
REJECT_MESSAGE_MIN_LENGTH: Final = 100
REJECT_MESSAGE_MAX_LENGTH: Final = 2000
# Prolific's rejection categories (Prolific API, "rejection_category"), with the words the
# review form shows.
REJECTION_CATEGORIES: Final = {
    "TOO_QUICKLY": "Too quick",
    "TOO_SLOWLY": "Too slow",
    "FAILED_INSTRUCTIONS": "Did not follow the instructions",
    "INCOMP_LONGITUDINAL": "Incomplete longitudinal study",
    "FAILED_CHECK": "Failed an attention check",
    "LOW_EFFORT": "Low effort",
    "MALINGERING": "Malingering",
    "NO_CODE": "No completion code",
    "BAD_CODE": "Wrong completion code",
    "NO_DATA": "No data",
    "UNSUPP_DEVICE": "Unsupported device",
    "OTHER": "Other",
}
# A note on an accept or a correction, and the adjudicator's note on a gold label.
NOTE_MAX_LENGTH: Final = 2000
# One bulk review takes at most this many annotations (a page's selection, an API list).
BULK_MAX: Final = 500


def decision_check(decision: Any) -> list[FieldError]:
    if not isinstance(decision, str) or decision not in DECISIONS:
        return [FieldError("decision", f"choose one of {', '.join(DECISIONS)}")]
    return []


def reason_check(decision: str, reason: Any, category: Any) -> tuple[str, str, list[FieldError]]:
    """The reason and the category a decision keeps, with the problems found. A rejection needs
    a message of ``REJECT_MESSAGE_MIN_LENGTH`` to ``REJECT_MESSAGE_MAX_LENGTH`` characters
    (counted after trimming) and a category from ``REJECTION_CATEGORIES``; an accept or a
    correction takes an optional note and no category."""
    errors: list[FieldError] = []
    if reason is None:
        reason = ""
    if not isinstance(reason, str):
        return "", "", [FieldError("reason", "must be text")]
    reason = reason.strip()
    if category in (None, ""):
        category = ""
    if decision == DECISION_REJECT:
        if not (REJECT_MESSAGE_MIN_LENGTH <= len(reason) <= REJECT_MESSAGE_MAX_LENGTH):
            errors.append(
                FieldError(
                    "reason",
                    f"Prolific needs a rejection message of {REJECT_MESSAGE_MIN_LENGTH} to "
                    f"{REJECT_MESSAGE_MAX_LENGTH} characters, which the participant reads (got {len(reason)})",
                )
            )
        if not isinstance(category, str) or category not in REJECTION_CATEGORIES:
            errors.append(FieldError("rejection_category", f"choose one of {', '.join(REJECTION_CATEGORIES)}"))
            category = ""
    else:
        if len(reason) > NOTE_MAX_LENGTH:
            errors.append(FieldError("reason", f"at most {NOTE_MAX_LENGTH} characters (got {len(reason)})"))
        if category != "":
            errors.append(FieldError("rejection_category", "only a rejection takes a category"))
            category = ""
    return reason, category, errors


def note_check(note: Any, *, required: bool = True) -> tuple[str, list[FieldError]]:
    """An adjudicator's note: text of at most ``NOTE_MAX_LENGTH`` characters, required for a
    gold label (it says why the label is what it is)."""
    if note is None:
        note = ""
    if not isinstance(note, str):
        return "", [FieldError("note", "must be text")]
    note = note.strip()
    if required and not note:
        return note, [FieldError("note", "say why the gold label is what it is")]
    if len(note) > NOTE_MAX_LENGTH:
        return note, [FieldError("note", f"at most {NOTE_MAX_LENGTH} characters (got {len(note)})")]
    return note, []
