import json

from django.core.management.base import BaseCommand

from judging.how2score import How2ScoreTally, judgment_record
from judging.management import jsonl_records, record_error
from judging.metrics import RecordFieldError

# How many unreadable judge answers are described on stderr before the rest are counted.
PARSE_FAILURES_SHOWN = 10


class Command(BaseCommand):
    help = (
        "How2Score of a judgments JSONL file, overall and per topic. Each line: "
        "source_example_id, topic and has_failure (true/false) or judge_completion (the "
        "judge's raw answer; unreadable answers are counted in n_unusable, never scored). "
        "Prints one JSON object: How2Score with its 95% Wilson interval (ci95), n_judged, "
        "n_unusable and coverage (source_example_ids with a usable verdict / all of them); "
        "see docs/metrics.md."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--judgments", required=True, metavar="FILE.jsonl", help="the judgments to aggregate")

    def handle(self, *args, **options) -> None:
        path = options["judgments"]
        tally = How2ScoreTally()
        for position, raw in jsonl_records(path):
            try:
                judgment = judgment_record(raw)
            except RecordFieldError as exc:
                raise record_error(path, position, exc.field, exc.detail) from exc
            tally.add(judgment.topic, judgment.has_failure, item=judgment.source_example_id)
            if judgment.parse_error is not None and tally.n_parse_failed <= PARSE_FAILURES_SHOWN:
                self.stderr.write(f"{path}, {position}, field 'judge_completion': not scored: {judgment.parse_error}")
        hidden = tally.n_parse_failed - PARSE_FAILURES_SHOWN
        if hidden > 0:
            self.stderr.write(f"{path}: {hidden} more unreadable judge answers not shown")
        self.stdout.write(json.dumps(tally.result()))
