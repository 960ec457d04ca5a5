import json

from django.core.management.base import BaseCommand, CommandError

from core.record_files import RecordError
from judging.management import atomic_output, jsonl_records, record_error
from judging.metrics import MetricsSummary, generation_record
from judging.tokens import TokenCountError, TokenizerUnavailable


class Command(BaseCommand):
    help = (
        "Formatting proxies, lengths (o200k_base tokens) and RL rewards of a generations "
        "JSONL file. Each line: source_example_id, topic, steps (the reference) and "
        "predicted_steps or model_completion (parsed into steps when predicted_steps is "
        "absent). Prints one JSON object of means over examples; see docs/metrics.md."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--generations", required=True, metavar="FILE.jsonl", help="the generations to measure")
        parser.add_argument(
            "--per-record",
            metavar="OUT.jsonl",
            help="also write one JSON object per example to this file (replaced atomically)",
        )

    def handle(self, *args, **options) -> None:
        path = options["generations"]
        out_path = options["per_record"]
        summary = MetricsSummary()
        try:
            if out_path:
                with atomic_output(out_path) as out:
                    self._measure(path, summary, out)
            else:
                self._measure(path, summary, None)
        except TokenizerUnavailable as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(summary.result()))

    def _measure(self, path: str, summary: MetricsSummary, out) -> None:
        for position, raw in jsonl_records(path):
            try:
                record = generation_record(raw)
                metrics = record.metrics()
            except RecordError as exc:
                raise record_error(path, position, exc.field, exc.message) from exc
            except TokenCountError as exc:
                raise record_error(path, position, None, str(exc)) from exc
            summary.add(metrics)
            if out is not None:
                line = {
                    "source_example_id": record.source_example_id,
                    "predicted_steps": list(metrics.predicted_steps),
                    "n_pred": metrics.n_pred,
                    "n_ref": metrics.n_ref,
                    "gen_tokens": metrics.gen_tokens,
                    "ref_tokens": metrics.ref_tokens,
                    "dup_step": metrics.dup_step,
                    "dup_ngram_rate": metrics.dup_ngram_rate,
                    "format_reward": metrics.format_reward,
                    "length_reward": metrics.length_reward,
                }
                out.write((json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))
