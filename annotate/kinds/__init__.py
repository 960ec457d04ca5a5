"""The registry of study kinds: ``critical_failure``, ``multiple_choice`` and
``constraint_faithfulness``, each with its own templates, record parser and validators
(see annotate/kinds/base.py)."""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from annotate.kinds import constraint_faithfulness, critical_failure, multiple_choice
from annotate.kinds.base import StudyKind

_KINDS: dict[str, StudyKind] = {}


def kind_register(kind: StudyKind) -> None:
    if kind.key in _KINDS and _KINDS[kind.key] is not kind:
        raise ValueError(f"study kind {kind.key!r} is already registered")
    _KINDS[kind.key] = kind


def kind_get(key: str) -> StudyKind:
    try:
        return _KINDS[key]
    except KeyError:
        raise KeyError(f"unknown study kind {key!r}; known kinds: {', '.join(sorted(_KINDS))}") from None


def kind_choices() -> list[tuple[str, str]]:
    return [(kind.key, kind.label) for kind in _KINDS.values()]


@lru_cache(maxsize=None)
def codebook_get(key: str) -> dict[str, Any] | None:
    """The kind's training codebook (definition, categories, examples), or None."""
    kind = kind_get(key)
    if kind.codebook_path is None:
        return None
    with open(kind.codebook_path, encoding="utf-8") as handle:
        return json.loads(handle.read())


kind_register(critical_failure.KIND)
kind_register(multiple_choice.KIND)
kind_register(constraint_faithfulness.KIND)
