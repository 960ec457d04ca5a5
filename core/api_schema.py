"""The OpenAPI schema says what the API answers, refusals included (docs/api.md, "Errors").

``ApiAutoSchema`` (``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]``) adds to every operation the
refusals that its view can give whatever the view itself declares, each with the one error body
of ``core.errors.api_exception_handler`` (``ApiError``):

* 400 on every operation: any request may be refused before the view runs (a NUL character in a
  parameter, a body above its cap, a JSON body that is not strict JSON; core/middleware.py,
  core/strict_json.py), and every parameter and body is validated;
* 401 and 403 where the view needs a signed-in caller (every view but an ``AllowAny`` one);
* 404 where the path names an object (a path parameter) or the list is paginated (a page past the
  end is ``{"detail": "Invalid page."}``);
* 408 on every operation: a request body (any request may send one) that did not arrive in time
  is refused before the view runs (core/middleware.py);
* 415 where the operation takes a body: one in a content type the view's parsers do not read is
  refused when the view reads it;
* 429 where the view is throttled.

A method the path does not have is answered 405 (with the same body): that is no operation of
the schema, and the tests' check of every response (tests/schema_check.py) holds it to that.

A status the view declares itself keeps the view's description; its body schema also admits
``ApiError`` (``ApiErrorSerializer``) for 400 (the refusals before the view share that shape, not the view's).

A request serializer with ``unknown_keys_refused = True`` (it refuses a key it does not know, by
name) has ``additionalProperties: false``: the schema says what the serializer does.

A view with ``empty_query_value_is_default = True`` (a page's form sends its empty fields, which
mean the default) says that each optional query parameter may be empty. A list's
``min_length`` (a list body, a nested list, one form of a polymorphic body) is its ``minItems``. A decimal sent as text has a pattern that needs a digit and respects the field's digits and sign.

A related object a response names by a slug or string (``created_by``, ``first_round``) is
``nullable`` when its model field is: drf-spectacular reads ``allow_null`` only, which a
read-only relation never sets."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import AllowAny


class ApiErrorSerializer(serializers.Serializer):
    """A refusal, one shape for all (docs/api.md, Errors): `code`, machine-readable; `detail`,
    the whole message; each refused field, body key or query parameter with its list of
    problems (`{"seed": ["expected a non-negative integer"]}`); `what_to_do` when there is
    advice beyond the message."""

    code = serializers.CharField(help_text="What kind of refusal, for programs (docs/api.md, Errors)")
    detail = serializers.CharField(help_text="The whole message")
    what_to_do = serializers.CharField(required=False, help_text="What to do next, when the message does not say")


def error_response(description: str) -> OpenApiResponse:
    """A refusal an operation declares, with the one error body."""
    return OpenApiResponse(ApiErrorSerializer, description=description)


REFUSALS: dict[str, str] = {
    "400": (
        "Refused input: each field, body key or query parameter with its problems, and `detail` "
        "when the refusal has a message of its own; nothing was changed"
    ),
    "401": "Not logged in (no token or session)",
    "403": "The role this endpoint needs is missing",
    "404": "Nothing with this id or slug (or a page past the end of a list)",
    "408": "The request body did not arrive in time; nothing was changed",
    "415": "A body in a content type this endpoint does not read",
    "429": "Too many requests; try again later",
}


class ApiAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema with the refusals every operation can give (module docstring)."""

    def _refusal_codes(self) -> list[str]:
        codes = ["400", "408"]
        permissions = [type(permission) for permission in self.view.get_permissions()]
        if any(permission is not AllowAny for permission in permissions):
            codes += ["401", "403"]
        if self._path_has_parameters() or self._paginates():
            codes.append("404")
        if self._takes_body():
            codes.append("415")
        if self.view.get_throttles():
            codes.append("429")
        return codes

    def _path_has_parameters(self) -> bool:
        return "{" in self.path

    def _takes_body(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH") and self.get_request_serializer() is not None

    def _paginates(self) -> bool:
        return self.method == "GET" and self._get_paginator() is not None and self._is_list_view()

    def _error_ref(self) -> dict[str, str]:
        return self.resolve_serializer(ApiErrorSerializer, "response").ref

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        error = self._error_ref()
        for code in self._refusal_codes():
            declared = responses.get(code)
            if declared is None:
                responses[code] = {"content": {"application/json": {"schema": error}}, "description": REFUSALS[code]}
                continue
            content = declared.setdefault("content", {})
            body = content.get("application/json")
            if body is None:
                content["application/json"] = {"schema": error}
            elif code == "400" and body.get("schema") not in (None, error):
                body["schema"] = {"anyOf": [body["schema"], error]}
        return responses

    def _get_parameters(self):
        parameters = super()._get_parameters()
        if not getattr(self.view, "empty_query_value_is_default", False):
            return parameters
        for parameter in parameters:
            if parameter.get("in") != "query" or parameter.get("required"):
                continue
            schema = parameter.get("schema", {})
            if "enum" in schema:
                schema["enum"] = [*schema["enum"], ""]
                schema.pop("minLength", None)
            elif schema.get("type") == "string":
                schema.pop("minLength", None)
            else:
                parameter["schema"] = {"anyOf": [schema, {"type": "string", "maxLength": 0}]}
        return parameters

    def _get_request_for_media_type(self, serializer, direction="request"):
        schema, required = super()._get_request_for_media_type(serializer, direction)
        min_length = getattr(serializer, "min_length", None)
        if isinstance(serializer, serializers.ListSerializer) and min_length and isinstance(schema, dict):
            schema["minItems"] = min_length
        return schema, required

    def _unwrap_list_serializer(self, serializer, direction):
        schema = super()._unwrap_list_serializer(serializer, direction)
        min_length = getattr(serializer, "min_length", None)
        if isinstance(serializer, serializers.ListSerializer) and min_length and isinstance(schema, dict):
            schema = {**schema, "minItems": min_length}
        return schema

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, serializers.DecimalField) and schema.get("format") == "decimal" and "pattern" in schema:
            schema["pattern"] = decimal_pattern(field)
        return schema

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and getattr(serializer, "unknown_keys_refused", False):
            schema["additionalProperties"] = False
        return schema

    def _get_serializer_field_meta(self, field, direction):
        meta = super()._get_serializer_field_meta(field, direction)
        if _nullable_relation(field):
            meta["nullable"] = True
        return meta


def decimal_pattern(field: serializers.DecimalField) -> str:
    """The text of a DecimalField's values: at least one digit (drf-spectacular's pattern lets
    "", "-" and "." through, which the field refuses), at most its whole and decimal digits, and
    no sign when it takes no negative value."""
    whole, places = field.max_whole_digits, field.decimal_places
    sign = "" if field.min_value is not None and field.min_value >= 0 else "-?"
    fraction = rf"(?:\.\d{{0,{places}}})?" if places else ""
    integer = rf"\d{{1,{whole}}}" if whole is not None else r"\d+"
    alternatives = [integer + fraction] if whole != 0 else []
    if places:
        alternatives.append(rf"\.\d{{1,{places}}}")
    return rf"^{sign}(?:{'|'.join(alternatives)})$"


def _nullable_relation(field: Any) -> bool:
    """A relation (SlugRelatedField, StringRelatedField, ...) whose model field may be NULL."""
    if not isinstance(field, serializers.RelatedField) or field.allow_null:
        return False
    model = getattr(getattr(field.parent, "Meta", None), "model", None)
    if model is None or not field.source or "." in field.source:
        return False
    try:
        model_field = model._meta.get_field(field.source)
    except Exception:
        return False
    return bool(getattr(model_field, "null", False))


def schema_endpoints_canonical(endpoints: list[Any]) -> list[Any]:
    """SPECTACULAR_SETTINGS' preprocessing hook: the schema lists each endpoint by the API's one
    spelling, with the trailing slash; an old spelling kept as an alias (config/urls.py,
    ``slash_and_alias``) is left out."""
    return [
        endpoint for endpoint in endpoints if not (endpoint[0].startswith("/api/") and not endpoint[0].endswith("/"))
    ]
