"""The walk of one mining candidate through the six stages (How2Everything §3.2), and its
write. The stages are taken one after the other on one base (``mining/walk_stages.py``:
stored results made from the same request are kept, the others decided); a walk keeps its
stage results in memory and writes them, with the candidate's new state, in one
transaction when it ends (``Walker._write``): a killed worker loses the results of the
documents it was walking, whose answers the ledger still holds. How candidates reach a
walker is the runner's (``mining/run_claims.py``, ``mining/online_runner.py``,
``mining/waves.py``)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from llm.client import LLMClient
from llm.request import LLMResult
from llm.run_watch import RunWatch
from mining.models import CandidateStatus, MiningCandidate, MiningRun, Procedure, StageResult, Topic, procedure_identity
from mining.procedure_records import NO_TOPIC
from mining.run_counters import Budget, candidate_lock, document_written
from mining.stage_plans import StagePlan, stage_plans
from mining.stages import LLM_STAGE_CLASSES, PIPELINE, Draft, HeuristicsStage, StageVerdict, procedure_fields
from mining.walk_stages import HeuristicsWalkStage, LedgerView, NeedsKey, NeedsRequest, Walk, WalkStage, walk_stages


@dataclass
class Final:
    """How a walk leaves its candidate: its new status (None: still pending, asked again
    later), the stage and reason, the procedure it became."""

    status: str | None
    stage: str
    reason: str = ""
    procedure: Procedure | None = None
    failures: int | None = None


class Walker:
    """Takes one candidate through the stages (see the module docstring). A walk keeps its
    stage results in memory and writes them, with the candidate's new state, in one
    transaction when it ends (``_write``): a killed worker loses the results of the
    documents it was walking, whose answers the ledger still holds."""

    def __init__(
        self,
        run: MiningRun,
        *,
        plans: dict[str, StagePlan] | None = None,
        clients: dict[str, LLMClient] | None = None,
        budget: Budget | None = None,
    ):
        self.run = run
        self.plans = plans if plans is not None else stage_plans(run)
        self.clients = clients if clients is not None else {}
        self.heuristics = HeuristicsStage(min_steps=run.min_steps, max_steps=run.max_steps)
        self.budget = budget
        self.stop_reason: str | None = None
        self.watch = RunWatch()
        self.local = threading.local()  # per thread: CPU of its last write, counted with its next document
        self.no_topic_id: int | None = None

    @cached_property
    def stages(self) -> list[WalkStage]:
        """The stages a walk takes, in pipeline order (built on first use: a walker made only
        to write, with no plans, never needs them)."""
        return walk_stages(self.plans, HeuristicsWalkStage(self.heuristics), PIPELINE)

    def client(self, stage: str) -> LLMClient:
        plan = self.plans[stage]
        ident = f"{plan.endpoint.base_url}|{plan.endpoint.model}|{plan.endpoint.api_key}|{plan.limits}"
        if ident not in self.clients:
            self.clients[ident] = LLMClient(plan.endpoint, limits=plan.limits)
        return self.clients[ident]

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    # -- a chunk's ledger lookup ----------------------------------------------------------

    def ledger_prefetch(self, items: list[tuple[MiningCandidate, dict[str, StageResult]]]) -> LedgerView:
        """Look up, for a chunk of candidates, every request their walks would take from the
        ledger: dry walks advance each candidate as far as its stored results and the
        entries found so far answer, and the keys they stop at are looked up together, at
        most once per LLM stage. A fresh document costs one lookup for the chunk; one whose
        answers are all stored (a resumed or repeated run) at most one per stage."""
        view = LedgerView()
        todo = items
        for _ in range(len(LLM_STAGE_CLASSES) + 1):
            waiting: dict[str, list[tuple[MiningCandidate, dict[str, StageResult]]]] = {}
            for candidate, stored in todo:
                outcome = self.walk(candidate, stored=stored, ledger=view, dry=True)
                if isinstance(outcome, NeedsKey):
                    waiting.setdefault(outcome.key, []).append((candidate, stored))
            if not waiting:
                break
            view.add(list(waiting))
            todo = [item for key, group in waiting.items() if key in view.found for item in group]
        return view

    # -- one candidate --------------------------------------------------------------

    def walk(
        self,
        candidate: MiningCandidate,
        *,
        collect: bool = False,
        stored: dict[str, StageResult] | None = None,
        ledger: LedgerView | None = None,
        dry: bool = False,
        overhead_ms: float = 0.0,
    ) -> str | NeedsRequest | NeedsKey:
        """Advance a candidate as far as it goes. Returns its new status, ``"stopped"``
        (pause, cancel or budget: the candidate stays pending) or, in collect mode, the
        request it needs next. ``stored``: its stage results, when read with its chunk;
        ``ledger``: the chunk's ledger lookup; ``dry``: send and write nothing, return the
        first key the ledger view does not know (``NeedsKey``); ``overhead_ms``: the
        candidate's share of the CPU its chunk's claim took."""
        started = time.thread_time()
        if stored is None:
            stored = {r.stage: r for r in StageResult.objects.filter(candidate=candidate)}
        pending: dict[str, dict[str, Any]] = {}
        outcome, final = self._walk(Walk(self, candidate, stored, pending, collect=collect, ledger=ledger, dry=dry))
        if dry:
            return outcome
        cpu_ms = (time.thread_time() - started) * 1000 + overhead_ms + getattr(self.local, "carry_ms", 0.0)
        written = time.thread_time()
        self._write(candidate, stored, pending, final, cpu_ms=cpu_ms)
        self.local.carry_ms = (time.thread_time() - written) * 1000 if final is not None else 0.0
        return outcome

    def _walk(self, walk: Walk) -> tuple[Any, Final | None]:
        draft = Draft(document=walk.candidate.document.text)
        for stage in self.stages:
            taken = stage.take(walk, draft)
            if not isinstance(taken, StageVerdict):
                return taken
            if not taken.passed:
                return CandidateStatus.REJECTED, Final(CandidateStatus.REJECTED, stage.name, taken.reason)
            draft = taken.draft
        if walk.dry:
            return "complete", None
        procedure = self._procedure_store(walk.candidate, draft, walk.stored, walk.pending)
        return CandidateStatus.PASSED, Final(CandidateStatus.PASSED, PIPELINE[-1], procedure=procedure)

    def may_not_call(self) -> str | None:
        """``"stopped"`` when no new call may start (the run stopped, its budget is spent or
        the circuit breaker tripped), with the reason kept in ``stop_reason``."""
        if self.stop_reason is not None:
            return "stopped"
        if self.budget is not None and self.budget.reached():
            self.stop_reason = f"budget of {self.budget.cap} USD reached"
            return "stopped"
        if self.watch.tripped is not None:
            self.stop_reason = self.stop_reason or "circuit breaker"
            return "stopped"
        return None

    # -- storage ---------------------------------------------------------------------

    def fields(
        self,
        stage: str,
        verdict: StageVerdict,
        *,
        key: str,
        answer: Any,
        existing: StageResult | None,
        result: LLMResult | None = None,
    ) -> dict[str, Any]:
        """A stage result as it will be written. ``created_at``: when it was decided (a
        replaced result keeps the time of the one it replaces)."""
        plan = self.plans.get(stage)
        fields = dict(
            run_id=self.run.pk,
            status=verdict.status,
            reason=verdict.reason,
            answer=answer,
            draft={
                "goal": verdict.draft.goal,
                "steps": list(verdict.draft.steps),
                "resources": list(verdict.draft.resources),
            },
            request_key=key,
            prompt_hash=plan.prompt.sha256 if plan else "",
            model=plan.endpoint.model if plan else "",
            created_at=existing.created_at if existing is not None else timezone.now(),
        )
        if result is not None:
            fields.update(
                cached=result.cached,
                tokens_in=result.tokens_in,
                tokens_out=result.tokens_out,
                cost_usd=(result.cost_usd or 0) if not result.cached else 0,
                latency_ms=result.latency_ms,
            )
        else:
            fields.update(cached=False, tokens_in=0, tokens_out=0, cost_usd=0, latency_ms=0)
        return fields

    def fail(
        self, candidate: MiningCandidate, stage: str, result: LLMResult, key: str, pending: dict[str, dict[str, Any]]
    ) -> tuple[str, Final]:
        plan = self.plans[stage]
        pending[stage] = dict(
            run_id=self.run.pk,
            status=result.outcome,
            reason=result.error or result.outcome,
            answer={"text": result.text[:4000]} if result.text else None,
            draft={},
            request_key=key,
            prompt_hash=plan.prompt.sha256,
            model=plan.endpoint.model,
            cached=result.cached,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            cost_usd=(result.cost_usd or 0) if not result.cached else 0,
            latency_ms=result.latency_ms,
            created_at=timezone.now(),
        )  # a wave's retry asks again until an answer newer than this
        failures = candidate.failures + 1
        reason = f"{result.outcome}: {result.error}"
        if failures <= self.run.failure_retries:  # asked again later, not reusing the failed answer
            candidate.failures = failures
            return CandidateStatus.PENDING, Final(None, stage, reason, failures=failures)
        return CandidateStatus.FAILED, Final(CandidateStatus.FAILED, stage, reason, failures=failures)

    def _write(
        self,
        candidate: MiningCandidate,
        stored: dict[str, StageResult],
        pending: dict[str, dict[str, Any]],
        final: Final | None,
        *,
        cpu_ms: float,
    ) -> None:
        """Store what a walk decided in one transaction: its stage results (new or
        replacing earlier ones, one statement), the results of later stages a previous walk
        left (under other prompts or models), and the candidate's new state with the CPU
        the walk took. A walk that stopped (pause, cancel, budget, a wave's missing answer)
        writes its results and leaves the candidate as it is."""
        rows = [StageResult(candidate_id=candidate.pk, stage=stage, **fields) for stage, fields in pending.items()]
        if not rows and final is None:
            return
        with transaction.atomic():
            before = candidate_lock(candidate.pk)  # the run's counters move from this (mining/run_counters.py)
            if rows:
                StageResult.objects.bulk_create(
                    rows, update_conflicts=True, unique_fields=["candidate", "stage"], update_fields=STAGE_RESULT_FIELDS
                )
            if final is None:
                document_written(self.run.pk, before, pending)
                return
            fields: dict[str, Any] = dict(
                stage=final.stage,
                reason=final.reason,
                claim="",
                claimed_at=None,
                cpu_ms=Coalesce(F("cpu_ms"), Value(0.0)) + cpu_ms,
            )
            if final.failures is not None:
                fields["failures"] = final.failures
            stale: list[int] = []
            if final.status is not None:
                later = PIPELINE[PIPELINE.index(final.stage) + 1 :]
                stale = [r.pk for s, r in stored.items() if s in later and s not in pending]
                if stale:
                    StageResult.objects.filter(pk__in=stale).delete()
                previous = candidate.procedure_id
                if previous and (final.procedure is None or final.procedure.pk != previous):
                    _procedure_unlink(previous, self.run, candidate)
                    _procedure_discard(previous, self.run)
                fields.update(status=final.status, procedure=final.procedure, finished_at=timezone.now())
                if final.procedure is not None:  # the run produced it, whichever run stored it first
                    final.procedure.mining_runs.add(self.run)
            MiningCandidate.objects.filter(pk=candidate.pk).update(**fields)
            document_written(self.run.pk, before, pending, deleted=stale, final=final, cpu_ms=cpu_ms)
        if final.status is not None:
            candidate.status, candidate.procedure = final.status, final.procedure

    def _no_topic_id(self) -> int:
        """The topic of a procedure whose document has none (written back as ``""``)."""
        if self.no_topic_id is None:
            self.no_topic_id = Topic.objects.get(name=NO_TOPIC).pk  # made by mining_run_create
        return self.no_topic_id

    def _procedure_store(
        self,
        candidate: MiningCandidate,
        draft: Draft,
        stored: dict[str, StageResult],
        pending: dict[str, dict[str, Any]],
    ) -> Procedure:
        """The procedure a candidate became, with its provenance. A procedure's identity is
        its source id and goal: the same document and goal mined twice is stored once."""
        document = candidate.document
        answers = {
            s: pending[s]["answer"] if s in pending else stored[s].answer
            for s in PIPELINE
            if s in pending or s in stored
        }
        provenance = {
            "mining_run": self.run.name,
            "mining_run_id": self.run.pk,
            "corpus": document.corpus.name,
            "document_id": document.pk,
            "prompt_hashes": self.run.prompt_hashes(),
            "models": {s: p.endpoint.model for s, p in self.plans.items()},
            "processed_example": answers,
        }
        # Stored clean: stripped, no empty steps, each resource once (procedure_fields).
        topic_id = candidate.topic_id
        if self.run.pools_documents:  # the no-topics mode: the document's own topic, or none
            topic_id = document.topic_id or self._no_topic_id()
        procedure = Procedure(
            topic_id=topic_id,
            **procedure_fields(draft),
            source_example_id=document.doc_id,
            source_url=document.url,
            provenance=provenance,
        )
        procedure.identity = procedure_identity(document.doc_id, procedure.goal)
        # One statement: inserted, or (stored before, by this run or another, or by another
        # worker a moment ago) the stored one's id, its fields untouched.
        Procedure.objects.bulk_create(
            [procedure], update_conflicts=True, unique_fields=["identity"], update_fields=["identity"]
        )
        if procedure.pk is None:  # a database that does not return the row's id
            return Procedure.objects.get(identity=procedure.identity)
        return procedure


# The columns a stage result's upsert writes (all but its identity: candidate and stage).
STAGE_RESULT_FIELDS = [f.name for f in StageResult._meta.concrete_fields if f.name not in ("id", "candidate", "stage")]


def _procedure_unlink(procedure_id: int, run: MiningRun, candidate: MiningCandidate) -> None:
    """A re-walk no longer yields this procedure: it stops being one of this run's (unless
    another of the run's documents still became it)."""
    others = MiningCandidate.objects.filter(run=run, procedure_id=procedure_id, status=CandidateStatus.PASSED)
    if not others.exclude(pk=candidate.pk).exists():
        Procedure.mining_runs.through.objects.filter(procedure_id=procedure_id, miningrun_id=run.pk).delete()


def _procedure_discard(procedure_id: int, run: MiningRun) -> None:
    """A re-walk under changed prompts no longer yields this procedure: delete it when
    this run made it, no other run produced it and nothing refers to it (generations,
    study items); otherwise keep it."""
    procedure = Procedure.objects.filter(pk=procedure_id).first()
    if procedure is None or procedure.provenance.get("mining_run_id") != run.pk:
        return
    if procedure.mining_runs.exists():
        return
    for relation in procedure._meta.related_objects:
        accessor = relation.get_accessor_name()
        if relation.one_to_many and accessor and accessor != "+" and getattr(procedure, accessor).exists():
            return
    if MiningCandidate.objects.filter(procedure_id=procedure_id).exclude(run=run).exists():
        return
    procedure.delete()
