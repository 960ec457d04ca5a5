"""Start a How2Mine run from a YAML file, change a run's stages, or show a run's progress."""
from __future__ import annotations

import json
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.run_configs import RunConfigError, config_read
from mining.models import MiningRun
from mining.run_configs import mining_config_parse
from mining.run_selectors import mining_run_progress
from mining.run_services import mining_run_create, mining_run_update_stages
from mining.runner import mining_run_execute


class Command(BaseCommand):
    help = ("mine_run --corpus NAME --config FILE.yaml [--wait]: start a run, or, when a run of that name exists, "
            "apply the file's changed stages to it and re-run only what changed; mine_run --status NAME")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--corpus", help="the corpus to sample documents from (or the file's corpus key)")
        parser.add_argument("--config", help="the run's YAML file")
        parser.add_argument("--wait", action="store_true",
                            help="run in this process until done instead of handing it to Celery workers")
        parser.add_argument("--status", metavar="NAME", help="print a run's progress as JSON")

    def handle(self, *args, **options) -> None:
        if options["status"]:
            run = MiningRun.objects.filter(name=options["status"]).first()
            if run is None:
                raise CommandError(f"no mining run named {options['status']!r}")
            self.stdout.write(json.dumps(mining_run_progress(run), indent=2, default=str))
            return
        if not options["config"]:
            raise CommandError("give --config FILE.yaml (or --status NAME)")
        source = options["config"]
        try:
            text = config_read(source)
            name = mining_config_parse(text, source=source)["name"]
            existing = MiningRun.objects.filter(name=name).first()
            if existing is not None:
                if options["corpus"] and options["corpus"] != existing.corpus.name:
                    raise RunConfigError(f"run {name!r} mines corpus {existing.corpus.name!r}, not {options['corpus']!r}")
                report = mining_run_update_stages(run=existing, config_text=text, source=source,
                                                  start=not options["wait"])
                run = existing
                changed = ", ".join(report["changed_stages"]) or "none"
                self.stdout.write(f"mining run {name!r} (id {run.pk}) updated: changed stages {changed}; "
                                  f"{report['documents_rewalked']} documents walked again")
            else:
                run = mining_run_create(config_text=text, source=source, corpus_name=options["corpus"] or "",
                                        start=not options["wait"])
                topics = ", ".join(run.topics.values_list("name", flat=True))
                self.stdout.write(f"mining run {name!r} (id {run.pk}) on corpus {run.corpus.name!r}: up to "
                                  f"{run.candidates_per_topic} documents per topic ({topics})")
        except (RunConfigError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if options["wait"]:
            outcome = mining_run_execute(run_id=run.pk)
            while outcome.startswith("waiting") and outcome != "waiting for other workers":
                time.sleep(settings.LLM_BATCH_POLL_SECONDS)
                outcome = mining_run_execute(run_id=run.pk)
            self.stdout.write(f"finished: {outcome}")
            self.stdout.write(json.dumps(mining_run_progress(run)["totals"], default=str))
