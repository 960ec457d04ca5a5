"""No module over 500 lines, no function over 80 (docs/architecture.md, "Sizes").

Every app package (a directory with an ``apps.py``) and ``core/`` and ``config/`` are walked,
migrations skipped. A module's size is its number of lines; a function's (or method's, nested
ones included) runs from its ``def`` line to its last line, decorators not counted. What is
over the limit today and is being reworked is listed in ``STILL_OVER`` with its size now: the
list can only shrink, so a listed item that grew, or that is now within the limit (remove it),
fails as well as a new one."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_MAX_LINES = 500
FUNCTION_MAX_LINES = 80

# "path" is a module, "path::qualified.name" a function or method; the value is its size now.
STILL_OVER: dict[str, int] = {}  # empty since 2026-11-29: every module and function is within the limits


def _packages() -> list[Path]:
    apps = {path.parent for path in ROOT.glob("*/apps.py")}
    return sorted(apps | {ROOT / "core", ROOT / "config"})


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, lines) of every function and method under ``tree``, nested ones included."""
    found: list[tuple[str, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            found.append((name, (node.end_lineno or node.lineno) - node.lineno + 1))
            found.extend(_functions(node, f"{name}."))
        elif isinstance(node, ast.ClassDef):
            found.extend(_functions(node, f"{prefix}{node.name}."))
        else:
            found.extend(_functions(node, prefix))
    return found


def measure() -> dict[str, int]:
    """Everything over the limits, by the names ``STILL_OVER`` uses."""
    over: dict[str, int] = {}
    for package in _packages():
        for path in sorted(package.rglob("*.py")):
            if "migrations" in path.relative_to(ROOT).parts:
                continue
            name = path.relative_to(ROOT).as_posix()
            source = path.read_text(encoding="utf-8")
            lines = len(source.splitlines())
            if lines > MODULE_MAX_LINES:
                over[name] = lines
            for function, size in _functions(ast.parse(source, filename=name)):
                if size > FUNCTION_MAX_LINES:
                    over[f"{name}::{function}"] = size
    return over


def test_the_walk_sees_every_app_and_measures_functions_from_their_def_line():
    packages = {path.name for path in _packages()}
    assert {"core", "config", "llm", "mining", "judging", "annotate", "prolific"} <= packages
    tree = ast.parse(
        "class A:\n    @staticmethod\n    def f():\n        def g():\n            pass\n        return g\n"
    )
    assert _functions(tree) == [("A.f", 4), ("A.f.g", 2)]


def test_no_module_or_function_is_over_the_limit_unless_listed():
    over = measure()
    new = {name: size for name, size in over.items() if name not in STILL_OVER}
    assert not new, f"over {MODULE_MAX_LINES} lines a module or {FUNCTION_MAX_LINES} a function: {new}"


def test_the_list_of_those_still_over_only_shrinks():
    over = measure()
    within = sorted(name for name in STILL_OVER if name not in over)
    assert not within, f"now within the limit (take them off STILL_OVER): {within}"
    grown = {name: (STILL_OVER[name], over[name]) for name in STILL_OVER if over[name] > STILL_OVER[name]}
    assert not grown, f"grew since listed (listed, now): {grown}"
