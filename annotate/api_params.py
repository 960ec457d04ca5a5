"""Query parameters of the annotate app's API views, checked: a bad value is a 400 that
names the parameter, never a 500."""
from __future__ import annotations

from typing import Any

from rest_framework.response import Response


def query_int(request: Any, name: str, default: int, maximum: int | None = None) -> int | Response:
    """A non-negative integer parameter (at most ``maximum``), its default when absent, or
    the 400 response to return."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0 or (maximum is not None and value > maximum):
        limit = f" at most {maximum}" if maximum is not None else ""
        return Response({name: [f"expected a non-negative integer{limit}, got {raw!r}"]}, status=400)
    return value
