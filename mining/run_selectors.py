"""Reads of mining runs: progress (the funnel of How2Everything Figure 2 per topic and
stage, yield, throughput, ETA, tokens and USD per stage), and the documents a run
rejected or failed, for tuning prompts."""
from __future__ import annotations

from collections import Counter, defaultdict
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from llm.models import LedgerEntry
from mining.models import CandidateStatus, MiningCandidate, MiningRun, StageResult
from mining.stages import PASSED, PIPELINE, REJECTED, reason_code

# Documents finished in this window set the throughput (and so the ETA).
THROUGHPUT_WINDOW = timedelta(minutes=5)


def mining_run_list() -> QuerySet[MiningRun]:
    return MiningRun.objects.select_related("corpus").annotate(
        n_candidates=Count("candidates", distinct=True),
        n_passed=Count("candidates", filter=Q(candidates__status=CandidateStatus.PASSED), distinct=True),
    ).order_by("-id")


def _planned(run: MiningRun, n_topics: int) -> int:
    """Documents the run will take at most: the sampling budget of every topic."""
    return run.candidates_per_topic * n_topics


def mining_run_progress(run: MiningRun) -> dict[str, Any]:
    topics = list(run.topics.order_by("position", "name").values("id", "name", "slug"))
    by_status = Counter(dict(MiningCandidate.objects.filter(run=run).values_list("status").annotate(n=Count("id"))))
    per_topic_status: dict[int, Counter] = defaultdict(Counter)
    for topic_id, status, n in (MiningCandidate.objects.filter(run=run).values_list("topic_id", "status")
                                .annotate(n=Count("id"))):
        per_topic_status[topic_id][status] = n

    # The funnel: per topic and stage, how many documents reached the stage and passed it.
    reached: dict[tuple[int, str], int] = Counter()
    passed: dict[tuple[int, str], int] = Counter()
    outcome_counts: Counter = Counter()
    for topic_id, stage, status, n in (StageResult.objects.filter(run=run)
                                       .values_list("candidate__topic_id", "stage", "status").annotate(n=Count("id"))):
        reached[(topic_id, stage)] += n
        if status == PASSED:
            passed[(topic_id, stage)] += n
        outcome_counts[status] += n

    funnel_topics = []
    for topic in topics:
        sampled = sum(per_topic_status[topic["id"]].values())
        funnel_topics.append({
            "topic": topic["name"], "slug": topic["slug"], "documents": sampled,
            "stages": [{"stage": s, "reached": reached[(topic["id"], s)], "passed": passed[(topic["id"], s)]}
                       for s in PIPELINE],
            "procedures": per_topic_status[topic["id"]][CandidateStatus.PASSED],
        })
    funnel_total = [{"stage": s, "reached": sum(reached[(t["id"], s)] for t in topics),
                     "passed": sum(passed[(t["id"], s)] for t in topics)} for s in PIPELINE]

    finished = by_status[CandidateStatus.PASSED] + by_status[CandidateStatus.REJECTED] + by_status[CandidateStatus.FAILED]
    sampled = sum(by_status.values())
    planned = _planned(run, len(topics))
    now = timezone.now()
    recent = MiningCandidate.objects.filter(run=run, finished_at__gte=now - THROUGHPUT_WINDOW).count()
    started = run.started_at
    window_minutes = THROUGHPUT_WINDOW.total_seconds() / 60
    if started and now - started < THROUGHPUT_WINDOW:
        window_minutes = max((now - started).total_seconds() / 60, 1 / 60)
    per_minute = recent / window_minutes if recent else 0.0
    remaining = max(planned - finished, 0) if run.status not in ("done", "cancelled") else 0
    eta_minutes = remaining / per_minute if per_minute and remaining else None

    costs = list(LedgerEntry.objects.filter(run=run.ledger_run).values("stage").annotate(
        requests=Count("id"), tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), cost_usd=Sum("cost_usd")))
    by_stage = {row["stage"]: row for row in costs}
    spent = sum((row["cost_usd"] or Decimal(0) for row in costs), Decimal(0))
    priced = all(row["cost_usd"] is not None for row in costs)
    projected = spent * planned / finished if finished and priced else None

    rejections = Counter()
    for stage, reason, n in (MiningCandidate.objects.filter(run=run, status=CandidateStatus.REJECTED)
                             .values_list("stage", "reason").annotate(n=Count("id"))):
        rejections[(stage, reason_code(reason))] += n

    return {
        "run": run.name, "status": run.status, "pause_reason": run.pause_reason, "error": run.error,
        "totals": {
            "planned": planned, "sampled": sampled, "pending": by_status[CandidateStatus.PENDING],
            "finished": finished, "procedures": by_status[CandidateStatus.PASSED],
            "rejected": by_status[CandidateStatus.REJECTED], "failed": by_status[CandidateStatus.FAILED],
            "yield": by_status[CandidateStatus.PASSED] / finished if finished else None,
            "documents_per_minute": round(per_minute, 2), "eta_minutes": round(eta_minutes, 1) if eta_minutes else None,
            "cost_usd": spent if priced else None, "projected_cost_usd": projected,
            "budget_usd": run.budget_usd,
        },
        "funnel": funnel_total,
        "funnel_by_topic": funnel_topics,
        "stage_costs": [{"stage": s, "requests": by_stage.get(s, {}).get("requests", 0),
                         "tokens_in": by_stage.get(s, {}).get("tokens_in") or 0,
                         "tokens_out": by_stage.get(s, {}).get("tokens_out") or 0,
                         "cost_usd": by_stage.get(s, {}).get("cost_usd")} for s in PIPELINE if s != "heuristics"],
        "outcomes": {status: outcome_counts[status] for status in
                     (PASSED, REJECTED, "parse_failed", "truncated", "refused", "api_error")},
        "rejection_reasons": [{"stage": stage, "reason": code, "documents": n}
                              for (stage, code), n in sorted(rejections.items(), key=lambda kv: -kv[1])],
    }


def mining_candidate_list(*, run: MiningRun, status: str = "", stage: str = "", topic: str = "",
                          q: str = "") -> QuerySet[MiningCandidate]:
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
