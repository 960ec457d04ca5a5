"""An annotator's flag on an item (issue 31, part 5): "This item is broken" or "I'm unsure",
with a reason. Pure Python, no Django: the rules of the value, shared by drafts, submits,
the preview, the results and the exports.

The flag travels inside the draft and the submitted answer as ``"flag"``: ``{"flag":
"broken", "reason": "unreadable", "note": "..."}`` or ``{"flag": "unsure", "note": "..."}``;
absent or ``null`` for none. The kind never sees it: ``flag_split`` takes it out first.

The rules (docs/annotation.md, "Flags"):

* **broken** needs a reason from ``BROKEN_REASONS``; "other" needs a note. The kind's questions
  are then not required (whatever was answered is kept as a draft would be), and the
  annotation counts nowhere: it is left out of k's *answers* (not of its slots), alpha, the
  human majority and every agreement, and counted apart as ``n_broken``. On an attention check
  or a qualification item it is not graded: neither a pass nor a miss.
* **unsure** takes an optional note and needs a full answer; the answer counts as any other
  (the flag is shown and counted, ``n_unsure``), so alpha is not raised by dropping the hard
  items.
* A flag never shortens the page: the goal box, the step openings and the minimum seconds
  apply as to any submit."""

from __future__ import annotations

from typing import Any, Final

from annotate.kinds.base import FieldError

FLAG_BROKEN: Final = "broken"
FLAG_UNSURE: Final = "unsure"
FLAGS: Final = {FLAG_BROKEN: "This item is broken", FLAG_UNSURE: "I'm unsure"}

# Why an item is broken: the page's short list (the note says more; "other" needs it).
BROKEN_REASONS: Final = {
    "unreadable": "The procedure is unreadable or empty",
    "goal_mismatch": "The goal does not match the procedures",
    "other": "Other (say what in the note)",
}
REASON_OTHER: Final = "other"

# The note's length, enforced by the server (the page's field has the same maxlength).
FLAG_NOTE_MAX_LENGTH: Final = 500

FLAG_KEY: Final = "flag"


def flag_split(answer: Any) -> tuple[Any, Any]:
    """``answer`` without its flag, and the flag's raw value (None when there is none). An
    answer that is not an object is returned as it is (the kind says what is wrong with it)."""
    if not isinstance(answer, dict) or FLAG_KEY not in answer:
        return answer, None
    rest = {key: value for key, value in answer.items() if key != FLAG_KEY}
    return rest, answer[FLAG_KEY]


def flag_clean_draft(value: Any) -> dict[str, str] | None:
    """A draft's flag, kept leniently as typed (a draft may be incomplete): a known flag with
    its reason if known and its note cut to the limit; anything else is no flag."""
    if not isinstance(value, dict) or value.get("flag") not in FLAGS:
        return None
    kept = {"flag": value["flag"]}
    if value["flag"] == FLAG_BROKEN and value.get("reason") in BROKEN_REASONS:
        kept["reason"] = value["reason"]
    note = value.get("note")
    if isinstance(note, str) and note:
        kept["note"] = note[:FLAG_NOTE_MAX_LENGTH]
    return kept


def flag_validate(value: Any) -> tuple[dict[str, str] | None, list[FieldError]]:
    """A submitted flag, strictly: ``(None, [])`` for none; ``({"flag", "reason", "note"}, [])``
    when valid; else the problems, each naming its field (``flag``, ``flag.reason``,
    ``flag.note``)."""
    if value is None:
        return None, []
    if not isinstance(value, dict):
        return None, [FieldError("flag", 'must be an object like {"flag": "unsure"} or null')]
    errors: list[FieldError] = []
    unknown = sorted(set(value) - {"flag", "reason", "note"})
    if unknown:
        errors.append(FieldError(f"flag.{unknown[0]}", "is not a field of a flag (flag, reason, note)"))
    flag = value.get("flag")
    if flag not in FLAGS:
        errors.append(FieldError("flag.flag", f"must be one of: {', '.join(FLAGS)}"))
        return None, errors
    reason = value.get("reason")
    note = value.get("note")
    if note is None:
        note = ""
    if not isinstance(note, str):
        errors.append(FieldError("flag.note", "must be text"))
        note = ""
    elif len(note) > FLAG_NOTE_MAX_LENGTH:
        errors.append(FieldError("flag.note", f"must be at most {FLAG_NOTE_MAX_LENGTH} characters"))
    note = note.strip()
    if flag == FLAG_BROKEN:
        if reason in (None, ""):
            errors.append(FieldError("flag.reason", "Say why the item is broken: choose a reason."))
        elif reason not in BROKEN_REASONS:
            errors.append(FieldError("flag.reason", f"must be one of: {', '.join(BROKEN_REASONS)}"))
        elif reason == REASON_OTHER and not note:
            errors.append(FieldError("flag.note", 'With "Other", say in the note what is wrong with the item.'))
    elif reason not in (None, ""):
        errors.append(FieldError("flag.reason", "only a broken flag takes a reason; say more in the note"))
    if errors:
        return None, errors
    return {"flag": flag, "reason": reason if flag == FLAG_BROKEN else "", "note": note}, []
