from django.core.management.base import BaseCommand, CommandError

from mining.models import MiningRun
from mining.run_counters import mining_run_counters_verify


class Command(BaseCommand):
    help = (
        "Count mining runs afresh from their stage results, documents and ledger entries and compare with "
        "the counters and ledger totals kept as they go (mining/run_counters.py, llm/ledger_totals.py); a "
        "mismatch is rebuilt from the rows and reported, and the command then exits 1. Safe while runs go on."
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
            if not report["rebuilt"]:
                self.stdout.write(f"{label}: counters agree with the rows ({report['counters']} counters)")
                continue
            rebuilt += [] if report["first_count"] and not report["ledger_mismatches"] else [run.pk]
            for mismatch in report["mismatches"]:
                key = ", ".join(f"{k}={v!r}" for k, v in mismatch["key"].items() if v != "")
                self.stdout.write(
                    f"{label}: mismatch at {key}: kept {mismatch['kept']} ({mismatch['kept_cost_usd']} USD, "
                    f"{mismatch['kept_cpu_us']} us CPU), counted {mismatch['counted']} "
                    f"({mismatch['counted_cost_usd']} USD, {mismatch['counted_cpu_us']} us CPU)"
                )
            for mismatch in report["ledger_mismatches"]:
                key = ", ".join(f"{k}={v!r}" for k, v in mismatch["key"].items() if v != "")
                self.stdout.write(
                    f"{label}: ledger mismatch at {key}: kept {mismatch['kept']}, counted {mismatch['counted']}"
                )
            n = len(report["mismatches"]) + len(report["ledger_mismatches"])
            self.stdout.write(f"{label}: {n} counters rebuilt from the rows")
        if rebuilt:
            raise CommandError(f"counters of run {', '.join(map(str, rebuilt))} disagreed with the rows (now rebuilt)")
