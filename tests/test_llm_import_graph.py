"""The LLM layer's job modules import one another one way: the services choose executors
from a table and change a job's state through llm/job_lifecycle.py, and no executor (nor
anything it imports) imports the services back. Read from every import statement of the
modules, those inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from llm.constants import EXECUTORS
from llm.executors import EXECUTOR_CLASSES

LLM = Path(__file__).resolve().parent.parent / "llm"
EXECUTOR_MODULES = (
    "llm.executors",
    "llm.async_executor",
    "llm.batch",
    "llm.vllm_offline",
    "llm.worker_pool",
    "llm.job_lifecycle",
    "llm.run_watch",
)
# The Celery task module is the entry point above the services: the services enqueue it
# (``_enqueue``) and it calls them, as every app's tasks do.
ENTRY_POINTS = {"llm.tasks"}


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under ``if TYPE_CHECKING:``: read by type checkers only,
    they are never executed, so they make no cycle."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            skipped |= {id(inner) for child in node.body for inner in ast.walk(child)}
    return skipped


def _imports(path: Path) -> set[str]:
    """The ``llm.*`` modules a file imports anywhere in it, but for type checking."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "llm" and len(parts) > 1 and (LLM / f"{parts[1]}.py").exists():
                found.add(f"llm.{parts[1]}")
    return found


def _graph() -> dict[str, set[str]]:
    graph = {f"llm.{path.stem}": _imports(path) for path in LLM.glob("*.py")}
    return {
        module: {m for m in imported if m != module and m not in ENTRY_POINTS}
        for module, imported in graph.items()
        if module not in ENTRY_POINTS
    }


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for module in graph.get(todo.pop(), ()):
            if module not in seen:
                seen.add(module)
                todo.append(module)
    return seen


def test_no_executor_module_reaches_the_services():
    graph = _graph()
    for module in EXECUTOR_MODULES:
        assert "llm.services" not in _reachable(graph, module), module


def test_the_services_and_their_executors_import_each_other_in_no_cycle():
    graph = _graph()
    assert "llm.executors" in graph["llm.services"]  # the services do choose the executors
    cycles = sorted(module for module in graph if module in _reachable(graph, module))
    assert cycles == []


def test_the_graph_reader_sees_imports_inside_functions(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text("def f():\n    from llm.services import llm_job_execute\n    import llm.shards\n")
    assert _imports(source) == {"llm.services", "llm.shards"}


def test_the_graph_reader_leaves_out_imports_for_type_checking_only(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nimport llm.shards\nif TYPE_CHECKING:\n    from llm.services import llm_job_execute\n"
    )
    assert _imports(source) == {"llm.shards"}


def test_every_executor_name_has_a_class_in_the_table():
    assert set(EXECUTOR_CLASSES) == set(EXECUTORS)


def test_a_job_gets_the_executor_its_name_picks_from_the_table():
    from llm.executors import OnlineExecutor, executor_for
    from llm.models import LLMJob

    assert EXECUTOR_CLASSES["online"] is OnlineExecutor
    assert isinstance(executor_for(LLMJob(run="t", role="generator", executor="online")), OnlineExecutor)
    with pytest.raises(ValueError, match="unknown executor 'nope'"):
        executor_for(LLMJob(run="t", role="generator", executor="nope"))
