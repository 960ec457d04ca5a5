"""Reads of mining runs: progress (the funnel of How2Everything Figure 2 per topic and
stage with the documents still in flight, yield, throughput, ETA, tokens and USD per stage
and model), and the documents a run rejected or failed, for tuning prompts. Planned
documents, ETA and projected cost count only the documents the run can actually sample
(mining/run_estimates.py has the estimates and their intervals). Yield and the stage pass
rates carry their n and a 95 % Wilson interval and count only decided documents
(``mining_yield``)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypedDict

from django.conf import settings
from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from core.intervals import share_estimate
from llm.constants import OUTCOMES
from llm.costs import cost_known
from llm.ledger_totals import ledger_run_totals
from llm.models import LedgerTotal, LLMJob
from llm.runs import Liveness, jobs_liveness, ledger_run_counts, run_state
from mining.models import CandidateStatus, CounterScope, MiningCandidate, MiningRun, MiningRunStatus, StageResult
from mining.run_counters import mining_run_counters
from mining.run_estimates import CostSums, cost_projection, eta_estimate
from mining.stages import LLM_STAGES, PASSED, PIPELINE, REJECTED

# Documents finished in this window set the throughput (and so the ETA).
THROUGHPUT_WINDOW = timedelta(minutes=5)

# A run in one of these states has stopped for good: it has an amount spent, no ETA and no
# projection. (Paused and failed runs can be resumed, so they keep both.)
FINISHED_STATUSES = ("done", "done_with_failures", "cancelled")


class RunCounts(TypedDict):
    """The document counts ``mining_run_list`` annotates each run with."""

    n_candidates: int
    n_passed: int
    n_failed: int
    n_rejected: int


if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    CountedRun = WithAnnotations[MiningRun, RunCounts]


def mining_run_list() -> QuerySet[CountedRun]:
    return (
        MiningRun.objects.select_related("corpus")
        .annotate(
            n_candidates=Count("candidates", distinct=True),
            n_passed=Count("candidates", filter=Q(candidates__status=CandidateStatus.PASSED), distinct=True),
            n_failed=Count("candidates", filter=Q(candidates__status=CandidateStatus.FAILED), distinct=True),
            n_rejected=Count("candidates", filter=Q(candidates__status=CandidateStatus.REJECTED), distinct=True),
        )
        .order_by("-id")
    )


def mining_yield(
    *, procedures: int, rejected: int, failed: int, in_flight: int, cancelled: bool = False
) -> dict[str, Any]:
    """Yield: procedures / decided documents (passed every stage, or rejected by a stage's
    decision), with n (the decided documents) and its 95 % Wilson interval
    (``core.intervals.share_estimate``), and what it leaves out: documents still in flight
    (not decided yet; of a ``cancelled`` run, ``not_asked``: nothing will ask them) and failed
    documents (a stage call had no usable answer, which decides nothing about the document;
    *Retry failed* asks again). The one rule of the run page, the API and ``mine_run
    --status`` (docs/mining.md, "Yield")."""
    left_out = {"in_flight": 0 if cancelled else in_flight, "not_asked": in_flight if cancelled else 0}
    return {**share_estimate(procedures, procedures + rejected), "left_out": {**left_out, "failed": failed}}


def mining_run_yield(run: CountedRun) -> dict[str, Any]:
    """``mining_yield`` of a run of ``mining_run_list`` (from its document counts)."""
    return mining_yield(
        procedures=run.n_passed,
        rejected=run.n_rejected,
        failed=run.n_failed,
        in_flight=run.n_candidates - run.n_passed - run.n_rejected - run.n_failed,
        cancelled=run.status == MiningRunStatus.CANCELLED,
    )


def mining_run_state(
    run: MiningRun, *, counts: tuple[dict[str, int], list] | None = None, n_failed_documents: int | None = None
) -> dict[str, Any]:
    """The run's state as every run shows it (llm/runs.py run_state; the page, the run list,
    the API and ``mine_run --status``): its status, its requests in the ledger per outcome
    with the most frequent errors, those waiting for a retry, the circuit breaker's record
    and why it stopped. *Retry failed* walks the failed documents again (re-asking their
    failed requests), so it is offered when the run has stopped with failed documents.
    ``counts``: precomputed outcome counts (the run list counts every run in one query)."""
    if n_failed_documents is None:
        n_failed_documents = MiningCandidate.objects.filter(run=run, status=CandidateStatus.FAILED).count()
    stopped = run.status not in (MiningRunStatus.PENDING, MiningRunStatus.RUNNING, MiningRunStatus.CANCELLED)
    return run_state(
        status=run.status,
        liveness=mining_run_liveness(run),
        counts=counts or ledger_run_counts(run.ledger_run),
        retrying=run.n_retrying,
        breaker=run.breaker,
        reason=run.pause_reason or run.error,
        extra={
            "id": f"mining-run-{run.pk}",
            "n_failed_documents": n_failed_documents,
            "can_retry_failed": stopped and n_failed_documents > 0,
        },
    )


def mining_run_list_states() -> list[CountedRun]:
    """The run list, each run with its ``state``; the outcome counts of every run come from
    one grouped query (no error messages: the run page lists those)."""
    runs = list(mining_run_list())
    by_label: dict[str, Counter] = defaultdict(Counter)
    for label, outcome, n in (
        LedgerTotal.objects.filter(run__in=[run.ledger_run for run in runs])
        .order_by()
        .values_list("run", "outcome")
        .annotate(n=Sum("n"))
    ):
        by_label[label][outcome] = n
    for run in runs:
        counts = by_label[run.ledger_run]
        # The state is shown beside the run in the list (an attribute for the template).
        run.state = mining_run_state(  # type: ignore[attr-defined]
            run, counts=({**{o: counts[o] for o in OUTCOMES}, "pending": 0}, []), n_failed_documents=run.n_failed
        )
    return runs


def _planned_per_topic(
    run: MiningRun, topic_ids: list[int], per_topic_status: dict[int, Counter], available: Counter
) -> dict[int, int]:
    """Documents the run can still take per topic, at most: its sampling budget, or what
    the corpus holds for the topic (``available``: the documents present when the run was
    created, as the sampler sees them, kept in its ``corpus`` counters) when that is fewer;
    a topic that met ``desired_valid_per_topic`` and has nothing pending takes no more than
    it has."""
    planned = {}
    for topic_id in topic_ids:
        counts = per_topic_status[topic_id]
        planned[topic_id] = min(run.candidates_per_topic, available.get(topic_id, 0))
        if (
            run.desired_valid_per_topic
            and counts[CandidateStatus.PASSED] >= run.desired_valid_per_topic
            and not counts[CandidateStatus.PENDING]
        ):
            planned[topic_id] = sum(counts.values())
    return planned


def _funnel_cell(
    stage: str,
    documents: int,
    pending: int,
    reached: int,
    passed: int,
    passed_pending: int,
    rejected: int = 0,
    *,
    cancelled: bool = False,
) -> dict:
    """One stage of the funnel. ``in_flight``: documents still being worked on that have
    not passed the stage yet (they may); of a ``cancelled`` run they are ``not_asked``
    instead (nothing will ask them); ``dropped``: rejected or failed at or before it.
    ``pass_rate``: passed / decided at this stage (passed or rejected by it), with its
    Wilson interval; ``undecided``: documents whose call at this stage had no usable answer
    (yet), left out of the rate."""
    unfinished = max(pending - passed_pending, 0)
    return {
        "stage": stage,
        "reached": reached,
        "passed": passed,
        "in_flight": 0 if cancelled else unfinished,
        "not_asked": unfinished if cancelled else 0,
        "dropped": max(documents - passed - unfinished, 0),
        "rejected": rejected,
        "pass_rate": share_estimate(passed, passed + rejected),
        "undecided": max(reached - passed - rejected, 0),
    }


@dataclass
class RunCounted:
    """A run's kept counters (mining/run_counters.py), read as the rows would count them:
    its stage results by (topic, stage, status, its document's status); its documents by
    topic and status; what they cost by status; its rejected documents by (stage, reason
    code); the corpus documents it can sample per topic; the CPU of the documents whose
    walk ended. A few hundred rows whatever the size of the run (counting the rows
    themselves took 0.7 s at 100,000 documents on PostgreSQL, docs/benchmarks.md)."""

    funnel: list[tuple[int, str, str, str, int]] = field(default_factory=list)
    per_topic_status: dict[int, Counter] = field(default_factory=lambda: defaultdict(Counter))
    costs: dict[str, CostSums] = field(default_factory=lambda: defaultdict(lambda: CostSums(0)))
    rejections: Counter[tuple[str, str]] = field(default_factory=Counter)
    available: Counter[int] = field(default_factory=Counter)
    cpu_us: int = 0
    n_cpu: int = 0


def _run_counts(run: MiningRun) -> RunCounted:
    counted = RunCounted()
    for topic_id, scope, stage, status, candidate_status, reason, n, usd, squares, cpu_us, n_cpu in mining_run_counters(
        run
    ):
        if scope == CounterScope.STAGE:
            counted.funnel.append((topic_id, stage, status, candidate_status, n))
            continue
        if scope == CounterScope.CORPUS:
            counted.available[topic_id] += n
            continue
        counted.per_topic_status[topic_id][candidate_status] += n
        held = counted.costs[candidate_status]
        counted.costs[candidate_status] = CostSums(held.n + n, held.total + usd, held.squares + squares)
        counted.cpu_us += cpu_us
        counted.n_cpu += n_cpu
        if candidate_status == CandidateStatus.REJECTED:
            counted.rejections[(stage, reason)] += n
    return counted


def _stage_costs(run: MiningRun) -> list[dict[str, Any]]:
    """Requests, tokens and USD per stage and per model that served them (the ledger
    entry's model), so requests made before *Change stages* stay under their own model.
    ``current`` marks the model the stage asks now; a stage without requests yet shows
    its current model with zeros."""
    by_model: dict[tuple[str, str], dict[str, Any]] = {}
    for total in ledger_run_totals(run.ledger_run):  # kept as the ledger is written (llm/ledger_totals.py)
        row = by_model.setdefault(
            (total.stage, total.model),
            {
                "model": total.model,
                "requests": 0,
                "tokens_in": 0,
                "tokens_out": 0,
                "priced_usd": Decimal(0),
                "n_unpriced": 0,
            },
        )
        row["requests"] += total.n
        row["tokens_in"] += total.tokens_in
        row["tokens_out"] += total.tokens_out
        row["priced_usd"] += total.priced_usd
        row["n_unpriced"] += total.n_unpriced
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (stage, _), row in sorted(by_model.items()):
        # unknown (None) when any of its requests has no price, never a partial sum (llm/costs.py)
        rows[stage].append({**row, "cost_usd": cost_known(row["priced_usd"], row["n_unpriced"])})
    table = []
    for stage in LLM_STAGES:
        spec = run.stages.get(stage, {})
        current_model = spec.get("resolved_model", "")
        stage_rows = rows.get(stage) or [
            {"model": current_model, "requests": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": None, "n_unpriced": 0}
        ]
        for served in sorted(stage_rows, key=lambda r: (r["model"] != current_model, r["model"])):
            current = served["model"] == current_model
            table.append(
                {
                    "stage": stage,
                    "model": served["model"],
                    "current": current,
                    "requests": served["requests"],
                    "tokens_in": served["tokens_in"] or 0,
                    "tokens_out": served["tokens_out"] or 0,
                    "cost_usd": served["cost_usd"],
                    "n_unpriced": served["n_unpriced"],
                    "prompt_hash": spec.get("prompt_hash", "") if current else "",
                    "prompt_file": spec.get("prompt_file", "") if current else "",
                }
            )
    return table


def _most_first(item: tuple[tuple[str, str], int]) -> tuple:
    """Rejection reasons, the most frequent first; ties in the order of the stages."""
    (stage, code), n = item
    return (-n, PIPELINE.index(stage) if stage in PIPELINE else len(PIPELINE), stage, code)


def _cpu(cpu_us: int, n: int) -> dict[str, Any]:
    return {"ms_per_document": round(cpu_us / 1000 / n, 2) if n else None, "n": n}


def mining_run_cpu(run: MiningRun) -> dict[str, Any]:
    """Worker CPU per document: the mean of the CPU the workers' walks of each document took
    (the thread's CPU time, every walk of the document, its share of its chunk's claim and
    ledger lookup included; summed to the microsecond in the run's counters), with n, the
    documents whose walk has ended. Left out: walks still under way or interrupted (a
    killed worker's), and the worker's own bookkeeping outside the walks (status checks,
    sampling)."""
    counted = _run_counts(run)
    return _cpu(counted.cpu_us, counted.n_cpu)


def mining_run_progress(run: MiningRun) -> dict[str, Any]:
    topics = list(run.topics.order_by("position", "name").values("id", "name", "slug"))
    counted_run = _run_counts(run)
    per_topic_status = counted_run.per_topic_status
    by_status: Counter[str] = Counter()
    for counts in per_topic_status.values():
        by_status.update(counts)

    # The funnel: per topic and stage, how many documents reached the stage and passed it,
    # and how many of those still pending passed it (the rest of the pending are in flight).
    reached: dict[tuple[int, str], int] = Counter()
    passed: dict[tuple[int, str], int] = Counter()
    passed_pending: dict[tuple[int, str], int] = Counter()
    rejected: dict[tuple[int, str], int] = Counter()
    outcome_counts: Counter = Counter()
    document_costs, rejections = counted_run.costs, counted_run.rejections
    for topic_id, stage, status, candidate_status, n in counted_run.funnel:
        reached[(topic_id, stage)] += n
        if status == PASSED:
            passed[(topic_id, stage)] += n
            if candidate_status == CandidateStatus.PENDING:
                passed_pending[(topic_id, stage)] += n
        elif status == REJECTED:
            rejected[(topic_id, stage)] += n
        outcome_counts[status] += n

    # A cancelled run's unfinished documents are not in flight: nothing will ask them.
    cancelled = run.status == MiningRunStatus.CANCELLED
    funnel_topics = []
    for topic in topics:
        counts = per_topic_status[topic["id"]]
        documents, pending = sum(counts.values()), counts[CandidateStatus.PENDING]
        funnel_topics.append(
            {
                "topic": topic["name"],
                "slug": topic["slug"],
                "documents": documents,
                "stages": [
                    _funnel_cell(
                        s,
                        documents,
                        pending,
                        reached[(topic["id"], s)],
                        passed[(topic["id"], s)],
                        passed_pending[(topic["id"], s)],
                        rejected[(topic["id"], s)],
                        cancelled=cancelled,
                    )
                    for s in PIPELINE
                ],
                "procedures": counts[CandidateStatus.PASSED],
                "yield": mining_yield(
                    procedures=counts[CandidateStatus.PASSED],
                    rejected=counts[CandidateStatus.REJECTED],
                    failed=counts[CandidateStatus.FAILED],
                    in_flight=pending,
                    cancelled=cancelled,
                ),
            }
        )
    sampled = sum(by_status.values())
    funnel_total = [
        _funnel_cell(
            s,
            sampled,
            by_status[CandidateStatus.PENDING],
            sum(reached[(t["id"], s)] for t in topics),
            sum(passed[(t["id"], s)] for t in topics),
            sum(passed_pending[(t["id"], s)] for t in topics),
            sum(rejected[(t["id"], s)] for t in topics),
            cancelled=cancelled,
        )
        for s in PIPELINE
    ]

    finished = (
        by_status[CandidateStatus.PASSED] + by_status[CandidateStatus.REJECTED] + by_status[CandidateStatus.FAILED]
    )
    topic_ids = [t["id"] for t in topics]
    planned = sum(_planned_per_topic(run, topic_ids, per_topic_status, counted_run.available).values())
    over = run.status in FINISHED_STATUSES
    now = timezone.now()
    recent = MiningCandidate.objects.filter(run=run, finished_at__gte=now - THROUGHPUT_WINDOW).count()
    started = run.started_at
    window_minutes = THROUGHPUT_WINDOW.total_seconds() / 60
    if started and now - started < THROUGHPUT_WINDOW:
        window_minutes = max((now - started).total_seconds() / 60, 1 / 60)
    per_minute = recent / window_minutes if recent else 0.0
    remaining = 0 if over else max(planned - finished, 0)
    eta = eta_estimate(remaining=remaining, finished_in_window=recent, window_minutes=window_minutes)

    stage_costs = _stage_costs(run)
    spent = sum((row["cost_usd"] or Decimal(0) for row in stage_costs), Decimal(0))
    priced = all(row["cost_usd"] is not None for row in stage_costs if row["requests"])
    projection = {"usd": None, "ci95": None, "n": finished}
    if priced and not over:  # a finished run shows what it spent, not a projection
        # every finished document (one without stage results cost nothing), their costs' sums
        paid = [document_costs[s] for s in document_costs if s != CandidateStatus.PENDING]
        sums = CostSums(finished, sum((c.total for c in paid), Decimal(0)), sum((c.squares for c in paid), Decimal(0)))
        in_flight_paid = document_costs[CandidateStatus.PENDING].total
        projection = cost_projection(spent=spent, planned=planned, finished=sums, in_flight_paid=in_flight_paid)

    return {
        "run": run.name,
        "status": run.status,
        "pause_reason": run.pause_reason,
        "error": run.error,
        "totals": {
            "planned": planned,
            "sampled": sampled,
            "pending": 0 if cancelled else by_status[CandidateStatus.PENDING],
            "not_asked": by_status[CandidateStatus.PENDING] if cancelled else 0,
            "finished": finished,
            "procedures": by_status[CandidateStatus.PASSED],
            "rejected": by_status[CandidateStatus.REJECTED],
            "failed": by_status[CandidateStatus.FAILED],
            "yield": mining_yield(
                procedures=by_status[CandidateStatus.PASSED],
                rejected=by_status[CandidateStatus.REJECTED],
                failed=by_status[CandidateStatus.FAILED],
                in_flight=by_status[CandidateStatus.PENDING],
                cancelled=cancelled,
            ),
            "documents_per_minute": round(per_minute, 2),
            "eta_minutes": eta["minutes"],
            "eta_ci95_minutes": eta["ci95"],
            "eta_n": eta["n"],
            "cost_usd": spent if priced else None,
            "requests_without_price": sum(row["n_unpriced"] for row in stage_costs),
            "projected_cost_usd": projection["usd"],
            "projected_ci95_usd": projection["ci95"],
            "projected_n": projection["n"],
            "budget_usd": run.budget_usd,
            "over": over,
            "cpu": _cpu(counted_run.cpu_us, counted_run.n_cpu),
        },
        "funnel": funnel_total,
        "funnel_by_topic": funnel_topics,
        "stage_costs": stage_costs,
        "outcomes": {
            status: outcome_counts[status]
            for status in (PASSED, REJECTED, "parse_failed", "truncated", "refused", "too_long", "api_error")
        },
        "rejection_reasons": [
            {"stage": stage, "reason": code, "documents": n}
            for (stage, code), n in sorted(rejections.items(), key=_most_first)
        ],
    }


def mining_candidate_list(
    *, run: MiningRun, status: str = "", stage: str = "", topic: str = "", q: str = ""
) -> QuerySet[MiningCandidate]:
    """A run's documents, filtered (the rejected-documents browser)."""
    candidates = MiningCandidate.objects.filter(run=run).select_related("document", "topic", "procedure")
    if status:
        candidates = candidates.filter(status=status)
    if stage:
        candidates = candidates.filter(stage=stage)
    if topic:
        candidates = candidates.filter(topic__slug=topic)
    if q:
        candidates = candidates.filter(Q(reason__icontains=q) | Q(document__doc_id__icontains=q))
    return candidates.order_by("id")


def mining_candidate_get(*, run: MiningRun, pk: int) -> MiningCandidate | None:
    return MiningCandidate.objects.filter(run=run, pk=pk).select_related("document", "topic", "procedure").first()


def stage_result_list(*, candidate: MiningCandidate) -> list[StageResult]:
    results = {r.stage: r for r in StageResult.objects.filter(candidate=candidate)}
    return [results[s] for s in PIPELINE if s in results]


def mining_run_liveness(run: MiningRun) -> Liveness:
    """Whether a worker is at work on the run (llm/runs.py ``run_liveness``): the newest beat
    of its workers (each beats the run about once a second, ``mining.runner``) and of the LLM
    jobs of its current wave (Batch API, in-process vLLM); documents claimed within the lease
    count as a worker at work too."""

    def claimed() -> bool:
        since = timezone.now() - timedelta(seconds=settings.LLM_JOB_LEASE_SECONDS)
        return MiningCandidate.objects.filter(run=run, claimed_at__gte=since).exclude(claim="").exists()

    return jobs_liveness(
        [LLMJob(pk=pk) for pk in run.batch_job_ids or []], status=run.status, beats=[run.heartbeat_at], claimed=claimed
    )


def mining_run_held(run: MiningRun) -> bool:
    """Whether a worker is at work on the run now (a beat within the lease): resuming it is
    refused then, as it would release that worker's claims. A run whose workers all stopped
    beating reads stalled and may be resumed at once (its claims are released then)."""
    return mining_run_liveness(run).held
