"""YAML run configurations, shared by every app that starts runs from a file or a form:
read, and checked key by key, with errors that name the source and the line. Pure Python."""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml


class RunConfigError(ValueError):
    pass


def config_read(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RunConfigError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def config_parse(text: str, *, source: str, allowed: set[str], required: set[str]) -> dict[str, Any]:
    """A YAML mapping with only ``allowed`` keys and all ``required`` ones; ``budget_usd`` becomes a Decimal."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark else ""
        raise RunConfigError(f"{source}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from exc
    if not isinstance(data, dict):
        raise RunConfigError(f"{source}: expected a mapping of settings at the top level")
    unknown = set(data) - allowed
    if unknown:
        raise RunConfigError(f"{source}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                             f"allowed: {', '.join(sorted(allowed))}")
    missing = required - set(data)
    if missing:
        raise RunConfigError(f"{source}: missing key(s) {', '.join(sorted(missing))}")
    if data.get("budget_usd") is not None:
        try:
            data["budget_usd"] = Decimal(str(data["budget_usd"]))
        except InvalidOperation as exc:
            raise RunConfigError(f"{source}: budget_usd must be a number") from exc
        if data["budget_usd"] < 0:
            raise RunConfigError(f"{source}: budget_usd must not be negative")
    return data
