"""Counts kept as a mining run goes (docs/mining.md, "Counts kept as the run goes").

A run's page shows aggregates of every stage result (the funnel per topic, stage and status)
and of every document's cost (the cost projection, the rejection reasons). Counted from the
rows they grow with the run (600,000 stage results at 100,000 documents); kept here as
``MiningRunCounter`` rows, a few hundred per run, they do not.

**Exactly once.** A counter changes in the transaction that changes what it counts, by the
difference between the document's rows before and after, and the "before" is read with the
document's row locked (``candidate_lock``): two workers writing the same document (a claim
whose lease ran out and was taken again) wait for each other, and the second counts from
what the first wrote (its results read by a statement that begins once the lock is held). A retried, resumed or re-walked document therefore moves its counts
from its old state to its new one instead of adding them again, and a reopened document
(*Retry failed*, *Change stages*: ``documents_reopen``) moves them to pending. Increments
are added in the database (``n = n + excluded.n``), in key order, so concurrent writers
neither lose one another's counts nor deadlock on them.

**Reconciled against the rows.** ``mining_run_counters_verify`` counts the run afresh from
its rows and the kept counters in one statement (one snapshot), and adds the difference to
the counters: writers that commit meanwhile add their own changes on top, so the counters
agree with the rows afterwards even while the run goes on. A run made before the counters
were kept (``MiningRun.counters_built`` false) is counted this way on its first read."""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Protocol

from django.db import connections, transaction
from django.db.models import Count, Sum

from llm.ledger_totals import ledger_totals_verify
from llm.models import LedgerTotal
from mining.models import CandidateStatus, CounterScope, MiningCandidate, MiningRun, MiningRunCounter, StageResult
from mining.stages import REJECTED, reason_code

# A counter's key: topic, scope, stage, status, the document's status, the reason code.
Key = tuple[int, str, str, str, str, str]

# The longest reason code kept (a code is the part of a rejection reason before its colon,
# mining.stages.reason_code: a few words; the bound keeps a malformed one out of the index).
REASON_CODE_CHARS = 200

# Documents reopened or looked up per statement (a statement's parameters are bounded).
REOPEN_CHUNK = 5000

_COST_PLACES = Decimal(1).scaleb(-StageResult._meta.get_field("cost_usd").decimal_places)


def stored_cost(value: Any) -> Decimal:
    """A cost as a stage result stores it (its column's decimal places)."""
    return Decimal(str(value or 0)).quantize(_COST_PLACES, rounding=ROUND_HALF_UP)


def counted_reason(status: str, stage: str, reason: str) -> tuple[str, str]:
    """The stage and reason code a document is counted under: those that rejected it; a
    document in any other state is counted without them."""
    if status != REJECTED:
        return "", ""
    return stage, reason_code(reason or "")[:REASON_CODE_CHARS]


def cpu_microseconds(cpu_ms: float | None) -> int | None:
    """A document's CPU (``MiningCandidate.cpu_ms``) as its counters sum it: whole
    microseconds, half up (the same in Python and in the counting statement,
    ``_cpu_sql``); None for a document whose walk has not ended."""
    return None if cpu_ms is None else math.floor(cpu_ms * 1000 + 0.5)


@dataclass
class Sums:
    n: int = 0
    cost_usd: Decimal = Decimal(0)
    squares: Decimal = Decimal(0)
    cpu_us: int = 0
    n_cpu: int = 0

    def add(self, n: int, cost: Decimal, squares: Decimal, cpu_us: int = 0, n_cpu: int = 0) -> None:
        self.n += n
        self.cost_usd += cost
        self.squares += squares
        self.cpu_us += cpu_us
        self.n_cpu += n_cpu

    def add_sums(self, other: Sums, sign: int = 1) -> None:
        self.add(sign * other.n, sign * other.cost_usd, sign * other.squares, sign * other.cpu_us, sign * other.n_cpu)

    def __bool__(self) -> bool:
        return bool(self.n or self.cost_usd or self.squares or self.cpu_us or self.n_cpu)


Counts = dict[Key, Sums]


@dataclass
class DocumentRows:
    """A document of a run (its candidate row) and its stage results, as a write sees them:
    ``results`` maps a stage to its result's id, status and cost; ``cpu_ms``, the CPU its
    walks took (None until one ended)."""

    topic_id: int
    status: str
    stage: str
    reason: str
    cpu_ms: float | None = None
    results: dict[str, tuple[int | None, str, Decimal]] = field(default_factory=dict)

    def counts(self) -> Counts:
        counts: Counts = defaultdict(Sums)
        for stage, (_, status, _) in self.results.items():
            counts[(self.topic_id, CounterScope.STAGE, stage, status, self.status, "")].add(1, Decimal(0), Decimal(0))
        total = sum((cost for _, _, cost in self.results.values()), Decimal(0))
        stage, code = counted_reason(self.status, self.stage, self.reason)
        cpu = cpu_microseconds(self.cpu_ms)
        counts[(self.topic_id, CounterScope.DOCUMENT, stage, "", self.status, code)].add(
            1, total, total * total, cpu or 0, int(cpu is not None)
        )
        return counts

    def written(
        self,
        results: dict[str, dict[str, Any]],
        *,
        deleted: tuple[int, ...] | list[int] = (),
        status: str | None = None,
        stage: str | None = None,
        reason: str | None = None,
        cpu_ms: float | None = None,
    ) -> DocumentRows:
        """The document after a write: ``results`` (stage -> the fields written) stored,
        the results with the ``deleted`` ids gone, its new status, stage and reason where
        given, and ``cpu_ms`` added to its CPU (as the write adds it: from 0 when it had
        none)."""
        gone = set(deleted)
        after = {s: r for s, r in self.results.items() if r[0] not in gone}
        for s, fields in results.items():
            after[s] = (self.results.get(s, (None,))[0], fields["status"], stored_cost(fields.get("cost_usd")))
        return DocumentRows(
            topic_id=self.topic_id,
            status=self.status if status is None else status,
            stage=self.stage if stage is None else stage,
            reason=self.reason if reason is None else reason,
            cpu_ms=self.cpu_ms if cpu_ms is None else (self.cpu_ms or 0.0) + cpu_ms,
            results=after,
        )


def candidate_lock(candidate_id: int) -> DocumentRows | None:
    """Inside a write's transaction: lock the document's row, then read its stage results.
    Two statements, in this order: a statement that waited for the lock sees the row as the
    other writer left it but every other table as it was when the statement began, so the
    results are read by a statement that starts once the lock is held. None when the
    document is gone."""
    row = (
        MiningCandidate.objects.select_for_update()
        .filter(pk=candidate_id)
        .values_list("topic_id", "status", "stage", "reason", "cpu_ms")
        .first()
    )
    if row is None:
        return None
    document = DocumentRows(*row)
    for result_id, stage, status, cost in StageResult.objects.filter(candidate_id=candidate_id).values_list(
        "id", "stage", "status", "cost_usd"
    ):
        document.results[stage] = (result_id, status, stored_cost(cost))
    return document


def difference(after: Counts, before: Counts) -> Counts:
    delta: Counts = defaultdict(Sums)
    for key, sums in after.items():
        delta[key].add_sums(sums)
    for key, sums in before.items():
        delta[key].add_sums(sums, -1)
    return {key: sums for key, sums in delta.items() if sums}


def counters_add(run_id: int, delta: Counts) -> None:
    """Add ``delta`` to the run's counters in one statement, in key order (concurrent
    writers lock the same rows in the same order), each sum added in the database."""
    rows = sorted(delta.items())
    if not rows:
        return
    meta = MiningRunCounter._meta
    connection = connections[MiningRunCounter.objects.db]
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    key_columns = ["run_id", "topic_id", "scope", "stage", "status", "candidate_status", "reason"]
    sums = ["n", "cost_usd", "cost_usd_squares", "cpu_us", "n_cpu"]
    values = ", ".join(["(" + ", ".join(["%s"] * (len(key_columns) + len(sums))) + ")"] * len(rows))
    params: list[Any] = []
    for key, value in rows:
        params += [run_id, *key, value.n, value.cost_usd, value.squares, value.cpu_us, value.n_cpu]
    added = ", ".join(f"{quote(c)} = {table}.{quote(c)} + excluded.{quote(c)}" for c in sums)
    columns = ", ".join(quote(c) for c in key_columns + sums)
    conflict = ", ".join(quote(c) for c in key_columns)
    sql = f"INSERT INTO {table} ({columns}) VALUES {values} ON CONFLICT ({conflict}) DO UPDATE SET {added}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


class Decision(Protocol):
    """How a walk leaves its document (``mining.walker.Final``): its new status (None:
    unchanged), the stage and the reason."""

    status: str | None
    stage: str
    reason: str


def document_written(
    run_id: int,
    before: DocumentRows | None,
    results: dict[str, dict[str, Any]],
    *,
    deleted: list[int] | None = None,
    final: Decision | None = None,
    cpu_ms: float | None = None,
) -> None:
    """A walk's write (``mining.walker.Walker._write``) stored ``results`` (stage -> the
    fields written) for the document read as ``before`` (``candidate_lock``), deleted the
    results with the ``deleted`` ids and, with ``final``, set its stage, reason and status
    (unless None) and added ``cpu_ms`` to its CPU: move its counts from before to after,
    in the same transaction."""
    if before is None:  # the document is gone; nothing was written
        return
    if final is None:
        after = before.written(results, deleted=deleted or ())
    else:
        after = before.written(
            results,
            deleted=deleted or (),
            status=final.status,
            stage=final.stage,
            reason=final.reason,
            cpu_ms=cpu_ms,
        )
    counters_add(run_id, difference(after.counts(), before.counts()))


# -- counted from the rows ----------------------------------------------------------------


def _cpu_sql(column: str) -> str:
    """``cpu_microseconds`` of a column in SQL (whole microseconds, half up)."""
    if connections[MiningRunCounter.objects.db].vendor == "postgresql":
        return f"FLOOR({column} * 1000 + 0.5)::bigint"
    return f"CAST({column} * 1000 + 0.5 AS INTEGER)"  # truncates: a floor for what is not negative


def _counted_sql(where: str) -> str:
    """The counts of the documents ``where`` selects (``c`` their rows), from their rows:
    stage results per topic, stage, status and document status; documents per topic,
    status (and, rejected, stage and reason) with their cost and CPU sums."""
    quote = connections[MiningRunCounter.objects.db].ops.quote_name
    c = quote(MiningCandidate._meta.db_table)
    r = quote(StageResult._meta.db_table)
    rejected = f"'{CandidateStatus.REJECTED.value}'"
    return f"""
        WITH docs AS (
            SELECT c.topic_id, c.status, c.stage, c.reason, COALESCE(SUM(r.cost_usd), 0) AS total,
                {_cpu_sql("c.cpu_ms")} AS cpu_us
            FROM {c} c LEFT JOIN {r} r ON r.candidate_id = c.id
            WHERE {where}
            GROUP BY c.id, c.topic_id, c.status, c.stage, c.reason, c.cpu_ms
        )
        SELECT 'counted', c.topic_id, '{CounterScope.STAGE.value}', r.stage, r.status, c.status, '',
            COUNT(*), 0, 0, 0, 0
        FROM {r} r JOIN {c} c ON c.id = r.candidate_id
        WHERE {where}
        GROUP BY c.topic_id, r.stage, r.status, c.status
        UNION ALL
        SELECT 'counted', topic_id, '{CounterScope.DOCUMENT.value}',
            CASE WHEN status = {rejected} THEN stage ELSE '' END, '', status,
            CASE WHEN status = {rejected} THEN reason ELSE '' END,
            COUNT(*), SUM(total), SUM(total * total), COALESCE(SUM(cpu_us), 0), COUNT(cpu_us)
        FROM docs
        GROUP BY topic_id, CASE WHEN status = {rejected} THEN stage ELSE '' END, status,
            CASE WHEN status = {rejected} THEN reason ELSE '' END"""


def _collect(rows: list[tuple]) -> tuple[Counts, Counts]:
    """(counted, kept) from the rows of a counting statement."""
    found: dict[str, Counts] = {"counted": defaultdict(Sums), "kept": defaultdict(Sums)}
    for source, topic_id, scope, stage, status, candidate_status, reason, n, cost, squares, cpu, n_cpu in rows:
        if source == "counted" and scope == CounterScope.DOCUMENT:
            stage, reason = counted_reason(candidate_status, stage, reason)
        found[source][(topic_id, scope, stage, status, candidate_status, reason)].add(
            int(n), Decimal(str(cost or 0)), Decimal(str(squares or 0)), int(cpu or 0), int(n_cpu or 0)
        )
    return found["counted"], found["kept"]


def corpus_counts(run: MiningRun) -> Counts:
    """The corpus documents the run can sample per topic (the documents present when it
    was created, as the sampler sees them: ``MiningRun.documents_for_sampling``), as its
    ``corpus`` counters hold them: what its planned documents are bounded by. They do not
    change as the run goes."""
    topic_ids = list(run.topics.values_list("id", flat=True))
    if run.pools_documents:  # the no-topics mode: every document under the one pseudo-topic
        total = run.documents_for_sampling(topic_ids).count()
        available = dict.fromkeys(topic_ids, total)
    else:
        available = dict(
            run.documents_for_sampling(topic_ids).values_list("topic_id").annotate(n=Count("id")).order_by()
        )
    counts: Counts = defaultdict(Sums)
    for topic_id, n in available.items():
        if n:
            counts[(topic_id, CounterScope.CORPUS, "", "", "", "")].add(n, Decimal(0), Decimal(0))
    return counts


def mining_run_corpus_count(run: MiningRun) -> None:
    """Keep what the corpus holds for a new run (``mining_run_create``, once its topics are
    set): its ``corpus`` counters."""
    counters_add(run.pk, corpus_counts(run))


def _run_lock(run: MiningRun) -> bool:
    """Serialise reconciliations of one run (a row lock on the run that writers, which
    never lock the run, do not wait for). Returns whether its counters were built."""
    return bool(
        MiningRun.objects.select_for_update(no_key=True)
        .filter(pk=run.pk)
        .values_list("counters_built", flat=True)
        .first()
    )


_KEY_NAMES = ("topic_id", "scope", "stage", "status", "candidate_status", "reason")


def _reconcile(run: MiningRun) -> list[dict[str, Any]]:
    """Count the run afresh and add the difference to its counters; the mismatches found."""
    quote = connections[MiningRunCounter.objects.db].ops.quote_name
    kept_sql = (
        "SELECT 'kept', topic_id, scope, stage, status, candidate_status, reason, n, cost_usd, cost_usd_squares, "
        f"cpu_us, n_cpu FROM {quote(MiningRunCounter._meta.db_table)} WHERE run_id = %s"
    )
    sql = _counted_sql("c.run_id = %s") + "\nUNION ALL\n" + kept_sql
    with connections[MiningRunCounter.objects.db].cursor() as cursor:
        cursor.execute(sql, [run.pk, run.pk, run.pk])
        counted, kept = _collect(cursor.fetchall())
    for key, sums in corpus_counts(run).items():  # what the corpus holds does not change: read apart
        counted[key].add_sums(sums)
    delta = difference(counted, kept)
    counters_add(run.pk, delta)
    return [
        {
            "key": dict(zip(_KEY_NAMES, key, strict=True)),
            "kept": kept[key].n if key in kept else 0,
            "counted": counted[key].n if key in counted else 0,
            "kept_cost_usd": kept[key].cost_usd if key in kept else Decimal(0),
            "counted_cost_usd": counted[key].cost_usd if key in counted else Decimal(0),
            "kept_cpu_us": kept[key].cpu_us if key in kept else 0,
            "counted_cpu_us": counted[key].cpu_us if key in counted else 0,
        }
        for key in sorted(delta)
    ]


def mining_run_counters_verify(run: MiningRun) -> dict[str, Any]:
    """Count the run's documents and stage results afresh from their rows, and its ledger
    entries from the ledger, and compare them with its kept counters and ledger totals
    (llm/ledger_totals.py); where they differ, they are rebuilt from the rows (the
    difference is added, so writes made meanwhile stay counted). Returns the run, how many
    counters it has, the mismatches found (each key with the kept and the counted values;
    ``ledger_mismatches`` for the ledger's totals) and whether anything was rebuilt."""
    with transaction.atomic():
        built = _run_lock(run)
        mismatches = _reconcile(run)
        if not built:
            MiningRun.objects.filter(pk=run.pk).update(counters_built=True)
    ledger_mismatches = ledger_totals_verify(run.ledger_run)
    run.counters_built = True
    return {
        "run": run.pk,
        "name": run.name,
        "counters": MiningRunCounter.objects.filter(run=run).exclude(n=0).count(),
        "mismatches": mismatches,
        "ledger_mismatches": ledger_mismatches,
        "rebuilt": bool(mismatches or ledger_mismatches),
        "first_count": not built,
    }


CounterRow = tuple[int, str, str, str, str, str, int, Decimal, Decimal, int, int]


def mining_run_counters(run: MiningRun) -> list[CounterRow]:
    """The run's kept counters: (topic, scope, stage, status, document status, reason code,
    n, cost, sum of squared costs, CPU in microseconds, documents with a CPU), those not
    zero. A run made before counters were kept is counted from its rows first (once)."""
    if not run.counters_built:
        with transaction.atomic():
            if not _run_lock(run):
                _reconcile(run)
                MiningRun.objects.filter(pk=run.pk).update(counters_built=True)
        run.counters_built = True
    return list(
        MiningRunCounter.objects.filter(run=run)
        .exclude(n=0)
        .values_list(
            "topic_id",
            "scope",
            "stage",
            "status",
            "candidate_status",
            "reason",
            "n",
            "cost_usd",
            "cost_usd_squares",
            "cpu_us",
            "n_cpu",
        )
        .order_by()
    )


def candidates_insert(run_id: int, new: list[MiningCandidate]) -> int:
    """Insert the documents the sampler drew (``mining.run_claims.candidates_sample``, the only
    writer of a run's documents, holding the run's row): those not present yet, counted as
    pending in the same transaction. Returns how many were inserted."""
    present: set[int] = set()
    for start in range(0, len(new), REOPEN_CHUNK):
        drawn = [candidate.document_id for candidate in new[start : start + REOPEN_CHUNK]]
        present.update(
            MiningCandidate.objects.filter(run_id=run_id, document_id__in=drawn).values_list("document_id", flat=True)
        )
    new = [candidate for candidate in new if candidate.document_id not in present]
    MiningCandidate.objects.bulk_create(new, batch_size=2000, ignore_conflicts=True)
    counts: Counts = defaultdict(Sums)
    for candidate in new:
        counts[(candidate.topic_id, CounterScope.DOCUMENT, "", "", CandidateStatus.PENDING, "")].add(
            1, Decimal(0), Decimal(0)
        )
    counters_add(run_id, counts)
    return len(new)


def documents_reopen(*, run: MiningRun, ids: list[int], **fields: Any) -> int:
    """Put these documents of the run back to pending (*Retry failed*, *Change stages*),
    with ``fields`` set, and move their counts to pending. The caller's transaction holds
    their rows locked (``select_for_update``), so their counts read here are what is
    moved. Returns how many were reopened."""
    reopened = 0
    for start in range(0, len(ids), REOPEN_CHUNK):
        chunk = ids[start : start + REOPEN_CHUNK]
        marks = ", ".join(["%s"] * len(chunk))
        with connections[MiningRunCounter.objects.db].cursor() as cursor:
            cursor.execute(_counted_sql(f"c.id IN ({marks})"), chunk + chunk)
            before, _ = _collect(cursor.fetchall())
        after: Counts = defaultdict(Sums)
        for (topic_id, scope, stage, status, _, reason), sums in before.items():
            if scope == CounterScope.DOCUMENT:
                stage, reason = "", ""
            after[(topic_id, scope, stage, status, CandidateStatus.PENDING, reason)].add_sums(sums)
        reopened += MiningCandidate.objects.filter(pk__in=chunk).update(status=CandidateStatus.PENDING, **fields)
        counters_add(run.pk, difference(after, before))
    return reopened


class Budget:
    """What the run has paid (its ledger entries' kept totals), checked before every new call."""

    def __init__(self, run: MiningRun):
        self.run = run
        self.cap = run.budget_usd
        self.lock = threading.Lock()
        self.refresh()

    def refresh(self) -> None:
        spent = LedgerTotal.objects.filter(run=self.run.ledger_run).aggregate(s=Sum("priced_usd"))["s"] or Decimal(0)
        with self.lock:
            self.spent = Decimal(spent)

    def add(self, amount: Decimal | None) -> None:
        if amount:
            with self.lock:
                self.spent += amount

    def reached(self) -> bool:
        return self.cap is not None and self.spent >= self.cap
