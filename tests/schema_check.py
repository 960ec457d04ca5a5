"""Every response of the API that a test receives keeps the promises of the OpenAPI schema
(docs/testing.md, "Responses checked against the schema").

Loaded for the whole suite by tests/conftest.py (``pytest_plugins``): each response that Django's
test ``Client`` (and so DRF's ``APIClient``, which derives from it) receives for a path under
``/api/`` (the schema and its docs pages aside, ``NOT_OPERATIONS``) is checked against the schema
drf-spectacular generates in this process, by schemathesis (OpenAPI 3's ``nullable``, ``$ref``,
``anyOf``, the status codes' wildcards), as ``tests/test_api_schema_conformance.py`` checks the
responses to its generated requests:

* the method and path name an operation of the schema (its path template matched; an old
  spelling without the trailing slash or with the ``.json`` suffix, ``/api/topics.json``, is the
  operation it spells, and a redirect from it to the one spelling is not the operation's answer);
  a path the schema does not have is answered 404, a method the path does not have 405 (or
  401/403, which DRF answers first), or either a refusal of any request before a view runs (400,
  404, 408: ``BEFORE_ANY_VIEW_STATUSES``), always with the one error body;
* the status code is one the operation documents;
* the content type is one the operation documents for that status;
* a JSON body is valid against the documented schema for that status and content type.

A violation fails the test that received the response: ``SchemaViolation`` (an
``AssertionError``) is raised where the response is received, naming the operation, the status
and the first schema error with its path in the body; a test that swallows it (``except
Exception``) still fails once it returns (``pytest_runtest_call``).

The schema is generated once per process and kept for what it depends on: the URL configuration
(``ROOT_URLCONF``, which a test may override) and the registered study kinds (each kind adds
what it declares, annotate/studies/kind_schema.py), so a test that registers a kind is checked
against a schema that has it. The queries the generation runs (the stored rubrics' kinds) are
not logged, so a test that counts its queries counts its own.

Not checked: a streamed body (a download read in chunks: its status and content type are); the
browsable API's HTML pages (``BROWSABLE_FORMAT``); responses of the live server (no test sends a
request under ``/api/`` to it)."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import pytest

# Paths under /api/ that are not operations of the schema: the schema itself and its docs pages;
# Prolific's webhook receiver (a plain Django view that Prolific's servers call, signed instead of
# authenticated, prolific/webhook_views.py; docs/prolific.md says what it answers), which is no
# endpoint of the API for its clients. (A view that leaves itself out, ``schema = None`` as the
# API root's list of links, is not one either.)
NOT_OPERATIONS = ("/api/schema/", "/api/docs/", "/api/redoc/", "/api/prolific/webhook/")
# Statuses a path the schema does not have, or a method its path does not have, may be answered,
# with the one error body: 404 and 405, and the refusals of any request before a view runs
# (core/middleware.py: 400 for a NUL character or a body refused, 408 for a body that did not
# arrive in time, 404 for a path integer beyond 64 bits), and 401/403, which DRF answers before
# it looks at the method.
BEFORE_ANY_VIEW_STATUSES = frozenset({400, 404, 408})
UNKNOWN_PATH_STATUSES = BEFORE_ANY_VIEW_STATUSES
UNKNOWN_METHOD_STATUSES = BEFORE_ANY_VIEW_STATUSES | {401, 403, 405}
# A format suffix (the route's ``format``, config/urls.py view_routes): ``/api/topics.json`` is
# ``/api/topics/``; a suffix no renderer has (``.csv``) names nothing (404).
JSON_FORMAT = "json"
# DRF's browsable API: the same answers rendered as HTML pages for people (format ``api``, by a
# suffix or ``?format=api``), which the schema, a description of the JSON API, does not describe.
BROWSABLE_FORMAT = "api"
# Schemas kept at once (a test that registers a kind and one that takes it away again).
SCHEMAS_KEPT = 4


class SchemaViolation(AssertionError):
    """A response the OpenAPI schema does not describe."""


@dataclass
class LoadedSchema:
    """The schema of one URL configuration and set of kinds, read by schemathesis."""

    raw: dict[str, Any]
    schema: Any
    kinds: tuple[Any, ...]  # kept alive, so that their ids in the cache's key are theirs
    error_validator: Any = field(default=None)

    def error_body_problem(self, body: Any) -> str | None:
        """Why ``body`` is not the one error body (``ApiError``), or None."""
        if self.error_validator is None:
            import jsonschema_rs

            self.error_validator = jsonschema_rs.validator_for(self.raw["components"]["schemas"]["ApiError"])
        for error in self.error_validator.iter_errors(body):
            return f"at {_pointer(error.instance_path)}: {error.message}"
        return None


_schemas: OrderedDict[tuple[Any, ...], LoadedSchema] = OrderedDict()
_lock = threading.Lock()
_unraised: list[SchemaViolation] = []  # violations of the running test, in case one was swallowed
_checked: list[float] = [0, 0.0, 0]  # responses checked in this process, the seconds it took, schemas generated


def _kinds() -> tuple[Any, ...]:
    """The registered kinds, without asking the kinds' sources (no query)."""
    from annotate.kinds import kind_choices, kind_get

    return tuple(kind_get(key) for key, _ in kind_choices())


def _key(kinds: tuple[Any, ...]) -> tuple[Any, ...]:
    from django.conf import settings

    return (settings.ROOT_URLCONF, *((kind.key, id(kind)) for kind in kinds))


@contextmanager
def _queries_unlogged() -> Iterator[None]:
    """The checker's queries are not the test's (``django_assert_num_queries`` counts what is logged)."""
    from django.db import connections

    opened = list(connections.all(initialized_only=True))
    forced = [connection.force_debug_cursor for connection in opened]
    for connection in opened:
        connection.force_debug_cursor = False
    try:
        yield
    finally:
        for connection, value in zip(opened, forced, strict=True):
            connection.force_debug_cursor = value


def schema_now() -> LoadedSchema:
    """The schema as /api/schema/ would serve it now, generated once for what it depends on."""
    with _lock:
        key = _key(_kinds())
        loaded = _schemas.get(key)
        if loaded is None:
            loaded = _generate()
            _schemas[key] = loaded
            # Generating asks the kinds' sources, which may register a stored rubric's kind.
            _schemas[_key(loaded.kinds)] = loaded
        for stale in list(_schemas)[:-SCHEMAS_KEPT]:
            del _schemas[stale]
        _schemas.move_to_end(key)
        return loaded


def _generate() -> LoadedSchema:
    import schemathesis
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    _checked[2] += 1
    with _queries_unlogged():
        generated = SchemaGenerator().get_schema(request=None, public=True)
    raw = json.loads(OpenApiJsonRenderer().render(generated, renderer_context={}))
    return LoadedSchema(raw=raw, schema=schemathesis.openapi.from_dict(raw), kinds=_kinds())


def _pointer(path: Any) -> str:
    return "/" + "/".join(str(part) for part in path) if path else "the body's root"


def _as_schemathesis_response(response: Any, status: int) -> Any:
    import requests
    from schemathesis.core.transport import Response

    headers = {name.lower(): [value] for name, value in response.items()}
    content = b"" if response.streaming else response.content
    return Response(
        status_code=status, headers=headers, content=content, request=requests.PreparedRequest(), elapsed=0, verify=True
    )


def _content_type(response: Any) -> str:
    return (response.get("Content-Type") or "").split(";")[0].strip().lower()


def _route(response: Any) -> tuple[Any, str | None]:
    """The view class the request's path was routed to (None: no route, or a view function) and
    the format suffix the route took (None: none)."""
    from django.urls import Resolver404

    try:
        match = response.resolver_match  # resolved when first read
        return getattr(match.func, "cls", None), match.kwargs.get("format")
    except Resolver404:
        return None, None


def _operation(schema: Any, method: str, path: str, suffix: str | None) -> tuple[Any, bool]:
    """The operation ``method path`` is, and whether ``path`` is its one spelling."""
    if suffix is not None:
        if suffix != JSON_FORMAT:
            return None, False
        return schema.find_operation_by_path(method, path[: path.rindex("." + suffix)] + "/"), False
    operation = schema.find_operation_by_path(method, path)
    if operation is not None:
        return operation, True
    if not path.endswith("/"):
        return schema.find_operation_by_path(method, path + "/"), False
    return None, False


def _browsable(suffix: str | None, query: str) -> bool:
    """A request for the browsable API's HTML (``BROWSABLE_FORMAT``)."""
    return suffix == BROWSABLE_FORMAT or BROWSABLE_FORMAT in parse_qs(query).get("format", [])


def _path_exists(schema: Any, path: str, suffix: str | None) -> bool:
    """Whether some method of the schema has ``path`` (spelled either way; a format suffix no
    renderer has is not a spelling)."""
    return any(
        _operation(schema, method, path, suffix)[0] is not None for method in ("GET", "POST", "PUT", "PATCH", "DELETE")
    )


def _json_body(response: Any) -> Any:
    if response.streaming or not _content_type(response).endswith("json"):
        return None
    try:
        return json.loads(response.content)
    except ValueError:
        return None


def response_problem(method: str, path: str, response: Any, suffix: str | None = None) -> str | None:
    """What is wrong with ``response`` to ``method path`` (routed with the format ``suffix``)
    by the schema, or None."""
    loaded = schema_now()
    status = response.status_code
    lookup = "GET" if method == "HEAD" else method
    operation, canonical = _operation(loaded.schema, lookup, path, suffix)
    if operation is None:
        allowed = UNKNOWN_METHOD_STATUSES if _path_exists(loaded.schema, path, suffix) else UNKNOWN_PATH_STATUSES
        what = "an undocumented method of a documented path" if allowed is UNKNOWN_METHOD_STATUSES else "no operation"
        if status not in allowed:
            return f"{method} {path} is {what} of the schema, answered {status} (expected one of {sorted(allowed)})"
        problem = loaded.error_body_problem(_json_body(response))
        return (
            None if problem is None else f"{method} {path} ({what}) answered {status} without the error body, {problem}"
        )
    label = operation.label if operation.path == path else f"{operation.label} ({method} {path})"
    if not canonical and 300 <= status < 400:
        return None  # a redirect to the one spelling
    definition = operation.responses.find_by_status_code(status)
    if definition is None:
        documented = ", ".join(operation.responses.status_codes)
        return f"{label} answered {status}, a status the schema does not document for it (documented: {documented})"
    documented_types = list(definition.definition.get("content", {}))
    received = _content_type(response)
    if documented_types and status != 204 and method != "HEAD" and not _type_documented(received, documented_types):
        return f"{label} answered {status} as {received or 'no content type'}, not {', '.join(documented_types)}"
    if method == "HEAD" or response.streaming:
        return None
    return _body_problem(operation, _as_schemathesis_response(response, status), label, status)


def _type_documented(received: str, documented: list[str]) -> bool:
    from schemathesis.core import media_types

    try:
        parts = media_types.parse(received)
    except ValueError:
        return False
    return any(media_types.matches_parts(media_types.parse(option), parts) for option in documented)


def _body_problem(operation: Any, response: Any, label: str, status: int) -> str | None:
    from schemathesis.core.failures import Failure, FailureGroup
    from schemathesis.openapi.checks import JsonSchemaError

    try:
        operation.validate_response(response)
    except FailureGroup as group:
        failure = group.exceptions[0]
    except Failure as single:
        failure = single
    else:
        return None
    if isinstance(failure, JsonSchemaError):
        return f"{label} answered {status} with a body the schema refuses, at {_pointer(failure.instance_path)}: {failure._raw_message}"
    return f"{label} answered {status}: {failure.title}: {failure.message}"


def response_check(response: Any) -> None:
    """Raise ``SchemaViolation`` if ``response`` (of the test client) breaks the schema."""
    environ = response.request
    path = environ.get("PATH_INFO", "")
    if not path.startswith("/api/") or path.startswith(NOT_OPERATIONS):
        return
    view, suffix = _route(response)
    if _browsable(suffix, environ.get("QUERY_STRING", "")) or getattr(view, "schema", False) is None:
        return  # the browsable API's HTML, or a view that leaves itself out (the API root's links)
    started = time.perf_counter()
    problem = response_problem(environ.get("REQUEST_METHOD", "GET").upper(), path, response, suffix)
    _checked[0] += 1
    _checked[1] += time.perf_counter() - started
    if problem is not None:
        violation = SchemaViolation(problem)
        _unraised.append(violation)
        raise violation


def _client_request_checked(request: Any) -> Any:
    def checked_request(self: Any, **environ: Any) -> Any:
        response = request(self, **environ)
        response_check(response)
        return response

    checked_request.schema_checked = True  # type: ignore[attr-defined]
    return checked_request


def pytest_configure(config: pytest.Config) -> None:
    from django.test.client import Client

    if not getattr(Client.request, "schema_checked", False):
        Client.request = _client_request_checked(Client.request)  # type: ignore[method-assign]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _checked[0]:
        terminalreporter.write_line(
            f"API responses checked against the OpenAPI schema: {_checked[0]:.0f} in {_checked[1]:.1f} s "
            f"({_checked[2]:.0f} schemas generated)"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A violation the test caught and did not re-raise still fails it."""
    _unraised.clear()
    result = yield
    if _unraised:
        raise _unraised[0]
    return result
