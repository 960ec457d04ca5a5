"""Serializer fields the API shares (DRF's, made as strict as the schema they publish).

``StrictCharField``: a JSON body's text field takes a string only. DRF's ``CharField`` turns a
number into its text (``{"name": 0}`` registers a model named "0"), so a body the schema calls
invalid would be accepted; a form's values are all strings and pass as before."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.utils import html


class StrictCharField(serializers.CharField):
    default_error_messages = {"not_a_string": "expected a string, got {kind}"}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string", kind=type(data).__name__)
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """true or false, never a number or another word standing for one (DRF's ``BooleanField``
    takes 0, 1, "yes", ... where the schema says boolean): a JSON body's true or false, and in a
    form (which has text only) the words ``true`` and ``false``."""

    default_error_messages = {"not_a_boolean": "expected true or false, got {value!r}"}

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        if isinstance(data, str) and data in ("true", "false") and _from_form(self):
            return data == "true"
        self.fail("not_a_boolean", value=data if isinstance(data, (str, int, float)) else type(data).__name__)
        raise AssertionError  # fail() raises


def _from_form(field: serializers.Field) -> bool:
    """Whether the field's serializer reads a form (a QueryDict) rather than a JSON body."""
    parent = field.parent
    while parent is not None and not hasattr(parent, "initial_data"):
        parent = parent.parent
    return parent is not None and html.is_html_input(parent.initial_data)


class NotBool:
    """A number that true or false is not (DRF's numeric fields read them as 1 and 0, since a
    bool is an int in Python)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool):
            self.fail("invalid")  # type: ignore[attr-defined]
        return super().to_internal_value(data)  # type: ignore[misc]


class StrictIntegerField(NotBool, serializers.IntegerField):
    pass


class StrictFloatField(NotBool, serializers.FloatField):
    pass


class FormNull:
    """A nullable number that a form (multipart) can also clear: a form has no null, so the
    empty value and the word ``null`` both stand for it there, as ``null`` does in JSON (where
    an empty string is not a number, and is refused as the schema says)."""

    text_in_json = False

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if isinstance(data, str) and getattr(self, "allow_null", False):
            if data.strip().lower() == "null" and _from_form(self):  # type: ignore[arg-type]
                data = None
            elif not data.strip() and not _from_form(self):  # type: ignore[arg-type]
                self.fail("invalid")  # type: ignore[attr-defined]
        elif self.text_in_json and data not in (None, serializers.empty) and not _from_form(self):  # type: ignore[arg-type]
            self.fail("invalid")  # type: ignore[attr-defined]  # the schema says text ("0.30"), not a number
        return super().run_validation(data)  # type: ignore[misc]


class FormNullDecimalField(FormNull, serializers.DecimalField):
    """A decimal as the schema writes it: text ("0.30") in JSON as in a form."""

    text_in_json = True


class FormNullIntegerField(FormNull, StrictIntegerField):
    pass
