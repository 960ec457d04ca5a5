"""Corpus documents as they arrive in record files, checked without Django.

A document row has an id, a text, and optionally a URL and a topic; the field names are
chosen by the user (``--id-field`` and friends). Also here: finding the record files of a
directory, filtered by an ``--include`` glob."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.record_files import RecordError, file_kind
from mining.procedure_records import web_url


@dataclass(frozen=True)
class DocumentFields:
    """Which field of a row holds what."""

    id: str = "id"
    text: str = "text"
    url: str = "url"
    topic: str = "topic"


@dataclass(frozen=True)
class DocumentRecord:
    doc_id: str
    text: str
    url: str
    topic: str  # "" when the row has none


def _scalar_text(raw: dict[str, Any], name: str) -> str | None:
    """The field as text: None when missing or null; numbers (ids in Parquet) become text."""
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool):
        raise RecordError(None, None, name, f"expected a string, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise RecordError(None, None, name, f"expected a string or a finite number, got {value}")
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        raise RecordError(None, None, name, f"expected a string, got {type(value).__name__}")
    return value


def parse_document_record(raw: dict[str, Any], fields: DocumentFields = DocumentFields()) -> DocumentRecord:
    """Check one row; raises ``RecordError`` naming the field that is wrong. A URL must
    be empty or http(s); whether the values fit their columns (the id's length, NUL
    characters) is checked against the model by the importer."""
    doc_id = _scalar_text(raw, fields.id)
    if doc_id is None or not doc_id.strip():
        raise RecordError(None, None, fields.id, "missing or empty id")
    text = raw.get(fields.text)
    if text is None:
        raise RecordError(None, None, fields.text, "missing text")
    if not isinstance(text, str):
        raise RecordError(None, None, fields.text, f"expected a string, got {type(text).__name__}")
    if not text.strip():
        raise RecordError(None, None, fields.text, "empty text")
    url = web_url(_scalar_text(raw, fields.url), fields.url)
    topic = (_scalar_text(raw, fields.topic) or "").strip()
    return DocumentRecord(doc_id=doc_id.strip(), text=text, url=url, topic=topic)


def _is_record_file(path: Path) -> bool:
    try:
        file_kind(path)
    except RecordError:
        return False
    return True


def corpus_files(path: str | Path, include: str | list[str] | None = None) -> list[Path]:
    """The record files to import from ``path``: the file itself, or every file below a
    directory (recursively, sorted, hidden files skipped) whose name, or path relative
    to the directory, matches ``include``. Without ``include``, every file of a
    supported type is taken; with it, a matching file of an unknown type is an error."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(str(path))
    if root.is_file():
        file_kind(root)  # raises for an unknown type
        return [root]
    found: list[Path] = []
    for candidate in sorted(root.rglob("*")):
        relative = candidate.relative_to(root)
        if not candidate.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        if include is None:
            if _is_record_file(candidate):
                found.append(candidate)
        elif any(
            fnmatch.fnmatch(candidate.name, glob) or fnmatch.fnmatch(relative.as_posix(), glob)
            for glob in ([include] if isinstance(include, str) else include)
        ):  # a list: any of its globs
            file_kind(candidate)
            found.append(candidate)
    return found
