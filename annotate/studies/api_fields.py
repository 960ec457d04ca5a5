"""The studies API's shared pieces: column bounds, strict fields and filters, the error answers
every endpoint documents, and query parameters checked (a bad value is a 400 that names the parameter, never a 500)."""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from core.api_schema import ApiErrorSerializer
from core.app_errors import InvalidInput
from core.query_params import QueryFlag, query_params_clean
from core.serializer_fields import StrictBooleanField

# Column bounds: a value the database could not hold is a 400 naming the field, never a 500.
SMALL_INT_MAX = 32_767  # PositiveSmallIntegerField
INT_MAX = 2_147_483_647  # PositiveIntegerField
SEED_MAX = 2**32 - 1
INSTRUCTIONS_MAX_CHARS = 100_000
MAX_SAMPLE = 100_000  # judged generations sampled into one study (the items file's own limit)
STATUS_OPEN, STATUS_CLOSED = "open", "closed"
LABEL_HAS_FAILURE, LABEL_NO_FAILURE = "has_failure", "no_failure"
EXPORT_FORMATS = ("jsonl", "csv")


class Flag(StrictBooleanField):
    """A boolean whose absence from a multipart form means its default (DRF reads an absent
    HTML checkbox as false; an API caller who leaves a field out means the default): true or
    false in JSON, the words true or false in a form (core/serializer_fields.py)."""

    default_empty_html = serializers.empty


class IntegerFilter(django_filters.NumberFilter):
    """A whole-number filter: 0.5 is a 400 naming the parameter (django-filter's NumberFilter
    reads a decimal), as the schema's integer says."""

    field_class = forms.IntegerField


class Text(serializers.CharField):
    """Text that must arrive as text: a number, list or object is refused by name (DRF's
    CharField would turn 7 into "7")."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class Pattern(serializers.RegexField):
    """A RegexField that, like ``Text``, takes only text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanFilter(django_filters.ChoiceFilter):
    """true/false (also 1/0, yes/no); anything else is a 400 naming the parameter (django-filter's
    BooleanFilter ignores a value it cannot read and filters nothing)."""

    VALUES = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("choices", [(v, v) for v in self.VALUES])
        super().__init__(*args, **kwargs)

    def filter(self, qs, value):  # with a ``method``, django-filter calls the method instead
        if value in (None, ""):
            return qs
        return qs.filter(**{f"{self.field_name}__{self.lookup_expr}": self.VALUES[value]})


# The 503 of an endpoint that needs the study's kind (``KindNotInstalled``: a study made with a
# kind whose package has since been removed from this installation), as ``_503=``.
KIND_NOT_INSTALLED = "The study's kind is not installed on this server (named): what needs the kind cannot be read"


def error_responses(**responses: str) -> dict[int, OpenApiResponse]:
    """The error answers every endpoint shares, plus its own (status: description)."""
    shared = {
        401: OpenApiResponse(ApiErrorSerializer, description="Not logged in (no token or session)"),
        403: OpenApiResponse(ApiErrorSerializer, description="The researcher or admin role is needed"),
    }
    for code, description in responses.items():
        number = int(code.lstrip("_"))
        shared[number] = OpenApiResponse(ApiErrorSerializer, description=description)
    return shared


def query_int(request: Any, name: str, default: int, maximum: int | None = None) -> int:
    """A non-negative integer parameter (at most ``maximum``), or its default when absent;
    ``InvalidInput`` naming the parameter (a 400) otherwise."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0 or (maximum is not None and value > maximum):
        limit = f" at most {maximum}" if maximum is not None else ""
        raise InvalidInput(fields={name: f"expected a non-negative integer{limit}, got {raw!r}"})
    return value


class IncludeTestQuery(serializers.Serializer):
    include_test = QueryFlag(
        required=False,
        default=False,
        help_text="1/true: also test participants (a researcher's own runs, marked is_test); default: left out, "
        "as on the study page",
    )


INCLUDE_TEST = OpenApiParameter(
    "include_test",
    OpenApiTypes.BOOL,
    description=("1/true: also test participants (a researcher's own runs, marked is_test); default: left out"),
)


def include_test(request: Any, *, offered: bool = True) -> bool:
    """The ``include_test`` parameter of a page or an API request (core/query_params.py: a bad
    value is a 400 naming it and its values). ``offered=False``: the endpoint's numbers always
    leave test participants out, so asking for them is refused too, rather than ignored."""
    value = query_params_clean(IncludeTestQuery, request.GET)["include_test"]
    if value and not offered:
        raise InvalidInput(
            fields={
                "include_test": "test participants are always left out of this report; accepted: false "
                "(or leave the parameter out)"
            }
        )
    return value
