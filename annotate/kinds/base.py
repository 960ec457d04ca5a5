"""What every study kind provides. Pure Python: no Django imports.

A kind is data plus a few functions: how an input record becomes an item, how a draft is
cleaned, how a submission is validated, and how an answer is compared with a known answer
(attention checks, qualification). Templates are named, not imported, so the web layer
renders whatever the registered kind asks for."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol

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


ITEM_ID_MAX_LENGTH = 200


def record_item_id(record: dict[str, Any], *, key: str = "item_id") -> str:
    """An input record's item id (a whole number is taken as its text), stripped; refused
    naming ``key`` when missing, empty or longer than ``ITEM_ID_MAX_LENGTH``."""
    item_id = record.get(key)
    if isinstance(item_id, int) and not isinstance(item_id, bool):
        item_id = str(item_id)
    if not isinstance(item_id, str) or not item_id.strip():
        raise ItemRecordError("is required and must be a non-empty string", key)
    if len(item_id) > ITEM_ID_MAX_LENGTH:
        raise ItemRecordError(f"must be at most {ITEM_ID_MAX_LENGTH} characters", key)
    return item_id.strip()


@dataclass
class ItemSpec:
    """One item to annotate, independent of where it came from (JSONL file, judged generations)."""

    item_id: str
    topic: str
    goal: str
    reference_steps: list[str]
    candidate_steps: list[str]
    role: str = ROLE_MAIN
    # The item's known answer in the kind's own shape, JSON (None: none): critical failure the
    # has_failure of a check or gold item, multiple choice the 0-based index of the right
    # candidate (the item's label), constraint faithfulness the answers by question
    # ({"steps_correct": "no", ...}). Only the kind reads it (``answer_correct``).
    expected: Any = None
    explanation: str = ""
    source: dict[str, Any] = field(default_factory=dict)


class KnownAnswerItem(Protocol):
    """What a kind's ``answer_correct`` reads of a study item: its role and its known answer
    (``annotate.models.StudyItem`` is one; the kinds are pure and do not import it). A hook
    typed with it is checked by mypy against what the submit path passes: the item, not its
    ``expected``."""

    @property
    def role(self) -> str: ...

    @property
    def expected(self) -> Any: ...


@dataclass
class FieldError:
    """A validation message for the annotator: ``field`` says where (``failures[2].description``)."""

    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


# The reports a kind's studies have besides its results (a page, a download, the API, a command
# each checks the kind's ``reports`` before computing one).
REPORT_AGREEMENT = "agreement"  # the critical-failure agreement report (has_failure labels)
REPORT_METRIC_AGREEMENT = "metric_agreement"  # automatic metrics against the human majority
REPORT_CHOICE_TIERS = "choice_tiers"  # the gold and harder tiers as goal-step task lines
REPORTS = (REPORT_AGREEMENT, REPORT_METRIC_AGREEMENT, REPORT_CHOICE_TIERS)


# The names a known answer has in exports and the items API, one per built-in kind.
KNOWN_ANSWER_COLUMNS = ("expected_has_failure", "expected_choice", "expected_answer")


def _function(path: str | None) -> Callable[..., Any] | None:
    """The function a dotted path names (imported on first use, so a kind's definition stays
    free of Django while its results read the database)."""
    if path is None:
        return None
    module, _, name = path.rpartition(".")
    function: Callable[..., Any] = getattr(import_module(module), name)
    return function


@dataclass(frozen=True)
class StudyKind:
    """A study kind. Everything beyond the first six fields has a kind-neutral default: a kind
    says what it has (a script, shortcuts, known answers, results, reports) and the web layer,
    the API and the commands ask it instead of testing its key."""

    key: str
    label: str
    # Template of the item page body (the frame, timer and submit bar are shared).
    item_template: str
    # Training material: a JSON codebook in the kind's package (None: no training).
    codebook_path: Path | None
    # The consent and guidelines text a new study starts with (researchers can edit it).
    default_instructions: str
    parse_record: Callable[[dict[str, Any]], ItemSpec]
    clean_draft: Callable[[Any, int, int], dict[str, Any]]
    validate_submission: Callable[[Any, int, int], tuple[dict[str, Any] | None, list[FieldError]]]
    # Names of the steps the annotator must open before submitting, e.g. ["L1.1", "L2.1"].
    required_openings: Callable[[int, int], list[str]] = lambda n_reference, n_steps: []
    # The has_failure label of a cleaned answer, for kinds whose answers carry one (None: the
    # kind's annotations store no has_failure).
    answer_label: Callable[[dict[str, Any]], bool] | None = None
    # Whether a cleaned answer matches the item's known answer (None from the function: the
    # item has none; None as the hook: the kind never knows). It receives the item itself
    # (KnownAnswerItem: its role and ``expected``), never ``expected`` alone.
    answer_correct: Callable[[dict[str, Any], KnownAnswerItem], bool | None] | None = None
    # A cleaned answer as the item's known answer (``expected``, the shape ``answer_correct``
    # reads): how a gold label becomes a qualification item's known answer in a later study and
    # how an annotation is checked against the gold label (None: the kind cannot, and says so).
    expected_from_answer: Callable[[dict[str, Any]], Any] | None = None
    # Whether a submit needs the "I've read the goal" acknowledgement (Figure 7).
    requires_goal_acknowledgement: bool = False
    # The annotator page: None for the shared one-item page (annotate/item.html with
    # ``item_template``), else a template that shows a page of one or more items.
    page_template: str | None = None
    # On the shared one-item page: the kind's script (window.AnnotateKind, loaded before
    # annotate.js). The default serves a kind whose item template is a plain form part: the
    # draft is {name: value} of its named fields (annotate/static/annotate/form_kind.js).
    # The keyboard help under the form (None: none).
    item_script: str = "annotate/form_kind.js"
    shortcuts_template: str | None = None
    # Extra template context of one item (e.g. the parts of a goal to highlight; on a page of
    # items, each item's options), or None.
    item_context: Callable[[Any], dict[str, Any]] | None = None
    # The name the known answer has in exports and the items API (KNOWN_ANSWER_COLUMNS; None:
    # the kind's known answer appears in none of them).
    expected_column: str | None = None
    # The kind's own columns of an export row, from a cleaned answer (a rubric: one column per
    # question, ``answer.<question id>``), after the shared ones (None: none).
    export_cells: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # The minimum seconds per item of a new study that does not set its own (None: the
    # How2Everything 90 s of annotate/constants.py).
    min_seconds_default: int | None = None
    # Seconds an item typically takes (the consent page's expected time when the study's minimum
    # is lower; operational, the paper's figure in each kind's definition).
    typical_seconds_per_item: int = 90
    # What the kind's input file calls an item's fields where the name differs from the item's
    # own (``goal`` -> ``prompt``), so a storage error names the field of the file.
    file_field_names: dict[str, str] = field(default_factory=dict)
    # On a kind's own page (``page_template``): the guidance shown above the items.
    page_guidance: str = ""
    # The kind's results for a study, as dotted paths of functions taking the study: what the
    # study page shows (``results_template`` renders it under the name ``results_name``, the
    # key the report API also answers with), the same with the intervals the API adds, and
    # the alpha of a pilot round's row. None: the kind has none.
    results_function: str | None = None
    api_results_function: str | None = None
    results_template: str | None = None
    results_name: str | None = None
    round_alpha_function: str | None = None
    # How the study page names a pilot round's alpha (the column's parenthesis, the note under
    # the table), and what the kind's own results hold (the note on a report page that does
    # not apply to the kind). Text, shown as written.
    round_alpha_label: str = ""
    round_alpha_note: str = ""
    results_summary: str = ""
    # The reports that apply to the kind's studies (REPORTS).
    reports: frozenset[str] = frozenset()
    # The version of the kind's annotation interface (its templates and scripts), in the page
    # state and stored on every annotation (provenance); change it when the interface changes.
    # Empty: "<key>-ui-1".
    interface_version: str = ""

    def __post_init__(self) -> None:
        if not self.interface_version:
            object.__setattr__(self, "interface_version", f"{self.key}-ui-1")

    def known_answer_columns(self, expected: Any) -> dict[str, Any]:
        """The known answer under the export's and the API's names, None in the other kinds' columns."""
        columns: dict[str, Any] = dict.fromkeys(KNOWN_ANSWER_COLUMNS)
        if self.expected_column is not None:
            columns[self.expected_column] = expected
        return columns

    def export_columns(self, answer: dict[str, Any]) -> dict[str, Any]:
        """The kind's own export columns of an answer (empty when it has none)."""
        return self.export_cells(answer) if self.export_cells is not None else {}

    def has_failure(self, cleaned: dict[str, Any]) -> bool | None:
        """The has_failure label an annotation stores (None for kinds without one)."""
        return self.answer_label(cleaned) if self.answer_label is not None else None

    def is_correct(self, cleaned: dict[str, Any], item: KnownAnswerItem) -> bool | None:
        """Whether the answer matches the item's known answer (None: no known answer)."""
        return self.answer_correct(cleaned, item) if self.answer_correct is not None else None

    def gold_expected(self, cleaned: dict[str, Any]) -> Any:
        """The known answer a gold label stands for (None when the kind has no such hook)."""
        return self.expected_from_answer(cleaned) if self.expected_from_answer is not None else None

    def results(self, study: Any, **options: Any) -> Any:
        """The kind's results for a study (None when the kind has none)."""
        function = _function(self.results_function)
        return function(study, **options) if function is not None else None

    def api_results(self, study: Any) -> Any:
        """The results as the report API gives them (with intervals)."""
        function = _function(self.api_results_function or self.results_function)
        return function(study) if function is not None else None

    def round_alpha(self, study: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """The alpha of a pilot round (``alpha`` and whatever else the kind reports with it)."""
        function = _function(self.round_alpha_function)
        return function(study, rows) if function is not None else {"alpha": None}

    def has_report(self, report: str) -> bool:
        return report in self.reports
