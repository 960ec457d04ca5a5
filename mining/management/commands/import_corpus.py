from django.core.management.base import BaseCommand, CommandError

from core.record_files import RecordError
from mining.corpus_services import CorpusImportFailed, corpus_import
from mining.document_records import DocumentFields


class Command(BaseCommand):
    help = (
        "Import documents into a corpus from a JSONL, CSV, Parquet or Arrow file (optionally "
        ".gz/.zst/.bz2/.xz) or from every matching file below a folder. Duplicate ids are skipped and "
        "reported. Bad rows are listed with file and line; unless --skip-bad is given, any bad row means "
        "nothing is imported."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="corpus name (created if it does not exist; otherwise documents are added)")
        parser.add_argument("path", metavar="FILE_OR_DIR")
        parser.add_argument("--id-field", default="id", help="field holding the document id (default: id)")
        parser.add_argument("--text-field", default="text", help="field holding the text (default: text)")
        parser.add_argument("--url-field", default="url", help="field holding the URL (default: url)")
        parser.add_argument("--topic-field", default="topic", help="field holding the topic (default: topic)")
        parser.add_argument(
            "--include", help="glob for the files of a folder, e.g. '*.jsonl.zst' (default: every record file)"
        )
        parser.add_argument("--skip-bad", action="store_true", help="import the good rows and list the bad ones")
        parser.add_argument("--create-topics", action="store_true", help="create topics that do not exist yet")
        parser.add_argument("--description", default="", help="description of the corpus")

    def handle(self, *args, **options) -> None:
        fields = DocumentFields(
            id=options["id_field"], text=options["text_field"], url=options["url_field"], topic=options["topic_field"]
        )
        try:
            report = corpus_import(
                name=options["name"],
                path=options["path"],
                fields=fields,
                include=options["include"],
                skip_bad=options["skip_bad"],
                create_topics=options["create_topics"],
                description=options["description"],
            )
        except FileNotFoundError as exc:
            raise CommandError(f"{options['path']}: no such file or folder") from exc
        except CorpusImportFailed as exc:
            lines = exc.report.lines()
            lines[-1] = "Nothing was imported: pass --skip-bad to import the good rows and skip the bad ones."
            raise CommandError("\n".join(lines)) from exc
        except (RecordError, ValueError) as exc:
            raise CommandError(f"{exc}\nNothing was imported.") from exc
        self.stdout.write("\n".join(report.lines()))
