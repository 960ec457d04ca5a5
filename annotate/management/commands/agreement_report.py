"""``python manage.py agreement_report (--study SLUG | --annotations FILE.jsonl)
[--judgments FILE.jsonl] [--min-annotations N] [--output FILE.json] [--bootstrap 1000] [--seed 0]``

Prints the agreement report (``annotate.stats.agreement.agreement_report``) as one JSON object,
or writes it atomically to ``--output``. Malformed input stops the command with an error
that names the file and line, and a non-zero exit status. See docs/agreement.md."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.constants import MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT
from annotate.stats.agreement import agreement_report
from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP
from annotate.stats.majority import check_min_annotations
from annotate.stats.records import AnnotationRow, JudgmentRow, read_annotations, read_judgments
from core.record_files import RecordError


def _min_annotations(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 2, got {value!r}") from None
    try:
        return check_min_annotations(number)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_min_annotations_argument(parser: CommandParser) -> None:
    """``--min-annotations N``: annotations an item needs for a human majority (>= 2);
    default: the study's setting with ``--study``, 2 with ``--annotations``."""
    parser.add_argument(
        "--min-annotations",
        metavar="N",
        type=_min_annotations,
        default=None,
        help=f"non-excluded annotations an item needs for a human majority, at least 2 (default: the study's "
        f"setting with --study, {MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT} with --annotations)",
    )


def study_agreement_rows(
    slug: str, *, include_test: bool = False
) -> tuple[list[AnnotationRow], list[JudgmentRow], int]:
    """The annotations (excluded ones included, flagged; test participants' only with
    ``include_test``) and judge labels of a study, and its ``min_annotations_for_majority``."""
    from annotate.kinds import kind_get
    from annotate.kinds.base import REPORT_AGREEMENT
    from annotate.models import Study
    from annotate.reports.selectors import study_annotation_rows, study_judgment_rows

    study = Study.objects.filter(slug=slug).first()
    if study is None:
        raise CommandError(f"no study with slug {slug!r}")
    if not kind_get(study.kind).has_report(REPORT_AGREEMENT):
        raise CommandError(
            f"study {study.slug!r} is a {study.kind} study: its answers carry no has_failure, so there "
            f"is no critical-failure agreement report; its results are on the study page"
        )
    return (
        study_annotation_rows(study, include_test=include_test),
        study_judgment_rows(study),
        study.min_annotations_for_majority,
    )


def _non_negative(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value!r}")
    return number


def emit_report(command: BaseCommand, report: dict[str, Any], output: str | None, summary: str) -> None:
    """A report as JSON: to ``output`` (atomically, a line naming it on stderr) or to stdout."""
    text = json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if not output:
        command.stdout.write(text, ending="")
        return
    path = Path(output)
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise CommandError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    command.stderr.write(f"{path}: {summary} written")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it into place, so a
    reader never sees a half-written report and a failure leaves any old file intact."""
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise CommandError(f"{path}: directory {directory} does not exist")
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


class Command(BaseCommand):
    help = (
        "Agreement report (Krippendorff's alpha, human majority, judge-human agreement, leave-one-out, "
        "pairwise agreement, calibration) of a study or of an annotations JSONL file, as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--study", metavar="SLUG", help="a study's slug")
        source.add_argument("--annotations", metavar="FILE.jsonl", help="annotations as written by export_annotations")
        parser.add_argument(
            "--judgments", metavar="FILE.jsonl", help="judge labels (item_id, judge, has_failure); added to the study's"
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
        parser.add_argument(
            "--include-test",
            action="store_true",
            help="with --study: count test participants' annotations too (left out by default)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["study"]:
                annotations, judgments, min_annotations = study_agreement_rows(
                    options["study"], include_test=options["include_test"]
                )
            else:
                annotations, judgments = read_annotations(options["annotations"]), []
                min_annotations = MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT
            if options["min_annotations"] is not None:
                min_annotations = options["min_annotations"]
            if options["judgments"]:
                judgments = [*judgments, *read_judgments(options["judgments"])]
            report = agreement_report(
                annotations,
                judgments,
                bootstrap=options["bootstrap"],
                seed=options["seed"],
                min_annotations=min_annotations,
            )
        except RecordError as exc:
            raise CommandError(str(exc)) from exc
        except ValueError as exc:  # e.g. a judge labelling the same item in the study and in --judgments
            raise CommandError(str(exc)) from exc
        emit_report(self, report, options["output"], f"agreement report on {report['n_items']} items")
