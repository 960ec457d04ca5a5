"""python manage.py create_study --name NAME --items FILE.jsonl [options]"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate import constants as C
from annotate.errors import AnnotateError
from annotate.kinds import DEFAULT_KIND_KEY, kind_choices_fresh
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION
from annotate.links import default_base_url, prolific_entry_url
from annotate.participation.allocation import POLICIES, POLICY_FIXED
from annotate.studies.imports import study_create_from_sources, study_create_options
from core.record_files import RecordError


def _item_arguments(parser: CommandParser) -> None:
    """The study's name, kind and slug, and where its items come from."""
    parser.add_argument("--name", required=True)
    parser.add_argument(
        "--items",
        help="JSONL (optionally .gz/.zst/.bz2/.xz), one item per line in the shape of "
        'the --kind (docs/annotation.md); critical_failure: {"item_id", "topic", "goal", '
        '"reference_steps", "candidate_steps"} + optional "attention_check" / "qualification"',
    )
    parser.add_argument("--from-judge", metavar="JUDGE", help="also sample judged generations of this judge")
    parser.add_argument("--sample", type=int, default=200, help="how many judged generations (default 200, as in §4.3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kind", default=DEFAULT_KIND_KEY, choices=[k for k, _ in kind_choices_fresh()])
    parser.add_argument("--slug")


def _path_arguments(parser: CommandParser) -> None:
    """The annotator's path: k, the clock, training, qualification, attention checks, pages."""
    parser.add_argument("--annotators-per-item", type=int, default=C.ANNOTATORS_PER_ITEM_DEFAULT)
    parser.add_argument(
        "--min-seconds",
        type=int,
        help=f"minimum seconds per item (default: the kind's, {C.MIN_SECONDS_DEFAULT} s for critical "
        f"failure, {C.FAITHFULNESS_MIN_SECONDS_DEFAULT} s for constraint faithfulness)",
    )
    parser.add_argument("--lease-minutes", type=int, default=C.LEASE_MINUTES_DEFAULT)
    parser.add_argument("--no-training", action="store_true")
    parser.add_argument(
        "--no-qualification",
        action="store_true",
        help="no qualification test (default: one when the items include gold qualification items)",
    )
    parser.add_argument("--qualification-pass", type=int, help="gold items needed to pass (default: 80 %% of them)")
    parser.add_argument(
        "--attention-rate",
        type=float,
        help=f"share of attention checks (default: {C.ATTENTION_CHECK_RATE_DEFAULT} when the items include "
        "attention-check items, else 0; above 0 without any is refused)",
    )
    parser.add_argument("--attention-max-failures", type=int, default=C.ATTENTION_MAX_FAILURES_DEFAULT)
    parser.add_argument("--max-items", type=int, help="items per annotator (default: until none are left)")
    parser.add_argument(
        "--items-per-page",
        type=int,
        default=1,
        help="multiple-choice studies: items shown on one page (default 1; the paper: 15, or 30 for step ordering)",
    )
    parser.add_argument(
        "--min-annotations-for-majority",
        type=int,
        default=C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT,
        help="annotations an item needs for a human majority, at least 2 (default "
        f"{C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT}; docs/agreement.md)",
    )


def _entry_arguments(parser: CommandParser) -> None:
    """Entry and leaving: completion codes, pay, instructions, Prolific's study and ids."""
    parser.add_argument("--completion-code")
    parser.add_argument("--screened-out-code")
    parser.add_argument("--payment-per-item", help="USD per item, for the implied hourly pay")
    parser.add_argument("--instructions", help="text file with the consent and guidelines text")
    parser.add_argument(
        "--prolific-study-id",
        default="",
        help="Prolific's id of the study: only entry links with this STUDY_ID are accepted",
    )
    parser.add_argument(
        "--allow-other-pids",
        action="store_true",
        help="accept PROLIFIC_PIDs that are not 24 hexadecimal characters (demos, pilots)",
    )


def _allocation_arguments(parser: CommandParser) -> None:
    """How many annotators an item gets (fixed, dynamic or active allocation)."""
    parser.add_argument(
        "--allocation-policy",
        default=POLICY_FIXED,
        choices=list(POLICIES),
        help="fixed: k annotators per item; dynamic: k, then more while the item is undecided; active: dynamic k "
        "with new items where they narrow the calibrated How2Score's interval most (docs/annotation.md)",
    )
    parser.add_argument(
        "--max-annotators-per-item",
        type=int,
        help="dynamic k and active: the most annotators an item gets (default: annotators per item + 1)",
    )
    parser.add_argument(
        "--target-interval-width",
        type=float,
        help="stop offering items once the PPI++ How2Score interval is this narrow (0-1; 0.10 = 10 points)",
    )


class Command(BaseCommand):
    help = (
        "Create an annotation study from a JSONL file of items (and/or a stratified sample of judged "
        "generations) and print its Prolific entry URL. Bad lines are reported with their line number "
        "and nothing is created."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        _item_arguments(parser)
        _path_arguments(parser)
        _entry_arguments(parser)
        _allocation_arguments(parser)
        parser.add_argument("--base-url", default=default_base_url(), help="where annotators reach this server")

    def handle(self, *args, **o) -> None:
        if not o["items"] and not o["from_judge"]:
            raise CommandError("Give --items FILE, --from-judge JUDGE, or both.")
        instructions = None
        if o["instructions"]:
            try:
                instructions = Path(o["instructions"]).read_text(encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"{o['instructions']}: {exc.strerror or exc}") from exc
        payment = None
        if o["payment_per_item"]:
            try:
                payment = Decimal(o["payment_per_item"])
            except InvalidOperation as exc:
                raise CommandError(f"--payment-per-item: {o['payment_per_item']!r} is not a number") from exc
        # The command's option names, where they differ from the New study page's.
        values = {
            **o,
            "judge": o["from_judge"],
            "n_judged": o["sample"],
            "instructions": instructions,
            "training_enabled": not o["no_training"],
            "qualification_enabled": False if o["no_qualification"] else None,
            "attention_check_rate": o["attention_rate"],
            "max_items_per_annotator": o["max_items"],
            "payment_per_item": payment,
        }
        try:
            study = study_create_from_sources(options=study_create_options(values), file_path=o["items"])
        except RecordError as exc:
            raise CommandError(f"{exc}\nNothing was created.") from exc
        except AnnotateError as exc:
            raise CommandError(f"{exc.message}\nNothing was created.") from exc
        items = list(study.items.all())
        counts = {
            role: sum(1 for i in items if i.role == role) for role in (ROLE_MAIN, ROLE_ATTENTION, ROLE_QUALIFICATION)
        }
        self.stdout.write(
            f"Created study {study.slug!r} ({study.kind}, guidelines {study.guideline_version.label}): "
            f"{counts[ROLE_MAIN]} items, {counts[ROLE_ATTENTION]} attention checks, "
            f"{counts[ROLE_QUALIFICATION]} qualification items; k = {study.annotators_per_item}."
        )
        self.stdout.write(f"Completion code: {study.completion_code}  Screened-out code: {study.screened_out_code}")
        self.stdout.write(f"Prolific entry URL: {prolific_entry_url(o['base_url'], study.slug)}")
