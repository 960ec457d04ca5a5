"""Reads of mining runs: progress (the funnel of How2Everything Figure 2 per topic and
stage with the documents still in flight, yield, throughput, ETA, tokens and USD per stage
and model), and the documents a run rejected or failed, for tuning prompts. Planned
documents, ETA and projected cost count only the documents the run can actually sample
(mining/run_estimates.py has the estimates and their intervals). Yield and the stage pass
rates carry their n and a 95 % Wilson interval and count only decided documents
(``mining_yield``)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
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


def _funnel_cell(stage: str, documents: int, pending: int, sums: Counter[str], *, cancelled: bool = False) -> dict:
    """One stage of the funnel, from its ``sums`` (``_funnel_sums``). ``in_flight``: documents
    still being worked on that have not passed the stage yet (they may); of a ``cancelled``
    run they are ``not_asked`` instead (nothing will ask them); ``dropped``: rejected or failed
    at or before it. ``pass_rate``: passed / decided at this stage (passed or rejected by
    it), with its Wilson interval; ``undecided``: documents whose call at this stage had no
    usable answer (yet), left out of the rate."""
    reached, passed, rejected = sums["reached"], sums["passed"], sums["rejected"]
    unfinished = max(pending - sums["passed_pending"], 0)
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


def _funnel_sums(counted: RunCounted) -> tuple[dict[tuple[int, str], Counter[str]], Counter[str]]:
    """Per (topic, stage), the documents that reached the stage, passed it, passed it while
    still pending (the rest of the pending are in flight) and were rejected by it; and the
    outcomes of the stage calls."""
    sums: dict[tuple[int, str], Counter[str]] = defaultdict(Counter)
    outcomes: Counter[str] = Counter()
    for topic_id, stage, status, candidate_status, n in counted.funnel:
        cell = sums[(topic_id, stage)]
        cell["reached"] += n
        if status == PASSED:
            cell["passed"] += n
            if candidate_status == CandidateStatus.PENDING:
                cell["passed_pending"] += n
        elif status == REJECTED:
            cell["rejected"] += n
        outcomes[status] += n
    return sums, outcomes


def _status_yield(counts: Counter, cancelled: bool) -> dict[str, Any]:
    """``mining_yield`` of documents counted by status (a topic's or the whole run's)."""
    return mining_yield(
        procedures=counts[CandidateStatus.PASSED],
        rejected=counts[CandidateStatus.REJECTED],
        failed=counts[CandidateStatus.FAILED],
        in_flight=counts[CandidateStatus.PENDING],
        cancelled=cancelled,
    )


def _funnel_by_topic(
    topics: Sequence[Mapping[str, Any]], counted: RunCounted, sums: dict[tuple[int, str], Counter[str]], cancelled: bool
) -> list[dict[str, Any]]:
    """Each topic's funnel, with its documents, procedures and yield."""
    rows = []
    for topic in topics:
        counts = counted.per_topic_status[topic["id"]]
        documents, pending = sum(counts.values()), counts[CandidateStatus.PENDING]
        cells = [_funnel_cell(s, documents, pending, sums[(topic["id"], s)], cancelled=cancelled) for s in PIPELINE]
        rows.append(
            {
                "topic": topic["name"],
                "slug": topic["slug"],
                "documents": documents,
                "stages": cells,
                "procedures": counts[CandidateStatus.PASSED],
                "yield": _status_yield(counts, cancelled),
            }
        )
    return rows


def _funnel_total(
    topic_ids: list[int], by_status: Counter, sums: dict[tuple[int, str], Counter[str]], cancelled: bool
) -> list[dict[str, Any]]:
    """The run's funnel: every topic's stages added up."""
    sampled, pending = sum(by_status.values()), by_status[CandidateStatus.PENDING]
    return [
        _funnel_cell(s, sampled, pending, sum((sums[(t, s)] for t in topic_ids), Counter()), cancelled=cancelled)
        for s in PIPELINE
    ]


def _pace(run: MiningRun, remaining: int) -> dict[str, Any]:
    """Documents finished per minute over the last ``THROUGHPUT_WINDOW`` (or since the run
    started, when that is sooner), and the ETA of the ``remaining`` documents at that pace."""
    now = timezone.now()
    recent = MiningCandidate.objects.filter(run=run, finished_at__gte=now - THROUGHPUT_WINDOW).count()
    window_minutes = THROUGHPUT_WINDOW.total_seconds() / 60
    if run.started_at and now - run.started_at < THROUGHPUT_WINDOW:
        window_minutes = max((now - run.started_at).total_seconds() / 60, 1 / 60)
    eta = eta_estimate(remaining=remaining, finished_in_window=recent, window_minutes=window_minutes)
    return {
        "documents_per_minute": round(recent / window_minutes if recent else 0.0, 2),
        "eta_minutes": eta["minutes"],
        "eta_ci95_minutes": eta["ci95"],
        "eta_n": eta["n"],
    }


def _spending(
    stage_costs: list[dict[str, Any]], counted: RunCounted, *, planned: int, finished: int, over: bool
) -> dict[str, Any]:
    """What the run spent (unknown while a request has no price) and, for a run still going,
    the projected cost of its planned documents from what its finished documents cost."""
    spent = sum((row["cost_usd"] or Decimal(0) for row in stage_costs), Decimal(0))
    priced = all(row["cost_usd"] is not None for row in stage_costs if row["requests"])
    projection = {"usd": None, "ci95": None, "n": finished}
    if priced and not over:  # a finished run shows what it spent, not a projection
        # every finished document (one without stage results cost nothing), their costs' sums
        paid = [cost for status, cost in counted.costs.items() if status != CandidateStatus.PENDING]
        sums = CostSums(finished, sum((c.total for c in paid), Decimal(0)), sum((c.squares for c in paid), Decimal(0)))
        in_flight_paid = counted.costs[CandidateStatus.PENDING].total
        projection = cost_projection(spent=spent, planned=planned, finished=sums, in_flight_paid=in_flight_paid)
    return {
        "cost_usd": spent if priced else None,
        "requests_without_price": sum(row["n_unpriced"] for row in stage_costs),
        "projected_cost_usd": projection["usd"],
        "projected_ci95_usd": projection["ci95"],
        "projected_n": projection["n"],
    }


def mining_run_progress(run: MiningRun) -> dict[str, Any]:
    """The run page's progress (the API's and ``mine_run --status``'s too): the totals with
    yield, pace and cost, the funnel overall and by topic, the cost per stage and model, the
    outcomes of the stage calls and the reasons documents were rejected."""
    topics = list(run.topics.order_by("position", "name").values("id", "name", "slug"))
    topic_ids = [t["id"] for t in topics]
    counted = _run_counts(run)
    by_status: Counter[str] = Counter()
    for counts in counted.per_topic_status.values():
        by_status.update(counts)
    sums, outcomes = _funnel_sums(counted)
    # A cancelled run's unfinished documents are not in flight: nothing will ask them.
    cancelled = run.status == MiningRunStatus.CANCELLED
    pending = by_status[CandidateStatus.PENDING]
    finished = sum(by_status[s] for s in (CandidateStatus.PASSED, CandidateStatus.REJECTED, CandidateStatus.FAILED))
    planned = sum(_planned_per_topic(run, topic_ids, counted.per_topic_status, counted.available).values())
    over = run.status in FINISHED_STATUSES
    pace = _pace(run, remaining=0 if over else max(planned - finished, 0))
    stage_costs = _stage_costs(run)
    return {
        "run": run.name,
        "status": run.status,
        "pause_reason": run.pause_reason,
        "error": run.error,
        "totals": {
            "planned": planned,
            "sampled": sum(by_status.values()),
            "pending": 0 if cancelled else pending,
            "not_asked": pending if cancelled else 0,
            "finished": finished,
            "procedures": by_status[CandidateStatus.PASSED],
            "rejected": by_status[CandidateStatus.REJECTED],
            "failed": by_status[CandidateStatus.FAILED],
            "yield": _status_yield(by_status, cancelled),
            **pace,
            **_spending(stage_costs, counted, planned=planned, finished=finished, over=over),
            "budget_usd": run.budget_usd,
            "over": over,
            "cpu": _cpu(counted.cpu_us, counted.n_cpu),
        },
        "funnel": _funnel_total(topic_ids, by_status, sums, cancelled),
        "funnel_by_topic": _funnel_by_topic(topics, counted, sums, cancelled),
        "stage_costs": stage_costs,
        "outcomes": {
            status: outcomes[status]
            for status in (PASSED, REJECTED, "parse_failed", "truncated", "refused", "too_long", "api_error")
        },
        "rejection_reasons": [
            {"stage": stage, "reason": code, "documents": n}
            for (stage, code), n in sorted(counted.rejections.items(), key=_most_first)
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
