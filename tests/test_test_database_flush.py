"""The suite's PostgreSQL backend (tests/pg_backend): a transactional test's flush deletes every
row, rows that point at each other included, without a TRUNCATE; a flush that resets sequences
keeps Django's own."""

from __future__ import annotations

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.models import GuidelineVersion, Study, StudyItem


def _rows() -> dict[str, int]:
    return {model._meta.label: model._default_manager.count() for model in apps.get_models()}


def test_the_flush_empties_every_table_with_deletes(transactional_db):
    guidelines = GuidelineVersion.objects.create(
        kind="critical_failure", instructions="i", codebook_version="1", content_hash="h", label="flush-probe"
    )
    study = Study.objects.create(name="s", slug="flush-probe", kind="critical_failure", guideline_version=guidelines)
    StudyItem.objects.create(study=study, item_id="i-1", position=1, goal="g")
    get_user_model().objects.create_user(username="flush-probe", password="x")
    assert _rows()["annotate.StudyItem"] == 1

    with CaptureQueriesContext(connection) as queries:
        call_command("flush", interactive=False, verbosity=0, reset_sequences=False, inhibit_post_migrate=True)

    assert {label: n for label, n in _rows().items() if n} == {}
    statements = [q["sql"].upper() for q in queries.captured_queries]
    assert not any("TRUNCATE" in sql for sql in statements)
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    assert sum(sql.startswith("DELETE FROM") for sql in statements) == len(tables)


def test_a_flush_that_resets_sequences_keeps_djangos_own(transactional_db):
    with CaptureQueriesContext(connection) as queries:
        call_command("flush", interactive=False, verbosity=0, reset_sequences=True, inhibit_post_migrate=True)
    statements = " ".join(q["sql"].upper() for q in queries.captured_queries)
    if connection.vendor == "postgresql":
        assert "TRUNCATE" in statements and "RESTART IDENTITY" in statements
    assert {label: n for label, n in _rows().items() if n} == {}
