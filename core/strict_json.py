"""A strict JSON loader for request bodies that come from strangers. Pure Python: no Django.

``json.loads`` accepts things that later turn into server errors: ``NaN`` and ``Infinity``
(not JSON at all, and not storable in a JSON column), ``1e400`` (parsed to infinity), strings
with a NUL character (PostgreSQL refuses them in text and jsonb) or a lone surrogate (not
encodable as UTF-8), nesting deep enough to exhaust the interpreter's recursion limit, and
integers far beyond any database column, and a key given twice in one object (the last
value would win silently). :func:`loads` refuses all of them before anything
reaches a service, with a :class:`StrictJSONError` whose ``field`` names where the problem is
(``draft.failures[0].description``), so a view can answer 400 naming the field.

The nesting is measured by a linear scan of the text *before* parsing, so a hostile body never
recurses; every other check is one walk over the parsed value (bounded by that depth)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

# Defaults, small enough for any request an annotation page or an API client sends.
MAX_BODY_BYTES = 1_000_000
MAX_DEPTH = 32
MAX_STRING_LENGTH = 100_000
# Integers with more digits than this are refused while parsing (long before Python's own
# 4,300-digit limit); a column's range is checked by ``check_int``.
MAX_INT_DIGITS = 30

# The range of a 32-bit signed integer column (PostgreSQL ``integer``, Django IntegerField).
INT32_MAX = 2**31 - 1
# The range of a 64-bit signed integer column (``bigint``).
INT64_MAX = 2**63 - 1

# A JSON string (with its escapes; an unterminated one runs to the end, so the scan never
# backtracks) or one bracket: enough to measure nesting without parsing.
_TOKENS = re.compile(r'"(?:[^"\\]+|\\.?)*"?|[\[\]{}]', re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")


class StrictJSONError(ValueError):
    """A refused body or value: ``field`` is the path of the offending value ("" for the
    body as a whole), ``message`` says what is wrong with it."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field or "body", "message": self.message}


class _TooManyDigits:
    """Stands in for an integer literal that was too long to convert (reported by the walk)."""

    def __init__(self, digits: int):
        self.digits = digits


def _parse_int(text: str) -> int | _TooManyDigits:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return _TooManyDigits(digits)
    return int(text)


def _parse_constant(name: str) -> float:
    # NaN, Infinity, -Infinity: kept as floats here and refused by the walk with their path.
    return float(name.replace("Infinity", "inf"))


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text`` (brackets inside strings do not
    count). Linear in the length of the text and without recursion."""
    depth = deepest = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


class _RepeatedKeys(dict[str, Any]):
    """An object in which a key appeared more than once (``repeated``: the first such key);
    ``check_value`` refuses it with the key's path. Plain ``json.loads`` keeps the last value
    silently, so a client's mistake would pass as something it did not mean."""

    repeated: str = ""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) == len(pairs):
        return result
    marked = _RepeatedKeys(result)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            marked.repeated = key
            break
        seen.add(key)
    return marked


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    # A key is shown printable and short: the path goes back to the client in the error.
    label = key if key.isprintable() and len(key) <= 60 else ascii(key[:60])[1:-1]
    return f"{parent}.{label}" if parent else label


def _check_string(value: str, field: str, max_string_length: int) -> None:
    if "\x00" in value:
        raise StrictJSONError(field, "must not contain a NUL character")
    if _SURROGATE.search(value):
        raise StrictJSONError(field, "must be valid Unicode text (it has an unpaired surrogate)")
    if len(value) > max_string_length:
        raise StrictJSONError(field, f"must be at most {max_string_length} characters")


def check_value(value: Any, *, field: str = "", max_string_length: int = MAX_STRING_LENGTH) -> None:
    """Refuse, naming the path, a non-finite number, an over-long integer literal, a string
    (or object key) with a NUL character, a lone surrogate or more than ``max_string_length``
    characters. Iterative, so it is safe on any depth."""
    stack: list[tuple[str, Any]] = [(field, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            _check_string(item, where, max_string_length)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise StrictJSONError(where, "must be a finite number (not NaN or Infinity)")
        elif isinstance(item, _TooManyDigits):
            raise StrictJSONError(
                where, f"is an integer with {item.digits} digits; at most {MAX_INT_DIGITS} are accepted"
            )
        elif isinstance(item, dict):
            if isinstance(item, _RepeatedKeys):
                raise StrictJSONError(_path(where, item.repeated), "appears twice in the same object")
            for key, child in reversed(list(item.items())):
                _check_string(key, _path(where, key) if isinstance(key, str) else where, max_string_length)
                stack.append((_path(where, key), child))
        elif isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                stack.append((_path(where, index), item[index]))


def loads(
    body: bytes | str,
    *,
    max_bytes: int = MAX_BODY_BYTES,
    max_depth: int = MAX_DEPTH,
    max_string_length: int = MAX_STRING_LENGTH,
) -> Any:
    """Parse ``body`` as strict JSON, or raise :class:`StrictJSONError` naming the field."""
    if isinstance(body, (bytes, bytearray)):
        if len(body) > max_bytes:
            raise StrictJSONError("", f"the request body is larger than {max_bytes} bytes")
        try:
            text = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            raise StrictJSONError("", "the request body is not UTF-8 text") from None
    else:
        text = body
        if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
            raise StrictJSONError("", f"the request body is larger than {max_bytes} bytes")
    if nesting_depth(text) > max_depth:
        raise StrictJSONError("", f"the JSON is nested more than {max_depth} levels deep")
    try:
        value = json.loads(text, parse_int=_parse_int, parse_constant=_parse_constant, object_pairs_hook=_object)
    except RecursionError:  # unreachable after the depth check; kept as a backstop
        raise StrictJSONError("", f"the JSON is nested more than {max_depth} levels deep") from None
    except ValueError as exc:
        raise StrictJSONError("", f"the request body is not valid JSON ({exc})") from None
    check_value(value, max_string_length=max_string_length)
    return value


def loads_object(body: bytes | str, **limits: Any) -> dict[str, Any]:
    """:func:`loads` for bodies that must be a JSON object (an empty body is ``{}``)."""
    if not body:
        return {}
    value = loads(body, **limits)
    if not isinstance(value, dict):
        raise StrictJSONError("", "the request body must be a JSON object")
    return value


def check_int(value: Any, *, field: str, minimum: int = 0, maximum: int = INT32_MAX) -> int:
    """``value`` as an integer in ``minimum..maximum`` (booleans and floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise StrictJSONError(field, "must be an integer")
    if not minimum <= value <= maximum:
        raise StrictJSONError(field, f"must be between {minimum} and {maximum}")
    return value


def check_number(value: Any, *, field: str, minimum: float = 0, maximum: float = INT32_MAX) -> float:
    """``value`` as a finite number (integer or float) in ``minimum..maximum``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise StrictJSONError(field, "must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise StrictJSONError(field, "must be a finite number (not NaN or Infinity)")
    if not minimum <= value <= maximum:
        raise StrictJSONError(field, f"must be between {minimum:g} and {maximum:g}")
    return float(value)


def check_text(value: Any, *, field: str, max_length: int, required: bool = False) -> str:
    """``value`` as a string of at most ``max_length`` characters, without NUL or lone
    surrogates (query parameters and form fields as well as JSON strings)."""
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise StrictJSONError(field, "must be text")
    _check_string(value, field, max_length)
    if required and not value.strip():
        raise StrictJSONError(field, "is required")
    return value
