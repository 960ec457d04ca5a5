from django.core.management.base import BaseCommand, CommandError

from core.record_files import RecordError
from mining.models import Split
from mining.procedure_services import procedure_import


class Command(BaseCommand):
    help = (
        "Import procedures from a JSONL, CSV, Parquet or Arrow file (optionally .gz/.zst/.bz2/.xz) "
        "in the how2mine.v1, flat or How2Bench shape. All or nothing: on any bad record nothing is stored."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file")
        parser.add_argument("--split", choices=Split.values, help="file every procedure under this split")
        parser.add_argument(
            "--topic-field", default="topic", help="name of the field holding the topic (default: topic)"
        )
        parser.add_argument("--create-topics", action="store_true", help="create topics that do not exist yet")

    def handle(self, *args, **options) -> None:
        try:
            result = procedure_import(
                path=options["file"],
                split=options["split"],
                topic_field=options["topic_field"],
                create_topics=options["create_topics"],
            )
        except FileNotFoundError as exc:
            raise CommandError(f"{options['file']}: no such file") from exc
        except RecordError as exc:
            raise CommandError(f"{exc}\nNothing was imported.") from exc
        self.stdout.write(f"{result.path}: {result.created} procedures created, {result.existing} already existed")
