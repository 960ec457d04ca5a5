"""``python manage.py metric_agreement (--study SLUG | --annotations FILE.jsonl
[--judgments FILE.jsonl] [--generations FILE.jsonl]) [--min-annotations N] [--bootstrap N]
[--seed S] [--output FILE.json]``

Prints the metric-agreement report (annotate/stats/metric_agreement.py: every automatic signal
ranked by AUC against the human majority's has_failure) as one JSON object, or writes it
atomically to ``--output``. Malformed input stops the command with an error naming the
file, line and field, and a non-zero exit status. See docs/metric-agreement.md."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.constants import MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT as MIN_DEFAULT
from annotate.management.commands.agreement_report import _non_negative, add_min_annotations_argument, emit_report
from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP
from annotate.stats.majority import human_majority
from annotate.stats.records import read_annotations, read_generations, read_judgments
from core.record_files import RecordError


class Command(BaseCommand):
    help = (
        "Which metric agrees with people: every automatic signal (How2Score per judge, SCORE and its parts, "
        "ROUGE-L, BLEU, length ratio, formatting proxies) ranked by AUC against the human majority, with the "
        "agreement at the best threshold and Kendall's tau of model rankings, as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--study", metavar="SLUG", help="a critical-failure study's slug")
        source.add_argument("--annotations", metavar="FILE.jsonl", help="annotations as written by export_annotations")
        parser.add_argument(
            "--judgments", metavar="FILE.jsonl", help="judge labels (item_id, judge, has_failure); added to the study's"
        )
        parser.add_argument(
            "--generations",
            metavar="FILE.jsonl",
            help="with --annotations: item_id, reference_steps, candidate_steps, model per item",
        )
        parser.add_argument("--output", metavar="FILE.json", help="write here (atomically) instead of stdout")
        parser.add_argument(
            "--bootstrap",
            metavar="N",
            type=_non_negative,
            default=DEFAULT_BOOTSTRAP,
            help="resamples (0: no intervals)",
        )
        parser.add_argument("--seed", metavar="N", type=_non_negative, default=0, help="seed of the resamples")
        add_min_annotations_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            inputs = self._inputs(options)
            report = inputs.report(bootstrap=options["bootstrap"], seed=options["seed"])
        except RecordError as exc:
            raise CommandError(str(exc)) from exc
        except ValueError as exc:  # e.g. a judge labelling the same item in the study and in --judgments
            raise CommandError(str(exc)) from exc
        emit_report(
            self,
            report,
            options["output"],
            f"metric agreement of {len(report['signals'])} signals on {report['n_items']} items",
        )

    def _inputs(self, options: dict[str, Any]):
        from annotate.reports.metric_selectors import file_metric_inputs, study_metric_inputs

        if options["study"]:
            if options["generations"]:
                raise CommandError("--generations goes with --annotations: a study's items carry their own steps")
            from annotate.kinds import kind_get, kind_list
            from annotate.kinds.base import REPORT_METRIC_AGREEMENT
            from annotate.models import Study

            study = Study.objects.filter(slug=options["study"]).first()
            if study is None:
                raise CommandError(f"no study with slug {options['study']!r}")
            if not kind_get(study.kind).has_report(REPORT_METRIC_AGREEMENT):
                kinds = " or ".join(k.key for k in kind_list() if k.has_report(REPORT_METRIC_AGREEMENT))
                raise CommandError(
                    f"study {study.slug!r} is a {study.kind} study; metric agreement needs "
                    f"has_failure labels (a {kinds} study)"
                )
            inputs = study_metric_inputs(study, min_annotations=options["min_annotations"])
        else:
            majority = human_majority(
                read_annotations(options["annotations"]), min_annotations=options["min_annotations"] or MIN_DEFAULT
            )
            generations = read_generations(options["generations"]) if options["generations"] else []
            inputs = file_metric_inputs(majority, generations)
        if options["judgments"]:
            inputs.add_judgments(read_judgments(options["judgments"]))
        return inputs
