"""The request ledger's reads and writes: the cache and the resume mechanism.

A finished request is stored under its key (``ledger_write``, ``ledger_write_many``); only an
``ok`` entry answers a key again (``ledger_lookup``, ``finished_keys``), and a failure asked
again moves into the entry's history. Each write moves the run's kept totals
(llm/ledger_totals.py) in its own transaction."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.bulk_insert import bulk_insert
from llm.constants import OUTCOME_OK
from llm.ledger_totals import difference, entries_totals, entry_totals, ledger_totals_add, stored_fields
from llm.models import LedgerEntry


def ledger_lookup(key: str) -> LedgerEntry | None:
    """The entry that answers a key from the cache: only an ``ok`` answer. A failure
    (``parse_failed``, ``truncated``, ``refused``, ``api_error``) is never an answer, so a
    new run, a resumed run or *Retry failed* asks again; the failure stays in the entry's
    history."""
    return LedgerEntry.objects.filter(key=key, outcome=OUTCOME_OK).first()


def finished_keys(keys: list[str], chunk: int = 2000) -> set[str]:
    """The keys among ``keys`` with an ``ok`` ledger entry (the ones not sent again), in few queries."""
    found: set[str] = set()
    for start in range(0, len(keys), chunk):
        found.update(
            LedgerEntry.objects.filter(key__in=keys[start : start + chunk], outcome=OUTCOME_OK).values_list(
                "key", flat=True
            )
        )
    return found


HISTORY_TEXT_CHARS = 2000  # of a failed answer kept in an entry's history


def _history_item(entry: LedgerEntry) -> dict[str, Any]:
    return {
        "outcome": entry.outcome,
        "error": entry.error,
        "run": entry.run,
        "attempts": entry.attempts,
        "tokens_in": entry.tokens_in,
        "tokens_out": entry.tokens_out,
        "latency_ms": entry.latency_ms,
        "cost_usd": None if entry.cost_usd is None else str(entry.cost_usd),
        "path": entry.path,
        "response_text": (entry.response_text or "")[:HISTORY_TEXT_CHARS],
        "at": entry.created_at.isoformat(),
    }


def ledger_write(key: str, fields: dict[str, Any]) -> None:
    """Store a finished request. An ``ok`` entry is never replaced (a concurrent worker's
    answer is kept). A failed entry is replaced by the newer attempt, and moves into the
    entry's ``history``, so every failed attempt stays visible on the ledger pages."""
    try:
        with transaction.atomic():
            created = LedgerEntry.objects.create(key=key, **fields)
            ledger_totals_add(entry_totals(stored_fields(created)))
        return
    except IntegrityError:
        pass
    with transaction.atomic():
        entry = LedgerEntry.objects.select_for_update().filter(key=key).exclude(outcome=OUTCOME_OK).first()
        if entry is None:
            return
        history = [*(entry.history or []), _history_item(entry)]
        # tokens and cost are what this key has cost over every call, failed ones included
        # (itemised in history), so that token counts and cost describe the same attempts
        fields = {
            **fields,
            "tokens_in": int(fields.get("tokens_in") or 0) + entry.tokens_in,
            "tokens_out": int(fields.get("tokens_out") or 0) + entry.tokens_out,
        }
        if fields.get("cost_usd") is not None and entry.cost_usd is not None:
            fields["cost_usd"] = fields["cost_usd"] + entry.cost_usd
        LedgerEntry.objects.filter(pk=entry.pk).update(history=history, created_at=timezone.now(), **fields)
        before = stored_fields(entry)
        after = {**before, **{name: value for name, value in fields.items() if name in before}}
        ledger_totals_add(difference(entry_totals(after), entry_totals(before)))


def ledger_write_many(items: list[tuple[str, dict[str, Any]]], *, present: set[str] | None = None) -> None:
    """Store many finished requests with the meaning of ``ledger_write`` for each, in
    order, in a few statements: one lookup of the keys already present, one multi-row
    insert of the new ones. A key that already has an entry (a failure asked again, or
    the same request twice in the list) goes through ``ledger_write``, which keeps an
    ``ok`` entry and moves a replaced failure into the history; so does the whole group
    when another worker inserted one of its keys in the meantime. ``present``: the keys
    with an entry as the caller has just read them (``ledger_ok_results(..., present=...)``),
    which saves the lookup; one written since then is caught like another worker's."""
    if not items:
        return
    if present is None:
        present = set(LedgerEntry.objects.filter(key__in=[key for key, _ in items]).values_list("key", flat=True))
    fresh: dict[str, dict[str, Any]] = {}
    later: list[tuple[str, dict[str, Any]]] = []
    for key, fields in items:
        if key in present or key in fresh:
            later.append((key, fields))
        else:
            fresh[key] = fields
    try:
        with transaction.atomic():
            inserted = [LedgerEntry(key=key, **fields) for key, fields in fresh.items()]
            bulk_insert(LedgerEntry, inserted)
            ledger_totals_add(entries_totals(stored_fields(entry) for entry in inserted))
    except IntegrityError:  # a concurrent writer got there first: one at a time, with its rules
        later = [*fresh.items(), *later]
    for key, fields in later:
        ledger_write(key, fields)
