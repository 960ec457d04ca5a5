"""Demo data registry: every installed app may define ``<app>.demo.load() -> str``.

``python manage.py load_demo`` calls them in INSTALLED_APPS order (mining before
judging before annotate), so a later app can build on what an earlier one loaded.
Each loader must be idempotent."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from importlib.util import find_spec

from django.apps import apps


def demo_loaders() -> Iterator[tuple[str, Callable[[], str]]]:
    for config in apps.get_app_configs():
        module_name = f"{config.name}.demo"
        if config.name == "core" or find_spec(module_name) is None:
            continue
        module = importlib.import_module(module_name)
        loader = getattr(module, "load", None)
        if callable(loader):
            yield config.label, loader
