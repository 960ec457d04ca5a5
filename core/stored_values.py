"""Whether values fit the columns they are about to be written to, checked before writing.

Importers read values from files written by someone else; a value the database refuses
(a topic name longer than its ``varchar(100)``, a NUL character, which PostgreSQL refuses in
text and jsonb, a lone surrogate, NaN in a JSON column, an integer beyond its column, a
decimal with more whole digits than its column) must
become an error that names the file, the line and the field, on SQLite (which would store
it silently) and PostgreSQL (which would raise mid-transaction) alike. The limits come from
the model's own fields (``max_length``, the integer type), so there is one mechanism and no
copies of the numbers.

No Django imports: a model is only asked for ``_meta.get_field(name)``. Errors are
``core.strict_json.StrictJSONError`` with ``field`` set to the label the caller gives (the
name of the field in the file) and, inside JSON, the path below it (``steps[3]``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from core.strict_json import StrictJSONError, check_int, check_text, check_value

# The ranges of Django's integer fields as every supported database stores them. (SQLite
# stores any 64-bit integer in any integer column; PostgreSQL refuses what is out of range.
# Checking the standard ranges makes both behave like PostgreSQL.)
INTEGER_RANGES: dict[str, tuple[int, int]] = {
    "SmallIntegerField": (-(2**15), 2**15 - 1),
    "IntegerField": (-(2**31), 2**31 - 1),
    "BigIntegerField": (-(2**63), 2**63 - 1),
    "PositiveSmallIntegerField": (0, 2**15 - 1),
    "PositiveIntegerField": (0, 2**31 - 1),
    "PositiveBigIntegerField": (0, 2**63 - 1),
}
UNBOUNDED = sys.maxsize

__all__ = ["INTEGER_RANGES", "StrictJSONError", "check_field_value", "check_stored_values", "max_length_of"]


def max_length_of(model: Any, name: str) -> int:
    """The ``max_length`` of a model's text field (a field without one is a mistake here)."""
    limit = getattr(model._meta.get_field(name), "max_length", None)
    if not isinstance(limit, int):
        raise TypeError(f"{model.__name__}.{name} has no max_length")
    return limit


def check_field_value(field: Any, value: Any, *, label: str) -> None:
    """Raise ``StrictJSONError(label, ...)`` when ``value`` cannot be stored in ``field``."""
    if value is None:
        return
    kind = field.get_internal_type()
    if kind in INTEGER_RANGES:
        low, high = INTEGER_RANGES[kind]
        check_int(value, field=label, minimum=low, maximum=high)
    elif kind == "JSONField":
        check_value(value, field=label, max_string_length=UNBOUNDED)
    elif kind == "DecimalField":
        _check_decimal(value, field, label)
    elif isinstance(value, str):
        max_length = getattr(field, "max_length", None) or UNBOUNDED
        check_text(value, field=label, max_length=max_length)


def _check_decimal(value: Any, field: Any, label: str) -> None:
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise StrictJSONError(label, "must be a number") from None
    if not number.is_finite():
        raise StrictJSONError(label, "must be a finite number (not NaN or Infinity)")
    whole_digits = field.max_digits - field.decimal_places
    if abs(number) >= Decimal(10) ** whole_digits:
        raise StrictJSONError(label, f"must be less than {10**whole_digits:,} in absolute value")


def check_stored_values(model: Any, values: Mapping[str, Any], *, labels: Mapping[str, str] | None = None) -> None:
    """Check each ``values[name]`` against ``model``'s field ``name``; the first problem is
    raised, its field named ``labels[name]`` (default: ``name``)."""
    labels = labels or {}
    for name, value in values.items():
        check_field_value(model._meta.get_field(name), value, label=labels.get(name, name))
