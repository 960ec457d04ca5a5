"""Start How2Bench generation and judge runs from YAML files, or show a run's status."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from core.app_errors import AppError
from core.errors import refusal_text
from core.run_configs import config_read
from judging.models import ComponentsRun, GenerationRun, JudgeRun
from judging.prompts import PromptError
from judging.reference_runs import reference_generations_write, reference_judgments_write
from judging.run_configs import RunConfigError
from judging.run_launch import BenchLaunch, bench_generate_launch, bench_judge_launch, components_launch
from judging.score_selectors import generation_run_score
from judging.score_services import components_run_create, components_run_execute
from judging.selectors import judge_run_score
from judging.services import generation_run_execute, judge_run_execute
from llm.costs import cost_json, job_cost
from llm.endpoints import EndpointNotConfigured
from llm.run_commands import run_finished_line, runs_done_check
from llm.run_lifecycle import run_control
from llm.runs import owned_run_state, run_state_json


def _prompt_used(run) -> str:
    """Which prompt file a run sends, and the SHA-256 of its text."""
    return f"prompt {run.prompt_file} (sha256 {run.prompt_hash})"


class Command(BaseCommand):
    help = (
        "bench_run generate|judge --config FILE.yaml [--wait]; bench_run components --run NAME|--config FILE.yaml "
        "[--wait]; "
        "bench_run status NAME; bench_run retry NAME [--wait]"
    )

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        for name in ("generate", "judge"):
            action = sub.add_parser(name, help=f"start a {name} run from a YAML file")
            action.add_argument("--config", required=True)
            action.add_argument(
                "--wait",
                action="store_true",
                help="run in this process until done instead of handing it to a Celery worker",
            )
        components = sub.add_parser(
            "components", help="extract the step components of a generation run for SCORE (docs/score.md)"
        )
        which = components.add_mutually_exclusive_group(required=True)
        which.add_argument("--run", help="the generation run's name")
        which.add_argument(
            "--config",
            help="a YAML file: generation_run (its name), and optionally name, "
            "prompt_file, executor, concurrency, budget_usd (as the API takes it)",
        )
        components.add_argument(
            "--wait",
            action="store_true",
            help="run in this process until done instead of handing it to a Celery worker",
        )
        status = sub.add_parser("status", help="print a run's status (and How2Score for a judge run) as JSON")
        status.add_argument("name")
        retry = sub.add_parser(
            "retry",
            help="Retry failed: ask exactly the requests of a generation, judge or "
            "components run that have no ok answer again",
        )
        retry.add_argument("name")
        retry.add_argument(
            "--wait",
            action="store_true",
            help="run in this process until done instead of handing it to a Celery worker",
        )

    def handle(self, *args, **options) -> None:
        try:
            if options["action"] == "generate":
                self._generate(options)
            elif options["action"] == "judge":
                self._judge(options)
            elif options["action"] == "components":
                self._components(options)
            elif options["action"] == "retry":
                self._retry(options)
            else:
                self._status(options["name"])
        except (RunConfigError, PromptError, EndpointNotConfigured, ValueError) as exc:
            raise CommandError(str(exc)) from exc

    def _launched(self, launch: BenchLaunch) -> None:
        for line in launch.notes:  # a reference configuration's notes and imported inputs
            self.stdout.write(line)

    def _generate(self, options) -> None:
        source = options["config"]
        launch = bench_generate_launch(config_text=config_read(source), source=source, start=not options["wait"])
        self._launched(launch)
        for run in launch.runs:
            self.stdout.write(
                f"generation run {run.name!r} (id {run.pk}): {len(run.procedure_ids)} procedures; {_prompt_used(run)}; "
                f"step parser {run.step_parser}"
            )
        if options["wait"]:
            finished = []
            for run in launch.runs:
                generation_run_execute(run_id=run.pk)
                finished.append(self._finished(run, name=run.name if launch.reference else ""))
                if launch.reference:
                    for path in reference_generations_write(config=launch.reference, run=run):
                        self.stdout.write(f"wrote {path}")
            runs_done_check(finished)

    def _judge(self, options) -> None:
        source = options["config"]
        launch = bench_judge_launch(config_text=config_read(source), source=source, start=not options["wait"])
        self._launched(launch)
        for run in launch.runs:
            self.stdout.write(
                f"judge run {run.name!r} (id {run.pk}) on {run.generation_run.name!r}; {_prompt_used(run)}"
            )
        if options["wait"]:
            finished = []
            for run in launch.runs:
                judge_run_execute(run_id=run.pk)
                finished.append(self._finished(run, name=run.name if launch.reference else ""))
                self.stdout.write(json.dumps(judge_run_score(run)))
                if launch.reference:
                    for path in reference_judgments_write(config=launch.reference, run=run):
                        self.stdout.write(f"wrote {path}")
            runs_done_check(finished)

    def _components(self, options) -> None:
        if options["config"]:
            run = components_launch(
                config_text=config_read(options["config"]), source=options["config"], start=not options["wait"]
            )
            generation_run = run.generation_run
        else:
            found = GenerationRun.objects.filter(name=options["run"]).first()
            if found is None:
                raise CommandError(f"no generation run named {options['run']!r}")
            generation_run = found
            run = components_run_create(generation_run=generation_run, start=not options["wait"])
        self.stdout.write(f"components run {run.name!r} (id {run.pk}): {len(run.steps_hashes)} step lists to extract")
        if options["wait"]:
            components_run_execute(run_id=run.pk)
            finished = self._finished(run)
            self.stdout.write(json.dumps(generation_run_score(generation_run)))
            runs_done_check([finished])

    @staticmethod
    def _find(name: str):
        for model in (JudgeRun, GenerationRun, ComponentsRun):
            run = model.objects.filter(name=name).select_related("llm_job").first()
            if run is not None:
                return run
        raise CommandError(f"no generation, judge or components run named {name!r}")

    def _retry(self, options) -> None:
        run = self._find(options["name"])
        try:
            n = run_control(run, "retry")  # the pages' and the API's one entry point, and its refusals
        except AppError as exc:
            raise CommandError(refusal_text(exc)) from exc
        self.stdout.write(f"{run.name}: {n} failed request(s) to ask again")
        if not options["wait"]:
            self._status(run.name)
            return
        execute = {  # executed here; the queued task then finds the run finished
            JudgeRun: judge_run_execute,
            GenerationRun: generation_run_execute,
            ComponentsRun: components_run_execute,
        }[type(run)]
        execute(run_id=run.pk)
        finished = self._finished(run)
        self._status(run.name)
        runs_done_check([finished])

    def _finished(self, run, *, name: str = "") -> tuple[str, dict]:
        """Print the run's true state once it has stopped (docs/commands.md, "Waiting for a
        run"); returns it for ``runs_done_check``."""
        run.refresh_from_db()
        state = owned_run_state(run)
        self.stdout.write(run_finished_line(state, name=name))
        noun = {JudgeRun: "judge run", GenerationRun: "generation run", ComponentsRun: "components run"}[type(run)]
        return f"{noun} {run.name!r}", state

    def _status(self, name: str) -> None:
        run = self._find(name)
        job = run.llm_job
        cost = job_cost(job)
        judge_run = run if isinstance(run, JudgeRun) else None
        generation_run = run if isinstance(run, GenerationRun) else None
        status = {
            "name": run.name,
            **run_state_json(owned_run_state(run)),
            "prompt_file": run.prompt_file,
            "prompt_hash": run.prompt_hash,
            "requests": job.n_total if job else None,
            "finished_requests": job.n_done if job else None,
            # What the run spent: null when unknown (a request without a price, llm/costs.py).
            "cost_usd": cost_json(cost),
            "requests_without_price": cost["n_unpriced"] if cost else 0,
        }
        if isinstance(run, ComponentsRun):
            status["score"] = generation_run_score(run.generation_run)
        elif judge_run:
            status["how2score"] = judge_run_score(judge_run)
        elif generation_run is not None:
            status["step_parser"] = generation_run.step_parser
            status["score"] = generation_run_score(generation_run)
        self.stdout.write(json.dumps(status, indent=2))
