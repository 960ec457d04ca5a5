"""core.bulk_insert: COPY on PostgreSQL, bulk_create elsewhere (this file runs in both passes of
``make test``), storing what bulk_create stores, and all or nothing; ``bulk_insert_new`` keeps
the rows that exist and adds the others."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from core.bulk_insert import bulk_insert, bulk_insert_new
from llm.models import LedgerEntry

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]  # bulk_create there, COPY on PostgreSQL

AWKWARD = 'tab\there, newline\nthere, back\\slash, "quotes", \\N, ünïcødé, 日本語'


def _entry(key: str, **fields) -> LedgerEntry:
    base = dict(
        stage="judge", role="how2score_judge", run="r", base_url="http://x/v1", model="m", executor="online", request={}
    )
    return LedgerEntry(key=key, **{**base, **fields})


def test_rows_come_back_as_bulk_create_would_store_them():
    request = {"messages": [{"role": "user", "content": AWKWARD}], "params": {"temperature": 0.0}, "schema": None}
    bulk_insert(
        LedgerEntry,
        [
            _entry(
                "a" * 64,
                request=request,
                response={"choices": [1, 2.5, None, True]},
                response_text=AWKWARD,
                outcome="ok",
                parsed={"critical_failures": [], "reasoning": AWKWARD},
                cost_usd=Decimal("0.000123"),
                tokens_in=2500,
                latency_ms=201,
                attempts=2,
            ),
            _entry("b" * 64, outcome="api_error", error="503: down"),
        ],
    )
    bulk_created = _entry("c" * 64, request=request, outcome="ok", parsed=[1, "two"])
    LedgerEntry.objects.bulk_create([bulk_created])
    a, b, c = (LedgerEntry.objects.get(key=k * 64) for k in "abc")
    assert a.request == request and a.response == {"choices": [1, 2.5, None, True]}
    assert a.response_text == AWKWARD and a.parsed is not None and a.parsed["reasoning"] == AWKWARD
    assert a.cost_usd == Decimal("0.000123") and (a.tokens_in, a.latency_ms, a.attempts) == (2500, 201, 2)
    assert a.created_at is not None and a.history == c.history == []  # auto_now_add and defaults, as bulk_create
    assert b.error == "503: down" and b.parsed is None and b.response is None
    assert connection.vendor in ("postgresql", "sqlite")


def test_a_duplicate_key_raises_integrity_error_and_writes_nothing_of_the_call():
    bulk_insert(LedgerEntry, [_entry("d" * 64, outcome="ok")])
    with pytest.raises(IntegrityError), transaction.atomic():
        bulk_insert(LedgerEntry, [_entry("e" * 64, outcome="ok"), _entry("d" * 64, outcome="api_error")])
    assert not LedgerEntry.objects.filter(key="e" * 64).exists()
    assert LedgerEntry.objects.get(key="d" * 64).outcome == "ok"


def test_nothing_to_insert_sends_nothing(django_assert_num_queries):
    with django_assert_num_queries(0):
        bulk_insert(LedgerEntry, [])


def test_insert_new_keeps_the_rows_that_exist_and_adds_the_others_inside_a_transaction():
    bulk_insert_new(LedgerEntry, [_entry("f" * 64, outcome="ok")])  # none there: one COPY
    with transaction.atomic():  # the caller's transaction goes on after the conflict
        bulk_insert_new(LedgerEntry, [_entry("g" * 64, outcome="ok"), _entry("f" * 64, outcome="api_error")])
        LedgerEntry.objects.filter(key="g" * 64).update(tokens_in=7)
    assert LedgerEntry.objects.get(key="f" * 64).outcome == "ok"  # kept as it was
    assert LedgerEntry.objects.get(key="g" * 64).tokens_in == 7


def test_inside_a_callers_transaction_it_adds_no_savepoint():
    """The caller's transaction already makes the rows all or nothing: no SAVEPOINT and
    RELEASE round trips (two of the reward endpoint's nine statements per fresh completion)."""
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        bulk_insert(LedgerEntry, [_entry("h" * 64, outcome="ok")])
    assert not [q["sql"] for q in queries.captured_queries if "SAVEPOINT" in q["sql"].upper()]
    assert LedgerEntry.objects.filter(key="h" * 64).exists()
