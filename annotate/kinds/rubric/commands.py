"""python manage.py rubric_create FILE.yaml|FILE.json (annotate/management/commands/rubric_create.py
takes this class from the registry: ``SOURCE.commands``)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.kinds.rubric.definition import kind_key
from annotate.kinds.rubric.schema import MAX_SOURCE_BYTES
from annotate.kinds.rubric.services import rubric_create
from core.app_errors import AppError


class RubricCreateCommand(BaseCommand):
    help = (
        'Store a rubric (a study kind defined as data, docs/annotation.md "Rubrics") from a YAML or JSON '
        "file and register its kind rubric:<key>, which create_study --kind then takes. Every problem is "
        "reported with its path and nothing is stored."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="the rubric, YAML or JSON")

    def handle(self, *args, **options) -> None:
        path = Path(options["file"])
        try:
            with path.open("rb") as handle:
                source = handle.read(MAX_SOURCE_BYTES + 1)
        except OSError as exc:
            raise CommandError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        try:
            row = rubric_create(source=source, name=path.name)
        except AppError as exc:
            lines = [f"{path}: {name}: {problem}" for name, problems in exc.fields.items() for problem in problems]
            raise CommandError("\n".join(lines or [f"{path}: {exc.message}"]) + "\nNothing was stored.") from None
        self.stdout.write(f"Rubric {row.key} stored: create studies of it with --kind {kind_key(row.key)}")
