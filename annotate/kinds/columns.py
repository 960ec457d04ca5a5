"""The columns and filters a study kind adds to the export rows, the items API and the annotations
API, and the stored annotation they are read from. Pure Python: no Django imports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class AnswerRecord:
    """What a kind's own export and API columns read of one stored annotation (the export, the
    items and annotations APIs and a pilot round's rows build it): the cleaned answer, the has_failure label and the
    failures the shared submit path stored from it (``answer_label``; None and [] for a kind
    without), whether the annotator flagged the item broken (no answer then), and the item's
    gold label when one is adjudicated."""

    answer: dict[str, Any]
    has_failure: bool | None = None
    failures: list[dict[str, Any]] = field(default_factory=list)
    broken: bool = False
    gold_answer: Any = None
    gold_has_failure: bool | None = None


@dataclass(frozen=True)
class Column:
    """A column a kind adds to the export rows (JSONL, CSV) or the items API: its name, the
    OpenAPI 3.0 schema of one cell (the API schema is built from it) and what it holds."""

    name: str
    schema: dict[str, Any]
    description: str


@dataclass(frozen=True)
class AnswerColumn(Column):
    """A column of an annotation's export row, read from its ``AnswerRecord``."""

    cell: Callable[[AnswerRecord], Any]


@dataclass(frozen=True)
class AnswerFilter:
    """A filter a kind adds to the annotations API: its query parameter, the OpenAPI 3.0 schema
    of its value (an ``enum`` of words, or an ``integer`` with its bounds: the API refuses any
    other value by name), what it selects, and the stored fields a value selects
    (``lookups``: keyword arguments of a query, ``{"has_failure": True}``, so the kind imports
    no Django)."""

    name: str
    schema: dict[str, Any]
    description: str
    lookups: Callable[[Any], dict[str, Any]]

    def __post_init__(self) -> None:
        if "enum" not in self.schema and self.schema.get("type") != "integer":
            raise ValueError(f"the filter {self.name!r} needs an enum or an integer schema, not {self.schema!r}")
