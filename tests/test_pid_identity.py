"""One person is one annotator (issue 28, F-07): a PROLIFIC_PID is compared without case, so
``7eaafb...`` and ``7EAAFB...`` enter as the same participant and one person cannot fill two
of an item's k places by changing the case of their id. Prolific's ids are lowercase
hexadecimal; the product stores every PID in lowercase."""

from __future__ import annotations

import pytest
from django.test import Client

from annotate.models import Annotator, Participation
from annotate.participation.services import participation_enter
from annotate.testing import study_make

pytestmark = pytest.mark.django_db

PID = "7eaafb0123456789abcdef01"


def test_the_same_pid_in_another_case_is_the_same_participant():
    study = study_make(n_items=2, annotators_per_item=2, allow_other_pids=False)
    first = participation_enter(study=study, pid=PID, prolific_study_id="S", session_id="s1")
    second = participation_enter(study=study, pid=PID.upper(), prolific_study_id="S", session_id="s1")
    mixed = participation_enter(study=study, pid="7EaAfB" + PID[6:], prolific_study_id="S", session_id="s1")
    assert first.pk == second.pk == mixed.pk
    assert list(Annotator.objects.values_list("pid", flat=True)) == [PID]
    assert Participation.objects.filter(study=study).count() == 1


def test_through_the_entry_link_too():
    study = study_make(n_items=2, annotators_per_item=2, allow_other_pids=False)
    for pid in (PID, PID.upper()):
        response = Client().get(f"/a/{study.slug}/", {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": "s1"})
        assert response.status_code in (200, 302), response.content[:300]
    assert list(Annotator.objects.values_list("pid", flat=True)) == [PID]


def test_studies_that_allow_other_ids_fold_case_as_well():
    study = study_make(n_items=2, annotators_per_item=2)
    a = participation_enter(study=study, pid="Pilot-Alice", prolific_study_id="S", session_id="s1")
    b = participation_enter(study=study, pid="pilot-alice", prolific_study_id="S", session_id="s1")
    assert a.pk == b.pk and a.annotator.pid == "pilot-alice"


@pytest.mark.sqlite  # a migration: on the embedded default too
def test_the_migration_lowercases_stored_ids_and_leaves_twins_apart(transactional_db):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    def migrate(target):
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(target)
        return executor.loader.project_state(target).apps

    before = [("annotate", "0011_remove_studyitem_expected_columns")]
    try:
        apps = migrate(before)
        Old = apps.get_model("annotate", "Annotator")
        for pid in (PID.upper(), "Pilot-Bob", "pilot-bob", "plain"):
            Old.objects.create(pid=pid)
        apps = migrate([("annotate", "0012_annotator_pid_lowercase")])
        pids = sorted(apps.get_model("annotate", "Annotator").objects.values_list("pid", flat=True))
        assert pids == sorted([PID, "Pilot-Bob", "pilot-bob", "plain"])
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
