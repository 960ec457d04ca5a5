"""Import and export generations and judgments as JSONL (the shapes bench_metrics and
bench_aggregate read), and export distillation data."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from core.record_files import RecordError
from judging.distillation import distillation_export
from judging.judgment_import import judgments_import
from judging.models import GenerationRun, JudgeRun
from judging.transfer import generations_export, generations_import, judgments_export


class Command(BaseCommand):
    help = (
        "bench_transfer import-generations FILE --run NAME [--model M] [--step-parser product|reference] | import-judgments FILE [--judge J] [--run NAME] [--model M] | "
        "export-generations --run NAME --output F | export-judgments --judge J [--run NAME] --output F | "
        "export-distillation --first RUN --second RUN --output F"
    )

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        p = sub.add_parser("import-generations")
        p.add_argument("file")
        p.add_argument("--run", required=True, help="name of the generation run to create")
        p.add_argument("--model", help="model name, when the file has no model field")
        p.add_argument(
            "--step-parser",
            choices=("product", "reference"),
            help="how a record without predicted_steps has its model_completion parsed: ours (the default) or "
            "the reference CLI's",
        )
        p = sub.add_parser("import-judgments")
        p.add_argument("file")
        p.add_argument("--judge", help="judge name; default: the file's judge field (a name, or judge info's model)")
        p.add_argument("--run", help="attach to the generations of this generation run")
        p.add_argument("--model", help="attach to the generations of this model")
        p = sub.add_parser("export-generations")
        p.add_argument("--run", required=True)
        p.add_argument("--output", required=True)
        p = sub.add_parser("export-judgments")
        p.add_argument("--judge", required=True)
        p.add_argument("--run", help="only generations of this generation run")
        p.add_argument("--output", required=True)
        p = sub.add_parser("export-distillation", help="teacher labels stable across two judge runs, as SFT JSONL")
        p.add_argument("--first", required=True, help="first judge run of the teacher")
        p.add_argument("--second", required=True, help="second judge run of the teacher (another seed)")
        p.add_argument("--output", required=True)

    def _generation_run(self, name: str | None) -> GenerationRun | None:
        if name is None:
            return None
        run = GenerationRun.objects.filter(name=name).first()
        if run is None:
            raise CommandError(f"no generation run named {name!r}")
        return run

    def _judge_run(self, name: str) -> JudgeRun:
        run = JudgeRun.objects.filter(name=name).first()
        if run is None:
            raise CommandError(f"no judge run named {name!r}")
        return run

    def handle(self, *args, **options) -> None:
        action = options["action"]
        try:
            if action == "import-generations":
                run = generations_import(
                    path=options["file"],
                    run_name=options["run"],
                    model=options["model"],
                    step_parser=options["step_parser"],
                )
                self.stdout.write(f"generation run {run.name!r}: {run.generations.count()} generations imported")
            elif action == "import-judgments":
                n = judgments_import(
                    path=options["file"],
                    judge=options["judge"],
                    run=self._generation_run(options["run"]),
                    model=options["model"],
                )
                self.stdout.write(f"{n} judgments imported")
            elif action == "export-generations":
                export_run = self._generation_run(options["run"])
                if export_run is None:
                    raise CommandError("export-generations needs --run NAME (the generation run to export)")
                n = generations_export(run=export_run, output=options["output"])
                self.stdout.write(f"{options['output']}: {n} generations")
            elif action == "export-judgments":
                n = judgments_export(
                    judge=options["judge"], run=self._generation_run(options["run"]), output=options["output"]
                )
                self.stdout.write(f"{options['output']}: {n} judgments")
            else:
                summary = distillation_export(
                    first=self._judge_run(options["first"]),
                    second=self._judge_run(options["second"]),
                    output=options["output"],
                )
                self.stdout.write(json.dumps(summary, indent=2))
        except FileNotFoundError as exc:
            raise CommandError(f"{exc.filename}: no such file") from exc
        except (RecordError, ValueError) as exc:
            raise CommandError(f"{exc}\nNothing was stored." if action.startswith("import") else str(exc)) from exc
