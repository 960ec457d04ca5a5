from django.core.management.base import BaseCommand, CommandError

from annotate.kinds import kind_get
from annotate.kinds.base import REPORT_CHOICE_TIERS
from annotate.kinds.multiple_choice.study_results import choice_tier_export
from annotate.models import Study
from core.record_files import RecordError


class Command(BaseCommand):
    help = (
        "Write the gold tier (all annotators chose the label) or the harder tier (all but one) of a "
        "multiple-choice study as goal-step task lines (Zhang et al. 2020 §3.4, Table 3)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--tier", required=True, choices=("gold", "harder"))
        parser.add_argument("--output", required=True)

    def handle(self, *args, **options) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None or not kind_get(study.kind).has_report(REPORT_CHOICE_TIERS):
            raise CommandError(f"no multiple-choice study {options['study']!r}")
        try:
            n = choice_tier_export(study=study, tier=options["tier"], output=options["output"])
        except RecordError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{study.slug}: {n} {options['tier']} items -> {options['output']}")
