"""Bonuses by a rule after a preview: a batch previewed (``prolific_bonus_preview``), paid once
(``prolific_bonus_pay``: claimed first, its intent recorded before Prolific is asked), an
uncertain payment settled by reading Prolific (``prolific_bonus_reconcile``,
``prolific_bonus_reconcile_pending``) or by a researcher's decision
(``prolific_bonus_resolve``)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from annotate.models import Annotation, ItemRole, ParticipationState, Study
from prolific import constants as C
from prolific.client import ProlificClient, ProlificError
from prolific.errors import ProlificConflict, ProlificInvalid
from prolific.models import BonusState, ProlificBonusBatch, ProlificBonusPayIntent, ProlificSubmission
from prolific.publish_services import _link_required
from prolific.token_services import _clear_error, _note_error, prolific_client


def _money(value: Any, field_name: str) -> Decimal:
    problem = ProlificInvalid(field_name, "an amount such as 0.10 (at most two decimals)")
    if isinstance(value, bool) or not isinstance(value, (str, int, Decimal)) or len(str(value)) > 20:
        raise problem
    try:
        amount = Decimal(str(value).strip())
        if not amount.is_finite() or amount != amount.quantize(Decimal("0.01")):
            raise problem
    except (InvalidOperation, ValueError, ArithmeticError):
        raise problem from None
    if not (Decimal("0.01") <= amount <= Decimal(C.BONUS_MAX_PER_PARTICIPANT)):
        raise ProlificInvalid(field_name, f"between 0.01 and {C.BONUS_MAX_PER_PARTICIPANT}")
    return amount


def _count(value: Any, field_name: str, maximum: int = 1_000_000) -> int:
    if isinstance(value, bool):
        raise ProlificInvalid(field_name, "a whole number")
    try:
        number = int(str(value).strip()) if isinstance(value, (str, int)) and len(str(value)) <= 9 else None
    except ValueError:
        number = None
    if number is None or not (0 <= number <= maximum):
        raise ProlificInvalid(field_name, f"a whole number from 0 to {maximum}")
    return number


def prolific_bonus_preview(*, study: Study, user: Any, per_item: Any, quota: Any = 0) -> ProlificBonusBatch:
    """A bonus batch by the rule "``per_item`` for every main item annotated beyond ``quota``"
    for each participant who completed the study and has no paid bonus yet: who gets how
    much and the total, stored, not paid. A preview that pays no one is returned unsaved (its
    ``pk`` None): there is nothing to pay, and repeated previews leave no empty batches behind."""
    amount = _money(per_item, "per_item")
    quota_n = _count(quota, "quota")
    link = _link_required(study)
    rows = []
    subs = (
        link.submissions.filter(participation__state=ParticipationState.COMPLETED, bonus_paid_cents=0)
        .exclude(status__in=[C.RETURNED, C.TIMED_OUT, C.REJECTED])
        .select_related("participation")
    )
    for s in subs:
        items = Annotation.objects.filter(participation=s.participation, source=ItemRole.MAIN, excluded=False).count()
        beyond = max(0, items - quota_n)
        cents = int(min(amount * beyond, Decimal(C.BONUS_MAX_PER_PARTICIPANT)) * 100)
        if cents > 0:
            rows.append(
                {
                    "participant_id": s.participant_id,
                    "submission_id": s.submission_id,
                    "items": items,
                    "amount_cents": cents,
                }
            )
    batch = ProlificBonusBatch(
        link=link,
        rule={"per_item": str(amount), "quota": quota_n},
        rows=rows,
        n_participants=len(rows),
        total_cents=sum(r["amount_cents"] for r in rows),
        created_by=user if user is not None and user.pk else None,
    )
    if rows:
        batch.save()
    return batch


def prolific_bonus_pay(*, batch: ProlificBonusBatch, user: Any) -> ProlificBonusBatch:
    """Pay a previewed batch once. Prolific's pay call is not idempotent (a second call pays
    everyone again), so it is made at most once per batch, by a state machine and a row:

    1. the batch is claimed (``preview`` → ``paying``, a conditional update: a second click or a
       concurrent request is refused);
    2. the payment is set up on Prolific (its id stored, unique across batches) and each
       participant's bonuses as Prolific lists them are read;
    3. the intent (``ProlificBonusPayIntent``, one per batch) is committed with those lists;
    4. the pay call is made once. 2xx: ``paid``. No connection, or a clear refusal: nothing was
       paid, the batch is ``failed`` (preview again). No answer (a timeout) or a 5xx:
       ``uncertain``, settled by ``prolific_bonus_reconcile`` reading Prolific, never by paying
       again; every further payment of the study waits for it.

    A failure before step 3 gives the batch back (``preview``): nothing was paid."""
    _bonus_batch_claim(batch)
    user = user if user is not None else batch.link.created_by
    client, bonus_id, baseline = _bonus_setup(batch, user)
    intent = _bonus_intent_commit(batch, bonus_id, baseline)
    return _bonus_pay_once(batch, intent, client, bonus_id)


def _bonus_batch_claim(batch: ProlificBonusBatch) -> None:
    """Step 1: ``preview`` → ``paying`` by a conditional update, refused (and given back, or
    failed when someone was paid since the preview) unless this batch alone pays now."""
    now = timezone.now()
    claimed = ProlificBonusBatch.objects.filter(pk=batch.pk, state=BonusState.PREVIEW).update(
        state=BonusState.PAYING, claimed_at=now
    )
    batch.refresh_from_db()
    if not claimed:
        raise ProlificConflict(f"This bonus batch cannot be paid: it is {batch.get_state_display().lower()}.")
    link = batch.link
    if not batch.rows:
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(state=BonusState.PREVIEW)
        raise ProlificConflict("This bonus batch pays no one (no participant is beyond the quota).")
    ids = [r["submission_id"] for r in batch.rows]
    already = link.submissions.filter(submission_id__in=ids, bonus_paid_cents__gt=0).count()
    if link.bonus_batches.filter(state=BonusState.PAYING).exclude(pk=batch.pk).exists():
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(state=BonusState.PREVIEW)
        raise ProlificConflict("Another bonus payment of this study is being made right now: wait for it.")
    if already or link.bonus_batches.filter(state=BonusState.UNCERTAIN).exists():
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(
            state=BonusState.FAILED,
            error=(
                f"{already} of these participants were paid a bonus since this preview"
                if already
                else "another batch's payment is uncertain: check Prolific first"
            )
            + "; preview again.",
        )
        raise ProlificConflict(
            "Some of these participants were paid a bonus already (or a payment is uncertain): "
            "preview the bonuses again."
        )


def _bonus_give_back(batch: ProlificBonusBatch, exc: ProlificError) -> None:
    """Nothing was paid: the batch may be paid again."""
    ProlificBonusBatch.objects.filter(pk=batch.pk).update(
        state=BonusState.PREVIEW, prolific_bonus_id="", error=str(exc)[:1000]
    )
    _note_error(batch.link, exc)


def _bonus_setup(batch: ProlificBonusBatch, user: Any) -> tuple[ProlificClient, str, dict[str, list[int]]]:
    """Step 2: the payment set up on Prolific (its id stored, unique across batches) and each
    participant's bonuses as Prolific lists them now; any failure gives the batch back."""
    link = batch.link
    csv_bonuses = "".join(f"{r['participant_id']},{Decimal(r['amount_cents']) / 100:.2f}\n" for r in batch.rows)
    try:
        client = prolific_client(link.study, user)
        setup = client.bonus_setup(link.prolific_id, csv_bonuses)
    except ProlificError as exc:
        _bonus_give_back(batch, exc)
        raise
    bonus_id = setup.get("id")
    if not isinstance(bonus_id, str) or not bonus_id or len(bonus_id) > 100:
        malformed = ProlificError("malformed", "Prolific's bonus payment has no usable id; nothing was paid.")
        _bonus_give_back(batch, malformed)
        raise malformed
    total = setup.get("total_amount")
    try:
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(
            prolific_bonus_id=bonus_id,
            prolific_total_cents=int(total) if isinstance(total, (int, float)) and math.isfinite(total) else None,
        )
    except IntegrityError:  # that payment belongs to another batch already: never paid twice
        clash = ProlificError("malformed", f"Prolific answered a bonus payment id ({bonus_id}) used by another batch.")
        _bonus_give_back(batch, clash)
        raise clash from None
    # Each participant's bonuses as Prolific shows them now: after a payment without a clear
    # answer, what was added since says whether it was made.
    try:
        baseline = {r["submission_id"]: _bonus_amounts(client.submission_get(r["submission_id"])) for r in batch.rows}
    except ProlificError as exc:
        _bonus_give_back(batch, exc)
        raise
    return client, bonus_id, baseline


def _bonus_intent_commit(
    batch: ProlificBonusBatch, bonus_id: str, baseline: dict[str, list[int]]
) -> ProlificBonusPayIntent:
    """Step 3: the intent, committed before the call: one row per batch, so the call is made at
    most once."""
    try:
        return ProlificBonusPayIntent.objects.create(batch=batch, prolific_bonus_id=bonus_id, baseline=baseline)
    except IntegrityError:
        raise ProlificConflict(
            "This bonus batch's payment was already sent to Prolific; it is never sent again."
        ) from None


def _bonus_pay_once(
    batch: ProlificBonusBatch, intent: ProlificBonusPayIntent, client: ProlificClient, bonus_id: str
) -> ProlificBonusBatch:
    """Step 4: the one pay call, and what its answer means for the batch."""
    try:
        client.bonus_pay(bonus_id)
    except ProlificError as exc:
        answered_2xx = exc.status_code is not None and 200 <= exc.status_code < 300
        if answered_2xx:  # Prolific took it (its answer's body aside)
            return _bonus_paid(batch, intent, exc.status_code, "")
        # Nothing reached Prolific (no connection) or it refused outright: not paid, and this
        # batch's one call is spent, so the researcher previews again.
        refused = exc.kind in ("unreachable", "auth", "not_found", "refused", "rate_limited", "wrong_url")
        ProlificBonusPayIntent.objects.filter(pk=intent.pk).update(
            answered_status=exc.status_code, outcome="refused" if refused else "unknown"
        )
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(
            state=BonusState.FAILED if refused else BonusState.UNCERTAIN,
            error=(str(exc) + (" Nothing was paid; preview again." if refused else ""))[:1000],
        )
        _note_error(batch.link, exc)
        raise
    return _bonus_paid(batch, intent, 200, "")


def _bonus_amounts(submission: dict[str, Any]) -> list[int]:
    """The bonus amounts (cents) Prolific lists on a submission (``bonus_payments``)."""
    amounts = submission.get("bonus_payments")
    if amounts is None:
        return []
    if not isinstance(amounts, list):
        raise ProlificError("malformed", "Prolific's submission has bonus_payments that are not a list.")
    out = []
    for a in amounts:
        value = a.get("amount") if isinstance(a, dict) else a
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ProlificError("malformed", "Prolific's submission lists a bonus that is not an amount.")
        out.append(int(round(value)))
    return out


def _bonus_paid(
    batch: ProlificBonusBatch, intent: ProlificBonusPayIntent, status_code: int | None, note: str
) -> ProlificBonusBatch:
    with transaction.atomic():
        ProlificBonusPayIntent.objects.filter(pk=intent.pk).update(
            answered_status=status_code if status_code is not None else intent.answered_status,
            outcome="paid",
            reconcile_note=note[:300],
        )
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(state=BonusState.PAID, paid_at=timezone.now(), error="")
        for r in batch.rows:
            ProlificSubmission.objects.filter(link=batch.link, submission_id=r["submission_id"]).update(
                bonus_paid_cents=r["amount_cents"]
            )
    _clear_error(batch.link)
    batch.refresh_from_db()
    return batch


@dataclass
class ReconcileResult:
    batch: ProlificBonusBatch
    shown: int = 0  # participants whose bonus Prolific now shows
    of: int = 0
    note: str = ""


def prolific_bonus_reconcile(*, batch: ProlificBonusBatch, user: Any = None) -> ReconcileResult:
    """Settle a payment whose answer never came by reading Prolific, never by paying again:
    every participant of the batch is read (``GET submissions/<id>/``) and the bonuses Prolific
    lists now are compared with those it listed just before the one pay call. All shown: the
    batch is paid. None or some: it stays uncertain, saying so (Prolific pays within minutes, so
    a later check may find them; the researcher may also settle it by hand). A batch claimed by
    a process that died before its pay call (no intent) goes back to its preview; one that died
    after it is treated as uncertain."""
    batch.refresh_from_db()
    stale = batch.claimed_at is not None and batch.claimed_at < timezone.now() - timedelta(
        seconds=C.CLAIM_STALE_SECONDS
    )
    intent = ProlificBonusPayIntent.objects.filter(batch=batch).first()
    if batch.state == BonusState.PAYING and stale and intent is None:
        ProlificBonusBatch.objects.filter(pk=batch.pk, state=BonusState.PAYING).update(
            state=BonusState.PREVIEW, prolific_bonus_id="", error="the payment was never sent; pay again"
        )
        batch.refresh_from_db()
        return ReconcileResult(batch=batch, note="The payment was never sent to Prolific: the batch can be paid.")
    if not (batch.state == BonusState.UNCERTAIN or (batch.state == BonusState.PAYING and stale)) or intent is None:
        raise ProlificConflict(
            f"Only a payment without a clear answer is checked on Prolific; this batch is "
            f"{batch.get_state_display().lower()}."
        )
    link = batch.link
    user = user if user is not None else link.created_by
    client = prolific_client(link.study, user)
    shown = 0
    try:
        for r in batch.rows:
            before = Counter(intent.baseline.get(r["submission_id"], []))
            now_listed = Counter(_bonus_amounts(client.submission_get(r["submission_id"])))
            shown += int((now_listed - before)[r["amount_cents"]] > 0)
    except ProlificError as exc:
        _note_error(link, exc)
        raise
    of = len(batch.rows)
    checked = timezone.now()
    if shown == of:
        note = f"Prolific shows all {of} bonuses of this payment (checked {checked:%Y-%m-%d %H:%M} UTC)."
        ProlificBonusPayIntent.objects.filter(pk=intent.pk).update(reconciled_at=checked)
        return ReconcileResult(batch=_bonus_paid(batch, intent, None, note), shown=shown, of=of, note=note)
    note = f"Prolific shows {shown} of the {of} bonuses of this payment (checked {checked:%Y-%m-%d %H:%M} UTC). " + (
        "Prolific pays within minutes of the request: check again later, or settle it by hand after "
        "checking its bonus payments."
        if shown == 0
        else "Some were paid: settle it by hand after checking Prolific's bonus payments."
    )
    ProlificBonusPayIntent.objects.filter(pk=intent.pk).update(reconciled_at=checked, reconcile_note=note[:300])
    ProlificBonusBatch.objects.filter(pk=batch.pk).update(state=BonusState.UNCERTAIN, error=note[:1000])
    batch.refresh_from_db()
    return ReconcileResult(batch=batch, shown=shown, of=of, note=note)


def prolific_bonus_reconcile_pending(*, study: Study) -> int:
    """Check on Prolific every payment of the study still without a clear answer (the
    scheduled sync does this after each sync); returns how many were found paid."""
    found = 0
    stale = timezone.now() - timedelta(seconds=C.CLAIM_STALE_SECONDS)
    pending = ProlificBonusBatch.objects.filter(link__study=study).filter(
        Q(state=BonusState.UNCERTAIN) | Q(state=BonusState.PAYING, claimed_at__lt=stale)
    )
    for batch in pending:
        try:
            result = prolific_bonus_reconcile(batch=batch)
        except (ProlificError, ProlificConflict):
            continue
        found += int(result.batch.state == BonusState.PAID)
    return found


def prolific_bonus_resolve(*, batch: ProlificBonusBatch, paid: bool) -> ProlificBonusBatch:
    """Settle an uncertain payment after the researcher checked Prolific's bonus page: paid
    (its participants count as paid) or not paid (the batch stays unpaid; preview again)."""
    with transaction.atomic():
        locked = ProlificBonusBatch.objects.select_for_update().get(pk=batch.pk)
        if locked.state != BonusState.UNCERTAIN:
            raise ProlificConflict(
                f"Only an uncertain payment can be settled; this batch is {locked.get_state_display().lower()}."
            )
        if paid:
            locked.state, locked.paid_at, locked.error = BonusState.PAID, timezone.now(), ""
            for r in locked.rows:
                ProlificSubmission.objects.filter(link=locked.link, submission_id=r["submission_id"]).update(
                    bonus_paid_cents=r["amount_cents"]
                )
        else:
            locked.state, locked.error = BonusState.FAILED, "not paid, as checked on Prolific; preview again"
        locked.save(update_fields=["state", "paid_at", "error"])
    return locked
