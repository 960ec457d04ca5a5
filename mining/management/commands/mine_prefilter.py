from django.core.management.base import BaseCommand, CommandError

from core.record_files import RecordError
from mining.constants import HEURISTICS_NORMALISATION, HEURISTICS_NORMALISATIONS, MAX_STEPS, MIN_STEPS
from mining.heuristics import HeuristicsFilter, prefilter_file


class Command(BaseCommand):
    help = (
        "Run the How2Mine heuristics stage (step count and n-gram repetition, How2Everything App. B.3) "
        "over a JSONL file of records with 'steps', writing each record with a 'prefilter' verdict. "
        "Plain or .gz/.zst/.bz2/.xz on either side; streamed; all or nothing on a bad record."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--input", required=True, help="JSONL file; every line an object with 'steps' (list of strings)"
        )
        parser.add_argument("--output", required=True, help="JSONL file to write (replaced only on success)")
        parser.add_argument("--min-steps", type=int, default=MIN_STEPS, help=f"fewest steps kept (default {MIN_STEPS})")
        parser.add_argument("--max-steps", type=int, default=MAX_STEPS, help=f"most steps kept (default {MAX_STEPS})")
        parser.add_argument(
            "--normalisation",
            choices=HEURISTICS_NORMALISATIONS,
            default=HEURISTICS_NORMALISATION,
            help="how steps are compared: 'reference' (the released data's rule, default) or "
            "'nfkc_casefold' (NFKC, casefold, Unicode punctuation; docs/mining.md)",
        )

    def handle(self, *args, **options) -> None:
        try:
            HeuristicsFilter(min_steps=options["min_steps"], max_steps=options["max_steps"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        try:
            summary = prefilter_file(
                options["input"],
                options["output"],
                min_steps=options["min_steps"],
                max_steps=options["max_steps"],
                normalisation=options["normalisation"],
            )
        except RecordError as exc:
            raise CommandError(f"{exc}\nNothing was written to {options['output']}.") from exc
        self.stdout.write(
            f"{options['input']} -> {options['output']}: {summary.records} records, "
            f"{summary.passed} passed, {summary.rejected_total} rejected"
        )
        for code, count in summary.rejected_in_order():
            self.stdout.write(f"  rejected {code}: {count}")
