import json
from collections.abc import Iterator

from django.core.management.base import BaseCommand

from judging.components import ComponentsError
from judging.management import jsonl_records, record_error
from judging.score_metric import ScoreInput, score_input


class Command(BaseCommand):
    help = (
        "SCORE (Thoth/SciRecipe §3.3.2) and the §4.2 metrics of a JSONL file. Each line: gold "
        "(a list of {action, objects, parameters}) and either pred (the same shape) or "
        "completion (Sketch-and-Fill text). Every line is checked before anything is printed; "
        "then one JSON object per line is printed. See docs/score.md."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--input", required=True, metavar="FILE.jsonl", help="the examples to score")

    def handle(self, *args, **options) -> None:
        path = options["input"]
        # Two passes: a bad line stops the command before any output, so stdout is either
        # complete or empty.
        for _ in self._inputs(path):
            pass
        for example in self._inputs(path):
            self.stdout.write(json.dumps(example.result().as_dict()))

    def _inputs(self, path: str) -> Iterator[ScoreInput]:
        for position, raw in jsonl_records(path):
            try:
                yield score_input(raw)
            except ComponentsError as exc:
                raise record_error(path, position, exc.field, exc.problem) from exc
