from django.core.management.base import BaseCommand, CommandError

from mining.models import MiningRun
from mining.run_counters import mining_run_counters_verify


class Command(BaseCommand):
    help = (
        "Count mining runs afresh from their stage results and documents and compare with the counters "
        "kept as they go (mining/run_counters.py); a mismatch is rebuilt from the rows and reported, "
        "and the command then exits 1. Safe while runs go on."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--run", type=int, action="append", help="a run's id (repeatable; default: every run)")

    def handle(self, *args, **options) -> None:
        runs = MiningRun.objects.order_by("pk")
        if options["run"]:
            runs = runs.filter(pk__in=options["run"])
            missing = sorted(set(options["run"]) - set(runs.values_list("pk", flat=True)))
            if missing:
                raise CommandError(f"--run: no mining run with id {', '.join(map(str, missing))}")
        rebuilt = []
        for run in runs:
            report = mining_run_counters_verify(run)
            label = f"run {run.pk} ({run.name})"
            if report["first_count"]:
                self.stdout.write(f"{label}: counted from its rows for the first time")
            if not report["mismatches"]:
                self.stdout.write(f"{label}: counters agree with the rows ({report['counters']} counters)")
                continue
            rebuilt += [] if report["first_count"] else [run.pk]
            for mismatch in report["mismatches"]:
                key = ", ".join(f"{k}={v!r}" for k, v in mismatch["key"].items() if v != "")
                self.stdout.write(
                    f"{label}: mismatch at {key}: kept {mismatch['kept']} ({mismatch['kept_cost_usd']} USD), "
                    f"counted {mismatch['counted']} ({mismatch['counted_cost_usd']} USD)"
                )
            self.stdout.write(f"{label}: {len(report['mismatches'])} counters rebuilt from the rows")
        if rebuilt:
            raise CommandError(f"counters of run {', '.join(map(str, rebuilt))} disagreed with the rows (now rebuilt)")
