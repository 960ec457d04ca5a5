"""Concurrency on PostgreSQL with real threads (one database connection each): 30 annotators
reserving at once never over-assign an item; concurrent submits of one item store one
annotation. Run with DATABASE_URL=postgres://... (skipped on SQLite, which serialises writers)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from functools import partial

import pytest
from django.db import connection, connections
from django.utils import timezone

from annotate.models import Annotation, Assignment, AssignmentStatus
from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.testing import NO_FAILURE, annotator_start, read_everything, study_make

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

N_THREADS = 30


@pytest.fixture(autouse=True)
def _postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("concurrency is proved on PostgreSQL: run with DATABASE_URL=postgres://...")


def _run_at_once(functions):
    """Start every function in its own thread, release them together, collect results/errors."""
    barrier = threading.Barrier(len(functions))
    results: list = [None] * len(functions)
    errors: list = []

    def worker(index, function):
        try:
            barrier.wait(timeout=30)
            results[index] = function()
        except Exception as exc:  # reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i, f)) for i, f in enumerate(functions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return results


def _live_per_item(study):
    now = timezone.now()
    live = Assignment.objects.filter(study=study, role="main").filter(
        status=AssignmentStatus.RESERVED, lease_expires_at__gt=now
    )
    return Counter(live.values_list("item_id", flat=True))


def test_30_annotators_reserving_at_once_never_over_assign():
    study = study_make(n_items=7, annotators_per_item=3)  # 21 slots for 30 people
    people = [annotator_start(study, f"c{i:02d}") for i in range(N_THREADS)]
    results = _run_at_once([lambda p=p: assignment_next(participation=p) for p in people])
    got = [a for a in results if a is not None]
    assert len(got) == 21
    per_item = _live_per_item(study)
    assert set(per_item.values()) == {3} and len(per_item) == 7
    pairs = Counter((a.item_id, a.annotator_id) for a in Assignment.objects.filter(study=study))
    assert max(pairs.values()) == 1  # nobody holds an item twice


def test_expired_slots_are_handed_out_again_without_over_assigning():
    study = study_make(n_items=2, annotators_per_item=3)
    first = [annotator_start(study, f"first{i}") for i in range(6)]
    _run_at_once([lambda p=p: assignment_next(participation=p) for p in first])
    # Three of the six walk away: their leases run out.
    gone = Assignment.objects.filter(study=study).order_by("pk")[:3]
    Assignment.objects.filter(pk__in=[a.pk for a in gone]).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    late = [annotator_start(study, f"late{i}") for i in range(N_THREADS)]
    results = _run_at_once([lambda p=p: assignment_next(participation=p) for p in late])
    assert sum(1 for a in results if a is not None) == 3
    assert set(_live_per_item(study).values()) == {3}


def test_concurrent_submits_of_one_item_store_one_annotation():
    study = study_make(n_items=1, annotators_per_item=1)
    p = annotator_start(study, "clicker")
    a = assignment_next(participation=p)
    assert a is not None
    read_everything(p, a)
    results = _run_at_once(
        [
            lambda: annotation_submit(participation=p, public_id=a.public_id, answer=NO_FAILURE, submission_id="same")
            for _ in range(10)
        ]
    )
    assert sum(1 for r in results if r.created) == 1
    assert len({r.annotation.pk for r in results}) == 1
    assert Annotation.objects.count() == 1


def test_autosaves_racing_a_submit_never_change_the_submitted_annotation():
    from annotate.errors import DraftRejected
    from annotate.participation.drafts import assignment_save

    study = study_make(n_items=1, annotators_per_item=1)
    p = annotator_start(study, "racer")
    a = assignment_next(participation=p)
    assert a is not None
    read_everything(p, a)

    def autosave(i: int) -> str:
        try:
            assignment_save(
                participation=p,
                public_id=a.public_id,
                draft={"has_failure": True, "failures": [], "comments": f"d{i}"},
                seq=100 + i,
            )
            return "saved"
        except DraftRejected:
            return "refused"

    calls: list[Callable[[], object]] = [partial(autosave, i) for i in range(15)]
    calls.append(
        lambda: annotation_submit(participation=p, public_id=a.public_id, answer={**NO_FAILURE, "comments": "final"})
    )
    _run_at_once(calls)
    ann = Annotation.objects.get()
    assert ann.comments == "final" and ann.has_failure is False
    assert Assignment.objects.get(pk=a.pk).status == AssignmentStatus.SUBMITTED
