from django.core.management.base import BaseCommand

from mining.models import Split
from mining.services import EXPORT_FORMATS, EXPORT_SHAPES, procedure_export


class Command(BaseCommand):
    help = "Export procedures as JSONL (optionally .gz/.zst/.bz2/.xz) or Parquet, flat or how2mine.v1."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--output", required=True)
        parser.add_argument("--split", choices=Split.values)
        parser.add_argument("--topic", help="topic slug")
        parser.add_argument("--format", choices=EXPORT_FORMATS, help="default: from the file name, else jsonl")
        parser.add_argument("--shape", choices=EXPORT_SHAPES, default="flat")

    def handle(self, *args, **options) -> None:
        fmt = options["format"] or ("parquet" if options["output"].lower().endswith(".parquet") else "jsonl")
        count = procedure_export(
            output=options["output"], split=options["split"], fmt=fmt, shape=options["shape"], topic=options["topic"]
        )
        self.stdout.write(f"{options['output']}: {count} procedures written ({options['shape']}, {fmt})")
