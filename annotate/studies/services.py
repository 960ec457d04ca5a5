"""Writes of the researchers' side of a study: creation (settings checked against the items and
the kind), settings changes, pilot rounds, and releasing a participant's slots.

Every study is created by ``study_create``, whichever way it comes (the New study page, the
API, ``manage.py create_study``, an import run by a worker)."""

from __future__ import annotations

import math
import re
import secrets
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max, Q, QuerySet
from django.utils.text import slugify

from annotate import constants as C
from annotate.errors import ReleaseRefused, StudyInvalid
from annotate.kinds import DEFAULT_KIND_KEY, codebook_get, kind_get
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION, FieldError, ItemSpec
from annotate.models import (
    Assignment,
    AssignmentStatus,
    GuidelineVersion,
    Participation,
    ParticipationState,
    Study,
    StudyItem,
)
from annotate.participation import clock
from annotate.participation.services import participation_finish, participation_lock
from annotate.studies.selectors import (
    participation_release_marks_returned,
    participation_release_refusal,
    participation_reserved_count,
)
from annotate.studies.settings import (
    PROLIFIC_STUDY_ID_RE,
    StudySettings,
    majority_threshold_problems,
    max_annotators_resolved,
    settings_problems,
    settings_resolved,
)


def _code() -> str:
    return secrets.token_hex(4).upper()


# --------------------------------------------------------------------------- studies


def guideline_version_ensure(*, kind: str, instructions: str) -> GuidelineVersion:
    """The version for this exact text and codebook, created on first use (``<kind>-v<n>``)."""
    codebook = codebook_get(kind) or {}
    codebook_version = str(codebook.get("version", ""))
    instructions = instructions.strip().replace("\r\n", "\n")
    if not instructions:
        raise StudyInvalid("The instructions must not be empty.")
    content_hash = GuidelineVersion.hash_of(kind, instructions, codebook_version)
    existing = GuidelineVersion.objects.filter(content_hash=content_hash).first()
    if existing is not None:
        return existing
    n = GuidelineVersion.objects.filter(kind=kind).count() + 1
    while GuidelineVersion.objects.filter(label=f"{kind}-v{n}").exists():
        n += 1
    try:
        with transaction.atomic():
            return GuidelineVersion.objects.create(
                kind=kind,
                label=f"{kind}-v{n}",
                instructions=instructions,
                codebook_version=codebook_version,
                content_hash=content_hash,
            )
    except IntegrityError:  # created concurrently
        return GuidelineVersion.objects.get(content_hash=content_hash)


def _unique_slug(base: str) -> str:
    base = (slugify(base) or "study")[:90]
    slug, n = base, 2
    while Study.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return slug


def study_items_insert(study: Study, items: list[ItemSpec], *, after: dict[str, int] | None = None) -> None:
    """Store ``items`` in ``study``, each role's numbered on from ``after[role]`` (0: a new
    study; the last position of each role: items added to a running study)."""
    positions = {role: (after or {}).get(role) or 0 for role in (ROLE_MAIN, ROLE_ATTENTION, ROLE_QUALIFICATION)}
    for spec in items:
        positions[spec.role] += 1
        StudyItem(
            study=study,
            item_id=spec.item_id,
            role=spec.role,
            position=positions[spec.role],
            topic=spec.topic,
            goal=spec.goal,
            reference_steps=spec.reference_steps,
            candidate_steps=spec.candidate_steps,
            expected=spec.expected,
            explanation=spec.explanation,
            source=spec.source,
        ).save()  # save() computes the L1/L2 hashes


@transaction.atomic
def study_create(
    *,
    name: str,
    items: list[ItemSpec],
    kind: str = DEFAULT_KIND_KEY,
    slug: str | None = None,
    instructions: str | None = None,
    settings: StudySettings | None = None,
    created_by: Any = None,
) -> Study:
    """A study with its items, in one transaction: a problem leaves nothing behind."""
    kind_def = kind_get(kind)
    settings = settings or StudySettings()
    name = (name or "").strip()
    problems = [] if name else [FieldError("name", "the study needs a name")]
    problems += settings_problems(settings, items, kind_def)
    if len({i.item_id for i in items}) != len(items):
        problems.append(FieldError("items", "two items have the same item_id"))
    if slug is not None and (not re.fullmatch(r"[a-z0-9-]{1,100}", slug) or Study.objects.filter(slug=slug).exists()):
        problems.append(
            FieldError("slug", f"the slug {slug!r} is taken or not made of lowercase letters, digits and '-'")
        )
    if problems:
        raise StudyInvalid(
            "The study was not created: " + "; ".join(p.message for p in problems) + ".", errors=problems
        )
    qualification_enabled, attention_check_rate = settings_resolved(settings, items)
    n_qual = sum(1 for i in items if i.role == ROLE_QUALIFICATION)
    qualification_pass = settings.qualification_pass
    if qualification_pass is None:
        qualification_pass = max(1, math.ceil(C.QUALIFICATION_PASS_FRACTION * n_qual)) if n_qual else 0
    min_seconds = settings.min_seconds
    if min_seconds is None:
        min_seconds = (
            kind_def.min_seconds_default if kind_def.min_seconds_default is not None else C.MIN_SECONDS_DEFAULT
        )
    completion = settings.completion_code or _code()
    screened = settings.screened_out_code or _code()
    while screened == completion:
        screened = _code()
    study = Study.objects.create(
        kind=kind,
        slug=slug or _unique_slug(name),
        name=name,
        guideline_version=guideline_version_ensure(
            kind=kind, instructions=instructions or kind_def.default_instructions
        ),
        annotators_per_item=settings.annotators_per_item,
        min_seconds=min_seconds,
        lease_minutes=settings.lease_minutes,
        training_enabled=settings.training_enabled and kind_def.codebook_path is not None,
        qualification_enabled=qualification_enabled,
        qualification_pass=qualification_pass,
        attention_check_rate=attention_check_rate,
        attention_max_failures=settings.attention_max_failures,
        max_items_per_annotator=settings.max_items_per_annotator,
        completion_code=completion,
        screened_out_code=screened,
        payment_per_item=settings.payment_per_item,
        created_by=created_by,
        items_per_page=settings.items_per_page,
        min_annotations_for_majority=settings.min_annotations_for_majority,
        prolific_study_id=(settings.prolific_study_id or "").strip(),
        allow_other_pids=settings.allow_other_pids,
        allocation_policy=settings.allocation_policy,
        max_annotators_per_item=max_annotators_resolved(settings),
        target_interval_width=settings.target_interval_width,
    )
    study_items_insert(study, items)
    return study


def study_item_specs(study: Study, items: QuerySet[StudyItem] | None = None) -> list[ItemSpec]:
    """The items of ``study`` (or ``items``, some of them) as specs a new study is created from."""
    rows = study.items.all() if items is None else items
    return [
        ItemSpec(
            item_id=i.item_id,
            topic=i.topic,
            goal=i.goal,
            reference_steps=list(i.reference_steps),
            candidate_steps=list(i.candidate_steps),
            role=i.role,
            expected=i.expected,
            explanation=i.explanation,
            source=dict(i.source),
        )
        for i in rows.order_by("role", "position")
    ]


@transaction.atomic
def study_round_create(
    *, study: Study, instructions: str, created_by: Any = None, items: list[ItemSpec] | None = None
) -> Study:
    """A pilot round: the same items and settings under new guidelines (a new version, so
    annotators qualify again). Rounds share the first round and are numbered 1, 2, ...
    ``items``: the round's items instead of all of ``study``'s (the data manager's "add to a
    round" with a new round: the selected main items, with the study's check and gold items)."""
    root = study.round_root
    last = Study.objects.filter(Q(pk=root.pk) | Q(first_round=root)).aggregate(m=Max("round"))["m"] or 1
    settings = StudySettings(
        annotators_per_item=study.annotators_per_item,
        min_seconds=study.min_seconds,
        lease_minutes=study.lease_minutes,
        training_enabled=study.training_enabled,
        qualification_enabled=study.qualification_enabled,
        qualification_pass=study.qualification_pass or None,
        attention_check_rate=study.attention_check_rate,
        attention_max_failures=study.attention_max_failures,
        max_items_per_annotator=study.max_items_per_annotator,
        payment_per_item=study.payment_per_item,
        min_annotations_for_majority=study.min_annotations_for_majority,
        allow_other_pids=study.allow_other_pids,
        allocation_policy=study.allocation_policy,
        max_annotators_per_item=study.max_annotators_per_item,
        target_interval_width=study.target_interval_width,
    )
    new = study_create(
        name=f"{root.name} (round {last + 1})",
        items=study_item_specs(study) if items is None else items,
        kind=study.kind,
        slug=_unique_slug(f"{root.slug}-r{last + 1}"),
        instructions=instructions,
        settings=settings,
        created_by=created_by,
    )
    new.round = last + 1
    new.first_round = root
    new.save(update_fields=["round", "first_round"])
    return new


@transaction.atomic
def study_update(
    *,
    study: Study,
    is_open: bool | None = None,
    payment_per_item: Decimal | None = None,
    clear_payment: bool = False,
    instructions: str | None = None,
    min_annotations_for_majority: int | None = None,
    prolific_study_id: str | None = None,
    allow_other_pids: bool | None = None,
) -> Study:
    """Open/close, set the payment, set the annotations a human majority needs (analysis
    only: it changes no annotator's work), or edit the guidelines (a new version; only before
    anyone has started, since annotators already trained on the old text: use a new round
    instead)."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    fields = []
    if is_open is not None:
        study.is_open = is_open
        fields.append("is_open")
    if clear_payment or payment_per_item is not None:
        if payment_per_item is not None and payment_per_item < 0:
            raise StudyInvalid("The payment must not be negative.")
        study.payment_per_item = None if clear_payment else payment_per_item
        fields.append("payment_per_item")
    if min_annotations_for_majority is not None:
        if problems := majority_threshold_problems(min_annotations_for_majority):
            raise StudyInvalid(problems[0][0].upper() + problems[0][1:] + ".")
        study.min_annotations_for_majority = min_annotations_for_majority
        fields.append("min_annotations_for_majority")
    if prolific_study_id is not None:
        prolific_study_id = prolific_study_id.strip()
        if prolific_study_id and not PROLIFIC_STUDY_ID_RE.fullmatch(prolific_study_id):
            raise StudyInvalid(
                "The Prolific study id must be 1-100 letters, digits, '_' or '-'.",
                [FieldError("prolific_study_id", "must be 1-100 letters, digits, '_' or '-'")],
            )
        study.prolific_study_id = prolific_study_id
        fields.append("prolific_study_id")
    if allow_other_pids is not None:
        study.allow_other_pids = allow_other_pids
        fields.append("allow_other_pids")
    if instructions is not None:
        version = guideline_version_ensure(kind=study.kind, instructions=instructions)
        if version.pk != study.guideline_version_id:
            if study.participations.exists():
                raise StudyInvalid(
                    "Annotators have already started on these guidelines. Start a new round to change them."
                )
            study.guideline_version = version
            fields.append("guideline_version")
    if fields:
        study.save(update_fields=fields)
    return study


# --------------------------------------------------------------------------- researchers


@transaction.atomic
def participation_release(
    *, participation: Participation, reason: str = "returned on Prolific; slots released by a researcher"
) -> int:
    """The participant returned the study on Prolific: their reserved slots go back to the
    pool at once (drafts stay stored; a late submit would still be kept), and one still on the
    path is marked returned (a completed or screened-out one keeps that state). ``reason`` is
    the participant's state reason, saying who released them (a researcher, or the Prolific
    sync). Refused (``ReleaseRefused``, 409) where a release does not apply: the participant is
    already returned, or finished with nothing reserved (``participation_release_refusal``; the
    study page and the API both release through here)."""
    p = participation_lock(participation)
    refusal = participation_release_refusal(p, n_reserved=participation_reserved_count(p))
    if refusal is not None:
        raise ReleaseRefused(refusal)
    released = Assignment.objects.filter(participation=p, status=AssignmentStatus.RESERVED).update(
        status=AssignmentStatus.RELEASED
    )
    if participation_release_marks_returned(p):
        participation_finish(p, ParticipationState.RETURNED, reason)
    p.save()
    return released


def assignments_live(study: Study) -> QuerySet[Assignment]:
    return Assignment.objects.filter(study=study, status=AssignmentStatus.RESERVED, lease_expires_at__gt=clock.now())
