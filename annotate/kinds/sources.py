"""A source of study kinds: a package whose kinds are data (a rubric's kinds are the stored
rubrics, one ``StudyKind`` each, built when asked). Pure Python: no Django imports.

The package declares one ``KindSource`` and the registry registers it as it registers a
built-in ``KIND`` (annotate/kinds/__init__.py), so what the package adds to the site lives in
the package: what it registers when the registry asks (``load_function``), its own pages and
endpoints (``urls``, as a ``StudyKind``'s), its templates (the ``templates/`` folder of
``package``, found by annotate/kinds/template_loader.py) and its management commands
(``commands``; Django finds a command only in an app's ``management/commands``, where a
two-line module takes it from the registry with ``kind_command``). Every hook is a dotted
path, imported when first used, so declaring a source imports nothing of Django."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from annotate.kinds.base import _function, dotted_function_problems, urls_problems


@dataclass(frozen=True)
class KindSource:
    # A name for messages and ``kind_source_get`` ("rubric"), never a study kind's key.
    key: str
    # The dotted name of the source's package (its ``templates/`` folder is the loader's).
    package: str
    # A dotted function taking nothing that registers the kinds the source holds which this
    # process does not know yet (``ReadyFunction``'s shape); asked by the registry once the app
    # has started, when it lists the kinds or meets a key it lacks (annotate/kinds/__init__.py).
    load_function: str
    # As ``StudyKind.urls``: a module with ``urlpatterns`` and/or ``api_urlpatterns``.
    urls: str | None = None
    # Management command name -> the dotted path of its ``BaseCommand`` subclass.
    commands: dict[str, str] = field(default_factory=dict)

    def load(self) -> None:
        function = _function(self.load_function)
        if function is not None:
            function()

    def package_dir(self) -> Path | None:
        """The folder of the source's package (None when it is not imported or has no file)."""
        path = getattr(sys.modules.get(self.package), "__file__", None)
        return Path(path).parent if path else None


def kind_source_problems(source: KindSource) -> list[str]:
    """What is wrong with a source's declaration: a ``load_function`` that does not resolve or
    cannot be called with nothing, a ``urls`` module without routes, a command that is not a
    class. Empty: every path resolves."""
    problems = dotted_function_problems(f"{source.key}.load_function", source.load_function, ())
    problems += urls_problems(source.key, source.urls)
    if source.package not in sys.modules:
        problems.append(f"{source.key}.package = {source.package!r} is not imported")
    for name, path in source.commands.items():
        try:
            command = _function(path)
        except (ImportError, AttributeError, ValueError) as exc:
            problems.append(f"{source.key}.commands[{name!r}] = {path!r} does not resolve: {exc}")
            continue
        if not isinstance(command, type):
            problems.append(f"{source.key}.commands[{name!r}] = {path!r} is not a class")
    return problems
