from django.core.management.base import BaseCommand, CommandError

from core.record_files import RecordError
from goalstep.constants import MAX_SHARED_WORDS, MIN_GOAL_WORDS, MIN_STEP_WORDS, SIMILARITY_CEILING, TASKS
from goalstep.items import FilterSettings, report_lines
from goalstep.services import SPLITS, task_set_build
from mining.embeddings import EmbeddingModelUnavailable


def _optional(cast):
    """A filter threshold, or ``off`` to turn the filter off."""

    def parse(value: str):
        return None if value.strip().lower() in ("off", "none") else cast(value)

    parse.__name__ = cast.__name__
    return parse


class Command(BaseCommand):
    help = (
        "Build a goal-step task (step inference, goal inference, step ordering; Zhang et al. 2020 §3) from the "
        "How2Bench or How2Train procedures and write it as JSONL, one item per line."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--task", required=True, choices=TASKS)
        parser.add_argument("--split", required=True, choices=SPLITS)
        parser.add_argument("--output", required=True, help="JSONL file to write (.gz/.zst/.bz2/.xz compress it)")
        parser.add_argument("--limit", type=int, help="stop after this many items")
        parser.add_argument("--seed", type=int, default=0, help="seed of every random choice (default: 0)")
        parser.add_argument(
            "--min-step-words",
            type=_optional(int),
            default=MIN_STEP_WORDS,
            help=f"length filter for steps, or off (default: {MIN_STEP_WORDS})",
        )
        parser.add_argument(
            "--min-goal-words",
            type=_optional(int),
            default=MIN_GOAL_WORDS,
            help=f"length filter for goals, or off (default: {MIN_GOAL_WORDS})",
        )
        parser.add_argument(
            "--max-shared-words",
            type=_optional(int),
            default=MAX_SHARED_WORDS,
            help=f"lexical-overlap filter, or off (default: {MAX_SHARED_WORDS})",
        )
        parser.add_argument(
            "--similarity-ceiling",
            type=_optional(float),
            default=SIMILARITY_CEILING,
            help=f"similarity filter, or off (default: {SIMILARITY_CEILING})",
        )
        parser.add_argument("--embedding-model", help="model name or folder (default: the EMBEDDING_MODEL setting)")

    def handle(self, *args, **options) -> None:
        if options["limit"] is not None and options["limit"] < 1:
            raise CommandError("--limit must be at least 1")
        filters = FilterSettings(
            min_step_words=options["min_step_words"],
            min_goal_words=options["min_goal_words"],
            max_shared_words=options["max_shared_words"],
            similarity_ceiling=options["similarity_ceiling"],
        )
        try:
            task_set, result = task_set_build(
                task=options["task"],
                split=options["split"],
                output=options["output"],
                seed=options["seed"],
                limit=options["limit"],
                filters=filters,
                embedding_model=options["embedding_model"],
            )
        except (ValueError, EmbeddingModelUnavailable, RecordError) as exc:
            raise CommandError(f"{exc}\nNothing was written.") from exc
        for line in report_lines(result.report):
            self.stdout.write(line)
        self.stdout.write(f"task set {task_set.pk}: {task_set.n_items} items -> {options['output']}")
