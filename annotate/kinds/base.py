"""What every study kind provides. Pure Python: no Django imports.

A kind is data plus a few functions: how an input record becomes an item, how a draft is
cleaned, how a submission is validated, and how an answer is compared with a known answer
(attention checks, qualification). Templates are named, not imported, so the web layer
renders whatever the registered kind asks for: annotate's own, or those of the ``templates/``
folder of the kind's package (``package_dir``), found once the kind is registered."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol

from annotate.kinds.columns import AnswerColumn, AnswerFilter, AnswerRecord, Column

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


class ShownItem(KnownAnswerItem, Protocol):
    """What a kind's ``item_context`` reads of the study item it is given (``StudyItem`` is one):
    its candidate steps and its source record besides its role and known answer."""

    @property
    def candidate_steps(self) -> Any: ...

    @property
    def source(self) -> Any: ...


# -- the hooks, as the shared code calls them (mypy checks each kind's functions against them) --


class RecordParser(Protocol):
    """An input record (one JSONL line) as an item; ``ItemRecordError`` naming the field."""

    def __call__(self, record: dict[str, Any], /) -> ItemSpec: ...


class DraftCleaner(Protocol):
    """What can be kept of a draft (never a refusal), given the item's reference and candidate
    step counts."""

    def __call__(self, draft: Any, n_reference: int, n_candidate: int, /) -> dict[str, Any]: ...


class SubmissionValidator(Protocol):
    """A submitted answer cleaned, or the problems under their fields."""

    def __call__(
        self, answer: Any, n_reference: int, n_candidate: int, /
    ) -> tuple[dict[str, Any] | None, list[FieldError]]: ...


class RequiredOpenings(Protocol):
    def __call__(self, n_reference: int, n_candidate: int, /) -> list[str]: ...


class AnswerLabel(Protocol):
    def __call__(self, cleaned: dict[str, Any], /) -> bool: ...


class AnswerCorrect(Protocol):
    """Whether a cleaned answer matches the known answer of the item it answers (the submit
    path passes the ``StudyItem``; None: the item has no known answer)."""

    def __call__(self, cleaned: dict[str, Any], item: KnownAnswerItem, /) -> bool | None: ...


class ExpectedFromAnswer(Protocol):
    def __call__(self, cleaned: dict[str, Any], /) -> Any: ...


class AnswerSummary(Protocol):
    """One line of text for a stored answer (the study page, the data manager, the API's
    ``label``)."""

    def __call__(self, answer: dict[str, Any], /) -> str: ...


class ExpectedSummary(Protocol):
    """One line of text for an item's known answer (``StudyItem.expected``, never None)."""

    def __call__(self, expected: Any, /) -> str: ...


class ItemContext(Protocol):
    def __call__(self, item: ShownItem, /) -> dict[str, Any]: ...


# The functions a kind names by dotted path (they read the database, which a definition may not
# import): ``kind_function_problems`` checks that each resolves and takes these arguments.
class ResultsFunction(Protocol):
    """The kind's results for a study (the study page's and the report API's)."""

    def __call__(self, study: Any, /) -> Any: ...


class TierRecordsFunction(Protocol):
    """The lines of one tier of a study's items (``StudyKind.tiers``)."""

    def __call__(self, study: Any, tier: str, /) -> list[dict[str, Any]]: ...


class ReadyFunction(Protocol):
    """What the kind sets up once the app has started (registrations with other apps)."""

    def __call__(self) -> None: ...


class RoundAlphaFunction(Protocol):
    """The alpha of a pilot round from its rows (``ROUND_ROW_FIELDS`` and the kind's own columns)."""

    def __call__(self, study: Any, rows: list[dict[str, Any]], /) -> dict[str, Any]: ...


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
REPORTS = (REPORT_AGREEMENT, REPORT_METRIC_AGREEMENT)


def _function(path: str | None) -> Callable[..., Any] | None:
    """The function a dotted path names (imported on first use, so a kind's definition stays
    free of Django while its results read the database)."""
    if path is None:
        return None
    module, _, name = path.rpartition(".")
    function: Callable[..., Any] = getattr(import_module(module), name)
    return function


def answer_summary_default(answer: dict[str, Any]) -> str:
    """A kind without its own ``answer_summary``: each answered field with its value
    (``rating 4``), comments left out; "no answer" when nothing is answered."""
    parts = [
        f"{name} {value}"
        for name, value in answer.items()
        if name != "comments" and value is not None and value != "" and value != []
    ]
    return " · ".join(parts) if parts else "no answer"


def expected_summary_default(expected: Any) -> str:
    if isinstance(expected, dict):
        return answer_summary_default(expected)
    return str(expected)


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
    parse_record: RecordParser
    clean_draft: DraftCleaner
    validate_submission: SubmissionValidator
    # Names of the steps the annotator must open before submitting, e.g. ["L1.1", "L2.1"].
    required_openings: RequiredOpenings = lambda n_reference, n_steps, /: []
    # The has_failure label of a cleaned answer, for kinds whose answers carry one (None: the
    # kind's annotations store no has_failure).
    answer_label: AnswerLabel | None = None
    # Whether a cleaned answer matches the item's known answer (None from the function: the
    # item has none; None as the hook: the kind never knows). It receives the item itself
    # (KnownAnswerItem: its role and ``expected``), never ``expected`` alone.
    answer_correct: AnswerCorrect | None = None
    # A cleaned answer as the item's known answer (``expected``, the shape ``answer_correct``
    # reads): how a gold label becomes a qualification item's known answer in a later study and
    # how an annotation is checked against the gold label (None: the kind cannot, and says so).
    expected_from_answer: ExpectedFromAnswer | None = None
    # One line for a stored answer ("has_failure", "choice 2", "rating 4"), shown wherever an
    # annotation is listed (None: ``answer_summary_default``, each answered field and value).
    answer_summary: AnswerSummary | None = None
    # One line for an item's known answer (None: ``expected_summary_default``).
    expected_summary: ExpectedSummary | None = None
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
    item_context: ItemContext | None = None
    # The column of an item's known answer (``StudyItem.expected`` as it is) in the export rows
    # and the items API (None: the kind's known answer appears in neither).
    known_answer_column: Column | None = None
    # The kind's own columns of an annotation's export row (and of a pilot round's rows), after
    # the shared ones (annotate/studies/exports.py): critical failure's has_failure and failures,
    # multiple choice's choice, a rubric's one per question (``answer.<question id>``).
    answer_columns: tuple[AnswerColumn, ...] = ()
    # The kind's own fields of an annotation in the annotations API, after the shared ones
    # (annotate/studies/item_apis.py), read from its ``AnswerRecord`` (the gold label left out):
    # critical failure's has_failure and failures, multiple choice's choice. And the kind's
    # own filters there (critical failure's label, multiple choice's choice); a study of
    # another kind refuses them by name.
    api_columns: tuple[AnswerColumn, ...] = ()
    api_filters: tuple[AnswerFilter, ...] = ()
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
    # The kind's results for a study, as dotted paths of functions taking the study
    # (``ResultsFunction``; dotted because they read the database, which a definition may not
    # import; ``kind_function_problems`` checks them): what the study page shows
    # (``results_template`` renders it under the name ``results_name``, the key the report API
    # also answers with), the same with the intervals the API adds, and the alpha of a pilot
    # round's rows (``RoundAlphaFunction``). None: the kind has none.
    results_function: str | None = None
    api_results_function: str | None = None
    results_template: str | None = None
    results_name: str | None = None
    # The OpenAPI 3.0 schema of the results (the report API's ``results_name`` property).
    results_schema: dict[str, Any] | None = None
    round_alpha_function: str | None = None
    # How the study page names a pilot round's alpha (the column's parenthesis, the note under
    # the table), and what the kind's own results hold (the note on a report page that does
    # not apply to the kind). Text, shown as written.
    round_alpha_label: str = ""
    round_alpha_note: str = ""
    results_summary: str = ""
    # The reports that apply to the kind's studies (REPORTS).
    reports: frozenset[str] = frozenset()
    # The tiers of a study's items the kind exports as lines (multiple choice's gold and harder
    # goal-step task lines: the study page's links, the tiers download, export_choice_tier), and
    # the dotted function giving one tier's lines (``TierRecordsFunction``). Empty: none.
    tiers: tuple[str, ...] = ()
    tier_records_function: str | None = None
    # A dotted function the app calls once it has started (``ReadyFunction``), for what the
    # kind offers other apps (multiple choice: the human accuracy the goal-step leaderboards
    # show beside the models'); the kinds registered at start-up only.
    ready_function: str | None = None
    # The kind's own pages and endpoints: the dotted path of a module with ``urlpatterns`` (pages,
    # in annotate's URL namespace at the site's root) and/or ``api_urlpatterns`` (under /api/),
    # included by annotate/urls.py and api_urls.py for the kinds registered when the URL
    # configuration is read (start-up). None: none.
    urls: str | None = None
    # The version of the kind's annotation interface (its templates and scripts), in the page
    # state and stored on every annotation (provenance); change it when the interface changes.
    # Empty: "<key>-ui-1".
    interface_version: str = ""

    def __post_init__(self) -> None:
        if not self.interface_version:
            object.__setattr__(self, "interface_version", f"{self.key}-ui-1")

    def known_answer_cells(self, expected: Any) -> dict[str, Any]:
        """The item's known answer under the kind's column (empty when the kind has none)."""
        return {} if self.known_answer_column is None else {self.known_answer_column.name: expected}

    def export_column_names(self) -> tuple[str, ...]:
        """The kind's own columns of an export row, in order: its answer columns, then its
        known-answer column."""
        known = () if self.known_answer_column is None else (self.known_answer_column.name,)
        return (*(column.name for column in self.answer_columns), *known)

    def answer_cells(self, record: AnswerRecord) -> dict[str, Any]:
        """The kind's answer columns of one annotation."""
        return {column.name: column.cell(record) for column in self.answer_columns}

    def api_cells(self, record: AnswerRecord) -> dict[str, Any]:
        """The kind's own fields of one annotation in the annotations API."""
        return {column.name: column.cell(record) for column in self.api_columns}

    def summary(self, answer: Any) -> str:
        """One line for a stored answer (``answer_summary``, or each answered field)."""
        answer = answer if isinstance(answer, dict) else {}
        return (self.answer_summary or answer_summary_default)(answer)

    def known_answer_summary(self, expected: Any) -> str | None:
        """One line for an item's known answer (None when it has none)."""
        return None if expected is None else (self.expected_summary or expected_summary_default)(expected)

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

    def tier_records(self, study: Any, tier: str) -> list[dict[str, Any]]:
        """The lines of one of the kind's ``tiers`` (ValueError for a tier it does not have)."""
        function = _function(self.tier_records_function)
        if tier not in self.tiers or function is None:
            raise ValueError(f"the study kind {self.key} has no tier {tier!r}; its tiers: {', '.join(self.tiers)}")
        records: list[dict[str, Any]] = function(study, tier)
        return records

    def ready(self) -> None:
        """Run the kind's ``ready_function`` (once, when the app starts)."""
        function = _function(self.ready_function)
        if function is not None:
            function()

    def package_dir(self) -> Path | None:
        """The folder of the kind's package: that of the module defining its ``parse_record``
        (a kind's package defines its own parser; its ``templates/`` folder there is found by
        annotate/kinds/template_loader.py). None when the parser's module has no file."""
        module = sys.modules.get(getattr(self.parse_record, "__module__", None) or "")
        path = getattr(module, "__file__", None)
        return Path(path).parent if path else None


def dotted_function_problems(name: str, path: str | None, arguments: tuple[str, ...]) -> list[str]:
    """What is wrong with one dotted function (``name``: where it is declared): a path that does
    not import, a name that is not callable, or one that cannot take ``arguments``."""
    if path is None:
        return []
    try:
        function = _function(path)
    except (ImportError, AttributeError, ValueError) as exc:
        return [f"{name} = {path!r} does not resolve: {exc}"]
    if not callable(function):
        return [f"{name} = {path!r} is not callable"]
    try:
        inspect.signature(function).bind(*arguments)
    except TypeError as exc:
        return [f"{name} = {path!r} cannot be called with ({', '.join(arguments)}): {exc}"]
    return []


# What each dotted function of a kind is called with: the study, and a round's rows.
_DOTTED_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "results_function": ("study",),
    "api_results_function": ("study",),
    "round_alpha_function": ("study", "rows"),
    "tier_records_function": ("study", "tier"),
    "ready_function": (),
}


# What a kind's (or a kind source's) ``urls`` module holds: its pages', its endpoints' routes.
URL_LISTS = ("urlpatterns", "api_urlpatterns")


def urls_problems(owner: str, path: str | None) -> list[str]:
    """What is wrong with a ``urls`` module: one that does not import, or holds neither route
    list (``URL_LISTS``), or one that is not a list. Empty: none, or a good one."""
    if path is None:
        return []
    try:
        module = import_module(path)
    except ImportError as exc:
        return [f"{owner}.urls = {path!r} does not import: {exc}"]
    lists = {name: getattr(module, name) for name in URL_LISTS if hasattr(module, name)}
    if not lists:
        return [f"{owner}.urls = {path!r} has neither {' nor '.join(URL_LISTS)}"]
    return [f"{owner}.urls = {path!r}: {name} is not a list" for name, v in lists.items() if not isinstance(v, list)]


def kind_function_problems(kind: StudyKind) -> list[str]:
    """What is wrong with a kind's dotted functions: a path that does not import, a name that
    is not callable, or a function that cannot be called as the shared code calls it
    (``ResultsFunction``: the study; ``RoundAlphaFunction``: the study and the rows), and a
    ``urls`` module without routes (``urls_problems``). Empty: every path resolves and matches."""
    problems = []
    for attribute, arguments in _DOTTED_FUNCTIONS.items():
        problems += dotted_function_problems(f"{kind.key}.{attribute}", getattr(kind, attribute), arguments)
    problems += urls_problems(kind.key, kind.urls)
    if kind.results_name is not None and kind.results_function is None:
        problems.append(f"{kind.key}.results_name is set but results_function is not")
    if kind.tiers and kind.tier_records_function is None:
        problems.append(f"{kind.key}.tiers is set but tier_records_function is not")
    return problems
