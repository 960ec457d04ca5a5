"""The template loader of the study kinds (listed once in the TEMPLATES setting, after the
project's and the apps' loaders): it looks in the ``templates/`` folder of every registered
kind's package (``kind_template_dirs``), so a kind that lives outside annotate, registered
with ``kind_register``, renders its own item and results templates with no settings edit; a
kind taken away is no longer looked in."""

from __future__ import annotations

from pathlib import Path

from django.template.loaders.filesystem import Loader as FilesystemLoader

from annotate.kinds import kind_template_dirs


class Loader(FilesystemLoader):
    def get_dirs(self) -> list[str | Path]:
        return list(kind_template_dirs())
