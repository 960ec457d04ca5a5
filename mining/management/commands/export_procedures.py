from django.core.management.base import BaseCommand, CommandError

from core.record_files import RecordError
from mining.export_services import EXPORT_FORMATS, EXPORT_SHAPES, procedure_export, shard_path
from mining.models import Split


class Command(BaseCommand):
    help = "Export procedures as JSONL (optionally .gz/.zst/.bz2/.xz) or Parquet, flat or how2mine.v1."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--output", required=True)
        parser.add_argument("--split", choices=Split.values)
        parser.add_argument("--topic", help="topic slug")
        parser.add_argument("--format", choices=EXPORT_FORMATS, help="default: from the file name, else jsonl")
        parser.add_argument("--shape", choices=EXPORT_SHAPES, default="flat")
        parser.add_argument("--mining-run", help="only the procedures a mining run produced (its name)")
        parser.add_argument("--shard-size", type=int, help="records per shard: NAME-00000-of-0000N.EXT files")

    def handle(self, *args, **options) -> None:
        fmt = options["format"] or ("parquet" if options["output"].lower().endswith(".parquet") else "jsonl")
        try:
            count = procedure_export(
                output=options["output"],
                split=options["split"],
                fmt=fmt,
                shape=options["shape"],
                topic=options["topic"],
                mining_run=options["mining_run"],
                shard_size=options["shard_size"],
            )
        except (ValueError, RecordError) as exc:
            raise CommandError(str(exc)) from exc
        if options["shard_size"]:
            total = max(1, -(-count // options["shard_size"]))
            self.stdout.write(
                f"{shard_path(options['output'], 0, total)} ... {shard_path(options['output'], total - 1, total)}: "
                f"{count} procedures in {total} shards ({options['shape']}, {fmt})"
            )
        else:
            self.stdout.write(f"{options['output']}: {count} procedures written ({options['shape']}, {fmt})")
