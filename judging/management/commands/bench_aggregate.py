import json

from django.core.management.base import BaseCommand, CommandError

from core.record_files import RecordError
from judging.how2score import judgments_tally
from judging.management import jsonl_records

# How many unreadable judge answers are described on stderr before the rest are counted.
PARSE_FAILURES_SHOWN = 10


class Command(BaseCommand):
    help = (
        "How2Score of a judgments JSONL file (ours or a how2bench.judgment.v1 file), overall "
        "and per topic. Each line: source_example_id, topic (empty: 'none') and has_failure "
        "(true/false) or judge_completion (the judge's raw answer); records marked "
        "parse_failed and unreadable answers are counted in n_parse_failed / n_unusable, "
        "never scored; any other record whose has_failure contradicts critical_failures, "
        "n_failures or judge_completion is refused (How2Everything §4.2). Prints one JSON "
        "object: how2score (0-1) and how2score_percent "
        "(0-100) as the reference's aggregate gives them, failure_rate, "
        "avg_failures_per_example, the 95% Wilson interval (ci95, 0-100), n_judged, "
        "n_unusable and coverage; see docs/how2bench.md."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--judgments", required=True, metavar="FILE.jsonl", help="the judgments to aggregate")

    def handle(self, *args, **options) -> None:
        path = options["judgments"]
        shown = 0

        def unscored(position, raw, judgment) -> None:
            nonlocal shown
            shown += 1
            if shown <= PARSE_FAILURES_SHOWN:
                field = "parse_failed" if raw.get("parse_failed") is True else "judge_completion"
                self.stderr.write(f"{path}, {position}, field '{field}': not scored: {judgment.parse_error}")

        try:
            tally = judgments_tally(jsonl_records(path), unscored=unscored)
        except RecordError as exc:
            raise CommandError(str(RecordError(path, exc.line, exc.field, exc.message))) from exc
        hidden = tally.n_parse_failed - PARSE_FAILURES_SHOWN
        if hidden > 0:
            self.stderr.write(f"{path}: {hidden} more unreadable judge answers not shown")
        self.stdout.write(json.dumps(tally.reference_result()))
