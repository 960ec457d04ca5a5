"""Slots cannot be hoarded (issue 18: with 25 made-up PIDs one browser reserved all 20 slots of
a study in 7 s; genuine participants were shown the completion code without annotating, and
the slots stayed locked for the 30-minute lease).

* new participants per client address and study are rate-limited (HTTP 429, a friendly page);
* a participant's reservation starts with a short lease that lengthens to the study's lease
  once their page reports activity; a reservation nobody acts on frees its slot quickly;
* STUDY_ID must match the study's Prolific study id when one is set;
* the PID must look like a Prolific id unless the study allows others;
* attention checks come at seeded, per-participant positions and in a seeded order."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from annotate import constants as C
from annotate.errors import EntryLimited, EntryRefused, StudyFull
from annotate.kinds import kind_get
from annotate.models import Annotator, Assignment, AssignmentStatus, Participation, ParticipationState, Study
from annotate.participation import attention_plan, clock
from annotate.participation.drafts import assignment_save
from annotate.participation.reservations import assignment_next, assignment_page
from annotate.participation.services import participation_consent, participation_enter
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import annotate_next, annotator_start, item_spec, study_make
from core import rate_limit

pytestmark = pytest.mark.django_db


def prolific_pid(n: int) -> str:
    """A made-up id of Prolific's shape (24 hexadecimal characters)."""
    return f"{n:024x}"


def _prolific_study(n_items: int = 20, **settings) -> Study:
    """A study as a researcher creates it: Prolific ids only, one annotator per item."""
    values: dict[str, Any] = {
        "training_enabled": False,
        "qualification_enabled": False,
        "min_seconds": 0,
        "annotators_per_item": 1,
    }
    values.update(settings)
    return study_create(
        name="Prolific study", items=[item_spec(i) for i in range(1, n_items + 1)], settings=StudySettings(**values)
    )


def _walk_in(study: Study, pid: str, address: str = "203.0.113.7", client: Client | None = None, **params):
    """Open the study link, accept the guidelines, open the work page (which reserves an item)."""
    client = client or Client(REMOTE_ADDR=address)
    query = {"PROLIFIC_PID": pid, "STUDY_ID": params.get("study_id", "st"), "SESSION_ID": f"se{pid[-4:]}"}
    entry = client.get(reverse("annotate:entry", args=[study.slug]), query)
    if entry.status_code != 302:
        return entry, client
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    return client.get(reverse("annotate:work", args=[study.slug])), client


def _later(monkeypatch, seconds: float) -> None:
    """The services' clock, ``seconds`` from now."""
    moment = timezone.now() + timedelta(seconds=seconds)
    monkeypatch.setattr(clock, "now", lambda: moment)


def _live_reservations(study: Study, at=None) -> int:
    at = at or timezone.now()
    return Assignment.objects.filter(study=study, status=AssignmentStatus.RESERVED, lease_expires_at__gt=at).count()


# ------------------------------------------------------------------------- the attack


def test_twenty_five_made_up_pids_from_one_client_cannot_take_every_slot(monkeypatch):
    study = _prolific_study(n_items=20)
    answers = [_walk_in(study, prolific_pid(n))[0].status_code for n in range(25)]
    limit = settings.ANNOTATE_ENTRY_LIMIT_PER_ADDRESS  # the default, 10
    assert answers.count(200) == limit and answers.count(429) == 25 - limit
    assert _live_reservations(study) == limit < 20

    # A genuine participant from elsewhere gets an item, not the completion code, and starts reading.
    page, genuine = _walk_in(study, prolific_pid(1000), address="198.51.100.20")
    assert page.status_code == 200 and b"page-state" in page.content
    mine = Assignment.objects.get(participation__annotator__pid=prolific_pid(1000))
    saved = genuine.post(
        reverse("annotate:save", args=[study.slug, mine.public_id]),
        data=json.dumps({"events": [{"type": "goal_ack"}], "active_ms": 800}),
        content_type="application/json",
    )
    assert saved.status_code == 200

    # The hoarder never acts: after the short initial lease every one of their slots is free again.
    _later(monkeypatch, C.INITIAL_LEASE_SECONDS + 1)
    assert _live_reservations(study, clock.now()) == 1  # only the genuine participant's
    others = [annotator_start(study, prolific_pid(2000 + n)) for n in range(19)]
    assert all(assignment_next(participation=p) is not None for p in others)


def test_the_limit_answers_429_with_a_friendly_page_and_creates_nobody():
    study = _prolific_study(n_items=3)
    with override_settings(ANNOTATE_ENTRY_LIMIT_PER_ADDRESS=2):
        assert _walk_in(study, prolific_pid(1))[0].status_code == 200
        assert _walk_in(study, prolific_pid(2))[0].status_code == 200
        refused, _ = _walk_in(study, prolific_pid(3))
    assert refused.status_code == 429
    assert b"Too many new participants" in refused.content and b"Traceback" not in refused.content
    assert not Annotator.objects.filter(pid=prolific_pid(3)).exists()
    assert Participation.objects.count() == 2


def test_a_returning_participant_is_never_counted_and_other_studies_and_addresses_have_their_own_allowance():
    first, second = _prolific_study(n_items=3), _prolific_study(n_items=3)
    with override_settings(ANNOTATE_ENTRY_LIMIT_PER_ADDRESS=1):
        page, client = _walk_in(first, prolific_pid(1))
        assert page.status_code == 200
        for _ in range(3):  # the same link again (a reload, another tab: the same session): resumes
            again = client.get(
                reverse("annotate:entry", args=[first.slug]),
                {"PROLIFIC_PID": prolific_pid(1), "STUDY_ID": "st", "SESSION_ID": f"se{prolific_pid(1)[-4:]}"},
            )
            assert again.status_code == 302
        assert _walk_in(first, prolific_pid(2))[0].status_code == 429
        assert _walk_in(second, prolific_pid(2))[0].status_code == 200  # another study
        assert _walk_in(first, prolific_pid(3), address="198.51.100.9")[0].status_code == 200  # another address
    with override_settings(ANNOTATE_ENTRY_LIMIT_PER_ADDRESS=0):  # 0: no limit
        assert _walk_in(first, prolific_pid(4))[0].status_code == 200


def test_the_limit_holds_within_the_window_and_lifts_after_it():
    name = "test-window"
    assert rate_limit.hit(name, limit=2, window=60, now=965.0)
    assert rate_limit.hit(name, limit=2, window=60, now=966.0)
    assert not rate_limit.hit(name, limit=2, window=60, now=1010.0)
    assert not rate_limit.hit(name, limit=2, window=60, now=1019.0)
    assert rate_limit.count(name, window=60, now=1021.0) > 1.9  # the previous window still weighs
    assert rate_limit.hit(name, limit=2, window=60, now=1100.0)  # more than a window later


def test_ipv6_clients_count_per_64_network():
    assert rate_limit.address_key("2001:db8:1:2::1") == rate_limit.address_key("2001:db8:1:2:ffff::9")
    assert rate_limit.address_key("2001:db8:1:2::1") != rate_limit.address_key("2001:db8:1:3::1")
    assert rate_limit.address_key("::ffff:203.0.113.7") == rate_limit.address_key("203.0.113.7")
    assert rate_limit.address_key("203.0.113.7") != rate_limit.address_key("203.0.113.8")


def test_the_services_limit_only_when_asked_and_name_the_cause():
    study = _prolific_study(n_items=2)
    with override_settings(ANNOTATE_ENTRY_LIMIT_PER_ADDRESS=1):
        participation_enter(study=study, pid=prolific_pid(1), client_address="203.0.113.1", rate_limited=True)
        with pytest.raises(EntryLimited) as caught:
            participation_enter(study=study, pid=prolific_pid(2), client_address="203.0.113.1", rate_limited=True)
        assert caught.value.status == 429
        # Commands, the demo and the tests create participants without a client address.
        participation_enter(study=study, pid=prolific_pid(3))


# ------------------------------------------------------------------------- leases


def test_a_new_participants_reservation_starts_with_the_short_lease():
    study = _prolific_study(n_items=2, lease_minutes=30)
    p = annotator_start(study, prolific_pid(1))
    a = assignment_next(participation=p)
    assert a is not None
    assert (a.lease_expires_at - a.reserved_at) == timedelta(seconds=C.INITIAL_LEASE_SECONDS)


def test_an_autosave_with_an_event_lengthens_the_lease_to_the_studys_but_a_bare_one_does_not():
    study = _prolific_study(n_items=2, lease_minutes=30)
    p = annotator_start(study, prolific_pid(1))
    a = assignment_next(participation=p)
    assert a is not None
    assignment_save(participation=p, public_id=a.public_id, active_ms=1000)  # only a timer tick
    a.refresh_from_db()
    assert (a.lease_expires_at - a.reserved_at) == timedelta(seconds=C.INITIAL_LEASE_SECONDS)
    assert a.activity_seen_at is None
    assignment_save(participation=p, public_id=a.public_id, events=[{"type": "step_open", "target": "L1.1"}])
    a.refresh_from_db()
    assert a.activity_seen_at is not None and (a.lease_expires_at - a.reserved_at) == timedelta(minutes=30)


def test_after_activity_the_next_reservations_get_the_full_lease():
    study = _prolific_study(n_items=3, lease_minutes=30)
    p = annotator_start(study, prolific_pid(1))
    annotate_next(p)  # reads everything (events) and submits
    nxt = assignment_next(participation=p)
    assert nxt is not None
    assert (nxt.lease_expires_at - nxt.reserved_at) == timedelta(minutes=30)


def test_a_reservation_nobody_acts_on_frees_its_slot_after_the_short_lease(monkeypatch):
    study = _prolific_study(n_items=1)
    idle = annotator_start(study, prolific_pid(1))
    assert assignment_next(participation=idle) is not None
    with pytest.raises(StudyFull):  # the only slot is held: a new participant is turned away
        annotator_start(study, prolific_pid(2))
    _later(monkeypatch, C.INITIAL_LEASE_SECONDS + 1)
    late = annotator_start(study, prolific_pid(3))
    taken = assignment_next(participation=late)
    assert taken is not None and taken.participation_id == late.pk


def test_an_active_participant_keeps_the_slot_beyond_the_short_lease(monkeypatch):
    study = _prolific_study(n_items=1)
    reader = annotator_start(study, prolific_pid(1))
    a = assignment_next(participation=reader)
    assert a is not None
    assignment_save(participation=reader, public_id=a.public_id, events=[{"type": "goal_ack"}])
    _later(monkeypatch, C.INITIAL_LEASE_SECONDS + 60)
    with pytest.raises(StudyFull):  # the slot is still held: a new participant is turned away
        annotator_start(study, prolific_pid(2))


def test_on_a_page_of_several_items_activity_on_one_lengthens_them_all():
    lines = [
        {
            "id": f"mc-{n}",
            "task": "step_inference",
            "prompt": f"Prevent colds {n}",
            "label": 0,
            "topic": "Health",
            "candidates": ["wash your hands", "wash your cat", "clap your hands", "eat your protein"],
        }
        for n in range(4)
    ]
    study = study_create(
        name="Page",
        kind="multiple_choice",
        items=[kind_get("multiple_choice").parse_record(x) for x in lines],
        settings=StudySettings(
            training_enabled=False, qualification_enabled=False, min_seconds=0, items_per_page=4, lease_minutes=30
        ),
    )
    p = participation_consent(participation=participation_enter(study=study, pid=prolific_pid(1)))
    page = assignment_page(participation=p, size=4)
    assert len(page) == 4
    assert all((a.lease_expires_at - a.reserved_at) == timedelta(seconds=C.INITIAL_LEASE_SECONDS) for a in page)
    assignment_save(participation=p, public_id=page[2].public_id, draft={"choice": 1}, seq=1)
    leases = {a.reserved_at: a.lease_expires_at for a in Assignment.objects.filter(participation=p)}
    assert all(end - start == timedelta(minutes=30) for start, end in leases.items())


def test_a_save_after_the_short_lease_ran_out_does_not_take_back_a_slot_given_to_someone_else(monkeypatch):
    study = _prolific_study(n_items=1)
    slow = annotator_start(study, prolific_pid(1))
    a = assignment_next(participation=slow)
    assert a is not None
    _later(monkeypatch, C.INITIAL_LEASE_SECONDS + 1)
    fast = annotator_start(study, prolific_pid(2))
    assert assignment_next(participation=fast) is not None
    assignment_save(participation=slow, public_id=a.public_id, events=[{"type": "goal_ack"}])
    a.refresh_from_db()
    assert a.lease_expires_at <= clock.now()  # not lengthened: the item is the other person's now
    assert _live_reservations(study, clock.now()) == 1


# ------------------------------------------------------------------------- STUDY_ID and PID


def test_study_id_must_match_the_studys_prolific_study_id_when_one_is_set():
    study = _prolific_study(n_items=2, prolific_study_id="60d5f0a1b2c3d4e5f6a7b8c9")
    wrong, _ = _walk_in(study, prolific_pid(1), study_id="someotherstudy")
    assert wrong.status_code == 400 and b"different Prolific study" in wrong.content and b"STUDY_ID" in wrong.content
    missing, _ = _walk_in(study, prolific_pid(2), study_id="")
    assert missing.status_code == 400
    assert not Participation.objects.exists()
    right, _ = _walk_in(study, prolific_pid(3), study_id="60d5f0a1b2c3d4e5f6a7b8c9")
    assert right.status_code == 200
    unset = _prolific_study(n_items=1)
    assert _walk_in(unset, prolific_pid(4), study_id="anything")[0].status_code == 200


def test_the_pid_must_look_like_prolifics_unless_the_study_allows_other_ids():
    strict = _prolific_study(n_items=2)
    assert not strict.allow_other_pids  # the default for a new study
    refused, _ = _walk_in(strict, "demo-annotator-1")
    assert refused.status_code == 400 and b"PROLIFIC_PID" in refused.content
    with pytest.raises(EntryRefused):
        participation_enter(study=strict, pid="made-up")
    assert _walk_in(strict, "5F1E2D3C4B5A69788796A5B4")[0].status_code == 200  # Prolific's shape, any case
    relaxed = _prolific_study(n_items=2, allow_other_pids=True)
    assert _walk_in(relaxed, "demo-annotator-1")[0].status_code == 200
    assert _walk_in(relaxed, "not/a pid")[0].status_code == 400  # still letters, digits, '_' and '-' only


def test_the_demo_study_accepts_any_pid(demo):
    from annotate import demo as annotate_demo

    annotate_demo.load()
    study = Study.objects.get(slug=annotate_demo.DEMO_SLUG)
    assert study.allow_other_pids
    assert participation_enter(study=study, pid="demo-annotator-1").pk


def test_the_study_settings_come_from_the_form_the_command_and_the_study_page(researcher_client, tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text(
        "".join(
            json.dumps(
                {"item_id": f"i{n}", "topic": "T", "goal": "G", "reference_steps": ["a"], "candidate_steps": ["b"]}
            )
            + "\n"
            for n in range(2)
        )
    )
    call_command(
        "create_study",
        "--name",
        "Cmd",
        "--items",
        str(items),
        "--no-training",
        "--prolific-study-id",
        "60d5f0a1b2c3d4e5f6a7b8c9",
        stdout=StringIO(),
    )
    made = Study.objects.get(name="Cmd")
    assert made.prolific_study_id == "60d5f0a1b2c3d4e5f6a7b8c9" and not made.allow_other_pids
    call_command(
        "create_study",
        "--name",
        "Pilot",
        "--items",
        str(items),
        "--no-training",
        "--allow-other-pids",
        stdout=StringIO(),
    )
    assert Study.objects.get(name="Pilot").allow_other_pids

    with open(items, "rb") as upload:
        response = researcher_client.post(
            reverse("annotate:study_new"),
            {
                "name": "Web",
                "kind": "critical_failure",
                "items_file": upload,
                "annotators_per_item": 3,
                "lease_minutes": 30,
                "attention_max_failures": 1,
                "qualification_enabled": "auto",
                "prolific_study_id": "bad id!",
            },
        )
    assert response.status_code == 400 and "prolific_study_id" in response.context["form"].errors

    settings_url = reverse("annotate:study_settings", args=[made.slug])
    researcher_client.post(settings_url, {"is_open": "on", "prolific_study_id": "abc123", "allow_other_pids": "on"})
    made.refresh_from_db()
    assert made.prolific_study_id == "abc123" and made.allow_other_pids and made.is_open
    researcher_client.post(settings_url, {"is_open": "on"})  # an older form without the entry rules
    made.refresh_from_db()
    assert made.prolific_study_id == "abc123" and made.allow_other_pids
    bad = researcher_client.post(settings_url, {"is_open": "on", "prolific_study_id": "no spaces please"})
    assert bad.status_code == 302
    made.refresh_from_db()
    assert made.prolific_study_id == "abc123"


# ------------------------------------------------------------------------- attention checks


def _served_roles(p: Participation) -> list[str]:
    return list(Assignment.objects.filter(participation=p).order_by("reserved_at", "pk").values_list("role", flat=True))


def test_attention_checks_come_at_seeded_positions_that_differ_between_participants():
    checks = study_create(
        name="Checks",
        items=[item_spec(i) for i in range(1, 13)]
        + [item_spec(i, role="attention", expected=True) for i in range(1, 4)],
        settings=StudySettings(
            training_enabled=False,
            qualification_enabled=False,
            min_seconds=0,
            annotators_per_item=12,
            attention_check_rate=0.25,
            attention_max_failures=10,
        ),
    )
    plans = set()
    for n, seed in enumerate((11, 22, 33, 44, 55, 66)):
        p = annotator_start(checks, prolific_pid(n))
        Participation.objects.filter(pk=p.pk).update(attention_seed=seed)
        p.refresh_from_db()
        while annotate_next(p, label=True) is not None:
            pass
        roles = _served_roles(p)
        positions = [i for i, role in enumerate(roles) if role == "attention"]
        assert positions == attention_plan.check_positions(seed, 0.25, 3)
        assert [roles[4 * j : 4 * j + 4].count("attention") for j in range(3)] == [1, 1, 1]
        plans.add(tuple(positions))
    assert len(plans) > 1  # not every annotator meets the checks at the same positions


def test_the_seed_is_recorded_at_entry_and_the_plan_is_reproducible():
    study = study_make(n_items=4, n_attention=2, attention_check_rate=0.5)
    p = annotator_start(study, "seeded")
    assert p.attention_seed is not None
    assert attention_plan.check_positions(p.attention_seed, 0.5, 2) == attention_plan.check_positions(
        p.attention_seed, 0.5, 2
    )
    assert attention_plan.check_order(7, ["a", "b", "c", "d"]) == attention_plan.check_order(7, ["a", "b", "c", "d"])
    orders = {tuple(attention_plan.check_order(seed, list(range(6)))) for seed in range(20)}
    assert len(orders) > 1


@pytest.mark.parametrize("rate", [0.1, 0.15, 0.25, 1 / 3, 0.5, 0.9])
def test_every_stretch_of_one_over_rate_items_holds_exactly_one_check(rate):
    for seed in range(50):
        positions = attention_plan.check_positions(seed, rate, 20)
        assert positions == sorted(set(positions))
        for j, position in enumerate(positions):
            first, last = attention_plan.stretch(rate, j)
            assert first <= position <= last
        # Over n served items the checks number about n * rate.
        n = positions[-1] + 1
        assert abs(len(positions) - n * rate) <= 1 + 1e-9


def test_a_participant_from_before_the_seed_gets_one_when_checks_are_due():
    study = study_make(n_items=4, n_attention=2, attention_check_rate=0.5, attention_max_failures=5)
    p = annotator_start(study, "old-timer")
    Participation.objects.filter(pk=p.pk).update(attention_seed=None)
    p.refresh_from_db()
    annotate_next(p, label=True)
    p.refresh_from_db()
    assert p.attention_seed is not None and p.state == ParticipationState.ANNOTATING


def test_the_export_carries_each_annotations_attention_seed():
    from annotate.studies.exports import annotation_export_rows

    study = study_make(n_items=4, n_attention=2, attention_check_rate=0.5, attention_max_failures=5)
    p = annotator_start(study, "exported")
    annotate_next(p, label=True)
    p.refresh_from_db()
    rows = list(annotation_export_rows(study))
    assert rows and {row["attention_seed"] for row in rows} == {p.attention_seed}
