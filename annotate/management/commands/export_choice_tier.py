import json

from django.core.management.base import BaseCommand, CommandError

from annotate.kinds import kind_get
from annotate.models import Study
from core.record_files import RecordError
from core.record_output import atomic_output


class Command(BaseCommand):
    help = (
        "Write one tier of a study's items as its kind's lines: of a multiple-choice study, the gold "
        "tier (all annotators chose the label) or the harder tier (all but one) as goal-step task "
        "lines (Zhang et al. 2020 §3.4, Table 3)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--tier", required=True, help="a tier of the study's kind (multiple choice: gold, harder)")
        parser.add_argument("--output", required=True)

    def handle(self, *args, **options) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"no study {options['study']!r}")
        kind = kind_get(study.kind)
        if options["tier"] not in kind.tiers:
            tiers = ", ".join(kind.tiers) or "none"
            raise CommandError(f"a {kind.label} study has no tier {options['tier']!r} (its tiers: {tiers})")
        records = kind.tier_records(study, options["tier"])
        try:
            with atomic_output(options["output"]) as handle:
                for record in records:
                    handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
        except RecordError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{study.slug}: {len(records)} {options['tier']} items -> {options['output']}")
