"""Start How2Bench generation and judge runs from YAML files, or show a run's status."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from judging.models import ComponentsRun, GenerationRun, JudgeRun
from judging.prompts import PromptError
from judging.reference_runs import (
    reference_generation_runs_create, reference_generations_write, reference_inputs_import,
    reference_judge_runs_create, reference_judgments_write,
)
from judging.run_configs import RunConfigError, generation_config_load, judge_config_load, reference_bench_config_load
from judging.score_selectors import generation_run_score
from judging.score_services import components_run_create, components_run_execute
from judging.selectors import judge_run_score
from judging.services import (
    generation_run_create, generation_run_execute, judge_run_create, judge_run_execute, language_model_register,
    run_control, run_name_check,
)
from llm.endpoints import EndpointNotConfigured
from llm.runs import owned_run_state, run_state_json


class Command(BaseCommand):
    help = ("bench_run generate|judge --config FILE.yaml [--wait]; bench_run components --run NAME [--wait]; "
            "bench_run status NAME; bench_run retry NAME [--wait]")

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        for name in ("generate", "judge"):
            action = sub.add_parser(name, help=f"start a {name} run from a YAML file")
            action.add_argument("--config", required=True)
            action.add_argument("--wait", action="store_true",
                                help="run in this process until done instead of handing it to a Celery worker")
        components = sub.add_parser("components", help="extract the step components of a generation run for SCORE (docs/score.md)")
        components.add_argument("--run", required=True, help="the generation run's name")
        components.add_argument("--wait", action="store_true",
                                help="run in this process until done instead of handing it to a Celery worker")
        status = sub.add_parser("status", help="print a run's status (and How2Score for a judge run) as JSON")
        status.add_argument("name")
        retry = sub.add_parser("retry", help="Retry failed: ask exactly the requests of a generation, judge or "
                                             "components run that have no ok answer again")
        retry.add_argument("name")
        retry.add_argument("--wait", action="store_true",
                           help="run in this process until done instead of handing it to a Celery worker")

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

    def _reference(self, options) -> dict | None:
        """A configuration in the reference CLI's shape, translated (its notes printed)."""
        config = reference_bench_config_load(options["config"])
        if config is not None:
            for note in config["reference"]["notes"]:
                self.stdout.write(f"note: {note}")
        return config

    def _generate_reference(self, config: dict, options) -> None:
        inputs = reference_inputs_import(config=config)
        for line in inputs.lines:
            self.stdout.write(line)
        runs = reference_generation_runs_create(config=config, start=not options["wait"],
                                                procedure_ids=inputs.procedure_ids)
        for run in runs:
            self.stdout.write(f"generation run {run.name!r} (id {run.pk}): {len(run.procedure_ids)} procedures")
        if options["wait"]:
            for run in runs:
                self.stdout.write(f"{run.name} finished: {generation_run_execute(run_id=run.pk)}")
                self.stdout.write(f"wrote {reference_generations_write(config=config, run=run)}")

    def _judge_reference(self, config: dict, options) -> None:
        for line in reference_inputs_import(config=config).lines:
            self.stdout.write(line)
        runs = reference_judge_runs_create(config=config, start=not options["wait"])
        for run in runs:
            self.stdout.write(f"judge run {run.name!r} (id {run.pk}) on {run.generation_run.name!r}")
        if options["wait"]:
            for run in runs:
                self.stdout.write(f"{run.name} finished: {judge_run_execute(run_id=run.pk)}")
                self.stdout.write(json.dumps(judge_run_score(run)))
                self.stdout.write(f"wrote {reference_judgments_write(config=config, run=run)}")

    def _generate(self, options) -> None:
        reference = self._reference(options)
        if reference is not None:
            return self._generate_reference(reference, options)
        config = generation_config_load(options["config"])
        run_name_check(run_class=GenerationRun, name=config["name"])  # before the model is (re)registered
        model = language_model_register(**config.pop("model"))
        run = generation_run_create(language_model=model, start=not options["wait"], **config)
        self.stdout.write(f"generation run {run.name!r} (id {run.pk}): {len(run.procedure_ids)} procedures")
        if options["wait"]:
            self.stdout.write(f"finished: {generation_run_execute(run_id=run.pk)}")

    def _judge(self, options) -> None:
        reference = self._reference(options)
        if reference is not None:
            return self._judge_reference(reference, options)
        config = judge_config_load(options["config"])
        name = config.pop("generation_run")
        generation_run = GenerationRun.objects.filter(name=name).first()
        if generation_run is None:
            raise CommandError(f"{options['config']}: no generation run named {name!r}")
        run = judge_run_create(generation_run=generation_run, start=not options["wait"], **config)
        self.stdout.write(f"judge run {run.name!r} (id {run.pk}) on {generation_run.name!r}")
        if options["wait"]:
            self.stdout.write(f"finished: {judge_run_execute(run_id=run.pk)}")
            self.stdout.write(json.dumps(judge_run_score(run)))

    def _components(self, options) -> None:
        generation_run = GenerationRun.objects.filter(name=options["run"]).first()
        if generation_run is None:
            raise CommandError(f"no generation run named {options['run']!r}")
        run = components_run_create(generation_run=generation_run, start=not options["wait"])
        self.stdout.write(f"components run {run.name!r} (id {run.pk}): {len(run.steps_hashes)} step lists to extract")
        if options["wait"]:
            self.stdout.write(f"finished: {components_run_execute(run_id=run.pk)}")
            self.stdout.write(json.dumps(generation_run_score(generation_run)))

    @staticmethod
    def _find(name: str):
        for model in (JudgeRun, GenerationRun, ComponentsRun):
            run = model.objects.filter(name=name).select_related("llm_job").first()
            if run is not None:
                return run
        raise CommandError(f"no generation, judge or components run named {name!r}")

    def _retry(self, options) -> None:
        run = self._find(options["name"])
        n = run_control(run=run, action="retry")
        self.stdout.write(f"{run.name}: {n} failed request(s) to ask again")
        if options["wait"]:  # executed here; the queued task then finds the run finished
            execute = {JudgeRun: judge_run_execute, GenerationRun: generation_run_execute,
                       ComponentsRun: components_run_execute}[type(run)]
            self.stdout.write(f"finished: {execute(run_id=run.pk)}")
        self._status(run.name)

    def _status(self, name: str) -> None:
        run = self._find(name)
        job = run.llm_job
        judge_run = run if isinstance(run, JudgeRun) else None
        generation_run = run if isinstance(run, GenerationRun) else None
        status = {"name": run.name, **run_state_json(owned_run_state(run)), "prompt_hash": run.prompt_hash,
                  "requests": job.n_total if job else None, "finished_requests": job.n_done if job else None,
                  "cost_usd": float(job.cost_usd) if job else None}
        if isinstance(run, ComponentsRun):
            status["score"] = generation_run_score(run.generation_run)
        elif judge_run:
            status["how2score"] = judge_run_score(judge_run)
        else:
            status["score"] = generation_run_score(generation_run)
        self.stdout.write(json.dumps(status, indent=2))
