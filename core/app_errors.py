"""The application's error family: what a service raises when it refuses, each class with the
HTTP status it is answered with. The API answers every one through one handler
(``core.errors.api_exception_handler``) and the pages through one decorator
(``core.errors.app_errors``), so a view never guesses an error's meaning from its Python type.
No Django.

A refusal carries a ``message`` for the person who caused it and ``fields``: each field (a
form field, a body key, a query parameter) with its problems. Its API body is
``{field: [problem, ...], ..., "detail": message}``; ``detail`` is left out when the refusal
is its field problems alone (``InvalidInput({"seed": "..."})``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class AppError(Exception):
    """A refusal meant for the person who caused it (HTTP ``status``, 400 unless a subclass
    says otherwise)."""

    status = 400

    def __init__(self, message: str = "", fields: Mapping[str, str | Iterable[str]] | None = None):
        self.fields: dict[str, list[str]] = {
            name: [problems] if isinstance(problems, str) else list(problems)
            for name, problems in (fields or {}).items()
        }
        self.has_summary = bool(message)
        self.message = message or "; ".join(f"{name}: {'; '.join(problems)}" for name, problems in self.fields.items())
        super().__init__(self.message)

    def __str__(self) -> str:  # the message as given, also where a subclass is a KeyError
        return self.message

    def body(self) -> dict[str, Any]:
        """The API body: each field's problems, then ``detail`` (the message) when there is one
        beyond them."""
        body: dict[str, Any] = {name: list(problems) for name, problems in self.fields.items()}
        if self.has_summary or not body:
            body["detail"] = self.message
        return body


class InvalidInput(AppError, ValueError):
    """Input that cannot be used, naming the field(s) (400). A ``ValueError`` too, so code that
    caught the bare ``ValueError`` services raised before still catches it."""

    status = 400


class NotFound(AppError):
    """What the request names does not exist, or is not the requester's to see (404)."""

    status = 404


class Conflict(AppError, ValueError):
    """The request does not apply in the current state of what it acts on (409), e.g. pausing
    a finished run. A ``ValueError`` too, like ``InvalidInput``."""

    status = 409


class Forbidden(AppError):
    """The requester may not do this (403)."""

    status = 403


class Unavailable(AppError):
    """Something the request needs upstream (an LLM endpoint, Prolific, a model) is not
    available now (503)."""

    status = 503
