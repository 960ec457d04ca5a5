"""`manage.py prolific <publish|publish-now|sync|review|bonus> <study-slug> ...`: the study page's
Prolific controls from a shell (docs/prolific.md). Steps that cannot be undone on Prolific
(publish-now, review, paying bonuses) need --yes, as the page asks for a confirmation."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotate.models import Study
from prolific import constants as C
from prolific.bonus_services import prolific_bonus_pay, prolific_bonus_preview, prolific_bonus_reconcile
from prolific.client import ProlificError
from prolific.errors import ProlificConflict, ProlificInvalid
from prolific.models import ProlificBonusBatch
from prolific.publish_services import prolific_draft, prolific_study_publish, prolific_study_publish_now
from prolific.review_services import prolific_review
from prolific.sync_services import prolific_submissions_sync

ACTIONS = ("publish", "publish-now", "sync", "review", "bonus")


class Command(BaseCommand):
    help = "Publish a study on Prolific, sync its submissions, review them, and pay bonuses."

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", choices=ACTIONS)
        parser.add_argument("study", help="the study's slug")
        parser.add_argument(
            "--user",
            help="whose saved Prolific token to use (default: the token of whoever linked the study, "
            "else PROLIFIC_API_TOKEN)",
        )
        parser.add_argument("--yes", action="store_true", help="confirm publish-now, review, or paying bonuses")
        parser.add_argument(
            "--base-url",
            help="publish: the address participants reach this server at "
            "(default: PROLIFIC_SITE_URL, else http://HOST:PORT)",
        )
        parser.add_argument("--relink", action="store_true", help="publish: replace a link whose study is gone")
        parser.add_argument("--dry-run", action="store_true", help="publish: print the draft's numbers, send nothing")
        parser.add_argument(
            "--policy",
            choices=C.POLICIES,
            default=C.POLICY_APPROVE,
            help="review: what happens to screened-out participants (default: approve)",
        )
        parser.add_argument("--message", help="review: the rejection message (at least 100 characters)")
        parser.add_argument("--per-item", help="bonus: amount per item beyond the quota, e.g. 0.10 (previews)")
        parser.add_argument("--quota", default="0", help="bonus: items without a bonus (default 0)")
        parser.add_argument("--pay", type=int, metavar="BATCH_ID", help="bonus: pay this previewed batch (with --yes)")
        parser.add_argument(
            "--reconcile",
            type=int,
            metavar="BATCH_ID",
            help="bonus: check on Prolific whether a payment without a clear answer was made (never pays)",
        )

    def handle(self, *args, **o) -> None:
        study = Study.objects.filter(slug=o["study"]).first()
        if study is None:
            raise CommandError(f"study: no study with the slug {o['study']!r}")
        user = None
        if o["user"]:
            user = get_user_model().objects.filter(username=o["user"]).first()
            if user is None:
                raise CommandError(f"--user: no user named {o['user']!r}")
        try:
            getattr(self, "_" + o["action"].replace("-", "_"))(study, user, o)
        except ProlificInvalid as exc:
            raise CommandError(exc.message) from None
        except ProlificConflict as exc:
            raise CommandError(str(exc)) from None
        except ProlificError as exc:
            raise CommandError(f"{exc.message} What to do: {exc.what_to_do}") from None

    def _needs_yes(self, o: dict, what: str) -> None:
        if not o["yes"]:
            raise CommandError(f"{what} cannot be undone on Prolific: add --yes to confirm (nothing was done).")

    def _publish(self, study: Study, user, o: dict) -> None:
        draft = prolific_draft(study=study, base_url=o["base_url"])
        self.stdout.write(
            f"{draft.main_items} main items × k {draft.k} ÷ {draft.items_per_annotator} main items per "
            f"annotator = {draft.places} places; {draft.estimated_minutes} min; reward "
            f"{draft.reward} ({draft.reward_cents} cents)\nStudy URL: {draft.external_study_url}"
        )
        for warning in draft.warnings:
            self.stderr.write(warning)
        if o["dry_run"]:
            return
        link = prolific_study_publish(study=study, user=user, base_url=o["base_url"], relink=o["relink"])
        self.stdout.write(
            self.style.SUCCESS(
                f"Draft created: Prolific study {link.prolific_id} (not published; "
                f"`manage.py prolific publish-now {study.slug} --yes` publishes it)."
            )
        )

    def _publish_now(self, study: Study, user, o: dict) -> None:
        self._needs_yes(o, "Publishing")
        link = prolific_study_publish_now(study=study, user=user)
        self.stdout.write(self.style.SUCCESS(f"Published: Prolific study {link.prolific_id} is {link.status}."))

    def _sync(self, study: Study, user, o: dict) -> None:
        r = prolific_submissions_sync(study=study, user=user)
        self.stdout.write(
            f"Synced {r.seen} submissions ({r.new} new, {r.changed} changed, {r.skipped_malformed} "
            f"unreadable); released {r.released_slots} slots of {r.released_participants} participants "
            f"who left; study {r.study_status}."
        )

    def _review(self, study: Study, user, o: dict) -> None:
        self._needs_yes(o, "A review")
        r = prolific_review(study=study, user=user, policy=o["policy"], message=o["message"])
        self.stdout.write(
            f"Approved {r.approved} ({r.screened_out_approved} screened out, {r.not_rejectable} of them "
            f"not rejectable), rejected {r.rejected}; {r.waiting} still working; {r.already_reviewed} "
            "already reviewed."
        )

    def _bonus(self, study: Study, user, o: dict) -> None:
        if o["reconcile"] is not None:
            batch = ProlificBonusBatch.objects.filter(pk=o["reconcile"], link__study=study).first()
            if batch is None:
                raise CommandError(f"--reconcile: no bonus batch {o['reconcile']} in this study")
            result = prolific_bonus_reconcile(batch=batch, user=user)
            self.stdout.write(f"Batch {batch.pk} is {result.batch.get_state_display().lower()}. {result.note}")
            return
        if o["pay"] is not None:
            self._needs_yes(o, "A bonus payment")
            batch = ProlificBonusBatch.objects.filter(pk=o["pay"], link__study=study).first()
            if batch is None:
                raise CommandError(f"--pay: no bonus batch {o['pay']} in this study")
            batch = prolific_bonus_pay(batch=batch, user=user)
            self.stdout.write(
                self.style.SUCCESS(
                    f"Paid {batch.n_participants} participants {batch.total_cents / 100:.2f} (batch {batch.pk})."
                )
            )
            return
        if not o["per_item"]:
            raise CommandError("--per-item: give the amount per item beyond the quota (or --pay BATCH_ID --yes)")
        batch = prolific_bonus_preview(study=study, user=user, per_item=o["per_item"], quota=o["quota"])
        for row in batch.rows:
            self.stdout.write(f"{row['participant_id']}\t{row['items']} items\t{row['amount_cents'] / 100:.2f}")
        self.stdout.write(
            f"Batch {batch.pk}: {batch.n_participants} participants, total {batch.total_cents / 100:.2f} "
            f"before Prolific's fees. Pay it with `manage.py prolific bonus {study.slug} --pay "
            f"{batch.pk} --yes`."
        )
