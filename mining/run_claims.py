"""Which documents a mining run walks next: the topic-stratified sample (How2Everything
§3.1), the claims that share a run's pending documents between workers (a lease; ``FOR
UPDATE SKIP LOCKED`` where the database has it), a claimed chunk read at once, and the
end of a run when nothing is left."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import timedelta

from django.db import connections, transaction
from django.db.models import Count, Q
from django.utils import timezone

from mining.constants import MINING_CLAIM_LEASE_SECONDS
from mining.models import CandidateStatus, MiningCandidate, MiningRun, MiningRunStatus, StageResult
from mining.run_counters import candidates_insert
from mining.walk_stages import LedgerView
from mining.walker import Walker


def _topic_order(run: MiningRun, topic_id: int, slug: str) -> list[int]:
    """The run's seeded order of a topic's documents (those present when the run was created)."""
    ids = list(run.documents_for_sampling([topic_id]).order_by("pk").values_list("pk", flat=True))
    random.Random(f"{run.seed}:{slug}").shuffle(ids)
    return ids


def candidates_sample(run: MiningRun) -> int:
    """Sample the next documents of every topic that needs more (How2Everything §3.1:
    topic-stratified sampling). A topic gets a new batch when none of its candidates is
    still pending, it has fewer procedures than ``desired_valid_per_topic`` and fewer
    candidates than ``candidates_per_topic``. Returns how many candidates were created."""
    with transaction.atomic():
        run = MiningRun.objects.select_for_update().get(pk=run.pk)
        stats = {
            row["topic_id"]: row
            for row in MiningCandidate.objects.filter(run=run)
            .values("topic_id")
            .annotate(
                n=Count("id"),
                pending=Count("id", filter=Q(status=CandidateStatus.PENDING)),
                passed=Count("id", filter=Q(status=CandidateStatus.PASSED)),
                rounds=Count("sample_round", distinct=True),
            )
        }
        per_topic: list[tuple[int, list[int], int]] = []
        for topic in run.topics.order_by("position", "name"):
            row = stats.get(topic.pk, {"n": 0, "pending": 0, "passed": 0, "rounds": 0})
            if row["pending"]:
                continue
            if run.desired_valid_per_topic and row["passed"] >= run.desired_valid_per_topic:
                continue
            room = run.candidates_per_topic - row["n"]
            if room <= 0:
                continue
            size = min(room, run.extract_batch_size or run.candidates_per_topic)
            ids = _topic_order(run, topic.pk, topic.slug)[row["n"] : row["n"] + size]
            if ids:
                per_topic.append((topic.pk, ids, row["rounds"]))
        # Interleave topics so that every topic advances at the same pace.
        new = []
        longest = max((len(ids) for _, ids, _ in per_topic), default=0)
        for i in range(longest):
            for topic_id, ids, sample_round in per_topic:
                if i < len(ids):
                    new.append(
                        MiningCandidate(run=run, document_id=ids[i], topic_id=topic_id, sample_round=sample_round)
                    )
        return candidates_insert(run.pk, new)


# -- online execution -----------------------------------------------------------------


def candidates_claim(run: MiningRun, token: str, n: int) -> list[int]:
    """Claim up to ``n`` pending documents nobody holds (or whose holder's lease ran out).
    Where the database locks rows (PostgreSQL), the free rows are taken with ``FOR UPDATE
    SKIP LOCKED``, so workers claiming at once take different documents instead of waiting
    for each other; the update checks again that each row is still free, and the caller
    reads back the rows that carry its token."""
    now = timezone.now()
    free = Q(claim="") | Q(claimed_at__lt=now - timedelta(seconds=MINING_CLAIM_LEASE_SECONDS))
    pending = MiningCandidate.objects.filter(run=run, status=CandidateStatus.PENDING).filter(free).order_by("id")
    if connections[pending.db].features.has_select_for_update_skip_locked:
        with transaction.atomic():
            ids = list(pending.select_for_update(skip_locked=True).values_list("id", flat=True)[:n])
            if ids:
                MiningCandidate.objects.filter(pk__in=ids).update(claim=token, claimed_at=now)
        return ids
    ids = list(pending.values_list("id", flat=True)[:n])
    if ids:
        MiningCandidate.objects.filter(pk__in=ids, status=CandidateStatus.PENDING).filter(free).update(
            claim=token, claimed_at=now
        )
    return ids


def candidates_release(token: str) -> None:
    MiningCandidate.objects.filter(claim=token).update(claim="", claimed_at=None)


@dataclass
class WorkItem:
    """A claimed candidate ready to walk: read with its chunk (its document, its stage
    results, the chunk's ledger lookup) and its share of the CPU the claim took."""

    candidate: MiningCandidate
    stored: dict[str, StageResult]
    ledger: LedgerView
    overhead_ms: float


def chunk_load(walker: Walker, token: str, ids: list[int]) -> list[WorkItem]:
    """The claimed candidates among ``ids`` (those carrying ``token``) with their documents
    and stage results, and one ledger lookup for the whole chunk: a few statements for the
    chunk instead of a few per document."""
    started = time.thread_time()
    candidates = list(
        MiningCandidate.objects.filter(pk__in=ids, claim=token, status=CandidateStatus.PENDING)
        .select_related("document", "document__corpus")
        .order_by("id")
    )
    stored: dict[int, dict[str, StageResult]] = {c.pk: {} for c in candidates}
    if candidates:
        for result in StageResult.objects.filter(candidate_id__in=list(stored)):
            stored[result.candidate_id][result.stage] = result
    pairs = [(c, stored[c.pk]) for c in candidates]
    view = walker.ledger_prefetch(pairs)
    share = (time.thread_time() - started) * 1000 / max(len(pairs), 1)
    return [WorkItem(candidate, results, view, share) for candidate, results in pairs]


def run_pause(run: MiningRun, reason: str) -> str:
    MiningRun.objects.filter(pk=run.pk, status=MiningRunStatus.RUNNING).update(
        status=MiningRunStatus.PAUSED, pause_reason=reason
    )
    return f"paused: {reason}"


def run_status(run_id: int) -> str | None:
    return MiningRun.objects.filter(pk=run_id).values_list("status", flat=True).first()


def run_finish_if_complete(run: MiningRun) -> bool:
    """Finish the run when nothing is pending and no topic needs more documents: ``done``
    when every document passed or was rejected, ``done_with_failures`` when some failed."""
    if MiningCandidate.objects.filter(run=run, status=CandidateStatus.PENDING).exists():
        return False
    if candidates_sample(run):
        return False
    failed = MiningCandidate.objects.filter(run=run, status=CandidateStatus.FAILED).exists()
    status = MiningRunStatus.DONE_WITH_FAILURES if failed else MiningRunStatus.DONE
    return bool(
        MiningRun.objects.filter(pk=run.pk, status=MiningRunStatus.RUNNING).update(
            status=status, finished_at=timezone.now(), n_retrying=0
        )
    )
