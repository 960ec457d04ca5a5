"""Where in a YAML run configuration an error is: the line and the field a refusal is about,
so that a launch through the API answers "the configuration, line 7: executor must be one of
online, batch" with ``line`` and ``field`` beside it. Pure Python (PyYAML only).

The configuration services (core/run_configs.py and each app's parser) name the field in
their message (``<source>: <field> ...``, ``unknown key(s) <field>``, ``stages.<stage>.<key>
...``); the line is that key's line in the text. YAML syntax errors carry their line already."""

from __future__ import annotations

import re
from typing import Any

import yaml

# A refusal's field, after "<source>: " (or "<source>, line N: ").
_UNKNOWN_UNDER = re.compile(r"unknown key\(s\) under ([\w.]+): ([\w.]+)")
_UNKNOWN = re.compile(r"unknown (?:key|stage)\(s\) ([\w.]+)")
_MISSING = re.compile(r"missing key\(s\) ([\w.]+)")
_LEADING = re.compile(r"([A-Za-z_][\w]*(?:\.[\w]+)*)\b")
_LINE = re.compile(r", line (\d+):")
# Nodes visited at most while looking for a key (a configuration is small; aliases are refused
# by the parser, so a composed tree here is never expanded beyond the text's own size).
MAX_NODES = 20_000


def _key_lines(text: str) -> dict[str, int]:
    """Dotted key path -> 1-based line of the key, for every mapping key of the document."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError, ValueError):
        return {}
    lines: dict[str, int] = {}
    stack: list[tuple[str, Any]] = [("", root)]
    seen = 0
    while stack and seen < MAX_NODES:
        prefix, node = stack.pop()
        seen += 1
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    path = f"{prefix}{key.value}"
                    lines.setdefault(path, key.start_mark.line + 1)
                    stack.append((path + ".", value))
    return lines


def config_error_location(text: str, message: str, *, source: str) -> dict[str, Any]:
    """``{"line": N or None, "field": dotted key or None, "message": ...}`` for a refusal of
    ``text``: the message gains ", line N" after the source when it had no line."""
    rest = message[len(source) :] if message.startswith(source) else message
    found = _LINE.match(rest)
    line = int(found.group(1)) if found else None
    rest = rest[found.end() :] if found else rest.lstrip(":")
    rest = rest.strip()
    field = None
    for pattern in (_UNKNOWN_UNDER, _UNKNOWN, _MISSING):
        match = pattern.search(rest)
        if match:
            field = ".".join(g for g in match.groups() if g) if pattern is _UNKNOWN_UNDER else match.group(1)
            if pattern is _UNKNOWN and rest.startswith("unknown stage"):
                field = f"stages.{field}"
            break
    lines = _key_lines(text) if line is None else {}
    if field is None:
        match = _LEADING.match(rest)
        if match:
            candidate = match.group(1).rstrip(".")
            # The longest prefix of the words that is a key of the file (e.g. "stages.rewrite.temperature").
            parts = candidate.split(".")
            for n in range(len(parts), 0, -1):
                if ".".join(parts[:n]) in lines:
                    field = ".".join(parts[:n])
                    break
    if line is None and field is not None:
        line = lines.get(field)
    if line is not None and not found and message.startswith(source):
        message = f"{source}, line {line}{message[len(source) :]}"
    return {"message": message, "line": line, "field": field}
