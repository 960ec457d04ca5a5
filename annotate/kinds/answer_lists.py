"""The rule the kinds share for a list in an answer (the failures listed, the steps marked):
absent is empty, anything but a list is refused, a longer one is cut with a message. Pure."""

from __future__ import annotations

from typing import Any

from annotate.kinds.base import FieldError


def answer_list(
    answer: dict[str, Any], field: str, maximum: int, errors: list[FieldError], *, not_a_list: str, too_many: str
) -> list[Any]:
    """The list an answer gives under ``field`` (empty when absent), cut to ``maximum`` items; a
    value that is not a list adds ``not_a_list`` to ``errors``, a longer list ``too_many``."""
    raw = answer.get(field) or []
    if not isinstance(raw, list):
        errors.append(FieldError(field, not_a_list))
        return []
    if len(raw) > maximum:
        errors.append(FieldError(field, too_many))
        return raw[:maximum]
    return raw
