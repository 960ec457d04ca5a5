from django.core.management.base import BaseCommand, CommandError

from goalstep.models import TaskSet
from goalstep.selectors import task_evaluation_accuracy
from goalstep.services import task_evaluation_create, task_evaluation_execute
from judging.models import LanguageModel
from judging.prompts import PromptError
from llm.constants import EXECUTORS
from llm.endpoints import EndpointNotConfigured


class Command(BaseCommand):
    help = "Evaluate a registered model on a stored goal-step task set through the LLM layer and print its accuracy."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--task-set", type=int, required=True, help="task set id (printed by goalstep_build)")
        parser.add_argument("--model", required=True, help="a registered model's name (judging LanguageModel)")
        parser.add_argument("--prompt", help="prompt file (default: goalstep/prompts/<task>.txt)")
        parser.add_argument("--executor", choices=EXECUTORS, default="online")
        parser.add_argument("--concurrency", type=int, default=16)

    def handle(self, *args, **options) -> None:
        task_set = TaskSet.objects.filter(pk=options["task_set"]).first()
        if task_set is None:
            raise CommandError(f"no task set {options['task_set']}")
        language_model = LanguageModel.objects.filter(name=options["model"]).first()
        if language_model is None:
            raise CommandError(f"no registered model {options['model']!r}")
        try:
            evaluation = task_evaluation_create(
                task_set=task_set, language_model=language_model, prompt_file=options["prompt"],
                executor=options["executor"], concurrency=options["concurrency"], start=False)
        except (ValueError, PromptError, EndpointNotConfigured) as exc:
            raise CommandError(str(exc)) from exc
        outcome = task_evaluation_execute(evaluation_id=evaluation.pk)
        evaluation.refresh_from_db()
        result = task_evaluation_accuracy(evaluation)
        accuracy = "—" if result["accuracy"] is None else f"{result['accuracy']:.3f}"
        self.stdout.write(
            f"evaluation {evaluation.pk} ({outcome}): {language_model.name} on task set {task_set.pk} "
            f"({task_set.task}): accuracy {accuracy} = {result['correct']} / {result['answered']} answered, "
            f"{result['unparseable']} unparseable, {result['n_items']} items")
        for topic, row in result["by_topic"].items():
            self.stdout.write(f"  {topic}: {row['accuracy']:.3f} ({row['correct']} / {row['answered']})")
