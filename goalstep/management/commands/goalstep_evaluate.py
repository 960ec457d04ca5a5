import json

from django.core.management.base import BaseCommand, CommandError

from core.run_configs import config_read
from goalstep.models import TaskEvaluation, TaskSet
from goalstep.run_launch import task_evaluation_launch
from goalstep.selectors import task_evaluation_accuracy, task_evaluation_state
from goalstep.services import task_evaluation_create, task_evaluation_execute, task_evaluation_retry_failed
from judging.models import LanguageModel
from judging.prompts import PromptError
from llm.constants import EXECUTORS
from llm.endpoints import EndpointNotConfigured
from llm.run_commands import run_finished_line, runs_done_check
from llm.runs import run_state_json


class Command(BaseCommand):
    help = (
        "Evaluate a registered model on a stored goal-step task set through the LLM layer and print its accuracy "
        "(--task-set ID --model NAME); print an evaluation's state as JSON (--status ID); or ask its failed "
        "requests again (--retry ID)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--config",
            help="a YAML file with task_set, model and optionally prompt_file, executor, "
            "concurrency, budget_usd (as the API takes it)",
        )
        parser.add_argument("--task-set", type=int, help="task set id (printed by goalstep_build)")
        parser.add_argument("--model", help="a registered model's name (judging LanguageModel)")
        parser.add_argument("--prompt", help="prompt file (default: goalstep/prompts/<task>.txt)")
        parser.add_argument("--executor", choices=EXECUTORS, default="online")
        parser.add_argument("--concurrency", type=int, default=16)
        parser.add_argument(
            "--status",
            type=int,
            metavar="ID",
            help="print an evaluation's state (status, requests per outcome, top errors) as JSON",
        )
        parser.add_argument(
            "--retry",
            type=int,
            metavar="ID",
            help="Retry failed: ask exactly the evaluation's requests without an ok answer again, "
            "in this process, then print its accuracy and state",
        )

    def handle(self, *args, **options) -> None:
        if options["status"] is not None:
            self._status(self._evaluation(options["status"]))
            return
        if options["retry"] is not None:
            evaluation = self._evaluation(options["retry"])
            try:
                n = task_evaluation_retry_failed(evaluation=evaluation, start=False)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"evaluation {evaluation.pk}: {n} failed request(s) to ask again")
            finished = self._evaluate(evaluation)
            self._status(evaluation)
            runs_done_check([finished])
            return
        if options["config"]:
            try:
                evaluation = task_evaluation_launch(
                    config_text=config_read(options["config"]), source=options["config"], start=False
                )
            except (ValueError, PromptError, EndpointNotConfigured) as exc:
                raise CommandError(str(exc)) from exc
            runs_done_check([self._evaluate(evaluation)])
            return
        if options["task_set"] is None or not options["model"]:
            raise CommandError(
                "give --config FILE.yaml, or --task-set ID and --model NAME (or --status ID, or --retry ID)"
            )
        task_set = TaskSet.objects.filter(pk=options["task_set"]).first()
        if task_set is None:
            raise CommandError(f"no task set {options['task_set']}")
        language_model = LanguageModel.objects.filter(name=options["model"]).first()
        if language_model is None:
            raise CommandError(f"no registered model {options['model']!r}")
        try:
            evaluation = task_evaluation_create(
                task_set=task_set,
                language_model=language_model,
                prompt_file=options["prompt"],
                executor=options["executor"],
                concurrency=options["concurrency"],
                start=False,
            )
        except (ValueError, PromptError, EndpointNotConfigured) as exc:
            raise CommandError(str(exc)) from exc
        runs_done_check([self._evaluate(evaluation)])

    @staticmethod
    def _evaluation(pk: int) -> TaskEvaluation:
        evaluation = (
            TaskEvaluation.objects.select_related("llm_job", "task_set", "language_model").filter(pk=pk).first()
        )
        if evaluation is None:
            raise CommandError(f"no goal-step evaluation {pk}")
        return evaluation

    def _evaluate(self, evaluation: TaskEvaluation) -> tuple[str, dict]:
        """Execute the evaluation in this process, print its accuracy and its true state
        (docs/commands.md, "Waiting for a run"); returns the state for ``runs_done_check``."""
        task_evaluation_execute(evaluation_id=evaluation.pk)
        self._report(evaluation)
        state = task_evaluation_state(evaluation)
        self.stdout.write(run_finished_line(state))
        return f"goal-step evaluation {evaluation.pk}", state

    def _report(self, evaluation: TaskEvaluation) -> None:
        evaluation.refresh_from_db()
        task_set, language_model = evaluation.task_set, evaluation.language_model
        result = task_evaluation_accuracy(evaluation)
        accuracy = (
            "—"
            if result["accuracy"] is None
            else (f"{result['accuracy']:.3f} (95% Wilson {result['ci95'][0]:.3f}–{result['ci95'][1]:.3f})")
        )
        left_out = ", ".join(f"{outcome} {n}" for outcome, n in result["unusable"].items()) or "none"
        self.stdout.write(
            f"evaluation {evaluation.pk} ({evaluation.status}): {language_model.name} on task set "
            f"{task_set.pk} ({task_set.task}): accuracy {accuracy} = {result['correct']} / {result['readable']} "
            f"readable of {result['answered']} answered ({result['ambiguous']} ambiguous, "
            f"{result['unparseable']} unparseable: not scored), {result['n_items']} items; left out: "
            f"{result['n_unusable']} unusable ({left_out}), {result['n_unanswered']} unanswered"
        )
        for topic, row in result["by_topic"].items():
            counts = f"{row['correct']} / {row['readable']} readable of {row['answered']} answered"
            self.stdout.write(
                f"  {topic}: — ({counts}: no readable answer)"
                if row["accuracy"] is None
                else f"  {topic}: {row['accuracy']:.3f} ({counts}; 95% Wilson {row['ci95'][0]:.3f}–{row['ci95'][1]:.3f})"
            )

    def _status(self, evaluation: TaskEvaluation) -> None:
        evaluation.refresh_from_db()
        state = run_state_json(task_evaluation_state(evaluation))
        self.stdout.write(
            json.dumps(
                {
                    **state,
                    "evaluation": evaluation.pk,
                    "task_set": evaluation.task_set_id,
                    "model": evaluation.language_model.name,
                },
                indent=2,
            )
        )
