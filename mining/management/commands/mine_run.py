"""Start a How2Mine run from a YAML file, change a run's stages, show a run's state and
progress, or retry its failed documents."""

from __future__ import annotations

import json
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.run_configs import RunConfigError, config_read
from llm.run_commands import run_finished_line, runs_done_check
from llm.runs import run_state_json
from mining.models import MiningRun
from mining.run_configs import mining_config_parse
from mining.run_selectors import mining_run_progress, mining_run_state
from mining.run_services import (
    mining_reference_export,
    mining_reference_inputs_import,
    mining_run_create,
    mining_run_retry_failures,
    mining_run_update_stages,
)
from mining.runner import mining_run_execute


class Command(BaseCommand):
    help = (
        "mine_run --corpus NAME --config FILE.yaml [--wait]: start a run, or, when a run of that name exists, "
        "apply the file's changed stages to it and re-run only what changed; mine_run --status NAME; "
        "mine_run --retry NAME [--wait]"
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--corpus", help="the corpus to sample documents from (or the file's corpus key)")
        parser.add_argument("--config", help="the run's YAML file")
        parser.add_argument(
            "--wait", action="store_true", help="run in this process until done instead of handing it to Celery workers"
        )
        parser.add_argument(
            "--status",
            metavar="NAME",
            help="print a run's state (status, requests per outcome, top errors) and progress as JSON",
        )
        parser.add_argument(
            "--retry",
            metavar="NAME",
            help="Retry failed: walk the run's failed documents again, asking their failed "
            "requests again (and nothing else)",
        )

    def handle(self, *args, **options) -> None:
        if options["status"]:
            self._status(self._run(options["status"]))
            return
        if options["retry"]:
            run = self._run(options["retry"])
            try:
                n = mining_run_retry_failures(run=run, start=not options["wait"])
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"{run.name}: {n} failed document(s) queued again")
            finished = self._execute(run) if options["wait"] and n else None
            self._status(run)
            if finished is not None:
                runs_done_check([finished])
            return
        if not options["config"]:
            raise CommandError("give --config FILE.yaml (or --status NAME, or --retry NAME)")
        source = options["config"]
        try:
            text = config_read(source)
            parsed = mining_config_parse(text, source=source)
            name = parsed["name"]
            for note in (parsed.get("reference") or {}).get("notes", []):  # a reference CLI configuration
                self.stdout.write(f"note: {note}")
            if (parsed.get("reference") or {}).get("inputs"):
                options["corpus"] = mining_reference_inputs_import(config=parsed, corpus_name=options["corpus"] or "")
            existing = MiningRun.objects.filter(name=name).first()
            if existing is not None:
                if options["corpus"] and options["corpus"] != existing.corpus.name:
                    raise RunConfigError(
                        f"run {name!r} mines corpus {existing.corpus.name!r}, not {options['corpus']!r}"
                    )
                report = mining_run_update_stages(
                    run=existing, config_text=text, source=source, start=not options["wait"]
                )
                run = existing
                changed = ", ".join(report["changed_stages"]) or "none"
                self.stdout.write(
                    f"mining run {name!r} (id {run.pk}) updated: changed stages {changed}; "
                    f"{report['documents_rewalked']} documents walked again"
                )
            else:
                run = mining_run_create(
                    config_text=text, source=source, corpus_name=options["corpus"] or "", start=not options["wait"]
                )
                topics = ", ".join(run.topics.values_list("name", flat=True))
                self.stdout.write(
                    f"mining run {name!r} (id {run.pk}) on corpus {run.corpus.name!r}: up to "
                    f"{run.candidates_per_topic} documents per topic ({topics})"
                )
        except (RunConfigError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if options["wait"]:
            finished = self._execute(run)
            self.stdout.write(json.dumps(mining_run_progress(run)["totals"], default=str))
            for path in mining_reference_export(run=run):  # a reference configuration's export
                self.stdout.write(f"exported {path}")
            runs_done_check([finished])
        elif (run.config or {}).get("reference"):
            self.stdout.write(
                "the reference configuration's export is written by mine_run --wait, or later with "
                f"export_procedures --mining-run {run.name} --shape how2mine.v1 --output FILE"
            )

    @staticmethod
    def _run(name: str) -> MiningRun:
        run = MiningRun.objects.filter(name=name).first()
        if run is None:
            raise CommandError(f"no mining run named {name!r}")
        return run

    def _execute(self, run: MiningRun) -> tuple[str, dict]:
        """Run in this process until it stops (polling Batch API jobs), then print its true
        state (docs/commands.md, "Waiting for a run"); returns it for ``runs_done_check``."""
        outcome = mining_run_execute(run_id=run.pk)
        while outcome.startswith("waiting") and outcome != "waiting for other workers":
            time.sleep(settings.LLM_BATCH_POLL_SECONDS)
            outcome = mining_run_execute(run_id=run.pk)
        run.refresh_from_db()
        state = mining_run_state(run)
        self.stdout.write(run_finished_line(state))
        return f"mining run {run.name!r}", state

    def _status(self, run: MiningRun) -> None:
        """The run's state (keys ``status`` and ``outcomes``: requests per outcome, from the
        ledger), then its progress; the stage results' own counts are ``stage_outcomes``."""
        run.refresh_from_db()
        progress = mining_run_progress(run)
        state = {
            "name": run.name,
            **run_state_json(mining_run_state(run)),
            **{k: v for k, v in progress.items() if k not in ("run", "status", "outcomes")},
            "stage_outcomes": progress["outcomes"],
        }
        self.stdout.write(json.dumps(state, indent=2, default=str))
