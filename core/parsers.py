"""The REST API's JSON parser: core/strict_json.py's rules for every API body (no NaN or
Infinity, bounded nesting, integers and strings, no NUL), so a hostile body is a 400 that
names the field, never a RecursionError or a database error."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core import strict_json


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = getattr(settings, "API_MAX_BODY_BYTES", 10_000_000)
        body = stream.read(limit + 1) if stream is not None else b""
        try:
            return strict_json.loads(body, max_bytes=limit)
        except strict_json.StrictJSONError as exc:
            field = exc.field or "body"
            # The one error body (docs/api.md, Errors): code parse_error, the message, the field's problem.
            raise ParseError({"detail": f"{field}: {exc.message}", field: [exc.message]}) from None
