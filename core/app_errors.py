"""The application's error family: what a service raises when it refuses, each class with the
HTTP status it is answered with. The API answers every one through one handler
(``core.errors.api_exception_handler``) and the pages through one decorator
(``core.errors.app_errors``), so a view never guesses an error's meaning from its Python type.
No Django.

A refusal carries a ``message`` for the person who caused it, ``fields`` (each form field,
body key or query parameter with its problems), a machine-readable ``code`` (the class's, or
a finer one the raiser gives: ``run_state``, ``prolific_no_token``, ...) and, where there is
one, ``what_to_do``. Its API body is one shape for every refusal (docs/api.md, "Errors")::

    {"code": "invalid_input", "detail": "seed: expected ...", "seed": ["expected ..."],
     "what_to_do": "..."}

``code`` and ``detail`` are always there; each refused field is a key with its list of
problems; ``what_to_do`` and ``extra`` keys (e.g. Prolific's ``upstream_status``) only when
the refusal has them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class AppError(Exception):
    """A refusal meant for the person who caused it (HTTP ``status``, 400 unless a subclass
    says otherwise; ``code``, the class's unless the raiser names a finer one)."""

    status = 400
    code = "refused"

    def __init__(
        self,
        message: str = "",
        fields: Mapping[str, str | Iterable[str]] | None = None,
        *,
        code: str | None = None,
        what_to_do: str = "",
        status: int | None = None,
        extra: Mapping[str, Any] | None = None,
    ):
        self.fields: dict[str, list[str]] = {
            name: [problems] if isinstance(problems, str) else list(problems)
            for name, problems in (fields or {}).items()
        }
        self.message = message or "; ".join(f"{name}: {'; '.join(problems)}" for name, problems in self.fields.items())
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.what_to_do = what_to_do
        self.extra: dict[str, Any] = dict(extra or {})
        super().__init__(self.message)

    def __str__(self) -> str:  # the message as given, also where a subclass is a KeyError
        return self.message

    def body(self) -> dict[str, Any]:
        """The API body (module docstring): ``code``, ``detail``, each field's problems, then
        ``what_to_do`` and the extras when there are any."""
        body: dict[str, Any] = {"code": self.code, "detail": self.message}
        body.update({name: list(problems) for name, problems in self.fields.items()})
        if self.what_to_do:
            body["what_to_do"] = self.what_to_do
        body.update(self.extra)
        return body


class InvalidInput(AppError, ValueError):
    """Input that cannot be used, naming the field(s) (400). A ``ValueError`` too, so code that
    caught the bare ``ValueError`` services raised before still catches it."""

    status = 400
    code = "invalid_input"


class NotFound(AppError):
    """What the request names does not exist, or is not the requester's to see (404)."""

    status = 404
    code = "not_found"


class Conflict(AppError, ValueError):
    """The request does not apply in the current state of what it acts on (409), e.g. pausing
    a finished run. A ``ValueError`` too, like ``InvalidInput``."""

    status = 409
    code = "conflict"


class Forbidden(AppError):
    """The requester may not do this (403)."""

    status = 403
    code = "forbidden"


class Unavailable(AppError):
    """Something the request needs upstream (an LLM endpoint, Prolific, a model) is not
    available now (503)."""

    status = 503
    code = "unavailable"


class UpstreamFailed(AppError):
    """A service the request relies on answered with a failure or not at all (502): Prolific
    failing, unreachable or answering what cannot be read."""

    status = 502
    code = "upstream_failed"
