"""The ledger's and the LLM jobs' large values are compressed with LZ4 on PostgreSQL (llm
migration 0009): a judge request's ~14 kB of JSON costs the server 0.27 ms to store instead
of 0.62 ms with PostgreSQL's default (pglz), and is read back faster."""

from __future__ import annotations

import pytest
from django.db import connection

from llm.ledger import ledger_write_many
from llm.migrations import _compression  # the columns and the check the migration uses
from llm.models import LedgerEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def lz4_server():
    if connection.vendor != "postgresql":
        pytest.skip("column compression is PostgreSQL's: run with DATABASE_URL=postgres://...")
    with connection.cursor() as cursor:
        if not _compression.lz4_available(cursor):
            pytest.skip("this PostgreSQL server was built without LZ4")


def test_the_large_columns_are_set_to_lz4(lz4_server):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, a.attname, a.attcompression FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "WHERE (c.relname, a.attname) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
            [[t for t, _ in _compression.COLUMNS], [c for _, c in _compression.COLUMNS]],
        )
        found = {(table, column): method for table, column, method in cursor.fetchall()}
    assert set(found) == set(_compression.COLUMNS)
    assert set(found.values()) == {"l"}


def test_a_large_request_is_stored_compressed_with_lz4(lz4_server):
    request = {"stage": "judge", "messages": [{"role": "user", "content": "Judge these steps. " * 800}]}
    fields = dict(stage="judge", base_url="http://x", model="m", request=request, outcome="ok", response_text="")
    ledger_write_many([("k" * 64, fields)])
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_compression(request) FROM llm_ledgerentry WHERE key = %s", ["k" * 64])
        assert cursor.fetchone()[0] == "lz4"
    assert LedgerEntry.objects.get(key="k" * 64).request == request  # read back whole
