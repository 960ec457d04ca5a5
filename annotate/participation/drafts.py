"""Drafts and events of an assignment: what the annotation page saves while an annotator works.

A draft never overwrites a submitted annotation; active time is what the server can vouch
for (never more than its own elapsed time); every value from the page is bounded and checked
(core/strict_json.py): a bad one is a 400 naming the field, and nothing is stored."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from annotate import constants as C
from annotate.errors import DraftRejected, NotYours, SaveInvalid, field_errors
from annotate.kinds import kind_get
from annotate.kinds.base import FieldError
from annotate.models import Assignment, AssignmentStatus, Participation
from annotate.participation import clock
from annotate.participation.flags import FLAG_KEY, flag_clean_draft, flag_split
from core.strict_json import StrictJSONError, check_int, check_number, check_text, check_value

# Event types the annotation page reports; anything else is refused.
EVENT_GOAL_ACK = "goal_ack"
EVENT_GOAL_UNACK = "goal_unack"
EVENT_STEP_OPEN = "step_open"
LOGGED_EVENTS = {
    "choice",
    "add_failure",
    "remove_failure",
    "link_step",
    "unlink_step",
    "shortcut",
    "visible",
    "hidden",
    "submit_attempt",
    "help_open",
    "reload",
    "flag",  # "This item is broken" / "I'm unsure" set or cleared (annotate/participation/flags.py)
    "field_change",  # a named field of a kind's plain form part (annotate/static/annotate/form_kind.js)
}
EVENT_TYPES = {EVENT_GOAL_ACK, EVENT_GOAL_UNACK, EVENT_STEP_OPEN} | LOGGED_EVENTS


# --------------------------------------------------------------------------- drafts and events


def draft_clean(study_kind: str, item: Any, draft: Any) -> dict[str, Any]:
    """A draft as stored: the kind's part cleaned by the kind, the flag (if any) by
    ``flag_clean_draft``, kept beside it under ``"flag"``."""
    rest, raw_flag = flag_split(draft)
    cleaned = kind_get(study_kind).clean_draft(rest, len(item.reference_steps), len(item.candidate_steps))
    flag = flag_clean_draft(raw_flag)
    if flag is not None:
        cleaned[FLAG_KEY] = flag
    return cleaned


def assignment_get_own(public_id: Any, participation: Participation | int, *, lock: bool) -> Assignment:
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


def assignment_events_apply(a: Assignment, events: list[dict[str, Any]], now: datetime) -> None:
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
                raise SaveInvalid(
                    f"there is no step {target!r} in this item",
                    [FieldError(f"events[{index}].target", f"there is no step {target!r} in this item")],
                )
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
    a.click_log = log[-C.MAX_CLICK_LOG :]


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
        .filter(
            participation_id=a.participation_id,
            status=AssignmentStatus.RESERVED,
            lease_expires_at__gt=now,
            activity_seen_at__isnull=True,
        )
        .exclude(pk=a.pk)
        .values_list("pk", "reserved_at", "lease_expires_at")
    )
    for pk, reserved_at, expires in others:
        if expires < reserved_at + lease:
            Assignment.objects.filter(pk=pk).update(lease_expires_at=reserved_at + lease)


def save_values_checked(*, draft: Any, seq: Any, events: Any, active_ms: Any) -> tuple[float, list[dict[str, Any]]]:
    """The values of a save checked for shape and bounds (``SaveInvalid`` naming the field):
    the seconds of active time it reports and its checked events."""
    try:
        seconds = (
            check_number(0 if active_ms is None else active_ms, field="active_ms", maximum=C.MAX_ACTIVE_MS) / 1000.0
        )
        if seq is not None or draft is not None:
            check_int(seq, field="seq", minimum=1, maximum=C.MAX_SEQ)
        if draft is not None:
            check_value(draft, field="draft", max_string_length=C.MAX_DRAFT_STRING_LENGTH)
    except StrictJSONError as exc:
        raise SaveInvalid(f"{exc.field}: {exc.message}", field_errors(exc)) from None
    return seconds, _checked_events(events)


@dataclass
class SaveResult:
    assignment: Assignment
    draft_saved: bool


@transaction.atomic
def assignment_save(
    *,
    participation: Participation | int,
    public_id: Any,
    draft: Any = None,
    seq: Any = None,
    events: Any = None,
    active_ms: Any = 0,
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
    seconds, checked_events = save_values_checked(draft=draft, seq=seq, events=events, active_ms=active_ms)
    a = assignment_get_own(public_id, participation, lock=True)
    if a.status == AssignmentStatus.SUBMITTED:
        raise DraftRejected("This item was already submitted; the submitted answer is kept.")
    now = clock.now()
    assignment_events_apply(a, checked_events, now)
    saved = False
    if draft is not None:
        if seq > a.draft_seq:
            a.draft = draft_clean(a.study.kind, a.item, draft)
            a.draft_seq = seq
            a.draft_saved_at = now
            saved = True
    _credit_active(a, seconds, now)
    a.last_activity_at = now
    fields = [
        "steps_opened",
        "click_log",
        "goal_acknowledged_at",
        "draft",
        "draft_seq",
        "draft_saved_at",
        "active_seconds",
        "last_activity_at",
    ]
    if (checked_events or draft is not None) and a.activity_seen_at is None:
        a.activity_seen_at = now
        _lengthen_leases(a, now)
        fields += ["activity_seen_at", "lease_expires_at"]
    a.save(update_fields=fields)
    return SaveResult(assignment=a, draft_saved=saved)
