"""What every study kind provides. Pure Python: no Django imports.

A kind is data plus a few functions: how an input record becomes an item, how a draft is
cleaned, how a submission is validated, and how an answer is compared with a known answer
(attention checks, qualification). Templates are named, not imported, so the web layer
renders whatever the registered kind asks for."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROLE_MAIN = "main"
ROLE_ATTENTION = "attention"
ROLE_QUALIFICATION = "qualification"
ROLES = (ROLE_MAIN, ROLE_ATTENTION, ROLE_QUALIFICATION)


class ItemRecordError(ValueError):
    """A bad input record: ``field`` names the offending field (``steps[2]`` style)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return f"field '{self.field}': {self.message}" if self.field else self.message


@dataclass
class ItemSpec:
    """One item to annotate, independent of where it came from (JSONL file, judged generations)."""

    item_id: str
    topic: str
    goal: str
    reference_steps: list[str]
    candidate_steps: list[str]
    role: str = ROLE_MAIN
    expected_has_failure: bool | None = None
    # Multiple-choice kinds: the 0-based index of the right candidate (the item's label).
    expected_choice: int | None = None
    explanation: str = ""
    source: dict[str, Any] = field(default_factory=dict)
    # Kinds with several questions: the known answers of an attention check or gold item,
    # by question (constraint faithfulness: {"steps_correct": "no", ...}).
    expected_answer: dict[str, Any] | None = None


@dataclass
class FieldError:
    """A validation message for the annotator: ``field`` says where (``failures[2].description``)."""

    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


@dataclass(frozen=True)
class StudyKind:
    key: str
    label: str
    # Template of the item page body (the frame, timer and submit bar are shared).
    item_template: str
    # Training material: a JSON codebook next to the kind's module (None: no training).
    codebook_path: Path | None
    # The consent and guidelines text a new study starts with (researchers can edit it).
    default_instructions: str
    parse_record: Callable[[dict[str, Any]], ItemSpec]
    clean_draft: Callable[[Any, int, int], dict[str, Any]]
    validate_submission: Callable[[Any, int, int], "tuple[dict[str, Any] | None, list[FieldError]]"]
    # The binary label of a cleaned answer (compared with an item's known answer).
    answer_label: Callable[[dict[str, Any]], bool]
    # Names of the steps the annotator must open before submitting, e.g. ["L1.1", "L2.1"].
    required_openings: Callable[[int, int], list[str]]
    # Whether a submit needs the "I've read the goal" acknowledgement (Figure 7).
    requires_goal_acknowledgement: bool = True
    # Whether a cleaned answer matches the item's known answer (None: the item has none).
    # Default: ``answer_label`` compared with the item's ``expected_has_failure``.
    answer_correct: "Callable[[dict[str, Any], Any], bool | None] | None" = None
    # The annotator page: None for the shared one-item page (annotate/item.html with
    # ``item_template``), else a template that shows a page of one or more items.
    page_template: str | None = None
    # On the shared one-item page: the kind's script (window.AnnotateKind, loaded before
    # annotate.js) and the keyboard help under the form.
    item_script: str = "annotate/critical_failure.js"
    shortcuts_template: str = "annotate/kinds/critical_failure_shortcuts.html"
    # Extra template context of one item (e.g. the parts of a goal to highlight), or None.
    item_context: "Callable[[Any], dict[str, Any]] | None" = None
    # The minimum seconds per item of a new study that does not set its own (None: the
    # How2Everything 90 s of annotate/constants.py).
    min_seconds_default: int | None = None
