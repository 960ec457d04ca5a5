"""What mypy holds the code to (pyproject.toml; docs/testing.md, "Static checks"): every pure
module of import-linter's contract, the study kinds' protocol among them, is checked with every
flag of mypy's --strict, read back through mypy's own configuration parser; no other module is;
the tests are checked, and the list of test modules whose errors are not yet reported names
only modules that exist; and mypy refuses a study kind whose known-answer hook is written for
the item's ``expected`` alone."""

from __future__ import annotations

import io
import tomllib
from pathlib import Path

import mypy.main
from mypy.config_parser import parse_config_file
from mypy.options import Options

BASE_DIR = Path(__file__).resolve().parent.parent
PYPROJECT = BASE_DIR / "pyproject.toml"


def _pyproject() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def _pure_modules() -> list[str]:
    contracts = _pyproject()["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == "pure-modules")["source_modules"]


def _mypy_options() -> Options:
    options = Options()
    parse_config_file(options, lambda: None, str(PYPROJECT), io.StringIO(), io.StringIO())
    return options


def _strict_assignments() -> list[tuple[str, bool]]:
    """What --strict sets, as mypy itself lists it (so a flag a new mypy adds is asked for too)."""
    _, _, assignments = mypy.main.define_options()
    return assignments


def _not_strict(options: Options, module: str) -> list[str]:
    effective = options.clone_for_module(module)
    return [name for name, value in _strict_assignments() if getattr(effective, name) != value]


def _submodules(module: str) -> list[str]:
    """The module, and every module under it when it is a package."""
    path = BASE_DIR.joinpath(*module.split("."))
    if not path.is_dir():
        assert path.with_suffix(".py").is_file(), f"{module} is in the pure-modules contract but is not a module"
        return [module]
    return [
        ".".join(file.relative_to(BASE_DIR).with_suffix("").parts).removesuffix(".__init__")
        for file in sorted(path.rglob("*.py"))
    ]


def test_every_pure_module_and_the_kind_protocol_are_checked_with_every_strict_flag():
    options = _mypy_options()
    modules = [sub for module in _pure_modules() for sub in _submodules(module)]
    assert "annotate.kinds.base" in modules and "annotate.stats.alpha" in modules and "core.intervals" in modules
    assert {module: _not_strict(options, module) for module in modules} == {module: [] for module in modules}


def test_a_module_outside_the_contract_is_not_held_to_strict():
    # The strict list is the contract's list, not a pattern that takes in more than it names.
    options = _mypy_options()
    assert "disallow_untyped_defs" in _not_strict(options, "annotate.studies.views")
    assert "disallow_untyped_defs" in _not_strict(options, "annotate.kinds.critical_failure.study_results")


def test_the_tests_are_checked_and_none_is_excused():
    """Every test module's errors are reported (since 2026-11-29: the last 69 that were excused
    were made clean); nothing anywhere has its errors ignored."""
    assert "tests" in _pyproject()["tool"]["mypy"]["files"]
    options = _mypy_options()
    excused = [pattern for pattern, section in options.per_module_options.items() if section.get("ignore_errors")]
    assert excused == []
    assert options.clone_for_module("tests.test_interval_methods").ignore_errors is False
    assert options.clone_for_module("tests.conftest").ignore_errors is False


KIND_WITH_HOOK = """
from typing import Any

from annotate.kinds.base import FieldError, ItemSpec, KnownAnswerItem, StudyKind


def parse_record(record: dict[str, Any]) -> ItemSpec:
    raise NotImplementedError


def clean_draft(draft: Any, n_reference: int, n_steps: int) -> dict[str, Any]:
    return {}


def validate_submission(draft: Any, n_reference: int, n_steps: int) -> tuple[dict[str, Any] | None, list[FieldError]]:
    return {}, []


def answer_correct(cleaned: dict[str, Any], {second}) -> bool | None:
    return None


KIND = StudyKind(
    key="typed",
    label="Typed",
    item_template="typed.html",
    codebook_path=None,
    default_instructions="",
    parse_record=parse_record,
    clean_draft=clean_draft,
    validate_submission=validate_submission,
    answer_correct=answer_correct,
)
"""


def _mypy_on(source: str, tmp_path: Path, monkeypatch) -> tuple[str, int]:
    """mypy on one module that imports the kind protocol (the repository's own modules followed
    silently, no plugins, no cache): its report and exit status."""
    from mypy import api

    module = tmp_path / "typed_kind.py"
    module.write_text(source, encoding="utf-8")
    monkeypatch.chdir(BASE_DIR)
    flags = ["--config-file", "/dev/null", "--cache-dir", "/dev/null", "--follow-imports", "silent"]
    report, _, status = api.run([*flags, "--python-version", "3.11", "--no-site-packages", str(module)])
    return report, status


def test_a_known_answer_hook_written_for_expected_alone_is_refused_by_mypy(tmp_path, monkeypatch):
    # The hook receives the item (KnownAnswerItem: its role and expected), never expected alone:
    # a hook that reads a bare has_failure would fail on its first submit, so mypy refuses it.
    report, status = _mypy_on(KIND_WITH_HOOK.replace("{second}", "expected: bool"), tmp_path, monkeypatch)
    assert status == 1 and 'Argument "answer_correct" to "StudyKind" has incompatible type' in report
    report, status = _mypy_on(KIND_WITH_HOOK.replace("{second}", "item: KnownAnswerItem"), tmp_path, monkeypatch)
    assert status == 0, report
