"""YAML run configurations, shared by every app that starts runs from a file or a form:
read, and checked key by key, with errors that name the source and the line. Pure Python.

A configuration may come from a form, so it is parsed as hostile text: it is refused above
``RUN_CONFIG_MAX_BYTES`` (config/settings/uploads.py) before parsing; YAML aliases
(``*name``, and so ``<<: *name`` merges) are refused where they appear, because expanding
them is how a few hundred bytes ("billion laughs") grow to gigabytes; nesting is bounded;
and the values that come out must be storable (finite numbers, 64-bit integers, text
without NUL characters)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import Node

from core.app_errors import InvalidInput
from core.strict_json import StrictJSONError, check_value

# Deeper than any configuration needs (stages.<stage>.<setting> is three levels).
MAX_NESTING = 20
# The default of the RUN_CONFIG_MAX_BYTES setting (config/settings/uploads.py), used
# without Django settings.
RUN_CONFIG_MAX_BYTES_DEFAULT = 256 * 1024
INT64 = 2**63 - 1
# Budgets are stored with 12 digits, 4 of them decimals (every run's budget_usd column).
BUDGET_USD_LIMIT = 10**8


class RunConfigError(InvalidInput):
    """A refused run configuration; the message names the source, the line and the key."""


class _ConfigLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and bounds nesting while composing, before any
    node is copied or any object built."""

    source = "<config>"

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            # types-PyYAML leaves Parser.peek_event unannotated (it returns the next Event).
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise RunConfigError(
                f"{self.source}, line {mark.line + 1}: YAML aliases (*name) are not allowed in a run "
                "configuration; write the value out"
            )
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]  # as above
                raise RunConfigError(f"{self.source}, line {mark.line + 1}: nested more than {MAX_NESTING} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def config_max_bytes() -> int:
    """``RUN_CONFIG_MAX_BYTES`` from the Django settings when they are configured."""
    try:
        from django.conf import settings

        if settings.configured:
            return int(getattr(settings, "RUN_CONFIG_MAX_BYTES", RUN_CONFIG_MAX_BYTES_DEFAULT))
    except ImportError:  # pragma: no cover - Django is always installed with the product
        pass
    return RUN_CONFIG_MAX_BYTES_DEFAULT


def config_read(path: str | Path, *, max_bytes: int | None = None) -> str:
    limit = config_max_bytes() if max_bytes is None else max_bytes
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise RunConfigError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if len(data) > limit:
        raise RunConfigError(f"{path}: larger than {limit:,} bytes (RUN_CONFIG_MAX_BYTES)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunConfigError(f"{path}: not UTF-8 text ({exc.reason})") from exc


def _load(text: str, source: str) -> Any:
    loader = _ConfigLoader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _check_values(data: Any, source: str) -> None:
    try:
        check_value(data, max_string_length=10**9)
    except StrictJSONError as exc:
        raise RunConfigError(f"{source}: {exc.field or 'value'} {exc.message}") from exc
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > INT64:
            raise RunConfigError(f"{source}: the integer {str(item)[:20]}... is too large")


def config_parse(
    text: str, *, source: str, allowed: set[str], required: set[str], max_bytes: int | None = None
) -> dict[str, Any]:
    """A YAML mapping with only ``allowed`` keys and all ``required`` ones; ``budget_usd`` becomes a Decimal."""
    limit = config_max_bytes() if max_bytes is None else max_bytes
    if len(text.encode("utf-8", "surrogatepass")) > limit:
        raise RunConfigError(f"{source}: larger than {limit:,} bytes (RUN_CONFIG_MAX_BYTES)")
    try:
        data = _load(text, source)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark else ""
        raise RunConfigError(f"{source}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from exc
    except (RecursionError, ValueError, OverflowError) as exc:  # e.g. an absurd date or number
        if isinstance(exc, RunConfigError):
            raise
        raise RunConfigError(f"{source}: not a usable YAML value ({exc.__class__.__name__})") from exc
    if not isinstance(data, dict):
        raise RunConfigError(f"{source}: expected a mapping of settings at the top level")
    _check_values(data, source)
    unknown = set(data) - allowed
    if unknown:
        raise RunConfigError(
            f"{source}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; allowed: {', '.join(sorted(allowed))}"
        )
    missing = required - set(data)
    if missing:
        raise RunConfigError(f"{source}: missing key(s) {', '.join(sorted(missing))}")
    if data.get("budget_usd") is not None:
        try:
            data["budget_usd"] = Decimal(str(data["budget_usd"]))
        except InvalidOperation as exc:
            raise RunConfigError(f"{source}: budget_usd must be a number") from exc
        if not data["budget_usd"].is_finite():
            raise RunConfigError(f"{source}: budget_usd must be a finite number")
        if data["budget_usd"] < 0:
            raise RunConfigError(f"{source}: budget_usd must not be negative")
        if data["budget_usd"] >= BUDGET_USD_LIMIT:
            raise RunConfigError(f"{source}: budget_usd must be below {BUDGET_USD_LIMIT:,}")
    return data
