"""The registry of study kinds: ``critical_failure``, ``multiple_choice`` and
``constraint_faithfulness``, each a package (``annotate/kinds/<kind>/``: its definition, its
codebook, its results) whose ``KIND`` says what the kind has (annotate/kinds/base.py). Another
kind registers itself with ``kind_register`` (and ``kind_unregister`` takes it away again); the
``templates/`` folder of its package is then found by the template loader
(annotate/kinds/template_loader.py, in the TEMPLATES setting) with no setting of its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from annotate.kinds import constraint_faithfulness, critical_failure, multiple_choice
from annotate.kinds.base import StudyKind
from core.app_errors import Unavailable

_KINDS: dict[str, StudyKind] = {}
# The kind a new study has when none is named (the New study page, the API, create_study).
DEFAULT_KIND_KEY = critical_failure.KEY
# Kinds kept as data (rubrics stored in the database): a source registers the kinds it holds
# when asked, so a kind created in another process (a web worker, a Celery worker) is known
# here too. Asked by ``kind_list`` and ``kind_choices_fresh`` (once per call: a form, a
# filter), and by ``kind_get`` for a key it lacks; never by ``kind_choices``, which a model
# field reads for every row it shows.
_SOURCES: list[Callable[[], None]] = []


def kind_source_register(source: Callable[[], None]) -> None:
    if source not in _SOURCES:
        _SOURCES.append(source)


def _sources_ask() -> None:
    for source in _SOURCES:
        source()


def kind_register(kind: StudyKind) -> None:
    if kind.key in _KINDS and _KINDS[kind.key] is not kind:
        raise ValueError(f"study kind {kind.key!r} is already registered")
    _KINDS[kind.key] = kind


def kind_unregister(key: str) -> None:
    """Take a registered kind away (a kind added at run time, e.g. by a test)."""
    _KINDS.pop(key, None)
    codebook_get.cache_clear()


def kind_list() -> list[StudyKind]:
    _sources_ask()
    return list(_KINDS.values())


class KindNotInstalled(Unavailable, KeyError):
    """No kind of that key is registered: a study made with a kind whose package has since
    been removed from this installation (503, naming it), or a key nobody registered. A
    ``KeyError`` too, for code that checks a key it was given."""


def kind_get(key: str) -> StudyKind:
    if key not in _KINDS:
        _sources_ask()
    try:
        return _KINDS[key]
    except KeyError:
        raise KindNotInstalled(
            f"the study kind {key!r} is not installed on this server; installed kinds: {', '.join(sorted(_KINDS))}"
        ) from None


def kind_choices() -> list[tuple[str, str]]:
    """The registered kinds as choices, without asking the sources (the model fields' choices,
    read per row: a rubric kind of another process is registered by the first ``kind_get``
    of its key, as the study page does)."""
    return [(kind.key, kind.label) for kind in _KINDS.values()]


def kind_choices_fresh() -> list[tuple[str, str]]:
    """Every kind as choices, the sources asked first (a form or filter that must accept a kind
    created in another process)."""
    _sources_ask()
    return kind_choices()


def kinds_ready() -> None:
    """Run each registered kind's ``ready_function`` (the app's start-up; no source is asked:
    no query then)."""
    for kind in list(_KINDS.values()):
        kind.ready()


def kind_template_dirs() -> list[Path]:
    """The ``templates/`` folder of each registered kind's package that has one (the template
    loader's folders, annotate/kinds/template_loader.py), without asking the sources: a kind
    kept as data has no package of its own, and a template lookup runs no query."""
    dirs = []
    for kind in _KINDS.values():
        package = kind.package_dir()
        if package is not None and (package / "templates").is_dir() and package / "templates" not in dirs:
            dirs.append(package / "templates")
    return dirs


@cache
def codebook_get(key: str) -> dict[str, Any] | None:
    """The kind's training codebook (definition, categories, examples), or None."""
    kind = kind_get(key)
    if kind.codebook_path is None:
        return None
    with open(kind.codebook_path, encoding="utf-8") as handle:
        return json.loads(handle.read())


kind_register(critical_failure.KIND)
kind_register(multiple_choice.KIND)
kind_register(constraint_faithfulness.KIND)
