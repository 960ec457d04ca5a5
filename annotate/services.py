"""Writes of the annotation app: studies, the annotator's path, reservations, drafts, submits.

Rules the server enforces (How2Everything App. C.1 and the annotation issue):

* a submit is refused, with nothing stored, unless the goal was acknowledged, every step of
  both lists was opened (recorded by the server as it happened), the study's minimum seconds
  have passed since the item was first served, and the kind's answer rules hold;
* a submit is idempotent (one annotation per assignment), a draft never overwrites it;
* an item is live for at most k annotators at once (reservations are atomic: the item row
  is locked while its live slots are counted); a lease expires and the slot returns to the
  pool; a late submit is stored and marked surplus when the item was already filled;
* slots cannot be hoarded (issue 18): new participants per client address and study are
  rate-limited, a participant's reservations hold their slot only briefly until the page
  reports activity, the PID must look like Prolific's unless the study allows others, and
  STUDY_ID must match the study's Prolific id when one is set;
* active time is what the server can vouch for: never more than its own elapsed time;
* every value from the page is bounded and checked (core/strict_json.py): a bad one is a
  400 naming the field, and nothing is stored.

Lock order everywhere: participation, then item, then assignment."""
from __future__ import annotations

import math
import re
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone
from django.utils.text import slugify

from annotate import attention_plan
from annotate import constants as C
from annotate.agreement import check_min_annotations
from annotate.kinds import codebook_get, kind_get
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION, FieldError, ItemSpec, StudyKind
from annotate.models import (
    Annotation,
    Annotator,
    Assignment,
    AssignmentStatus,
    GuidelineVersion,
    Participation,
    ParticipationState,
    Qualification,
    Study,
    StudyItem,
)
from core import rate_limit
from core.strict_json import StrictJSONError, check_int, check_number, check_text, check_value

PID_RE = re.compile(C.PID_PATTERN)
PROLIFIC_PID_RE = re.compile(C.PROLIFIC_PID_PATTERN)
PROLIFIC_PARAM_RE = re.compile(C.PROLIFIC_PARAM_PATTERN)
PROLIFIC_STUDY_ID_RE = re.compile(C.PROLIFIC_STUDY_ID_PATTERN)

# Event types the annotation page reports; anything else is refused.
EVENT_GOAL_ACK = "goal_ack"
EVENT_GOAL_UNACK = "goal_unack"
EVENT_STEP_OPEN = "step_open"
LOGGED_EVENTS = {
    "choice", "add_failure", "remove_failure", "link_step", "unlink_step", "shortcut",
    "visible", "hidden", "submit_attempt", "help_open", "reload",
}
EVENT_TYPES = {EVENT_GOAL_ACK, EVENT_GOAL_UNACK, EVENT_STEP_OPEN} | LOGGED_EVENTS


class AnnotateError(Exception):
    """An error with a message meant for the person who caused it."""

    status = 400

    def __init__(self, message: str, errors: list[FieldError] | None = None):
        super().__init__(message)
        self.message = message
        self.errors = errors or []


class StudyInvalid(AnnotateError):
    pass


class EntryRefused(AnnotateError):
    pass


class EntryLimited(EntryRefused):
    """Too many new participants from one client address in one study (HTTP 429)."""

    status = 429


class NotYours(AnnotateError):
    """The assignment does not exist or belongs to someone else (answered as 404)."""

    status = 404


class SubmissionRejected(AnnotateError):
    status = 400


class DraftRejected(AnnotateError):
    status = 409


class SaveInvalid(DraftRejected):
    """A save whose values are malformed (a bad request, not a conflict): 400 naming the field."""

    status = 400


def _field_errors(exc: StrictJSONError) -> list[FieldError]:
    return [FieldError(exc.field or "body", exc.message)]


class StepRefused(AnnotateError):
    status = 409


def _now() -> datetime:
    return timezone.now()


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
                kind=kind, label=f"{kind}-v{n}", instructions=instructions,
                codebook_version=codebook_version, content_hash=content_hash,
            )
    except IntegrityError:  # created concurrently
        return GuidelineVersion.objects.get(content_hash=content_hash)


def _unique_slug(base: str) -> str:
    base = (slugify(base) or "study")[:90]
    slug, n = base, 2
    while Study.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return slug


def _items_create(study: Study, items: list[ItemSpec]) -> None:
    positions = {role: 0 for role in (ROLE_MAIN, ROLE_ATTENTION, ROLE_QUALIFICATION)}
    rows = []
    for spec in items:
        positions[spec.role] += 1
        row = StudyItem(
            study=study, item_id=spec.item_id, role=spec.role, position=positions[spec.role],
            topic=spec.topic, goal=spec.goal, reference_steps=spec.reference_steps,
            candidate_steps=spec.candidate_steps, expected_has_failure=spec.expected_has_failure,
            expected_choice=spec.expected_choice, expected_answer=spec.expected_answer,
            explanation=spec.explanation, source=spec.source,
        )
        row.save()  # save() computes the L1/L2 hashes
        rows.append(row)


@dataclass
class StudySettings:
    annotators_per_item: int = C.ANNOTATORS_PER_ITEM_DEFAULT
    # None: the kind's default (annotate/kinds: 90 s, 45 s for constraint faithfulness).
    min_seconds: int | None = None
    lease_minutes: int = C.LEASE_MINUTES_DEFAULT
    training_enabled: bool = True
    # None: on exactly when the items include gold qualification items (so the defaults work
    # for every source of items); True with no gold items is refused.
    qualification_enabled: bool | None = None
    qualification_pass: int | None = None
    # None: ATTENTION_CHECK_RATE_DEFAULT when the items include attention checks, else 0; a rate
    # above 0 with no attention-check items is refused (a study must not claim checks it lacks).
    attention_check_rate: float | None = None
    attention_max_failures: int = C.ATTENTION_MAX_FAILURES_DEFAULT
    max_items_per_annotator: int | None = None
    completion_code: str | None = None
    screened_out_code: str | None = None
    payment_per_item: Decimal | None = None
    items_per_page: int = 1
    # Annotations an item needs for a human majority (analysis only; docs/agreement.md).
    min_annotations_for_majority: int = C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT
    # Prolific's id of the study: when set, the entry URL's STUDY_ID must equal it.
    prolific_study_id: str = ""
    # Accept PIDs that do not look like Prolific's (demos, pilots, tests); off for new studies.
    allow_other_pids: bool = False


def _majority_threshold_problems(value: Any) -> list[str]:
    try:
        check_min_annotations(value)
    except ValueError:
        return [f"a human majority needs at least {C.MIN_ANNOTATIONS_FOR_MAJORITY_MIN} annotations per item "
                f"(min annotations for majority between {C.MIN_ANNOTATIONS_FOR_MAJORITY_MIN} and "
                f"{C.MIN_ANNOTATIONS_FOR_MAJORITY_MAX}, got {value!r})"]
    return []


def _resolved(s: StudySettings, items: list[ItemSpec]) -> tuple[bool, float]:
    """The qualification switch and attention-check rate a study gets: as given, or (None)
    decided by the items it has."""
    n_qual = sum(1 for i in items if i.role == ROLE_QUALIFICATION)
    n_attention = sum(1 for i in items if i.role == ROLE_ATTENTION)
    qualification = s.qualification_enabled if s.qualification_enabled is not None else n_qual > 0
    rate = s.attention_check_rate
    if rate is None:
        rate = C.ATTENTION_CHECK_RATE_DEFAULT if n_attention else 0.0
    return qualification, rate


def _check_settings(s: StudySettings, items: list[ItemSpec], kind_def: StudyKind) -> list[FieldError]:
    """Every problem of the settings, each naming its field (the StudySettings attribute, which
    is also the New-study form's field)."""
    problems: list[FieldError] = []

    def problem(field: str, message: str) -> None:
        problems.append(FieldError(field, message))

    qualification, rate = _resolved(s, items)
    if not 1 <= s.annotators_per_item <= 100:
        problem("annotators_per_item", "annotators per item must be between 1 and 100")
    if s.min_seconds is not None and s.min_seconds < 0:
        problem("min_seconds", "the minimum seconds must be 0 or more")
    if s.lease_minutes < 1:
        problem("lease_minutes", "the lease must be at least 1 minute")
    if not 0 <= rate < 1:
        problem("attention_check_rate", "the attention-check rate must be at least 0 and below 1")
    if not 1 <= s.items_per_page <= C.MAX_ITEMS_PER_PAGE:
        problem("items_per_page", f"items per page must be between 1 and {C.MAX_ITEMS_PER_PAGE}")
    elif s.items_per_page != 1 and kind_def.page_template is None:
        problem("items_per_page", f"items per page applies to kinds that show a page of items (multiple choice); "
                f"a {kind_def.label} study shows one item at a time (1)")
    if s.max_items_per_annotator is not None and s.max_items_per_annotator < 1:
        problem("max_items_per_annotator", "the maximum items per annotator must be at least 1")
    for message in _majority_threshold_problems(s.min_annotations_for_majority):
        problem("min_annotations_for_majority", message)
    for name in ("completion_code", "screened_out_code"):
        code = getattr(s, name)
        if code is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", code):
            problem(name, f"the {name.replace('_', ' ')} must be 1-64 letters, digits, '_' or '-'")
    if s.completion_code and s.completion_code == s.screened_out_code:
        problem("screened_out_code", "the completion code and the screened-out code must differ")
    if s.prolific_study_id and not PROLIFIC_STUDY_ID_RE.fullmatch(s.prolific_study_id):
        problem("prolific_study_id", "the Prolific study id must be 1-100 letters, digits, '_' or '-' (Prolific's are "
                "24 hexadecimal characters)")
    n_main = sum(1 for i in items if i.role == ROLE_MAIN)
    n_qual = sum(1 for i in items if i.role == ROLE_QUALIFICATION)
    n_attention = sum(1 for i in items if i.role == ROLE_ATTENTION)
    if n_main == 0:
        problem("items", "the study has no main-pool items (items without attention_check or qualification)")
    if qualification and n_qual == 0:
        problem("qualification_enabled", "qualification is on but no item has a \"qualification\" answer; add gold "
                "items or turn qualification off")
    if qualification and s.qualification_pass is not None and not 1 <= s.qualification_pass <= n_qual:
        problem("qualification_pass", f"the qualification pass mark must be between 1 and {n_qual} (the number of gold items)")
    if rate > 0 and n_attention == 0:
        problem("attention_check_rate", f"the attention-check rate is {rate:g} but no item is an attention check (an "
                "item with \"attention_check\"); add attention-check items or set the rate to 0")
    return problems


@transaction.atomic
def study_create(
    *,
    name: str,
    items: list[ItemSpec],
    kind: str = "critical_failure",
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
    problems += _check_settings(settings, items, kind_def)
    if len({i.item_id for i in items}) != len(items):
        problems.append(FieldError("items", "two items have the same item_id"))
    if slug is not None and (not re.fullmatch(r"[a-z0-9-]{1,100}", slug) or Study.objects.filter(slug=slug).exists()):
        problems.append(FieldError("slug", f"the slug {slug!r} is taken or not made of lowercase letters, digits and '-'"))
    if problems:
        raise StudyInvalid("The study was not created: " + "; ".join(p.message for p in problems) + ".", errors=problems)
    qualification_enabled, attention_check_rate = _resolved(settings, items)
    n_qual = sum(1 for i in items if i.role == ROLE_QUALIFICATION)
    qualification_pass = settings.qualification_pass
    if qualification_pass is None:
        qualification_pass = max(1, math.ceil(C.QUALIFICATION_PASS_FRACTION * n_qual)) if n_qual else 0
    min_seconds = settings.min_seconds
    if min_seconds is None:
        min_seconds = kind_def.min_seconds_default if kind_def.min_seconds_default is not None else C.MIN_SECONDS_DEFAULT
    completion = settings.completion_code or _code()
    screened = settings.screened_out_code or _code()
    while screened == completion:
        screened = _code()
    study = Study.objects.create(
        kind=kind, slug=slug or _unique_slug(name), name=name,
        guideline_version=guideline_version_ensure(kind=kind, instructions=instructions or kind_def.default_instructions),
        annotators_per_item=settings.annotators_per_item, min_seconds=min_seconds,
        lease_minutes=settings.lease_minutes, training_enabled=settings.training_enabled and kind_def.codebook_path is not None,
        qualification_enabled=qualification_enabled, qualification_pass=qualification_pass,
        attention_check_rate=attention_check_rate, attention_max_failures=settings.attention_max_failures,
        max_items_per_annotator=settings.max_items_per_annotator, completion_code=completion,
        screened_out_code=screened, payment_per_item=settings.payment_per_item, created_by=created_by,
        items_per_page=settings.items_per_page, min_annotations_for_majority=settings.min_annotations_for_majority,
        prolific_study_id=(settings.prolific_study_id or "").strip(), allow_other_pids=settings.allow_other_pids,
    )
    _items_create(study, items)
    return study


def _item_specs(study: Study) -> list[ItemSpec]:
    return [
        ItemSpec(
            item_id=i.item_id, topic=i.topic, goal=i.goal, reference_steps=list(i.reference_steps),
            candidate_steps=list(i.candidate_steps), role=i.role, expected_has_failure=i.expected_has_failure,
            expected_choice=i.expected_choice, expected_answer=i.expected_answer, explanation=i.explanation,
            source=dict(i.source),
        )
        for i in study.items.order_by("role", "position")
    ]


@transaction.atomic
def study_round_create(*, study: Study, instructions: str, created_by: Any = None) -> Study:
    """A pilot round: the same items and settings under new guidelines (a new version, so
    annotators qualify again). Rounds share the first round and are numbered 1, 2, ..."""
    root = study.round_root
    last = Study.objects.filter(Q(pk=root.pk) | Q(first_round=root)).aggregate(m=Max("round"))["m"] or 1
    settings = StudySettings(
        annotators_per_item=study.annotators_per_item, min_seconds=study.min_seconds,
        lease_minutes=study.lease_minutes, training_enabled=study.training_enabled,
        qualification_enabled=study.qualification_enabled, qualification_pass=study.qualification_pass or None,
        attention_check_rate=study.attention_check_rate, attention_max_failures=study.attention_max_failures,
        max_items_per_annotator=study.max_items_per_annotator, payment_per_item=study.payment_per_item,
        min_annotations_for_majority=study.min_annotations_for_majority,
        allow_other_pids=study.allow_other_pids,
    )
    new = study_create(
        name=f"{root.name} (round {last + 1})", items=_item_specs(study), kind=study.kind,
        slug=_unique_slug(f"{root.slug}-r{last + 1}"), instructions=instructions, settings=settings,
        created_by=created_by,
    )
    new.round = last + 1
    new.first_round = root
    new.save(update_fields=["round", "first_round"])
    return new


@transaction.atomic
def study_update(
    *, study: Study, is_open: bool | None = None, payment_per_item: Decimal | None = None,
    clear_payment: bool = False, instructions: str | None = None, min_annotations_for_majority: int | None = None,
    prolific_study_id: str | None = None, allow_other_pids: bool | None = None,
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
        if problems := _majority_threshold_problems(min_annotations_for_majority):
            raise StudyInvalid(problems[0][0].upper() + problems[0][1:] + ".")
        study.min_annotations_for_majority = min_annotations_for_majority
        fields.append("min_annotations_for_majority")
    if prolific_study_id is not None:
        prolific_study_id = prolific_study_id.strip()
        if prolific_study_id and not PROLIFIC_STUDY_ID_RE.fullmatch(prolific_study_id):
            raise StudyInvalid("The Prolific study id must be 1-100 letters, digits, '_' or '-'.",
                               [FieldError("prolific_study_id", "must be 1-100 letters, digits, '_' or '-'")])
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


# --------------------------------------------------------------------------- the annotator's path


def _entry_refused(field: str, message: str, status: type[EntryRefused] = EntryRefused) -> EntryRefused:
    return status(message, [FieldError(field, message)])


def _pid_check(pid: Any, study: Study) -> str:
    malformed = _entry_refused(
        "PROLIFIC_PID",
        "The Prolific ID (PROLIFIC_PID) in this link does not look right (it should be letters and digits only). "
        "Please open the study from Prolific again.",
    )
    try:
        pid = check_text(pid, field="PROLIFIC_PID", max_length=C.PID_MAX_LENGTH + 2).strip()
    except StrictJSONError:
        raise malformed from None
    if not pid:
        raise _entry_refused(
            "PROLIFIC_PID",
            "This link is missing your Prolific ID (PROLIFIC_PID). Please open the study from Prolific "
            "again, or ask the researcher for the correct link.",
        )
    if not PID_RE.fullmatch(pid) or not (study.allow_other_pids or PROLIFIC_PID_RE.fullmatch(pid)):
        raise malformed
    return pid


def _prolific_param(value: Any, name: str) -> str:
    """STUDY_ID or SESSION_ID as Prolific fills them in (letters, digits, '_', '-', '.'; the
    unfilled placeholder's '{', '}' and '%' are accepted too, for a researcher's own test)."""
    problem = _entry_refused(
        name, f"The {name} in this link does not look right (it should be letters and digits, at most "
        f"{C.PROLIFIC_PARAM_MAX_LENGTH} characters). Please open the study from Prolific again.",
    )
    try:
        text = check_text(value, field=name, max_length=C.PROLIFIC_PARAM_MAX_LENGTH).strip()
    except StrictJSONError:
        raise problem from None
    if not PROLIFIC_PARAM_RE.fullmatch(text):
        raise problem
    return text


def _entry_allowed(study: Study, client_address: str | None) -> bool:
    """Count a new participant from this address in this study; False over the limit."""
    return rate_limit.hit(
        f"annotate-entry:{study.pk}:{rate_limit.address_key(client_address)}",
        limit=django_settings.ANNOTATE_ENTRY_LIMIT_PER_ADDRESS, window=django_settings.ANNOTATE_ENTRY_WINDOW_SECONDS,
    )


def participation_enter(
    *, study: Study, pid: Any, prolific_study_id: Any = None, session_id: Any = None,
    client_address: str | None = None, rate_limited: bool = False,
) -> Participation:
    """Entry with Prolific's URL parameters: the PID identifies the annotator across studies;
    returning with the same PID resumes where they were.

    Refused (``EntryRefused``, naming the parameter) when the PID does not look like a Prolific
    id and the study does not allow other ids, when STUDY_ID or SESSION_ID is malformed, when
    the study has a Prolific study id and STUDY_ID differs, and for a new participant when the
    study is closed. With ``rate_limited`` (the web entry), a new participant beyond the
    study's allowance for ``client_address`` is refused with ``EntryLimited`` (429); someone
    who comes back is never counted."""
    pid = _pid_check(pid, study)
    study_id = _prolific_param(prolific_study_id, "STUDY_ID")
    session_id = _prolific_param(session_id, "SESSION_ID")
    if study.prolific_study_id and study_id != study.prolific_study_id:
        raise _entry_refused(
            "STUDY_ID",
            "This link belongs to a different Prolific study (its STUDY_ID does not match this study). Please "
            "open the study from Prolific again, or ask the researcher for the correct link.",
        )
    now = _now()
    known = Participation.objects.filter(study=study, annotator__pid=pid).exists()
    if not known and not study.is_open:
        raise EntryRefused("This study is not accepting new participants. Please return it on Prolific.")
    if not known and rate_limited and not _entry_allowed(study, client_address):
        raise _entry_refused(
            "PROLIFIC_PID",
            "Too many new participants have started this study from your network recently. If you "
            "are a Prolific participant, please try again later or contact the researcher through Prolific.",
            EntryLimited,
        )
    try:
        with transaction.atomic():
            annotator, _ = Annotator.objects.get_or_create(pid=pid)
            participation, _ = Participation.objects.get_or_create(
                study=study, annotator=annotator, defaults={"attention_seed": attention_plan.new_seed()})
    except IntegrityError:  # a concurrent first entry with the same PID
        annotator = Annotator.objects.get(pid=pid)
        participation = Participation.objects.get(study=study, annotator=annotator)
    with transaction.atomic():
        p = Participation.objects.select_for_update().get(pk=participation.pk)
        session = {"study_id": study_id, "session_id": session_id}
        if any(session.values()):
            if session not in p.sessions_seen:
                p.sessions_seen = [*p.sessions_seen, {**session, "first_seen": now.isoformat()}][-50:]
            p.prolific_study_id = session["study_id"] or p.prolific_study_id
            p.prolific_session_id = session["session_id"] or p.prolific_session_id
        p.last_seen_at = now
        p.save(update_fields=["sessions_seen", "prolific_study_id", "prolific_session_id", "last_seen_at"])
        return p


def _finish(p: Participation, state: str, reason: str = "") -> None:
    p.state = state
    p.state_reason = reason[:200]
    p.finished_at = p.finished_at or _now()


def _qualification_record(p: Participation) -> Qualification | None:
    return Qualification.objects.filter(annotator_id=p.annotator_id, guideline_version_id=p.study.guideline_version_id).first()


def _state_after_consent(p: Participation) -> None:
    study = p.study
    record = _qualification_record(p) if study.qualification_enabled else None
    if record is not None and not record.passed:
        _finish(p, ParticipationState.SCREENED_OUT, f"did not pass the qualification of {study.guideline_version.label} earlier")
    elif record is not None and record.passed:
        p.state = ParticipationState.ANNOTATING  # trained and qualified on these guidelines already
    elif study.training_enabled and p.training_completed_at is None:
        p.state = ParticipationState.TRAINING
    else:
        _state_after_training(p)


def _state_after_training(p: Participation) -> None:
    study = p.study
    if not study.qualification_enabled:
        p.state = ParticipationState.ANNOTATING
        return
    record = _qualification_record(p)
    if record is None:
        p.state = ParticipationState.QUALIFICATION
    elif record.passed:
        p.state = ParticipationState.ANNOTATING
    else:
        _finish(p, ParticipationState.SCREENED_OUT, "did not pass the qualification")


def _lock(p: Participation | int) -> Participation:
    pk = p if isinstance(p, int) else p.pk
    # of=("self",): lock the participation row only, never the shared study row it joins.
    return Participation.objects.select_for_update(of=("self",)).select_related("study__guideline_version").get(pk=pk)


@transaction.atomic
def participation_consent(*, participation: Participation) -> Participation:
    p = _lock(participation)
    if p.state == ParticipationState.CONSENT:
        p.consented_at = _now()
        _state_after_consent(p)
        p.save()
    return p


def training_examples(study: Study) -> list[dict[str, Any]]:
    codebook = codebook_get(study.kind) or {}
    return list(codebook.get("examples", []))


def training_position(p: Participation) -> int:
    """Index of the first example not answered yet (== len(examples) when all are answered)."""
    examples = training_examples(p.study)
    for index, example in enumerate(examples):
        if "answer" not in p.training_progress.get(example["id"], {}):
            return index
    return len(examples)


@transaction.atomic
def training_open(*, participation: Participation, index: int) -> Participation:
    """Record that the annotator opened example ``index`` (only the next unanswered one opens)."""
    p = _lock(participation)
    if p.state != ParticipationState.TRAINING:
        raise StepRefused("Training is not open for you at this point.")
    examples = training_examples(p.study)
    if not 0 <= index < len(examples) or index > training_position(p):
        raise StepRefused("Finish the earlier examples first.")
    example_id = examples[index]["id"]
    progress = dict(p.training_progress)
    entry = dict(progress.get(example_id, {}))
    if "opened_at" not in entry:
        entry["opened_at"] = _now().isoformat()
        progress[example_id] = entry
        p.training_progress = progress
        p.save(update_fields=["training_progress"])
    return p


@dataclass
class TrainingResult:
    correct: bool
    explanation: str
    finished: bool


@transaction.atomic
def training_answer(*, participation: Participation, index: int, answer: bool) -> TrainingResult:
    """The check question of an example: the first answer counts; every answer shows the
    explanation. After the last example the annotator moves on to the qualification test."""
    p = _lock(participation)
    examples = training_examples(p.study)
    if p.state != ParticipationState.TRAINING or not 0 <= index < len(examples):
        raise StepRefused("Training is not open for you at this point.")
    example = examples[index]
    entry = dict(p.training_progress.get(example["id"], {}))
    if "opened_at" not in entry:
        raise StepRefused("Open the example and read it before answering.")
    if index > training_position(p):
        raise StepRefused("Finish the earlier examples first.")
    correct = bool(answer) == bool(example["is_critical"])
    if "answer" not in entry:
        entry.update(answer=bool(answer), correct=correct, answered_at=_now().isoformat())
        p.training_progress = {**p.training_progress, example["id"]: entry}
    finished = training_position(p) >= len(examples)
    if finished and p.training_completed_at is None:
        p.training_completed_at = _now()
        _state_after_training(p)
    p.save()
    return TrainingResult(correct=correct, explanation=example["explanation"], finished=finished)


# --------------------------------------------------------------------------- reservations


def _live_slots(item_id: int, now: datetime, exclude_pk: int | None = None) -> int:
    """Slots of an item that count toward k: submitted (not surplus) and unexpired reservations."""
    qs = Assignment.objects.filter(item_id=item_id).filter(
        Q(status=AssignmentStatus.SUBMITTED, surplus=False)
        | Q(status=AssignmentStatus.RESERVED, lease_expires_at__gt=now)
    )
    if exclude_pk is not None:
        qs = qs.exclude(pk=exclude_pk)
    return qs.count()


def _lock_item(item_id: int, *, skip_locked: bool) -> StudyItem | None:
    qs = StudyItem.objects.filter(pk=item_id)
    qs = qs.select_for_update(skip_locked=True) if skip_locked else qs.select_for_update()
    return qs.first()


def _shown_activity(p: Participation) -> bool:
    """Whether the participant's page has reported activity on any item (a save with an event or
    a draft), or they have submitted something: their reservations then get the study's lease."""
    return Assignment.objects.filter(participation=p).filter(
        Q(activity_seen_at__isnull=False) | Q(status=AssignmentStatus.SUBMITTED)
    ).exists()


def _lease_until(p: Participation, now: datetime) -> datetime:
    """The end of a lease granted now: the study's lease once the participant has shown
    activity, else the short initial lease (a reservation nobody acts on frees its slot soon)."""
    full = now + timedelta(minutes=p.study.lease_minutes)
    if _shown_activity(p):
        return full
    return min(full, now + timedelta(seconds=C.INITIAL_LEASE_SECONDS))


def _new_assignment(p: Participation, item: StudyItem, now: datetime) -> Assignment:
    return Assignment.objects.create(
        study_id=p.study_id, item=item, participation=p, annotator_id=p.annotator_id, role=item.role,
        reserved_at=now, lease_expires_at=_lease_until(p, now), first_served_at=now, last_activity_at=now,
    )


def _candidate_main_items(p: Participation, now: datetime, limit: int) -> list[int]:
    """Ids of main-pool items this annotator has never had, with fewer than k live slots,
    in study order (so items fill up one after another)."""
    from django.db.models import Count

    seen = Assignment.objects.filter(participation=p).values("item_id")
    live = Count(
        "assignments",
        filter=Q(assignments__status=AssignmentStatus.SUBMITTED, assignments__surplus=False)
        | Q(assignments__status=AssignmentStatus.RESERVED, assignments__lease_expires_at__gt=now),
    )
    qs = (
        StudyItem.objects.filter(study_id=p.study_id, role=ROLE_MAIN)
        .exclude(pk__in=seen)
        .annotate(live=live)
        .filter(live__lt=p.study.annotators_per_item)
        .order_by("position", "pk")
        .values_list("pk", flat=True)
    )
    return list(qs[:limit])


class _ItemFull(Exception):
    """Raised inside a savepoint to roll it back, which releases the item's row lock."""


_SKIPPED = object()


def _try_reserve(p: Participation, item_id: int, now: datetime, *, skip_locked: bool) -> Any:
    """Lock one item, count its live slots, and reserve it if one is free. Runs in a savepoint:
    when the item is full the savepoint is rolled back, which releases its row lock at once, so
    a reserver never holds one item while waiting for another (no deadlocks between reservers)."""
    try:
        with transaction.atomic():
            item = _lock_item(item_id, skip_locked=skip_locked)
            if item is None:
                return _SKIPPED
            if _live_slots(item.pk, now) < p.study.annotators_per_item:
                return _new_assignment(p, item, now)
            raise _ItemFull
    except _ItemFull:
        return None


def _reserve_main(p: Participation, now: datetime) -> Assignment | None:
    """Reserve one main-pool item atomically. Each candidate item row is locked while its live
    slots are counted, so concurrent reservers never hand out more than k; rows locked by
    another reserver are skipped first and waited for only if nothing else is free."""
    for _attempt in range(20):
        candidates = _candidate_main_items(p, now, limit=8)
        if not candidates:
            return None
        skipped = []
        for item_id in candidates:
            result = _try_reserve(p, item_id, now, skip_locked=True)
            if result is _SKIPPED:
                skipped.append(item_id)
            elif result is not None:
                return result
        for item_id in skipped:
            result = _try_reserve(p, item_id, now, skip_locked=False)
            if result is not None:
                return result
    return None


def _reserve_free(p: Participation, role: str, now: datetime) -> Assignment | None:
    """Attention-check and qualification items have no k limit: the next one this annotator
    has not had; qualification items in study order, attention checks in the participant's own
    seeded order (annotate/attention_plan.py)."""
    seen = Assignment.objects.filter(participation=p).values("item_id")
    candidates = StudyItem.objects.filter(study_id=p.study_id, role=role).exclude(pk__in=seen).order_by("position", "pk")
    if role == ROLE_ATTENTION:
        order = attention_plan.check_order(_attention_seed(p), list(
            StudyItem.objects.filter(study_id=p.study_id, role=role).order_by("position", "pk").values_list("pk", flat=True)))
        left = set(candidates.values_list("pk", flat=True))
        item_pk = next((pk for pk in order if pk in left), None)
        item = StudyItem.objects.filter(pk=item_pk).first() if item_pk is not None else None
    else:
        item = candidates.first()
    return _new_assignment(p, item, now) if item is not None else None


def _attention_seed(p: Participation) -> int:
    """The participant's seed (participations from before the seed existed get one now; the
    caller saves the participation)."""
    if p.attention_seed is None:
        p.attention_seed = attention_plan.new_seed()
    return p.attention_seed


def _attention_due(p: Participation) -> bool:
    """Whether the next item is an attention check: one check in every stretch of about 1/rate
    items, at a position drawn from the participant's seed (annotate/attention_plan.py)."""
    rate = p.study.attention_check_rate
    if rate <= 0:
        return False
    seen_main = Assignment.objects.filter(participation=p, role=ROLE_MAIN).count()
    seen_attention = Assignment.objects.filter(participation=p, role=ROLE_ATTENTION).count()
    return attention_plan.check_due(_attention_seed(p), rate, served=seen_main + seen_attention,
                                    checks_served=seen_attention)


def _renew_or_expire(a: Assignment, p: Participation, now: datetime) -> bool:
    """An annotator is back on an item whose lease ran out: keep it if a slot is still free."""
    if a.role != ROLE_MAIN:
        a.lease_expires_at = _lease_until(p, now)
        a.save(update_fields=["lease_expires_at"])
        return True
    try:
        with transaction.atomic():  # a savepoint: rolling it back releases the item lock
            _lock_item(a.item_id, skip_locked=False)
            if _live_slots(a.item_id, now, exclude_pk=a.pk) >= p.study.annotators_per_item:
                raise _ItemFull
            a.lease_expires_at = _lease_until(p, now)
            a.save(update_fields=["lease_expires_at"])
            return True
    except _ItemFull:
        pass
    a.status = AssignmentStatus.EXPIRED  # the draft stays stored; a late submit is still accepted
    a.save(update_fields=["status"])
    return False


def _grade_qualification(p: Participation) -> None:
    """After the last gold item: pass or screen out, remembered per guideline version."""
    study = p.study
    n_total = StudyItem.objects.filter(study=study, role=ROLE_QUALIFICATION).count()
    answers = Annotation.objects.filter(participation=p, source=ROLE_QUALIFICATION)
    if answers.count() < n_total:
        return
    n_correct = answers.filter(correct=True).count()
    passed = n_correct >= study.qualification_pass
    Qualification.objects.get_or_create(
        annotator_id=p.annotator_id, guideline_version_id=study.guideline_version_id,
        defaults={"study": study, "passed": passed, "n_correct": n_correct, "n_total": n_total},
    )
    if passed:
        p.state = ParticipationState.ANNOTATING
    else:
        _finish(p, ParticipationState.SCREENED_OUT, f"qualification: {n_correct} of {n_total} correct, {study.qualification_pass} needed")


def _current(p: Participation, roles: tuple[str, ...], held: Collection[int] = ()) -> Assignment | None:
    return (
        Assignment.objects.filter(participation=p, status=AssignmentStatus.RESERVED, role__in=roles)
        .exclude(pk__in=list(held)).select_related("item").order_by("reserved_at", "pk").first()
    )


@transaction.atomic
def assignment_next(*, participation: Participation, held: Collection[int] = ()) -> Assignment | None:
    """The item this annotator should see now: their current reservation (renewed if its lease
    ran out and a slot is still free), else a newly reserved one (qualification items first,
    then main items with attention checks mixed in). None when there is nothing left, in which
    case the participation is completed (or screened out after a failed qualification).

    ``held``: main-pool assignments already on the annotator's page (a page of several items):
    they are skipped, count towards the study's limit per annotator, and while there are any the
    participation is not completed when nothing more is left."""
    p = _lock(participation)
    now = _now()
    p.last_seen_at = now
    result = None
    if p.state == ParticipationState.QUALIFICATION:
        result = _current(p, (ROLE_QUALIFICATION,)) or _reserve_free(p, ROLE_QUALIFICATION, now)
        if result is None:
            _grade_qualification(p)
            if p.state == ParticipationState.QUALIFICATION:  # gold items missing: nothing to grade
                _finish(p, ParticipationState.SCREENED_OUT, "no qualification items")
    if result is None and p.state == ParticipationState.ANNOTATING:
        current = _current(p, (ROLE_MAIN, ROLE_ATTENTION), held)
        if current is not None and (current.lease_expires_at > now or _renew_or_expire(current, p, now)):
            result = current
        else:
            done = Assignment.objects.filter(
                participation=p, role__in=(ROLE_MAIN, ROLE_ATTENTION), status=AssignmentStatus.SUBMITTED
            ).count()
            limit = p.study.max_items_per_annotator
            if limit is not None and done + len(held) >= limit:
                if not held:
                    _finish(p, ParticipationState.COMPLETED, f"reached the study's {limit} items")
            else:
                if _attention_due(p):
                    result = _reserve_free(p, ROLE_ATTENTION, now)
                result = result or _reserve_main(p, now)
                if result is None and not held:
                    _finish(p, ParticipationState.COMPLETED, "no more items to annotate")
    p.save()
    return result


def assignment_page(*, participation: Participation, size: int) -> list[Assignment]:
    """Up to ``size`` items for one page (a study that shows several items per page): the
    annotator's current reservations first, then new ones, each reserved by ``assignment_next``
    under the same rules. Qualification items are always shown one at a time."""
    page: list[Assignment] = []
    while len(page) < max(size, 1):
        a = assignment_next(participation=participation, held=[x.pk for x in page])
        if a is None or any(x.pk == a.pk for x in page):
            break
        page.append(a)
        participation.refresh_from_db()
        if a.role == ROLE_QUALIFICATION or participation.state != ParticipationState.ANNOTATING:
            break
    return page


# --------------------------------------------------------------------------- drafts and events


def _get_own(public_id: Any, participation: Participation | int, *, lock: bool) -> Assignment:
    participation_id = participation if isinstance(participation, int) else participation.pk
    qs = Assignment.objects.select_related("item", "study")
    if lock:
        qs = qs.select_for_update(of=("self",))
    try:
        return qs.get(public_id=public_id, participation_id=participation_id)
    except (Assignment.DoesNotExist, ValueError, TypeError):
        raise NotYours("This item is not assigned to you.") from None


def _credit_active(a: Assignment, seconds: float, now: datetime) -> None:
    """Credit tab-visible time the server can vouch for: what the page reports, but never more
    than the server's own time since its previous event on this item (the last save, or the
    first serve), and the total never more than the time since the item was first served. No
    slack: a burst of saves claiming more than the elapsed time is credited the elapsed time."""
    since = a.last_activity_at or a.first_served_at or now
    if a.first_served_at is not None and since < a.first_served_at:
        since = a.first_served_at
    elapsed = max(0.0, (now - since).total_seconds())
    total = a.active_seconds + min(max(0.0, seconds), elapsed)
    if a.first_served_at is not None:
        total = min(total, max(0.0, (now - a.first_served_at).total_seconds()))
    a.active_seconds = round(total, 3)


def _save_invalid(field: str, message: str) -> SaveInvalid:
    return SaveInvalid(f"{field}: {message}", [FieldError(field, message)])


def _checked_events(events: Any) -> list[dict[str, Any]]:
    """The events of a save, each checked for shape and bounds (a bad one names its index)."""
    if events is None:
        return []
    if not isinstance(events, list):
        raise _save_invalid("events", "must be a list of event objects")
    if len(events) > C.MAX_EVENTS_PER_SAVE:
        raise _save_invalid("events", f"at most {C.MAX_EVENTS_PER_SAVE} events per save")
    checked = []
    for index, event in enumerate(events):
        where = f"events[{index}]"
        if not isinstance(event, dict):
            raise _save_invalid(where, "must be an object with a type")
        etype = event.get("type")
        if not isinstance(etype, str) or etype not in EVENT_TYPES:
            raise _save_invalid(f"{where}.type", "is not an event type of the annotation page")
        target = event.get("target")
        if target is not None:
            if isinstance(target, bool) or not isinstance(target, (str, int)):
                raise _save_invalid(f"{where}.target", "must be text")
            try:
                target = check_text(str(target), field=f"{where}.target", max_length=C.MAX_EVENT_TARGET_LENGTH)
            except StrictJSONError as exc:
                raise _save_invalid(exc.field, exc.message) from None
        entry: dict[str, Any] = {"type": etype, "target": target}
        if "client_t" in event:
            try:
                entry["client_t"] = check_number(event["client_t"], field=f"{where}.client_t", maximum=C.MAX_CLIENT_T)
            except StrictJSONError as exc:
                raise _save_invalid(exc.field, exc.message) from None
        checked.append(entry)
    return checked


def _apply_events(a: Assignment, events: list[dict[str, Any]], now: datetime) -> None:
    if not events:
        return
    kind = kind_get(a.study.kind)
    step_names = set(kind.required_openings(len(a.item.reference_steps), len(a.item.candidate_steps)))
    stamp = now.isoformat()
    log = list(a.click_log)
    opened = dict(a.steps_opened)
    for index, event in enumerate(events):
        etype, target = event["type"], event["target"]
        if etype == EVENT_STEP_OPEN:
            if target not in step_names:
                raise SaveInvalid(f"there is no step {target!r} in this item",
                                  [FieldError(f"events[{index}].target", f"there is no step {target!r} in this item")])
            opened.setdefault(target, stamp)
        elif etype == EVENT_GOAL_ACK:
            a.goal_acknowledged_at = a.goal_acknowledged_at or now
        elif etype == EVENT_GOAL_UNACK:
            a.goal_acknowledged_at = None
        entry = {"t": stamp, "type": etype}
        if target is not None:
            entry["target"] = target
        if "client_t" in event:
            client_t = event["client_t"]
            entry["client_t"] = int(client_t) if client_t == int(client_t) else client_t
        log.append(entry)
    a.steps_opened = opened
    a.click_log = log[-C.MAX_CLICK_LOG:]


def _lengthen_leases(a: Assignment, now: datetime) -> None:
    """The page showed activity: its short initial lease (and those of the participant's other
    items on the same page) lengthens to the study's lease, counted from the reservation. A
    lease that already ran out is left alone (the slot may be someone else's by now; coming
    back renews it if a slot is still free). Rows another save holds are skipped, never waited
    for: that save lengthens its own."""
    lease = timedelta(minutes=a.study.lease_minutes)
    if a.status == AssignmentStatus.RESERVED and a.lease_expires_at > now:
        a.lease_expires_at = max(a.lease_expires_at, a.reserved_at + lease)
    others = list(
        Assignment.objects.select_for_update(skip_locked=True)
        .filter(participation_id=a.participation_id, status=AssignmentStatus.RESERVED, lease_expires_at__gt=now,
                activity_seen_at__isnull=True)
        .exclude(pk=a.pk).values_list("pk", "reserved_at", "lease_expires_at")
    )
    for pk, reserved_at, expires in others:
        if expires < reserved_at + lease:
            Assignment.objects.filter(pk=pk).update(lease_expires_at=reserved_at + lease)


@dataclass
class SaveResult:
    assignment: Assignment
    draft_saved: bool


@transaction.atomic
def assignment_save(
    *, participation: Participation | int, public_id: Any, draft: Any = None, seq: Any = None,
    events: Any = None, active_ms: Any = 0,
) -> SaveResult:
    """Autosave: record events with server timestamps, credit visible time, and store the draft
    when its sequence number is newer than the stored one (an older save that arrives late does
    not undo a newer one). Refused once the item is submitted: a draft never overwrites a
    submitted annotation. Only the participant's assignment rows are locked and written (saves
    are frequent; the participation is not touched, its "last seen" comes from the assignment's
    activity).

    Every value is checked before anything is written: ``seq`` an integer in 1..2^31-1,
    ``active_ms`` a finite number in 0..2^31-1, each event's type, target and ``client_t``, and
    the draft free of NaN, NUL and the like (``SaveInvalid``, 400, naming the field). A save
    with an event or a draft is activity: the first one lengthens the short initial lease."""
    try:
        seconds = check_number(0 if active_ms is None else active_ms, field="active_ms", maximum=C.MAX_ACTIVE_MS) / 1000.0
        if seq is not None or draft is not None:
            check_int(seq, field="seq", minimum=1, maximum=C.MAX_SEQ)
        if draft is not None:
            check_value(draft, field="draft", max_string_length=C.MAX_DRAFT_STRING_LENGTH)
    except StrictJSONError as exc:
        raise SaveInvalid(f"{exc.field}: {exc.message}", _field_errors(exc)) from None
    checked_events = _checked_events(events)
    a = _get_own(public_id, participation, lock=True)
    if a.status == AssignmentStatus.SUBMITTED:
        raise DraftRejected("This item was already submitted; the submitted answer is kept.")
    now = _now()
    _apply_events(a, checked_events, now)
    saved = False
    if draft is not None:
        if seq > a.draft_seq:
            a.draft = kind_get(a.study.kind).clean_draft(draft, len(a.item.reference_steps), len(a.item.candidate_steps))
            a.draft_seq = seq
            a.draft_saved_at = now
            saved = True
    _credit_active(a, seconds, now)
    a.last_activity_at = now
    fields = ["steps_opened", "click_log", "goal_acknowledged_at", "draft", "draft_seq", "draft_saved_at",
              "active_seconds", "last_activity_at"]
    if (checked_events or draft is not None) and a.activity_seen_at is None:
        a.activity_seen_at = now
        _lengthen_leases(a, now)
        fields += ["activity_seen_at", "lease_expires_at"]
    a.save(update_fields=fields)
    return SaveResult(assignment=a, draft_saved=saved)


# --------------------------------------------------------------------------- submit


def submission_problems(a: Assignment, now: datetime) -> list[FieldError]:
    """The interface rules (App. C.1), checked against what the server recorded."""
    errors = []
    kind = kind_get(a.study.kind)
    if kind.requires_goal_acknowledgement and a.goal_acknowledged_at is None:
        errors.append(FieldError("goal", "Confirm that you have read the goal: tick the box under the goal."))
    required = kind.required_openings(len(a.item.reference_steps), len(a.item.candidate_steps))
    missing = [name for name in required if name not in a.steps_opened]
    if missing:
        shown = ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")
        errors.append(FieldError(
            "steps", f"Click every step of L1 and L2 to confirm you have read it; {len(missing)} not yet read: {shown}."
        ))
    elapsed = (now - a.first_served_at).total_seconds() if a.first_served_at else 0.0
    if elapsed < a.study.min_seconds:
        remaining = math.ceil(a.study.min_seconds - elapsed)
        errors.append(FieldError(
            "time", f"Submission opens {a.study.min_seconds} seconds after the item was first shown; "
            f"{remaining} second{'s' if remaining != 1 else ''} to go.",
        ))
    return errors


def _screen_out_for_attention(p: Participation) -> None:
    reason = f"failed {p.attention_failures} attention checks (allowed: {p.study.attention_max_failures})"
    _finish(p, ParticipationState.SCREENED_OUT, reason)
    p.excluded = True
    p.exclusion_reason = "failed_attention_checks"
    Annotation.objects.filter(participation=p, source=ROLE_MAIN).update(excluded=True, exclusion_reason="failed_attention_checks")
    Assignment.objects.filter(participation=p, status=AssignmentStatus.RESERVED).update(status=AssignmentStatus.RELEASED)


@dataclass
class SubmitResult:
    annotation: Annotation
    created: bool


@transaction.atomic
def annotation_submit(
    *, participation: Participation, public_id: Any, answer: Any, submission_id: str = ""
) -> SubmitResult:
    """Store the annotation once. A repeated submit (double click, network retry) returns the
    stored annotation unchanged. A late submit (lease expired or released) is stored too, and
    marked surplus when the item already had its k annotations. A malformed answer or
    submission id (NaN, NUL, over-long) is refused naming the field before anything is locked."""
    try:
        check_value(answer, field="answer", max_string_length=C.MAX_DRAFT_STRING_LENGTH)
        submission_id = check_text(submission_id, field="submission_id", max_length=C.SUBMISSION_ID_MAX_LENGTH)
    except StrictJSONError as exc:
        raise SubmissionRejected(f"The answer was not submitted: {exc.field}: {exc.message}", _field_errors(exc)) from None
    p = _lock(participation)
    a = _get_own(public_id, p, lock=False)
    existing = Annotation.objects.filter(assignment=a).first()
    if existing is not None:
        return SubmitResult(existing, False)
    item = _lock_item(a.item_id, skip_locked=False)
    a = _get_own(public_id, p, lock=True)
    existing = Annotation.objects.filter(assignment=a).first()
    if existing is not None:
        return SubmitResult(existing, False)
    now = _now()
    study = a.study
    kind = kind_get(study.kind)
    errors = submission_problems(a, now)
    cleaned, answer_errors = kind.validate_submission(answer, len(item.reference_steps), len(item.candidate_steps))
    errors += answer_errors
    if errors or cleaned is None:
        raise SubmissionRejected("The answer was not submitted: " + " ".join(e.message for e in errors), errors)
    late = a.status != AssignmentStatus.RESERVED or now > a.lease_expires_at
    surplus = False
    if a.role == ROLE_MAIN:
        filled = Assignment.objects.filter(item=item, status=AssignmentStatus.SUBMITTED, surplus=False).exclude(pk=a.pk).count()
        if late:
            filled += Assignment.objects.filter(
                item=item, status=AssignmentStatus.RESERVED, lease_expires_at__gt=now
            ).exclude(pk=a.pk).count()
        surplus = filled >= study.annotators_per_item
    correct = None
    if kind.answer_correct is not None:  # the kind knows its items' answers (main items too)
        correct = kind.answer_correct(cleaned, item)
    elif a.role in (ROLE_ATTENTION, ROLE_QUALIFICATION) and item.expected_has_failure is not None:
        correct = kind.answer_label(cleaned) == item.expected_has_failure
    excluded, reason = False, ""
    if a.role == ROLE_QUALIFICATION:
        excluded, reason = True, "qualification_item"
    elif a.role == ROLE_ATTENTION:
        excluded, reason = True, "attention_check_item"
    elif p.excluded:
        excluded, reason = True, p.exclusion_reason
    try:
        with transaction.atomic():
            annotation = Annotation.objects.create(
                assignment=a, study=study, item=item, participation=p, annotator_id=a.annotator_id,
                source=a.role, has_failure=kind.answer_label(cleaned), failures=cleaned.get("failures", []),
                comments=cleaned.get("comments", ""), answer=cleaned,
                guideline_version=study.guideline_version.label, l1_hash=item.l1_hash, l2_hash=item.l2_hash,
                interface_version=C.INTERFACE_VERSION, first_served_at=a.first_served_at, submitted_at=now,
                wall_seconds=round((now - a.first_served_at).total_seconds(), 3),
                active_seconds=a.active_seconds, goal_acknowledged_at=a.goal_acknowledged_at,
                steps_opened=a.steps_opened, click_log=a.click_log, surplus=surplus, late=late,
                correct=correct, excluded=excluded, exclusion_reason=reason, submission_id=submission_id,
            )
    except IntegrityError:  # the same assignment submitted concurrently (backstop of the lock)
        return SubmitResult(Annotation.objects.get(assignment=a), False)
    a.status = AssignmentStatus.SUBMITTED
    a.submitted_at = now
    a.surplus = surplus
    a.save(update_fields=["status", "submitted_at", "surplus"])
    p.last_seen_at = now
    if a.role == ROLE_ATTENTION and correct is not None:
        if correct:
            p.attention_passed += 1
        else:
            p.attention_failures += 1
            if p.attention_failures > study.attention_max_failures and p.state not in (
                ParticipationState.SCREENED_OUT, ParticipationState.RETURNED
            ):
                _screen_out_for_attention(p)
    if a.role == ROLE_QUALIFICATION and p.state == ParticipationState.QUALIFICATION:
        _grade_qualification(p)
    p.save()
    return SubmitResult(annotation, True)


# --------------------------------------------------------------------------- researchers


@transaction.atomic
def participation_release(*, participation: Participation) -> int:
    """The participant returned the study on Prolific: their reserved slots go back to the
    pool at once (drafts stay stored; a late submit would still be kept)."""
    p = _lock(participation)
    released = Assignment.objects.filter(participation=p, status=AssignmentStatus.RESERVED).update(
        status=AssignmentStatus.RELEASED
    )
    if p.state not in (ParticipationState.COMPLETED, ParticipationState.SCREENED_OUT):
        _finish(p, ParticipationState.RETURNED, "returned on Prolific; slots released by a researcher")
    p.save()
    return released


def assignments_live(study: Study) -> QuerySet[Assignment]:
    return Assignment.objects.filter(study=study, status=AssignmentStatus.RESERVED, lease_expires_at__gt=_now())
