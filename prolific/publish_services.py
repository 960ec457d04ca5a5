"""Publishing a study on Prolific: what a draft would send (``prolific_draft``: places, time and
reward from the study's terms), creating the draft and linking it (``prolific_study_publish``),
and the PUBLISH transition, sent once (``prolific_study_publish_now``). Requests to Prolific are
never made inside a database transaction, and what must happen once is claimed by a conditional
update first."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from annotate.links import default_base_url, prolific_entry_url
from annotate.models import ItemRole, Study, StudyItem
from annotate.participation.allocation import is_dynamic
from annotate.participation.selectors import study_terms
from annotate.studies.services import study_update
from prolific import constants as C
from prolific.client import ProlificError
from prolific.errors import ProlificConflict, ProlificNotReady
from prolific.models import BonusState, ProlificStudyLink
from prolific.token_services import _note_error, prolific_client


@dataclass
class Draft:
    """The numbers of a Prolific draft for a study, and the body sent to Prolific."""

    main_items: int
    k: int
    items_per_annotator: int
    places: int
    estimated_minutes: int
    reward_cents: int
    external_study_url: str
    body: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    @property
    def reward(self) -> str:
        return f"{self.reward_cents / 100:.2f}"


def prolific_draft(*, study: Study, base_url: str | None = None) -> Draft:
    """What publishing would send. The estimated time and the reward are the study's terms
    (``annotate.participation.selectors.study_terms``), the very numbers the consent page states: N items (main
    items and the attention checks a participant may meet) and the qualification items at the
    longer of the minimum seconds and the kind's typical time, plus the training examples; the
    reward = payment per item × N. Places = ceil(main items × k ÷ main items per annotator) (k:
    the most annotators per item under dynamic k and active selection),
    where main items per annotator is the fewest a participant is given in full
    (N − the most checks among them), so the places are enough to reach k. The entry URL carries
    Prolific's placeholders. Refuses (naming the setting) a study that has no main items or no
    payment per item."""
    main_items = StudyItem.objects.filter(study=study, role=ItemRole.MAIN).count()
    if main_items == 0:
        raise ProlificNotReady("items", "the study has no main items to annotate")
    if study.payment_per_item is None or study.payment_per_item <= 0:
        raise ProlificNotReady(
            "payment_per_item", "set a payment per item in the study's settings first (it gives the reward)"
        )
    terms = study_terms(study)
    # Dynamic k and active selection: places for the most annotators an item may get; places
    # nobody takes are not paid for once the Prolific study is stopped (by the product at a
    # target width: prolific/allocation.py; otherwise by the researcher on Prolific).
    k = (
        study.max_annotators_per_item
        if is_dynamic(study.allocation_policy) and study.max_annotators_per_item
        else study.annotators_per_item
    )
    per_annotator = max(1, min(terms["n_items"] - terms["n_checks"], main_items))
    places = math.ceil(main_items * k / per_annotator)
    minutes = terms["expected_minutes"]
    reward_cents = terms["pay_cents"]
    base = (base_url or settings.PROLIFIC_SITE_URL or default_base_url()).rstrip("/")
    url = prolific_entry_url(base, study.slug)
    warnings = []
    if "://127.0.0.1" in base or "://localhost" in base:
        warnings.append(
            f"The study URL points at {base}, which participants cannot reach: set PROLIFIC_SITE_URL "
            "or open this page at the server's public address."
        )
    body = {
        "name": study.name[:120],
        "internal_name": f"{study.slug} (round {study.round})"[:120],
        "description": (
            f"Read short how-to procedures and judge them ({terms['n_items']} item{'s' if terms['n_items'] != 1 else ''}, "
            f"at least {study.min_seconds} seconds each). You will read the guidelines first"
            f"{', practise on examples' if study.training_enabled else ''}"
            f"{' and pass a short qualification test' if study.qualification_enabled else ''}."
        ),
        "external_study_url": url,
        "prolific_id_option": "url_parameters",
        "completion_codes": [
            {
                "code": study.completion_code,
                "code_type": C.CODE_COMPLETED,
                "actions": [{"action": C.ACTION_MANUALLY_REVIEW}],
            },
            {
                "code": study.screened_out_code,
                "code_type": C.CODE_SCREENED_OUT,
                "actions": [{"action": C.ACTION_MANUALLY_REVIEW}],
            },
        ],
        "total_available_places": places,
        "estimated_completion_time": minutes,
        "reward": reward_cents,
        "device_compatibility": ["desktop"],
    }
    return Draft(main_items, k, per_annotator, places, minutes, reward_cents, url, body, warnings)


def _link_required(study: Study) -> ProlificStudyLink:
    link = ProlificStudyLink.objects.filter(study=study).exclude(prolific_id="").first()
    if link is None:
        raise ProlificConflict("This study has no Prolific draft yet: publish it first.")
    return link


def prolific_study_publish(
    *, study: Study, user: Any, base_url: str | None = None, relink: bool = False
) -> ProlificStudyLink:
    """Create the Prolific draft of ``study`` (not yet published: ``prolific_study_publish_now``
    does that on request) and link it: the study's Prolific id is set, so the entry checks
    STUDY_ID. A study already linked is refused unless ``relink`` (its draft is gone on
    Prolific); two concurrent publishes create one draft."""
    draft = prolific_draft(study=study, base_url=base_url)
    existing = ProlificStudyLink.objects.filter(study=study).first()
    if existing is not None:
        if existing.prolific_id and not relink:
            raise ProlificConflict(f"This study is already linked to Prolific study {existing.prolific_id}.")
        in_flight = not existing.prolific_id and existing.created_at > timezone.now() - timedelta(
            seconds=C.CLAIM_STALE_SECONDS
        )
        if in_flight:
            raise ProlificConflict("A draft for this study is being created right now.")
        if existing.bonus_batches.filter(state__in=[BonusState.PAID, BonusState.UNCERTAIN, BonusState.PAYING]).exists():
            raise ProlificConflict("This study's Prolific link has bonus payments on record; it cannot be relinked.")
        existing.delete()
    try:
        with transaction.atomic():
            link = ProlificStudyLink.objects.create(
                study=study,
                name=draft.body["name"],
                external_study_url=draft.external_study_url,
                places=draft.places,
                reward_cents=draft.reward_cents,
                estimated_minutes=draft.estimated_minutes,
                items_per_annotator=draft.items_per_annotator,
                created_by=user if user is not None and user.pk else None,
            )
    except IntegrityError:
        raise ProlificConflict("A draft for this study is being created right now.") from None
    try:
        answer = prolific_client(study, user).study_create(draft.body)
        prolific_id = answer.get("id")
        if not isinstance(prolific_id, str) or not prolific_id:
            raise ProlificError("malformed", "Prolific's new study has no id.")
    except ProlificError:
        link.delete()
        raise
    link.prolific_id = prolific_id[:100]
    link.status = str(answer.get("status") or C.STUDY_UNPUBLISHED)[:40]
    link.save(update_fields=["prolific_id", "status"])
    study_update(study=study, prolific_study_id=link.prolific_id)
    return link


def prolific_study_publish_now(*, study: Study, user: Any) -> ProlificStudyLink:
    """The PUBLISH transition of the linked draft: participants can start. Sent once: the
    link is claimed first (``published_at`` set, status ``PUBLISHING``) by a conditional update,
    so a second click while the first one's request is in flight is refused; a failure gives the
    claim back. A claim left by a process that died mid-request is taken over after
    CLAIM_STALE_SECONDS when Prolific (or the link) still says the study is not published."""
    link = _link_required(study)
    user = user if user is not None else link.created_by
    now = timezone.now()
    stale = now - timedelta(seconds=C.CLAIM_STALE_SECONDS)
    claimable = Q(published_at__isnull=True) | Q(
        status__in=[C.STUDY_PUBLISHING, C.STUDY_UNPUBLISHED], published_at__lt=stale
    )
    claimed = ProlificStudyLink.objects.filter(claimable, pk=link.pk).update(
        published_at=now, status=C.STUDY_PUBLISHING
    )
    if not claimed:
        link.refresh_from_db()
        if link.status == C.STUDY_PUBLISHING:
            raise ProlificConflict("This study is being published on Prolific right now.")
        raise ProlificConflict(
            f"This study was already published on Prolific ({link.published_at:%Y-%m-%d %H:%M} UTC)."
        )
    previous_status = link.status
    try:
        answer = prolific_client(study, user).study_transition(link.prolific_id, "PUBLISH")
    except ProlificError as exc:
        ProlificStudyLink.objects.filter(pk=link.pk, published_at=now).update(published_at=None, status=previous_status)
        link.refresh_from_db()
        _note_error(link, exc)
        raise
    link.published_at = now
    link.status = str(answer.get("status") or C.STUDY_ACTIVE)[:40]
    link.last_error = ""
    link.save(update_fields=["published_at", "status", "last_error"])
    return link
