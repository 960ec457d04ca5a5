from django.core.management.base import BaseCommand, CommandError

from annotate.exports import choice_tier_export
from annotate.kinds.multiple_choice import KEY as MULTIPLE_CHOICE
from annotate.models import Study
from mining.record_files import RecordFileError


class Command(BaseCommand):
    help = ("Write the gold tier (all annotators chose the label) or the harder tier (all but one) of a "
            "multiple-choice study as goal-step task lines (Zhang et al. 2020 §3.4, Table 3).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--tier", required=True, choices=("gold", "harder"))
        parser.add_argument("--output", required=True)

    def handle(self, *args, **options) -> None:
        study = Study.objects.filter(slug=options["study"], kind=MULTIPLE_CHOICE).first()
        if study is None:
            raise CommandError(f"no multiple-choice study {options['study']!r}")
        try:
            n = choice_tier_export(study=study, tier=options["tier"], output=options["output"])
        except RecordFileError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{study.slug}: {n} {options['tier']} items -> {options['output']}")
