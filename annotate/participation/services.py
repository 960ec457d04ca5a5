"""Writes of the annotator's path up to the items: entry from the Prolific link (the PID and
STUDY_ID checks, the per-address limit of issue 18), test participants, consent, training.

Lock order everywhere in ``annotate.participation``: participation, then item, then assignment."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction

from annotate import constants as C
from annotate.errors import EntryLimited, EntryRefused, StepRefused, StudyFull
from annotate.kinds import codebook_get, kind_get
from annotate.kinds.base import FieldError
from annotate.models import Annotator, Participation, ParticipationState, Qualification, Study
from annotate.participation import attention_plan, clock
from annotate.participation.selectors import participation_study_full, study_full
from core import rate_limit
from core.strict_json import StrictJSONError, check_text

PID_RE = re.compile(C.PID_PATTERN)
PROLIFIC_PID_RE = re.compile(C.PROLIFIC_PID_PATTERN)
PROLIFIC_PARAM_RE = re.compile(C.PROLIFIC_PARAM_PATTERN)


# --------------------------------------------------------------------------- the annotator's path


def _entry_refused(field: str, message: str, status: type[EntryRefused] = EntryRefused) -> EntryRefused:
    return status(message, [FieldError(field, message)])


def _pid_rule(study: Study) -> str:
    """The rule a PID must meet in ``study``, as the refusal states it (annotate/constants.py):
    Prolific's 24 hexadecimal characters, unless the study also accepts other ids."""
    if study.allow_other_pids:
        return f"it should be 1 to {C.PID_MAX_LENGTH} letters, digits, '_' or '-'"
    return "a Prolific ID is 24 hexadecimal characters: digits 0-9 and letters a-f"


def _pid_check(pid: Any, study: Study) -> str:
    malformed = _entry_refused(
        "PROLIFIC_PID",
        f"The Prolific ID (PROLIFIC_PID) in this link does not look right ({_pid_rule(study)}). "
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
    # One person is one annotator: Prolific's ids are lowercase hexadecimal, and 7EAAFB... is
    # the same participant as 7eaafb... (other ids, where a study allows them, fold too).
    return pid.lower()


def _prolific_param(value: Any, name: str) -> str:
    """STUDY_ID or SESSION_ID as Prolific fills them in (letters, digits, '_', '-', '.'; the
    unfilled placeholder's '{', '}' and '%' are accepted too, for a researcher's own test)."""
    problem = _entry_refused(
        name,
        f"The {name} in this link does not look right (it should be letters and digits, at most "
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
        limit=django_settings.ANNOTATE_ENTRY_LIMIT_PER_ADDRESS,
        window=django_settings.ANNOTATE_ENTRY_WINDOW_SECONDS,
    )


# What a participant turned away from a full study is told (the study-full page says it too).
STUDY_FULL_MESSAGE = (
    "This study is full: every item already has the annotations it needs, so there is no item left for you. "
    "Please return the study on Prolific."
)


def _placeholder(value: str) -> bool:
    """Prolific's unfilled placeholder ({{%SESSION_ID%}}): a researcher opening the raw link."""
    return "{" in value or "%" in value


def _session_check(participation: Participation, session_id: str) -> None:
    """A participation is bound to the Prolific session it started in: Prolific gives a
    participant one submission, and one SESSION_ID, per study, and the same link opened again
    carries the same one. Another session with the same PID is refused, and so is none at all
    in a study linked to a Prolific study (its links always carry one), so knowing a PID is
    not enough to see a participant's drafts or answer in their place (issue 28, F-08). A
    link without a session is taken in a study not linked to Prolific (a pilot's plain link);
    a placeholder binds nothing."""
    bound = participation.prolific_session_id
    if not bound or _placeholder(bound) or session_id == bound:
        return
    if not session_id and not participation.study.prolific_study_id:
        return
    raise _entry_refused(
        "SESSION_ID",
        "This Prolific ID is already taking part in this study in another Prolific session. Please go on "
        "in the browser window where you started, or contact the researcher through Prolific.",
    )


def participation_enter(
    *,
    study: Study,
    pid: Any,
    prolific_study_id: Any = None,
    session_id: Any = None,
    client_address: str | None = None,
    rate_limited: bool = False,
) -> Participation:
    """Entry with Prolific's URL parameters: the PID identifies the annotator across studies;
    returning with the same PID resumes where they were.

    Refused (``EntryRefused``, naming the parameter) when the PID does not look like a Prolific
    id and the study does not allow other ids, when STUDY_ID or SESSION_ID is malformed, when
    the study has a Prolific study id and STUDY_ID differs, and for a new participant when the
    study is closed, or full (``StudyFull``, 409: no main item is left that they could be
    given, ``study_full``; they are not recorded, and someone already in the study goes on).
    With ``rate_limited`` (the web entry), a new participant beyond the
    study's allowance for ``client_address`` is refused with ``EntryLimited`` (429); someone
    who comes back is never counted. A study whose kind is not installed on this server
    takes no one (``KindNotInstalled``, 503)."""
    kind_get(study.kind)
    pid = _pid_check(pid, study)
    study_id = _prolific_param(prolific_study_id, "STUDY_ID")
    session_id = _prolific_param(session_id, "SESSION_ID")
    if study.prolific_study_id and study_id != study.prolific_study_id:
        raise _entry_refused(
            "STUDY_ID",
            "This link belongs to a different Prolific study (its STUDY_ID does not match this study). Please "
            "open the study from Prolific again, or ask the researcher for the correct link.",
        )
    now = clock.now()
    known = Participation.objects.filter(study=study, annotator__pid=pid).exists()
    if not known and not study.is_open:
        raise EntryRefused("This study is not accepting new participants. Please return it on Prolific.")
    if not known and study_full(study):  # before the address is counted: nobody is created
        raise StudyFull(STUDY_FULL_MESSAGE)
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
                study=study, annotator=annotator, defaults={"attention_seed": attention_plan.new_seed()}
            )
    except IntegrityError:  # a concurrent first entry with the same PID
        annotator = Annotator.objects.get(pid=pid)
        participation = Participation.objects.get(study=study, annotator=annotator)
    with transaction.atomic():
        p = Participation.objects.select_for_update().get(pk=participation.pk)
        _session_check(p, session_id)
        session = {"study_id": study_id, "session_id": session_id}
        if any(session.values()):
            seen = {(s.get("study_id"), s.get("session_id")) for s in p.sessions_seen}
            if (study_id, session_id) not in seen:  # each session once (its first_seen kept)
                p.sessions_seen = [*p.sessions_seen, {**session, "first_seen": now.isoformat()}][-50:]
            p.prolific_study_id = session["study_id"] or p.prolific_study_id
            p.prolific_session_id = session["session_id"] or p.prolific_session_id
        p.last_seen_at = now
        p.save(update_fields=["sessions_seen", "prolific_study_id", "prolific_session_id", "last_seen_at"])
        return p


# A test participant's PID: "test-" and 12 hexadecimal characters (never a Prolific id, which
# is 24 hexadecimal characters without a dash).
TEST_PID_PREFIX = "test-"


def participation_test_start(*, study: Study) -> Participation:
    """A researcher's test run of the annotator path: a real participant under a new PID
    (``test-<12 hex>``) flagged ``is_test``. It walks consent, training, qualification and items
    as anyone would, and everything it does is stored, but its reservations and annotations never
    count toward k (a real annotator still gets the slot) and the progress, reports, agreement,
    exports and the API leave it out unless asked (``include_test``). Open or closed study alike;
    no entry limit; no Prolific parameters."""
    for _attempt in range(5):
        pid = TEST_PID_PREFIX + secrets.token_hex(6)
        try:
            with transaction.atomic():
                annotator = Annotator.objects.create(pid=pid)
                return Participation.objects.create(
                    study=study,
                    annotator=annotator,
                    is_test=True,
                    attention_seed=attention_plan.new_seed(),
                    last_seen_at=clock.now(),
                )
        except IntegrityError:  # the same random PID twice: draw again
            continue
    raise EntryRefused("No test participant could be created; try again.")


def participation_finish(p: Participation, state: str, reason: str = "") -> None:
    p.state = state
    p.state_reason = reason[:200]
    p.finished_at = p.finished_at or clock.now()


def _qualification_record(p: Participation) -> Qualification | None:
    return Qualification.objects.filter(
        annotator_id=p.annotator_id, guideline_version_id=p.study.guideline_version_id
    ).first()


def _state_after_consent(p: Participation) -> None:
    study = p.study
    record = _qualification_record(p) if study.qualification_enabled else None
    if record is not None and not record.passed:
        participation_finish(
            p,
            ParticipationState.SCREENED_OUT,
            f"did not pass the qualification of {study.guideline_version.label} earlier",
        )
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
        participation_finish(p, ParticipationState.SCREENED_OUT, "did not pass the qualification")


def participation_lock(p: Participation | int) -> Participation:
    pk = p if isinstance(p, int) else p.pk
    # of=("self",): lock the participation row only, never the shared study row it joins.
    return Participation.objects.select_for_update(of=("self",)).select_related("study__guideline_version").get(pk=pk)


@transaction.atomic
def participation_consent(*, participation: Participation) -> Participation:
    """Accept the guidelines and move on (training, qualification or the items). Refused with
    ``StudyFull`` while the study is full for them (``participation_study_full``): nobody
    consents to a study that has no item to give them."""
    p = participation_lock(participation)
    if participation_study_full(p):
        raise StudyFull(STUDY_FULL_MESSAGE)
    if p.state == ParticipationState.CONSENT:
        p.consented_at = clock.now()
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
    p = participation_lock(participation)
    if p.state != ParticipationState.TRAINING:
        raise StepRefused("Training is not open for you at this point.")
    examples = training_examples(p.study)
    if not 0 <= index < len(examples) or index > training_position(p):
        raise StepRefused("Finish the earlier examples first.")
    example_id = examples[index]["id"]
    progress = dict(p.training_progress)
    entry = dict(progress.get(example_id, {}))
    if "opened_at" not in entry:
        entry["opened_at"] = clock.now().isoformat()
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
    p = participation_lock(participation)
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
        entry.update(answer=bool(answer), correct=correct, answered_at=clock.now().isoformat())
        p.training_progress = {**p.training_progress, example["id"]: entry}
    finished = training_position(p) >= len(examples)
    if finished and p.training_completed_at is None:
        p.training_completed_at = clock.now()
        _state_after_training(p)
    p.save()
    return TrainingResult(correct=correct, explanation=example["explanation"], finished=finished)
