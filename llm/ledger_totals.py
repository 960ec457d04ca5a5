"""Totals of the ledger kept per run as it is written (docs/llm.md, "Totals kept per run").

A run that asks as it goes (a mining run) finds its requests by its ledger label, and its
page shows the entries under that label summed per stage and model (requests, tokens,
cost) and counted per outcome with the most frequent errors. Summed from the entries they
grow with the run (500,000 entries at 100,000 mining documents); kept as ``LedgerTotal``
rows, one per run label, stage, model, outcome and error, they do not.

**Exactly once.** Every write that changes what an entry adds to a total changes the total
in the same transaction, by the difference between the entry before and after:
``ledger_write`` (a new entry adds itself; a failure asked again, its entry locked, moves
from its old label, outcome, error, tokens and cost to the new ones, which may be another
run's), ``ledger_write_many`` (its new entries in one statement) and ``ledger_entry_reject``
(an ``ok`` answer refused, its entry locked, becomes the refusing run's failure). Increments
are added in the database (``n = n + excluded.n``), in key order, so concurrent writers
neither lose one another's sums nor deadlock on them.

**Reconciled against the entries.** ``ledger_totals_verify`` sums a label's entries afresh
and reads its kept totals in one statement (one snapshot) and adds the difference, so the
totals agree with the entries afterwards even while writers go on."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from llm.constants import OUTCOME_OK
from llm.models import LedgerEntry, LedgerTotal
from llm.run_watch import ERROR_CHARS

# A total's key: run label, stage, model, outcome, error.
Key = tuple[str, str, str, str, str]

_COST_PLACES = Decimal(1).scaleb(-LedgerEntry._meta.get_field("cost_usd").decimal_places)

# The fields of an entry that decide what it adds to a total.
ENTRY_FIELDS = ("run", "stage", "model", "outcome", "error", "tokens_in", "tokens_out", "cost_usd")


def error_key(outcome: str, error: str | None) -> str:
    """An entry's error as grouped and shown (``llm.runs``): stripped and cut to
    ``ERROR_CHARS``; none for an ``ok`` answer."""
    return "" if outcome == OUTCOME_OK else (error or "").strip()[:ERROR_CHARS]


@dataclass
class Sums:
    n: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    priced_usd: Decimal = Decimal(0)
    n_unpriced: int = 0

    def add(self, other: Sums, sign: int = 1) -> None:
        self.n += sign * other.n
        self.tokens_in += sign * other.tokens_in
        self.tokens_out += sign * other.tokens_out
        self.priced_usd += sign * other.priced_usd
        self.n_unpriced += sign * other.n_unpriced

    def __bool__(self) -> bool:
        return bool(self.n or self.tokens_in or self.tokens_out or self.priced_usd or self.n_unpriced)


Totals = dict[Key, Sums]


def entry_totals(entry: Mapping[str, Any]) -> Totals:
    """What one entry (its ``ENTRY_FIELDS``, as stored) adds to its label's totals."""
    outcome = entry["outcome"]
    cost = entry.get("cost_usd")
    key = (entry.get("run") or "", entry["stage"], entry["model"], outcome, error_key(outcome, entry.get("error")))
    priced = Decimal(0) if cost is None else Decimal(str(cost)).quantize(_COST_PLACES, rounding=ROUND_HALF_UP)
    sums = Sums(1, int(entry.get("tokens_in") or 0), int(entry.get("tokens_out") or 0), priced, int(cost is None))
    return {key: sums}


def entries_totals(entries: Iterable[Mapping[str, Any]]) -> Totals:
    totals: Totals = defaultdict(Sums)
    for entry in entries:
        for key, sums in entry_totals(entry).items():
            totals[key].add(sums)
    return totals


def stored_fields(entry: LedgerEntry) -> dict[str, Any]:
    """The ``ENTRY_FIELDS`` of a stored entry."""
    return {name: getattr(entry, name) for name in ENTRY_FIELDS}


def difference(after: Totals, before: Totals) -> Totals:
    delta: Totals = defaultdict(Sums)
    for key, sums in after.items():
        delta[key].add(sums)
    for key, sums in before.items():
        delta[key].add(sums, -1)
    return {key: sums for key, sums in delta.items() if sums}


def ledger_totals_add(delta: Totals, *, at: datetime | None = None) -> None:
    """Add ``delta`` to the totals in one statement, in key order (concurrent writers lock
    the same rows in the same order), each sum added in the database. A key that gains
    entries takes ``at`` (now) as the time an entry was last counted under it."""
    rows = sorted(delta.items())
    if not rows:
        return
    at = at or timezone.now()
    connection = connections[LedgerTotal.objects.db]
    quote = connection.ops.quote_name
    table = quote(LedgerTotal._meta.db_table)
    key_columns = ["run", "stage", "model", "outcome", "error"]
    sums = ["n", "tokens_in", "tokens_out", "priced_usd", "n_unpriced"]
    columns = [*key_columns, *sums, "last_at"]
    values = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(rows))
    params: list[Any] = []
    for key, value in rows:
        last = connection.ops.adapt_datetimefield_value(at) if value.n > 0 else None
        params += [*key, value.n, value.tokens_in, value.tokens_out, value.priced_usd, value.n_unpriced, last]
    added = [f"{quote(c)} = {table}.{quote(c)} + excluded.{quote(c)}" for c in sums]
    last_at, kept = quote("last_at"), f"{table}.{quote('last_at')}"
    added.append(
        f"{last_at} = CASE WHEN excluded.{last_at} IS NULL THEN {kept} WHEN {kept} IS NULL "
        f"OR excluded.{last_at} > {kept} THEN excluded.{last_at} ELSE {kept} END"
    )
    sql = (
        f"INSERT INTO {table} ({', '.join(quote(c) for c in columns)}) VALUES {values} "
        f"ON CONFLICT ({', '.join(quote(c) for c in key_columns)}) DO UPDATE SET {', '.join(added)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def ledger_run_totals(run_label: str) -> list[LedgerTotal]:
    """The kept totals of a run label, those not zero, the most recently counted first."""
    return list(
        LedgerTotal.objects.filter(run=run_label).exclude(n=0).order_by("-last_at", "stage", "model", "outcome")
    )


def _sums_of(row: tuple) -> Sums:
    n, tokens_in, tokens_out, priced, unpriced = row
    return Sums(int(n), int(tokens_in or 0), int(tokens_out or 0), Decimal(str(priced or 0)), int(unpriced or 0))


def ledger_totals_verify(run_label: str) -> list[dict[str, Any]]:
    """Sum the label's entries afresh, compare with its kept totals (one statement, one
    snapshot) and add the difference where they differ, so that writes made meanwhile stay
    counted. Returns the mismatches found: each key with its kept and counted sums."""
    connection = connections[LedgerTotal.objects.db]
    quote = connection.ops.quote_name
    entries, totals = quote(LedgerEntry._meta.db_table), quote(LedgerTotal._meta.db_table)
    sql = f"""
        SELECT 'counted', stage, model, outcome, error, COUNT(*), SUM(tokens_in), SUM(tokens_out),
            SUM(cost_usd), SUM(CASE WHEN cost_usd IS NULL THEN 1 ELSE 0 END)
        FROM {entries} WHERE run = %s GROUP BY stage, model, outcome, error
        UNION ALL
        SELECT 'kept', stage, model, outcome, error, n, tokens_in, tokens_out, priced_usd, n_unpriced
        FROM {totals} WHERE run = %s"""
    found: dict[str, Totals] = {"counted": defaultdict(Sums), "kept": defaultdict(Sums)}
    with transaction.atomic(using=LedgerTotal.objects.db), connection.cursor() as cursor:
        cursor.execute(sql, [run_label, run_label])
        for source, stage, model, outcome, error, *sums in cursor.fetchall():
            if source == "counted":
                error = error_key(outcome, error)
            found[source][(run_label, stage, model, outcome, error)].add(_sums_of(tuple(sums)))
        counted, kept = found["counted"], found["kept"]
        delta = difference(counted, kept)
        ledger_totals_add(delta)
    names = ("run", "stage", "model", "outcome", "error")
    return [
        {
            "key": dict(zip(names, key, strict=True)),
            "kept": vars(kept.get(key, Sums())),
            "counted": vars(counted.get(key, Sums())),
        }
        for key in sorted(delta)
    ]
