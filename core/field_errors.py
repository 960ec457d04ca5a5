"""Refused input with one message per field (``FieldErrors``, the application error family's
``InvalidInput``), and the text check every form-like service shares, so a page shows form
errors and the API a 400 naming each field. No Django."""

from __future__ import annotations

from core.app_errors import InvalidInput


class FieldErrors(InvalidInput):
    """Refused input: ``errors`` maps each field to what is wrong with it (the API answers
    ``{field: [message]}``)."""

    def __init__(self, errors: dict[str, str]):
        super().__init__(fields=errors)
        self.errors = errors


def text_field_clean(
    errors: dict[str, str], field: str, value: object, *, max_length: int, required: bool = False
) -> str:
    """``value`` stripped, or ``""`` with the field's problem put in ``errors``: not text, a NUL,
    a control character or lone surrogate, longer than ``max_length``, or empty when required."""
    if value is None:
        value = ""
    if not isinstance(value, str):
        errors[field] = "must be text"
        return ""
    text = value.strip()
    if "\x00" in text:
        errors[field] = "must not contain a NUL character"
    elif any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF for c in text):
        errors[field] = "must not contain control characters"
    elif len(text) > max_length:
        errors[field] = f"must be at most {max_length} characters"
    elif required and not text:
        errors[field] = "is required"
    return text
