"""How a mining run executes: documents are claimed by workers in chunks and walked through
the six stages one after the other; a document's stage results and its new state are
written together when its walk ends.

* **Overlap.** A worker thread takes one document through all its stages before taking
  the next; with ``concurrency`` threads, documents sit at every stage at once, so the
  stages overlap and at most ``concurrency`` requests are in flight per worker.
* **Resume.** A document's walk starts from the beginning every time, but a stage whose
  stored result came from the same request (the ledger key of the rendered prompt,
  model, sampling parameters and schema; for the heuristics a hash of their input) is
  taken as stored. A killed worker therefore loses only the calls in flight, and the
  LLM ledger answers requests that finished but were not yet stored (a walk keeps its
  results in memory until it ends).
* **Changed prompts or models.** The same rule re-runs exactly the stage whose request
  changed and, where its answer changes their input, the stages after it.
* **Outcomes apart.** A stage either passes, rejects with its reason, or its call fails
  (``parse_failed``, ``truncated``, ``refused``, ``api_error``). A failed document is
  retried ``failure_retries`` times (asking again, not reusing the failed answer) and
  then listed as failed, never counted as rejected.
* **Claims.** Documents are claimed in chunks with a lease (``FOR UPDATE SKIP LOCKED``
  where the database has it), so several Celery tasks (``workers``) share a run without
  taking the same document; a dead worker's claims are released on resume or after the
  lease. A chunk is read at once: documents, stored stage results and one ledger lookup
  for the requests the chunk's walks will start with (``Walker.ledger_prefetch``).
* **CPU.** Each walk's thread CPU time is added to its document (``cpu_ms``), shown per
  document with its n on the run page.
* **Waves (Batch API, in-process vLLM).** With ``executor: batch``, or when a stage has
  an executor of its own (``stages.<stage>.executor: vllm_offline``: the model runs
  in-process on this machine's GPU), the walk collects the requests documents need next,
  sends them as one LLM job per stage with that stage's executor (``batch``,
  ``vllm_offline`` with the stage's engine options, or ``online`` for the other stages),
  and walks again when the answers are in the ledger. A run whose stages are all online
  keeps the threaded walk above."""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections, transaction
from django.db.models import Count, F, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from llm.call_watch import Interrupted
from llm.client import LLMClient
from llm.constants import EXECUTOR_ONLINE, EXECUTOR_VLLM_OFFLINE, OUTCOME_OK
from llm.endpoints import Endpoint, endpoint_from_overrides
from llm.ledger import ledger_lookup
from llm.limits import EndpointLimits, endpoint_limits_default
from llm.models import LedgerEntry, LedgerTotal, LLMJob
from llm.prompts import Prompt, prompt_read, prompts_dir_setting
from llm.request import LLMRequest, LLMResult
from llm.run_models import FINISHED
from llm.run_watch import RunWatch, breaker_message
from llm.sampling import sampling_params
from llm.worker_pool import WorkerPool
from mining.constants import (
    MINING_CLAIM_FACTOR,
    MINING_CLAIM_LEASE_SECONDS,
    MINING_STAGE_MAX_TOKENS,
    MINING_STATUS_CHECK_SECONDS,
    MINING_TEMPERATURE,
)
from mining.models import (
    CandidateStatus,
    MiningCandidate,
    MiningRun,
    MiningRunStatus,
    Procedure,
    StageResult,
    Topic,
    procedure_identity,
)
from mining.procedure_records import NO_TOPIC
from mining.run_configs import stage_prompt_path
from mining.run_counters import candidate_lock, candidates_insert, document_written
from mining.stage_schemas import PROMPT_PLACEHOLDERS, stage_schema
from mining.stages import (
    LLM_STAGE_CLASSES,
    PASSED,
    PIPELINE,
    REJECTED,
    Draft,
    HeuristicsStage,
    LLMStage,
    StageVerdict,
    procedure_fields,
)

GENUINE = (PASSED, REJECTED)  # stage outcomes; everything else is a failed call


@dataclass
class StagePlan:
    """How one LLM stage is asked in this run."""

    stage: LLMStage
    prompt: Prompt
    endpoint: Endpoint
    params: dict[str, Any]
    overrides: dict[str, str]
    mode: str = "chat"  # or "generate": the prompt as a plain completion (a reference config's vLLM mode)
    limits: EndpointLimits | None = None
    executor: str = EXECUTOR_ONLINE  # the stage's own, or the run's
    engine: dict[str, Any] | None = None  # vllm_offline: the options of vllm.LLM(...)

    def request(self, draft: Draft) -> LLMRequest:
        text = self.prompt.render(**self.stage.prompt_values(draft))
        schema = stage_schema(self.stage.name, self.prompt.text)  # the fields this prompt asks for
        engine = (self.engine or None) if self.executor == EXECUTOR_VLLM_OFFLINE else None
        if self.mode == "generate":
            return LLMRequest(
                stage=self.stage.name, messages=[], prompt=text, params=self.params, schema=schema, engine=engine
            )
        return LLMRequest(
            stage=self.stage.name,
            messages=[{"role": "user", "content": text}],
            params=self.params,
            schema=schema,
            engine=engine,
        )


def stage_overrides(spec: dict[str, Any]) -> dict[str, str]:
    return {k: spec[k] for k in ("base_url", "model", "api_key_env") if spec.get(k)}


def stage_endpoint(spec: dict[str, Any]) -> Endpoint:
    """The stage's endpoint; for an in-process vLLM stage the one its LLM jobs resolve (only
    the model is needed), so that the walk and the job key a request alike."""
    if spec.get("executor") == EXECUTOR_VLLM_OFFLINE:
        from llm.job_lifecycle import job_endpoint

        return job_endpoint(
            LLMJob(role=spec["role"], executor=EXECUTOR_VLLM_OFFLINE, endpoint_overrides=stage_overrides(spec))
        )
    return endpoint_from_overrides(spec["role"], stage_overrides(spec))


def stage_executor(run: MiningRun, spec: dict[str, Any]) -> str:
    """A stage's executor: its own (``stages.<stage>.executor``) or the run's."""
    return spec.get("executor") or run.executor


def run_uses_waves(run: MiningRun) -> bool:
    """Whether the run is executed in waves of LLM jobs (any stage not asked online)
    rather than by the threaded walk."""
    return any(stage_executor(run, run.stages[name]) != EXECUTOR_ONLINE for name in LLM_STAGE_CLASSES)


def stage_prompt(stage: str, spec: dict[str, Any]) -> Prompt:
    return prompt_read(
        stage_prompt_path(spec["prompt_file"], prompts_dir_setting()), expected=PROMPT_PLACEHOLDERS[stage], kind=stage
    )


def stage_sampling(stage: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A stage's ``temperature`` and ``max_tokens`` (llm/sampling.py): the configuration's
    ``stages.<stage>.temperature`` / ``max_tokens`` (a reference configuration always gives
    both) over the stage role's ``<PREFIX>_TEMPERATURE`` / ``<PREFIX>_MAX_TOKENS`` (or
    ``LLM_*``) over MINING_TEMPERATURE and the stage's MINING_STAGE_MAX_TOKENS. Resolved
    when the run is created or its stages change, and stored in its stage spec."""
    return sampling_params(
        spec.get("role") or stage,
        explicit={"temperature": spec.get("temperature"), "max_tokens": spec.get("max_tokens")},
        built_in={"temperature": MINING_TEMPERATURE, "max_tokens": MINING_STAGE_MAX_TOKENS[stage]},
    )


def stage_limits(spec: dict[str, Any]) -> EndpointLimits | None:
    """A stage's own requests and tokens per minute (a reference config's rate limits), if any."""
    if spec.get("requests_per_minute") is None and spec.get("tokens_per_minute") is None:
        return None
    default = endpoint_limits_default()
    return EndpointLimits(
        concurrency=default.concurrency,
        requests_per_minute=spec.get("requests_per_minute", default.requests_per_minute),
        tokens_per_minute=spec.get("tokens_per_minute", default.tokens_per_minute),
    )


def stage_plans(run: MiningRun) -> dict[str, StagePlan]:
    plans = {}
    for name, cls in LLM_STAGE_CLASSES.items():
        spec = run.stages[name]
        params = {**(spec.get("params") or {}), **stage_sampling(name, spec)}
        plans[name] = StagePlan(
            stage=cls(),
            prompt=stage_prompt(name, spec),
            endpoint=stage_endpoint(spec),
            params={k: v for k, v in params.items() if v is not None},
            overrides=stage_overrides(spec),
            mode=spec.get("mode") or "chat",
            limits=stage_limits(spec),
            executor=stage_executor(run, spec),
            engine=spec.get("engine") or None,
        )
    return plans


def heuristics_key(draft: Draft, stage: HeuristicsStage) -> str:
    payload = [
        list(draft.steps),
        stage.filter.min_steps,
        stage.filter.max_steps,
        sorted(stage.filter.thresholds.items()),
        stage.filter.normalisation,
    ]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


def _draft_from(result: StageResult, before: Draft) -> Draft:
    """The draft a stored stage result left behind."""
    return Draft(
        document=before.document,
        goal=result.draft.get("goal", before.goal),
        steps=tuple(result.draft.get("steps", before.steps)),
        resources=tuple(result.draft.get("resources", before.resources)),
    )


def _draft_dict(draft: Draft) -> dict[str, Any]:
    return {"goal": draft.goal, "steps": list(draft.steps), "resources": list(draft.resources)}


@dataclass
class NeedsRequest:
    """A walk in collect mode stopped at a stage whose answer is not in the ledger yet."""

    stage: str
    request: LLMRequest


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


@dataclass
class LedgerView:
    """What one lookup for a chunk of documents found in the ledger: the ``ok`` entry of
    each key that has one (the same rule as ``llm.ledger.ledger_lookup``: a failure is never
    an answer), and the keys that had none when it was asked."""

    found: dict[str, LedgerEntry] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)

    def knows(self, key: str) -> bool:
        return key in self.found or key in self.absent

    def add(self, keys: list[str]) -> None:
        """Look ``keys`` up in one statement (per 2,000 keys)."""
        for start in range(0, len(keys), 2000):
            part = keys[start : start + 2000]
            for entry in LedgerEntry.objects.filter(key__in=part, outcome=OUTCOME_OK).defer(
                "request", "response", "history"
            ):
                self.found[entry.key] = entry
        self.absent.update(k for k in keys if k not in self.found)


@dataclass
class NeedsKey:
    """A dry walk stopped at a request whose ledger entry it has not looked up yet."""

    key: str


@dataclass
class _Final:
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
        outcome, final = self._walk(candidate, stored, pending, collect=collect, ledger=ledger, dry=dry)
        if dry:
            return outcome
        cpu_ms = (time.thread_time() - started) * 1000 + overhead_ms + getattr(self.local, "carry_ms", 0.0)
        written = time.thread_time()
        self._write(candidate, stored, pending, final, cpu_ms=cpu_ms)
        self.local.carry_ms = (time.thread_time() - written) * 1000 if final is not None else 0.0
        return outcome

    def _walk(
        self,
        candidate: MiningCandidate,
        stored: dict[str, StageResult],
        pending: dict[str, dict[str, Any]],
        *,
        collect: bool,
        ledger: LedgerView | None,
        dry: bool,
    ) -> tuple[Any, _Final | None]:
        draft = Draft(document=candidate.document.text)
        fresh = False  # the last LLM stage was answered by a call of this walk
        for stage in PIPELINE:
            existing = stored.get(stage)
            if stage == "heuristics":
                key = heuristics_key(draft, self.heuristics)
                if existing is not None and existing.request_key == key:
                    verdict = StageVerdict(existing.status, existing.reason, draft)
                else:
                    verdict = self.heuristics.check(draft)
                    pending[stage] = self._fields(
                        stage,
                        verdict,
                        key=key,
                        existing=existing,
                        answer={"passed": verdict.passed, "reason": verdict.reason, **verdict.details},
                    )
            else:
                plan = self.plans[stage]
                request = plan.request(draft)
                key = request.key_for(plan.endpoint)
                if existing is not None and existing.request_key == key and existing.status in GENUINE:
                    verdict = StageVerdict(existing.status, existing.reason, _draft_from(existing, draft))
                    fresh = False
                else:
                    retry = existing is not None and existing.request_key == key  # a failed call: ask again
                    if retry and existing is not None and collect and plan.executor == EXECUTOR_VLLM_OFFLINE:
                        # Asked again in the next wave (there is no endpoint to ask at once): an
                        # answer written after the failure was stored is the new attempt's.
                        if (
                            ledger_lookup(key) is None
                            and not LedgerEntry.objects.filter(
                                key=key, run=self.run.ledger_run, created_at__gt=existing.created_at
                            ).exists()
                        ):
                            return NeedsRequest(stage, request), None
                        retry = False
                    if dry:
                        if ledger is None or not ledger.knows(key):
                            return NeedsKey(key), None
                        if key not in ledger.found:
                            return "unanswered", None
                        result: LLMResult | NeedsRequest | str = LLMResult.from_entry(ledger.found[key], cached=True)
                    else:
                        result = self._answer(
                            stage, request, key, retry=retry, collect=collect, ledger=ledger, after_fresh=fresh
                        )
                    if isinstance(result, (NeedsRequest, str)):
                        return result, None
                    fresh = not result.cached
                    if not result.ok:
                        if dry:
                            return "failed", None
                        return self._fail(candidate, stage, result, key, pending)
                    verdict = plan.stage.judge(result.value, draft)
                    pending[stage] = self._fields(
                        stage, verdict, key=key, answer=result.value, result=result, existing=existing
                    )
            if not verdict.passed:
                return CandidateStatus.REJECTED, _Final(CandidateStatus.REJECTED, stage, verdict.reason)
            draft = verdict.draft
        if dry:
            return "complete", None
        procedure = self._procedure_store(candidate, draft, stored, pending)
        return CandidateStatus.PASSED, _Final(CandidateStatus.PASSED, PIPELINE[-1], procedure=procedure)

    def _answer(
        self,
        stage: str,
        request: LLMRequest,
        key: str,
        *,
        retry: bool,
        collect: bool,
        ledger: LedgerView | None = None,
        after_fresh: bool = False,
    ) -> LLMResult | NeedsRequest | str:
        """The answer to a stage's request. With the chunk's ledger lookup (``ledger``), a
        key it found is answered from it, a key it found unanswered is sent without a
        second lookup, and so is a request that follows an answer this walk has just
        received (``after_fresh``): its prompt contains that answer, so the ledger can only
        hold it if another walk received the very same answer (a duplicate document) in
        the meantime — then it is asked again, as when two walks ask at the same moment."""
        if collect and not retry:
            # An ok answer from anywhere; a failure only when this run's batch produced it
            # (a failure left by another run is never an answer: it is asked again).
            entry = ledger_lookup(key) or LedgerEntry.objects.filter(key=key, run=self.run.ledger_run).first()
            if entry is None:
                return NeedsRequest(stage, request)
            return LLMResult.from_entry(entry, cached=entry.run != self.run.ledger_run)
        if ledger is not None and key in ledger.found:  # an ok answer found by the chunk's lookup
            return LLMResult.from_entry(ledger.found[key], cached=True)
        if self.stop_reason is not None:
            return "stopped"
        if self.budget is not None and self.budget.reached():
            self.stop_reason = f"budget of {self.budget.cap} USD reached"
            return "stopped"
        if self.watch.tripped is not None:
            self.stop_reason = self.stop_reason or "circuit breaker"
            return "stopped"
        try:
            known = ledger is not None and (after_fresh or key in ledger.absent)
            result = self.client(stage).complete(
                request,
                run=self.run.ledger_run,
                role=self.plans[stage].endpoint.role,
                watch=self.watch,
                known_unfinished=known,
            )
        except Interrupted:
            self.stop_reason = self.stop_reason or ("circuit breaker" if self.watch.tripped else "stopped")
            return "stopped"
        if self.budget is not None and not result.cached:
            self.budget.add(result.cost_usd)
        return result

    # -- storage ---------------------------------------------------------------------

    def _fields(
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
            draft=_draft_dict(verdict.draft),
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

    def _fail(
        self, candidate: MiningCandidate, stage: str, result: LLMResult, key: str, pending: dict[str, dict[str, Any]]
    ) -> tuple[str, _Final]:
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
            return CandidateStatus.PENDING, _Final(None, stage, reason, failures=failures)
        return CandidateStatus.FAILED, _Final(CandidateStatus.FAILED, stage, reason, failures=failures)

    def _write(
        self,
        candidate: MiningCandidate,
        stored: dict[str, StageResult],
        pending: dict[str, dict[str, Any]],
        final: _Final | None,
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


# -- sampling -----------------------------------------------------------------------


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


def _claim(run: MiningRun, token: str, n: int) -> list[int]:
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


def _release(token: str) -> None:
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


def _pause(run: MiningRun, reason: str) -> str:
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


class OnlineRunner:
    """One worker's share of a run: ``concurrency`` threads walking claimed documents. The
    documents are claimed in chunks (``concurrency × MINING_CLAIM_FACTOR`` at a time), each
    read with its stage results and the chunk's ledger lookup; a thread that sees fewer
    than ``concurrency`` documents left claims the next chunk before the others run dry."""

    def __init__(self, run: MiningRun):
        self.run = run
        self.token = uuid.uuid4().hex
        self.budget = Budget(run)
        self.walker = Walker(run, budget=self.budget)
        self.queue: deque[WorkItem] = deque()
        self.lock = threading.Lock()
        self.claim_lock = threading.Lock()
        self.dry_until = 0.0  # after a claim that found nothing free, no claim ahead before this

    def _refill(self) -> int:
        """Claim (or sample, then claim) the next chunk into the local queue. Called with
        ``claim_lock`` held; returns how many documents it added."""
        size = self.run.concurrency * MINING_CLAIM_FACTOR
        ids = _claim(self.run, self.token, size)
        if not ids and candidates_sample(self.run):
            ids = _claim(self.run, self.token, size)
        items = chunk_load(self.walker, self.token, ids) if ids else []
        if not items:
            self.dry_until = time.monotonic() + 0.5
            return 0
        with self.lock:
            self.queue.extend(items)
        return len(items)

    def next_item(self) -> WorkItem | None:
        """The next claimed candidate; claims more (or samples more) when the local queue
        runs low. None when there is no more work for this worker."""
        while True:
            if self.walker.stop_reason is not None:
                return None
            with self.lock:
                item = self.queue.popleft() if self.queue else None
                low = len(self.queue) < self.run.concurrency
            if item is not None:
                if low and time.monotonic() >= self.dry_until and self.claim_lock.acquire(blocking=False):
                    try:  # claim ahead, so the other threads never wait for a claim
                        self._refill()
                    finally:
                        self.claim_lock.release()
                return item
            with self.claim_lock:
                with self.lock:
                    if self.queue:
                        continue
                if self._refill():
                    continue
                # Nothing free: others still hold pending documents (a topic waits for its
                # batch to finish before it is sampled again), or the run is complete.
                if not MiningCandidate.objects.filter(run=self.run, status=CandidateStatus.PENDING).exists():
                    return None
            time.sleep(0.2)

    def work(self) -> None:
        """One thread of the pool: walk claimed documents until none is left or the run stops."""
        try:
            while True:
                item = self.next_item()
                if item is None:
                    return
                if (
                    self.walker.walk(
                        item.candidate, stored=item.stored, ledger=item.ledger, overhead_ms=item.overhead_ms
                    )
                    == "stopped"
                ):
                    return
        finally:
            connections.close_all()

    def _halt(self, reason: str) -> None:
        self.walker.stop_reason = self.walker.stop_reason or reason
        self.walker.watch.stop()  # calls waiting for a retry give up now

    def _tick(self) -> str | None:
        """About once a second, in the thread that owns the run: whether someone paused or
        cancelled it, the live fields of its page, what it has spent."""
        close_old_connections()
        status = run_status(self.run.pk)
        MiningRun.objects.filter(pk=self.run.pk).update(  # the worker's heartbeat (llm/runs.py, run_liveness)
            n_retrying=self.walker.watch.retrying,
            breaker=self.walker.watch.breaker.streak(),
            heartbeat_at=timezone.now(),
        )
        self.budget.refresh()
        if status != MiningRunStatus.RUNNING:
            return status or "gone"
        return self.walker.stop_reason  # the walk's own (budget, breaker): the pool halts with it

    def run_all(self) -> str:
        """``concurrency`` threads walking documents (llm/worker_pool.py), supervised by this one."""
        pool = WorkerPool(
            size=self.run.concurrency,
            name=f"mining-{self.run.pk}",
            tick_seconds=MINING_STATUS_CHECK_SECONDS,
            on_halt=self._halt,
        )
        try:
            pool.run(self.work, tick=self._tick)
        finally:
            _release(self.token)
            self.walker.close()
        return self.walker.stop_reason or "done"


def mining_run_work(run: MiningRun) -> str:
    """Execute one worker's share of an online run; the last worker to find nothing left
    marks the run done. Returns what happened."""
    runner = OnlineRunner(run)
    outcome = runner.run_all()
    MiningRun.objects.filter(pk=run.pk).update(n_retrying=0, breaker={})
    if runner.walker.watch.tripped is not None:
        record = runner.walker.watch.tripped
        MiningRun.objects.filter(pk=run.pk, status=MiningRunStatus.RUNNING).update(breaker=record)
        return _pause(run, breaker_message(record))
    if outcome.startswith("budget"):
        return _pause(run, outcome)
    if outcome != "done":
        return outcome
    return "done" if run_finish_if_complete(run) or run_status(run.pk) in FINISHED else "waiting for other workers"


# -- execution in waves (Batch API, in-process vLLM) ------------------------------------


def _wave_job_execute(run: MiningRun, job_id: int) -> str | None:
    """Execute one job of the wave. Returns what the step returns when the run cannot go
    on (``waiting…`` while a batch is out; ``paused: …`` when the job paused, failed, or
    its executor cannot run here), or None when the job is through."""
    from llm.services import llm_job_execute
    from llm.vllm_offline import ExecutorUnavailable

    try:
        outcome = llm_job_execute(job_id=job_id)
    except ExecutorUnavailable as exc:  # e.g. no vLLM on this machine: the job is failed with it
        return _pause(run, str(exc))
    if outcome.startswith("waiting"):
        return outcome
    job = LLMJob.objects.filter(pk=job_id).first()
    if job is not None and job.status == LLMJob.Status.PAUSED:
        return _pause(run, job.pause_reason or "an LLM job of the run paused")
    if job is not None and job.status == LLMJob.Status.FAILED:
        return _pause(run, f"LLM job {job.pk} failed: {job.error}")
    return None


class _Beat:
    """The heartbeat of a walk between waves (the wave's jobs beat on their own): the run's
    ``heartbeat_at``, renewed every few seconds (llm/runs.py, ``run_liveness``)."""

    def __init__(self, run: MiningRun):
        self.run_id = run.pk
        self.every = min(5.0, settings.LLM_JOB_LEASE_SECONDS / 4)
        self.last = time.monotonic()

    def __call__(self) -> None:
        if time.monotonic() - self.last >= self.every:
            MiningRun.objects.filter(pk=self.run_id).update(heartbeat_at=timezone.now())
            self.last = time.monotonic()


def mining_run_batch_step(run: MiningRun) -> str:
    """One step of a run executed in waves: wait for the current jobs; when they are done,
    walk every pending document as far as the ledger answers, and send what they need
    next as new jobs, one per stage with the stage's executor (``batch``, ``vllm_offline``
    with its engine options, ``online``). Returns ``waiting…`` while batches are out,
    ``paused: …`` when a job cannot go on, ``done`` at the end."""
    from llm.services import llm_job_create

    for job_id in run.batch_job_ids:
        job = LLMJob.objects.filter(pk=job_id).first()
        if job is None or job.status in (*FINISHED, LLMJob.Status.CANCELLED, LLMJob.Status.FAILED):
            continue
        if job.status == LLMJob.Status.PAUSED:
            return _pause(run, job.pause_reason)
        stop = _wave_job_execute(run, job.pk)
        if stop is not None:
            return stop
    budget = Budget(run)
    walker = Walker(run, budget=budget)
    beat = _Beat(run)
    try:
        while True:
            needed: dict[tuple[str, str], list[LLMRequest]] = {}
            seen: set[str] = set()
            candidates_sample(run)
            for candidate in (
                MiningCandidate.objects.filter(run=run, status=CandidateStatus.PENDING)
                .select_related("document", "document__corpus")
                .iterator(chunk_size=500)
            ):
                if run_status(run.pk) != MiningRunStatus.RUNNING:
                    return "stopped"
                beat()
                outcome = walker.walk(candidate, collect=True)
                if isinstance(outcome, NeedsRequest):
                    plan = walker.plans[outcome.stage]
                    key = outcome.request.key_for(plan.endpoint)
                    if key not in seen:
                        seen.add(key)
                        group = (outcome.stage, json.dumps(plan.overrides, sort_keys=True))
                        needed.setdefault(group, []).append(outcome.request)
                elif outcome == "stopped":
                    return _pause(run, walker.stop_reason or "stopped")
            if needed:
                remaining = None if run.budget_usd is None else max(Decimal(0), run.budget_usd - budget.spent)
                job_ids = []
                for (stage, _), requests in needed.items():
                    plan = walker.plans[stage]
                    job = llm_job_create(
                        run=run.ledger_run,
                        role=plan.endpoint.role,
                        requests=requests,
                        executor=plan.executor,
                        budget_usd=remaining,
                        concurrency=run.concurrency,
                        endpoint_overrides=plan.overrides,
                        start=False,
                    )
                    job_ids.append(job.pk)
                MiningRun.objects.filter(pk=run.pk).update(batch_job_ids=job_ids)
                run.batch_job_ids = job_ids
                for job_id in job_ids:
                    stop = _wave_job_execute(run, job_id)
                    if stop is not None:
                        return stop
                continue  # every job answered at once: walk again
            if run_finish_if_complete(run):
                return "done"
            if not MiningCandidate.objects.filter(run=run, status=CandidateStatus.PENDING).exists():
                return "done"
    finally:
        walker.close()


def mining_run_execute(*, run_id: int) -> str:
    """Execute (one worker's share of) a run. Returns what happened, for the task log."""
    with transaction.atomic():
        run = MiningRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            return "gone"
        if run.status not in (MiningRunStatus.PENDING, MiningRunStatus.RUNNING):
            return f"not active ({run.status})"
        run.status = MiningRunStatus.RUNNING
        run.started_at = run.started_at or timezone.now()
        run.heartbeat_at = timezone.now()  # its first beat; the work beats from here on
        run.save(update_fields=["status", "started_at", "heartbeat_at"])
    if not run_uses_waves(run):
        return mining_run_work(run)
    return mining_run_batch_step(run)
