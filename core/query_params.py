"""Query-string parameters read one way by the pages and the API: a DRF serializer declares
them (the API's schema documents the same serializer), :func:`query_params_clean` checks the
request's values against it, and a bad value is an ``InvalidInput`` naming the parameter and
the values it accepts: a 400, the API's ``{name: [problem]}`` (its exception handler) or a
page's 400 page (``AppErrorMiddleware``), never a value silently read as the default.

:class:`QueryFlag` is a true/false parameter (``include_test``), :class:`QueryChoice` one of
a few words (``format``); :func:`query_format` the ``format`` of a page with downloads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from rest_framework import serializers

from core.app_errors import InvalidInput


class QueryFlag(serializers.BooleanField):
    """true or false (also 1/0, yes/no, on/off, as DRF reads them); anything else is refused
    with the values it accepts."""

    default_error_messages = {"invalid": "Must be true or false (also 1 or 0, yes or no)."}


class QueryChoice(serializers.ChoiceField):
    """One of ``choices``; anything else is refused with the choices."""

    default_error_messages = {"invalid_choice": '"{input}" is not accepted: one of {accepted}.'}

    def to_internal_value(self, data: Any) -> Any:
        if data == "" and self.allow_blank:
            return ""
        try:
            return self.choice_strings_to_values[str(data)]
        except KeyError:
            self.fail("invalid_choice", input=data, accepted=", ".join(self.choice_strings_to_values))


def query_params_clean(
    serializer_class: type[serializers.Serializer], params: Mapping[str, Any], **options: Any
) -> dict[str, Any]:
    """The query parameters ``serializer_class`` declares (made with ``options``), read from
    ``params`` (``request.GET``, ``request.query_params``; a repeated one's last value), with
    their defaults; ``InvalidInput`` naming each bad one (a 400). Parameters the serializer
    does not declare are not read."""
    # A plain dict: given a QueryDict, DRF would read an absent flag as an unticked checkbox.
    serializer = serializer_class(data={name: params[name] for name in params}, **options)
    if not serializer.is_valid():
        raise InvalidInput(fields={name: [str(m) for m in problems] for name, problems in serializer.errors.items()})
    return dict(serializer.validated_data)


class FormatQuery(serializers.Serializer):
    """A page's ``format``: one of its downloads (``formats``); absent, the page itself."""

    format = QueryChoice(choices=(), required=False)

    def __init__(self, *args: Any, formats: Sequence[str] = (), **kwargs: Any):
        super().__init__(*args, **kwargs)
        cast(QueryChoice, self.fields["format"]).choices = list(formats)


def query_format(params: Mapping[str, Any], formats: Sequence[str]) -> str:
    """The ``format`` of a page with downloads: one of ``formats``, or ``""`` when absent
    (the page itself); anything else is a 400 naming the parameter and ``formats``."""
    return query_params_clean(FormatQuery, params, formats=formats).get("format", "")
