"""Annotation exports: the rows every read outside the study page sees (``annotation_list``,
``annotation_export_rows``), JSONL (the agreement report's input) and CSV (for spreadsheets).

A file export is written to a temporary file beside the target and renamed when complete,
so a failed export never leaves a partial file."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from django.db.models import QuerySet

from annotate.kinds import kind_get
from annotate.kinds.base import StudyKind
from annotate.kinds.columns import AnswerRecord
from annotate.models import Annotation, Study, StudyItem
from annotate.review.models import GoldLabel
from core.csv_cells import csv_writer
from core.record_output import atomic_output

# The columns every study's rows have, whatever its kind; the kind's own columns follow them
# (``StudyKind.export_column_names``: critical failure's has_failure, failures,
# gold_has_failure and expected_has_failure; multiple choice's choice and expected_choice; a
# rubric's answer.<question id> and expected_answer; ...).
EXPORT_FIELDS = (
    "item_id",
    "annotator",
    "comments",
    "study",
    "round",
    "guideline_version",
    "submitted_at",
    "wall_seconds",
    "active_seconds",
    "excluded",
    "exclusion_reason",
    # the annotator's flag: "broken" (left out of agreement) or "unsure" (counted), empty for none
    "flag",
    "flag_reason",
    "flag_note",
    # provenance
    "source",
    "surplus",
    "late",
    "correct",
    "kind",
    "topic",
    "l1_hash",
    "l2_hash",
    "interface_version",
    "first_served_at",
    "goal_acknowledged_at",
    "steps_opened",
    "click_log",
    "prolific_study_id",
    "prolific_session_id",
    "attention_seed",
    "item_source",
    # review and adjudication (annotate/review/): the latest decision ("" not reviewed; a
    # rejected annotation is also excluded, a corrected one carries the correction in its
    # answer columns and the annotator's own in submitted_answer), and the item's gold label
    "review",
    "reviewed_at",
    "submitted_answer",
    "gold_answer",
    "gold_note",
    "is_test",
    "answer",
)


def export_fields(kind: StudyKind) -> tuple[str, ...]:
    """The columns of a study's export rows: the shared ones, then its kind's own."""
    return (*EXPORT_FIELDS, *kind.export_column_names())


class ExportRows(Iterator[dict[str, Any]]):
    """The export rows of one study (an iterator of dicts) with their columns (``fields``), so
    a CSV header is right even when there is no row."""

    def __init__(self, fields: tuple[str, ...], rows: Iterator[dict[str, Any]]):
        self.fields = fields
        self._rows = rows

    def __next__(self) -> dict[str, Any]:
        return next(self._rows)


def annotation_list(study: Study, *, include_test: bool = False) -> QuerySet[Annotation]:
    """The study's annotations as every read outside the study page sees them: without those of
    test participants unless ``include_test`` (exports, reports, the API)."""
    qs = Annotation.objects.filter(study=study)
    return qs if include_test else qs.filter(is_test=False)


def annotation_export_rows(
    study: Study, *, include_test: bool = False, items: QuerySet[StudyItem] | None = None
) -> ExportRows:
    """One dict per annotation in the export shape (the agreement report's input), oldest first;
    a test participant's annotations only with ``include_test`` (marked ``is_test``); only the
    annotations of ``items`` when given (the data manager's "export the selection"). The
    study's kind is looked up at once, so a kind not installed is refused before a download
    starts rather than in the middle of it."""
    kind = kind_get(study.kind)
    qs = annotation_list(study, include_test=include_test)
    if items is not None:
        qs = qs.filter(item__in=items.values("pk"))
    qs = qs.select_related("item", "annotator", "participation", "study").order_by("submitted_at", "pk")
    return ExportRows(export_fields(kind), _export_rows(study, kind, qs))


def _export_rows(study: Study, kind: StudyKind, qs: QuerySet[Annotation]) -> Iterator[dict[str, Any]]:
    golds = {
        g.item_id: g for g in GoldLabel.objects.filter(study=study).only("item_id", "answer", "has_failure", "note")
    }
    for a in qs.iterator(chunk_size=1000):
        gold = golds.get(a.item_id)
        record = AnswerRecord(
            answer=a.answer if isinstance(a.answer, dict) else {},
            has_failure=a.has_failure,
            failures=a.failures,
            broken=a.broken,
            gold_answer=gold.answer if gold else None,
            gold_has_failure=gold.has_failure if gold else None,
        )
        yield {
            "item_id": a.item.item_id,
            "annotator": a.annotator.pid,
            "comments": a.comments,
            "study": study.slug,
            "round": study.round,
            "guideline_version": a.guideline_version,
            "submitted_at": a.submitted_at.isoformat(),
            "wall_seconds": a.wall_seconds,
            "active_seconds": a.active_seconds,
            "excluded": a.excluded,
            "exclusion_reason": a.exclusion_reason,
            "flag": a.flag,
            "flag_reason": a.flag_reason,
            "flag_note": a.flag_note,
            "source": a.source,
            "surplus": a.surplus,
            "late": a.late,
            "correct": a.correct,
            "kind": study.kind,
            "topic": a.item.topic,
            "l1_hash": a.l1_hash,
            "l2_hash": a.l2_hash,
            "interface_version": a.interface_version,
            "first_served_at": a.first_served_at.isoformat(),
            "goal_acknowledged_at": a.goal_acknowledged_at.isoformat() if a.goal_acknowledged_at else None,
            "steps_opened": a.steps_opened,
            "click_log": a.click_log,
            "prolific_study_id": a.participation.prolific_study_id,
            "prolific_session_id": a.participation.prolific_session_id,
            # The seed of the participant's attention-check plan (annotate/participation/attention_plan.py):
            # with it, the positions of their checks can be drawn again.
            "attention_seed": a.participation.attention_seed,
            "item_source": a.item.source,
            # The kind's whole cleaned answer (its own columns below take parts of it).
            "answer": a.answer,
            # A test participant's annotation (only in an export asked for with include_test).
            "is_test": a.is_test,
            "review": a.review,
            "reviewed_at": a.reviewed_at.isoformat() if a.reviewed_at else None,
            "submitted_answer": a.submitted_answer,
            "gold_answer": record.gold_answer,
            "gold_note": gold.note if gold else None,
            # The kind's own columns (StudyKind.answer_columns, then its known-answer column).
            **kind.answer_cells(record),
            **kind.known_answer_cells(a.item.expected),
        }


JSON_CELLS = {"steps_opened", "click_log", "item_source", "answer", "submitted_answer", "gold_answer"}


def annotation_export(*, study: Study, output: str | Path, include_test: bool = False) -> int:
    """Write one JSON line per annotation of the study (a test participant's only with
    ``include_test``); returns the number of lines."""
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with atomic_output(output) as handle:
        for row in annotation_export_rows(study, include_test=include_test):
            handle.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
            count += 1
    return count


def _csv_cell(name: str, value: Any) -> Any:
    if name in JSON_CELLS or isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return ""
    return value  # booleans as every CSV writes them (core/csv_cells.py): true/false


def annotation_csv_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """CSV text, one chunk per row (for a streaming HTTP response); list and object cells are
    JSON, and no cell starts a formula (core/csv_cells.py). The header is the rows' columns
    (``ExportRows.fields``: the shared ones, then the study's kind's own; other rows: the
    shared ones)."""
    fields = rows.fields if isinstance(rows, ExportRows) else EXPORT_FIELDS
    buffer = io.StringIO()
    writer = csv_writer(buffer)
    writer.writerow(fields)
    yield buffer.getvalue()
    for row in rows:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow([_csv_cell(name, row.get(name)) for name in fields])
        yield buffer.getvalue()
