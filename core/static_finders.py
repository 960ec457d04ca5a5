"""plotly.js as a static file: the installed plotly package's own ``plotly.min.js`` is found
under ``vendor/plotly.min.js``, so collectstatic copies it beside the product's assets and the
compressed manifest storage gives it a content-hashed name and a gzip copy that WhiteNoise
serves with far-future caching (docs/operations.md, "Static files"). Charts then work with no
internet, and the file changes name whenever the plotly package is upgraded.

The package is located without importing it (importing plotly costs seconds: issue 29)."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import CheckMessage, Error
from django.core.files.storage import FileSystemStorage

PLOTLY_STATIC_PATH = "vendor/plotly.min.js"
_PREFIX, _NAME = PLOTLY_STATIC_PATH.rsplit("/", 1)


@lru_cache(maxsize=1)
def plotly_package_data() -> Path | None:
    """The folder holding the installed plotly package's ``plotly.min.js``, or None."""
    spec = importlib.util.find_spec("plotly")
    for location in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(location) / "package_data"
        if (folder / _NAME).is_file():
            return folder
    return None


class PlotlyFinder(BaseFinder):
    """Finds exactly one file, ``vendor/plotly.min.js``, in the installed plotly package."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        folder = plotly_package_data()
        self.storage = None if folder is None else FileSystemStorage(location=folder)
        if self.storage is not None:
            self.storage.prefix = _PREFIX  # type: ignore[attr-defined]  # read by collectstatic and WhiteNoise

    def check(self, **kwargs) -> list[CheckMessage]:
        if self.storage is None:
            return [Error("plotly.min.js is not in the installed plotly package", id="core.E001")]
        return []

    def find(self, path: str, find_all: bool = False) -> Any:
        """The file's absolute path (a list of it with ``find_all``), or None (an empty list)."""
        found = [self.storage.path(_NAME)] if self.storage is not None and path == PLOTLY_STATIC_PATH else []
        if find_all:
            return found
        return found[0] if found else None

    def list(self, ignore_patterns):
        if self.storage is not None:
            yield _NAME, self.storage
