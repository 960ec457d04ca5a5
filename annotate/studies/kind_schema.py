"""The parts of the API schema that each study kind declares (annotate/kinds/base.py), read from
the registry when the schema is generated (each request of /api/schema/), so a kind registered
after start-up (a stored rubric, a kind a test registers) is documented as soon as it is
installed, and one taken away is no longer:

* an item of the items API carries its kind's known-answer column (``known_answer_column``):
  one optional property per column name of the registered kinds;
* the report API carries its kind's results under ``results_name``: one optional property per
  results name, typed by the kind's ``results_schema``;
* an annotation of the annotations API carries its kind's own fields (``api_columns``), and the
  list takes its kind's own filters (``api_filters``, as query parameters: the view's filter
  set for the schema, annotate/studies/item_apis.py, reads ``api_filter_schemas``).

A response carries only the property of its own study's kind; several kinds that share a name
(every rubric's ``rubric_results``) share the property, and where their schemas differ the
property is any of them."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension

from annotate.kinds import kind_list
from annotate.kinds.base import StudyKind

ANY_RESULTS: dict[str, Any] = {"type": "object", "description": "The kind declares no shape of its results"}


def _merged(entries: list[tuple[StudyKind, dict[str, Any], str]]) -> dict[str, Any]:
    """One property of several kinds' declarations: their schema (any of them where they
    differ), described with the kinds it belongs to."""
    schemas: list[dict[str, Any]] = []
    for _, schema, _ in entries:
        if schema not in schemas:
            schemas.append(schema)
    kinds = ", ".join(sorted({kind.key for kind, _, _ in entries}))
    descriptions = "; ".join(dict.fromkeys(description for _, _, description in entries if description))
    merged: dict[str, Any] = dict(schemas[0]) if len(schemas) == 1 else {"anyOf": schemas}
    merged["description"] = (
        f"Studies of kind {kinds} only: {descriptions}" if descriptions else f"Studies of kind {kinds} only"
    )
    return merged


def known_answer_properties() -> dict[str, dict[str, Any]]:
    """The items API's known-answer properties of every registered kind, by column name."""
    by_name: dict[str, list[tuple[StudyKind, dict[str, Any], str]]] = {}
    for kind in kind_list():
        column = kind.known_answer_column
        if column is not None:
            by_name.setdefault(column.name, []).append((kind, column.schema, column.description))
    return {name: _merged(entries) for name, entries in sorted(by_name.items())}


def results_properties() -> dict[str, dict[str, Any]]:
    """The report API's results properties of every registered kind, by results name."""
    by_name: dict[str, list[tuple[StudyKind, dict[str, Any], str]]] = {}
    for kind in kind_list():
        if kind.results_name is not None:
            schema = kind.results_schema or ANY_RESULTS
            by_name.setdefault(kind.results_name, []).append((kind, schema, kind.results_summary))
    return {name: _merged(entries) for name, entries in sorted(by_name.items())}


def api_column_properties() -> dict[str, dict[str, Any]]:
    """The annotations API's own fields of every registered kind, by name."""
    by_name: dict[str, list[tuple[StudyKind, dict[str, Any], str]]] = {}
    for kind in kind_list():
        for column in kind.api_columns:
            by_name.setdefault(column.name, []).append((kind, column.schema, column.description))
    return {name: _merged(entries) for name, entries in sorted(by_name.items())}


def api_filter_schemas() -> dict[str, dict[str, Any]]:
    """The annotations API's own filters of every registered kind, by parameter name: the
    schema of the value, described with the kinds that take it."""
    by_name: dict[str, list[tuple[StudyKind, dict[str, Any], str]]] = {}
    for kind in kind_list():
        for answer_filter in kind.api_filters:
            by_name.setdefault(answer_filter.name, []).append((kind, answer_filter.schema, answer_filter.description))
    return {name: _merged(entries) for name, entries in sorted(by_name.items())}


def _with_properties(auto_schema: Any, serializer: Any, direction: str, extra: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = auto_schema._map_basic_serializer(serializer, direction)
    schema.setdefault("properties", {}).update(extra)  # optional: not added to ``required``
    return schema


class StudyItemSchema(OpenApiSerializerExtension):
    """An item of the items API: its serializer's fields and the kinds' known-answer columns."""

    target_class = "annotate.studies.item_apis.StudyItemSerializer"

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return _with_properties(auto_schema, self.target, direction, known_answer_properties())


class StudyReportSchema(OpenApiSerializerExtension):
    """The report API's body: its serializer's fields and the kinds' results."""

    target_class = "annotate.reports.apis.StudyReportSerializer"

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return _with_properties(auto_schema, self.target, direction, results_properties())


class StudyAnnotationSchema(OpenApiSerializerExtension):
    """An annotation of the annotations API: its serializer's fields and the kinds' own."""

    target_class = "annotate.studies.item_apis.AnnotationSerializer"

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return _with_properties(auto_schema, self.target, direction, api_column_properties())
