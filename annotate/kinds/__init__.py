"""The registry of study kinds: ``critical_failure``, ``multiple_choice`` and
``constraint_faithfulness``, each a package (``annotate/kinds/<kind>/``: its definition, its
codebook, its results) whose ``KIND`` says what the kind has (annotate/kinds/base.py), and the
source of the rubrics' kinds (``annotate/kinds/rubric/``, whose ``SOURCE`` says what it has,
annotate/kinds/sources.py). Another kind registers itself with ``kind_register`` (and
``kind_unregister`` takes it away again); the ``templates/`` folder of its package is then
found by the template loader (annotate/kinds/template_loader.py, in the TEMPLATES setting) with
no setting of its own. A kind's or source's own routes (``urls``) are included by
annotate/urls.py and api_urls.py (``kind_routes``), its commands by a module of
annotate/management/commands (``kind_command``)."""

from __future__ import annotations

import json
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import Any

from annotate.kinds import constraint_faithfulness, critical_failure, multiple_choice, rubric
from annotate.kinds.base import StudyKind
from annotate.kinds.sources import KindSource
from core.app_errors import Unavailable

_KINDS: dict[str, StudyKind] = {}
# The kind a new study has when none is named (the New study page, the API, create_study).
DEFAULT_KIND_KEY = critical_failure.KEY
# Kinds kept as data (rubrics stored in the database): a source registers the kinds it holds
# when asked, so a kind created in another process (a web worker, a Celery worker) is known
# here too. Asked by ``kind_list`` and ``kind_choices_fresh`` (once per call: a form, a
# filter), and by ``kind_get`` for a key it lacks; never by ``kind_choices``, which a model
# field reads for every row it shows; and only once the app has started (``kinds_ready``):
# a source reads the database, whose models are not loaded before.
_SOURCES: list[KindSource] = []
_started = False  # True once kinds_ready has run


def kind_source_register(source: KindSource) -> None:
    if any(other.key == source.key and other is not source for other in _SOURCES):
        raise ValueError(f"kind source {source.key!r} is already registered")
    if source not in _SOURCES:
        _SOURCES.append(source)


def kind_sources() -> list[KindSource]:
    return list(_SOURCES)


def _sources_ask() -> None:
    if not _started:
        return
    for source in _SOURCES:
        source.load()


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
    no query then), and let the sources be asked from now on."""
    global _started
    for kind in list(_KINDS.values()):
        kind.ready()
    _started = True


def _holders() -> list[StudyKind | KindSource]:
    """The registered kinds, then the sources."""
    return [*_KINDS.values(), *_SOURCES]


def _url_modules() -> list[str]:
    """The ``urls`` of the registered kinds and sources, each once, in registration order."""
    paths = [holder.urls for holder in _holders() if holder.urls is not None]
    return list(dict.fromkeys(paths))


def kind_routes(name: str) -> list[Any]:
    """The routes every registered kind and source declares under ``name`` (``urlpatterns``:
    pages, ``api_urlpatterns``: endpoints; base.URL_LISTS), for annotate/urls.py and api_urls.py.
    Read when the URL configuration is (start-up): a kind registered later has no routes."""
    routes: list[Any] = []
    for path in _url_modules():
        routes += getattr(import_module(path), name, [])
    return routes


def kind_command(name: str) -> Any:
    """The command class a registered source declares under ``name`` (``KindSource.commands``):
    what a module of annotate/management/commands names ``Command``. KeyError when none does."""
    for source in _SOURCES:
        if name in source.commands:
            module, _, attribute = source.commands[name].rpartition(".")
            return getattr(import_module(module), attribute)
    raise KeyError(f"no kind source declares the command {name!r}")


def kind_template_dirs() -> list[Path]:
    """The ``templates/`` folder of each registered kind's and source's package that has one
    (the template loader's folders, annotate/kinds/template_loader.py), without asking the
    sources: a kind kept as data has no package of its own, and a template lookup runs no
    query."""
    dirs = []
    for holder in _holders():
        package = holder.package_dir()
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
kind_source_register(rubric.SOURCE)
