"""python manage.py export_annotations --study SLUG --output FILE.jsonl [--include-test]"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotate.models import Study
from annotate.studies.exports import annotation_export


class Command(BaseCommand):
    help = (
        "Write one JSON line per annotation of a study (the agreement report's input), with its "
        "provenance; excluded annotations are included and marked. The file appears only when complete."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True, help="the study's slug")
        parser.add_argument("--output", required=True)
        parser.add_argument(
            "--include-test",
            action="store_true",
            help="also the annotations of test participants (left out by default; marked is_test)",
        )

    def handle(self, *args, **o) -> None:
        study = Study.objects.filter(slug=o["study"]).first()
        if study is None:
            known = ", ".join(Study.objects.order_by("slug").values_list("slug", flat=True)[:20]) or "none"
            raise CommandError(f"--study: no study {o['study']!r} (known: {known})")
        try:
            n = annotation_export(study=study, output=o["output"], include_test=o["include_test"])
        except OSError as exc:
            raise CommandError(f"{o['output']}: {exc.strerror or exc}") from exc
        self.stdout.write(f"{o['output']}: {n} annotations of study {study.slug!r}")
