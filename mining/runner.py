"""How a mining run executes: documents are claimed by workers and walked through the six
stages one after the other, each stage result committed as it happens.

* **Overlap.** A worker thread takes one document through all its stages before taking
  the next; with ``concurrency`` threads, documents sit at every stage at once, so the
  stages overlap and at most ``concurrency`` requests are in flight per worker.
* **Resume.** A document's walk starts from the beginning every time, but a stage whose
  stored result came from the same request (the ledger key of the rendered prompt,
  model, sampling parameters and schema; for the heuristics a hash of their input) is
  taken as stored. A killed worker therefore loses only the calls in flight, and the
  LLM ledger answers requests that finished but were not yet stored.
* **Changed prompts or models.** The same rule re-runs exactly the stage whose request
  changed and, where its answer changes their input, the stages after it.
* **Outcomes apart.** A stage either passes, rejects with its reason, or its call fails
  (``parse_failed``, ``truncated``, ``refused``, ``api_error``). A failed document is
  retried ``failure_retries`` times (asking again, not reusing the failed answer) and
  then listed as failed, never counted as rejected.
* **Claims.** Documents are claimed in small batches with a lease, so several Celery
  tasks (``workers``) share a run without taking the same document; a dead worker's
  claims are released on resume or after the lease.
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
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, close_old_connections, connections, transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from llm.client import Interrupted, LLMClient, LLMRequest, LLMResult, ledger_lookup
from llm.constants import EXECUTOR_ONLINE, EXECUTOR_VLLM_OFFLINE
from llm.endpoints import Endpoint, endpoint_from_overrides
from llm.limits import EndpointLimits, endpoint_limits_default
from llm.models import FINISHED, LedgerEntry
from llm.runs import RunWatch, breaker_message
from llm.prompts import Prompt, prompt_read, prompts_dir_setting
from mining.constants import (
    MINING_CLAIM_FACTOR,
    MINING_CLAIM_LEASE_SECONDS,
    MINING_STATUS_CHECK_SECONDS,
)
from mining.models import (
    CandidateStatus,
    MiningCandidate,
    MiningRun,
    MiningRunStatus,
    Procedure,
    StageResult,
    procedure_identity,
)
from mining.run_configs import stage_prompt_path
from mining.stage_schemas import PROMPT_PLACEHOLDERS, stage_schema
from mining.stages import (
    LLM_STAGE_CLASSES,
    PASSED,
    PIPELINE,
    REJECTED,
    Draft,
    HeuristicsStage,
    LLMStage,
    Verdict,
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
            return LLMRequest(stage=self.stage.name, messages=[], prompt=text, params=self.params,
                              schema=schema, engine=engine)
        return LLMRequest(stage=self.stage.name, messages=[{"role": "user", "content": text}], params=self.params,
                          schema=schema, engine=engine)


def stage_overrides(spec: dict[str, Any]) -> dict[str, str]:
    return {k: spec[k] for k in ("base_url", "model", "api_key_env") if spec.get(k)}


def stage_endpoint(spec: dict[str, Any]) -> Endpoint:
    """The stage's endpoint; for an in-process vLLM stage the one its LLM jobs resolve (only
    the model is needed), so that the walk and the job key a request alike."""
    if spec.get("executor") == EXECUTOR_VLLM_OFFLINE:
        from llm.models import LLMJob
        from llm.services import job_endpoint

        return job_endpoint(LLMJob(role=spec["role"], executor=EXECUTOR_VLLM_OFFLINE,
                                   endpoint_overrides=stage_overrides(spec)))
    return endpoint_from_overrides(spec["role"], stage_overrides(spec))


def stage_executor(run: MiningRun, spec: dict[str, Any]) -> str:
    """A stage's executor: its own (``stages.<stage>.executor``) or the run's."""
    return spec.get("executor") or run.executor


def run_uses_waves(run: MiningRun) -> bool:
    """Whether the run is executed in waves of LLM jobs (any stage not asked online)
    rather than by the threaded walk."""
    return any(stage_executor(run, run.stages[name]) != EXECUTOR_ONLINE for name in LLM_STAGE_CLASSES)


def stage_prompt(stage: str, spec: dict[str, Any]) -> Prompt:
    return prompt_read(stage_prompt_path(spec["prompt_file"], prompts_dir_setting()),
                       expected=PROMPT_PLACEHOLDERS[stage], kind=stage)


def stage_limits(spec: dict[str, Any]) -> EndpointLimits | None:
    """A stage's own requests and tokens per minute (a reference config's rate limits), if any."""
    if spec.get("requests_per_minute") is None and spec.get("tokens_per_minute") is None:
        return None
    default = endpoint_limits_default()
    return EndpointLimits(concurrency=default.concurrency,
                          requests_per_minute=spec.get("requests_per_minute", default.requests_per_minute),
                          tokens_per_minute=spec.get("tokens_per_minute", default.tokens_per_minute))


def stage_plans(run: MiningRun) -> dict[str, StagePlan]:
    plans = {}
    for name, cls in LLM_STAGE_CLASSES.items():
        spec = run.stages[name]
        params = {**(spec.get("params") or {}), "temperature": spec.get("temperature"),
                  "max_tokens": spec.get("max_tokens")}
        plans[name] = StagePlan(stage=cls(), prompt=stage_prompt(name, spec), endpoint=stage_endpoint(spec),
                                params={k: v for k, v in params.items() if v is not None},
                                overrides=stage_overrides(spec), mode=spec.get("mode") or "chat",
                                limits=stage_limits(spec), executor=stage_executor(run, spec),
                                engine=spec.get("engine") or None)
    return plans


def heuristics_key(draft: Draft, stage: HeuristicsStage) -> str:
    payload = [list(draft.steps), stage.filter.min_steps, stage.filter.max_steps,
               sorted(stage.filter.thresholds.items()), stage.filter.normalisation]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


def _draft_from(result: StageResult, before: Draft) -> Draft:
    """The draft a stored stage result left behind."""
    return Draft(document=before.document, goal=result.draft.get("goal", before.goal),
                 steps=tuple(result.draft.get("steps", before.steps)),
                 resources=tuple(result.draft.get("resources", before.resources)))


def _draft_dict(draft: Draft) -> dict[str, Any]:
    return {"goal": draft.goal, "steps": list(draft.steps), "resources": list(draft.resources)}


@dataclass
class NeedsRequest:
    """A walk in collect mode stopped at a stage whose answer is not in the ledger yet."""

    stage: str
    request: LLMRequest


class Budget:
    """What the run has paid (its ledger entries), checked before every new call."""

    def __init__(self, run: MiningRun):
        self.run = run
        self.cap = run.budget_usd
        self.lock = threading.Lock()
        self.refresh()

    def refresh(self) -> None:
        spent = LedgerEntry.objects.filter(run=self.run.ledger_run).aggregate(s=Sum("cost_usd"))["s"] or Decimal(0)
        with self.lock:
            self.spent = Decimal(spent)

    def add(self, amount: Decimal | None) -> None:
        if amount:
            with self.lock:
                self.spent += amount

    def reached(self) -> bool:
        return self.cap is not None and self.spent >= self.cap


class Walker:
    """Takes one candidate through the stages (see the module docstring)."""

    def __init__(self, run: MiningRun, *, plans: dict[str, StagePlan] | None = None,
                 clients: dict[str, LLMClient] | None = None, budget: Budget | None = None):
        self.run = run
        self.plans = plans if plans is not None else stage_plans(run)
        self.clients = clients if clients is not None else {}
        self.heuristics = HeuristicsStage(min_steps=run.min_steps, max_steps=run.max_steps)
        self.budget = budget
        self.stop_reason: str | None = None
        self.watch = RunWatch()

    def client(self, stage: str) -> LLMClient:
        plan = self.plans[stage]
        ident = f"{plan.endpoint.base_url}|{plan.endpoint.model}|{plan.endpoint.api_key}|{plan.limits}"
        if ident not in self.clients:
            self.clients[ident] = LLMClient(plan.endpoint, limits=plan.limits)
        return self.clients[ident]

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    # -- one candidate --------------------------------------------------------------

    def walk(self, candidate: MiningCandidate, *, collect: bool = False) -> str | NeedsRequest:
        """Advance a candidate as far as it goes. Returns its new status, ``"stopped"``
        (pause, cancel or budget: the candidate stays pending) or, in collect mode, the
        request it needs next."""
        stored = {r.stage: r for r in StageResult.objects.filter(candidate=candidate)}
        draft = Draft(document=candidate.document.text)
        for stage in PIPELINE:
            existing = stored.get(stage)
            if stage == "heuristics":
                key = heuristics_key(draft, self.heuristics)
                if existing is not None and existing.request_key == key:
                    verdict = Verdict(existing.status, existing.reason, draft)
                else:
                    verdict = self.heuristics.check(draft)
                    self._store(candidate, stage, verdict, key=key, exists=existing is not None, answer={
                        "passed": verdict.passed, "reason": verdict.reason, **verdict.details})
            else:
                plan = self.plans[stage]
                request = plan.request(draft)
                key = request.key_for(plan.endpoint)
                if existing is not None and existing.request_key == key and existing.status in GENUINE:
                    verdict = Verdict(existing.status, existing.reason, _draft_from(existing, draft))
                else:
                    retry = existing is not None and existing.request_key == key  # a failed call: ask again
                    if retry and collect and plan.executor == EXECUTOR_VLLM_OFFLINE:
                        # Asked again in the next wave (there is no endpoint to ask at once): an
                        # answer written after the failure was stored is the new attempt's.
                        if ledger_lookup(key) is None and not LedgerEntry.objects.filter(
                                key=key, run=self.run.ledger_run, created_at__gt=existing.created_at).exists():
                            return NeedsRequest(stage, request)
                        retry = False
                    result = self._answer(stage, request, key, retry=retry, collect=collect)
                    if isinstance(result, (NeedsRequest, str)):
                        return result
                    if not result.ok:
                        return self._fail(candidate, stage, result, key, stored)
                    verdict = plan.stage.judge(result.value, draft)
                    self._store(candidate, stage, verdict, key=key, answer=result.value, result=result,
                                exists=existing is not None)
            if not verdict.passed:
                self._finish(candidate, CandidateStatus.REJECTED, stage, verdict.reason, stored)
                return CandidateStatus.REJECTED
            draft = verdict.draft
        procedure = self._procedure_store(candidate, draft)
        self._finish(candidate, CandidateStatus.PASSED, PIPELINE[-1], "", stored, procedure=procedure)
        return CandidateStatus.PASSED

    def _answer(self, stage: str, request: LLMRequest, key: str, *, retry: bool,
                collect: bool) -> LLMResult | NeedsRequest | str:
        if collect and not retry:
            # An ok answer from anywhere; a failure only when this run's batch produced it
            # (a failure left by another run is never an answer: it is asked again).
            entry = ledger_lookup(key) or LedgerEntry.objects.filter(key=key, run=self.run.ledger_run).first()
            if entry is None:
                return NeedsRequest(stage, request)
            return LLMResult.from_entry(entry, cached=entry.run != self.run.ledger_run)
        if self.stop_reason is not None:
            return "stopped"
        if self.budget is not None and self.budget.reached():
            self.stop_reason = f"budget of {self.budget.cap} USD reached"
            return "stopped"
        if self.watch.tripped is not None:
            self.stop_reason = self.stop_reason or "circuit breaker"
            return "stopped"
        try:
            result = self.client(stage).complete(request, run=self.run.ledger_run,
                                                 role=self.plans[stage].endpoint.role, watch=self.watch)
        except Interrupted:
            self.stop_reason = self.stop_reason or ("circuit breaker" if self.watch.tripped else "stopped")
            return "stopped"
        if self.budget is not None and not result.cached:
            self.budget.add(result.cost_usd)
        return result

    # -- storage ---------------------------------------------------------------------

    def _store(self, candidate: MiningCandidate, stage: str, verdict: Verdict, *, key: str, answer: Any,
               exists: bool, result: LLMResult | None = None) -> None:
        plan = self.plans.get(stage)
        fields = dict(run_id=candidate.run_id, status=verdict.status, reason=verdict.reason, answer=answer,
                      draft=_draft_dict(verdict.draft), request_key=key,
                      prompt_hash=plan.prompt.sha256 if plan else "", model=plan.endpoint.model if plan else "")
        if result is not None:
            fields.update(cached=result.cached, tokens_in=result.tokens_in, tokens_out=result.tokens_out,
                          cost_usd=(result.cost_usd or 0) if not result.cached else 0, latency_ms=result.latency_ms)
        else:
            fields.update(cached=False, tokens_in=0, tokens_out=0, cost_usd=0, latency_ms=0)
        _stage_result_write(candidate, stage, fields, exists=exists)

    def _fail(self, candidate: MiningCandidate, stage: str, result: LLMResult, key: str,
              stored: dict[str, StageResult]) -> str:
        plan = self.plans[stage]
        _stage_result_write(candidate, stage, dict(
            run_id=candidate.run_id, status=result.outcome, reason=result.error or result.outcome,
            answer={"text": result.text[:4000]} if result.text else None, draft={}, request_key=key,
            prompt_hash=plan.prompt.sha256, model=plan.endpoint.model, cached=result.cached,
            tokens_in=result.tokens_in, tokens_out=result.tokens_out,
            cost_usd=(result.cost_usd or 0) if not result.cached else 0, latency_ms=result.latency_ms,
            created_at=timezone.now()),  # a wave's retry asks again until an answer newer than this
            exists=stage in stored)
        failures = candidate.failures + 1
        if failures <= self.run.failure_retries:  # asked again later, not reusing the failed answer
            MiningCandidate.objects.filter(pk=candidate.pk).update(
                failures=failures, stage=stage, reason=f"{result.outcome}: {result.error}", claim="", claimed_at=None)
            candidate.failures = failures
            return CandidateStatus.PENDING
        self._finish(candidate, CandidateStatus.FAILED, stage, f"{result.outcome}: {result.error}", stored,
                     failures=failures)
        return CandidateStatus.FAILED

    def _finish(self, candidate: MiningCandidate, status: str, stage: str, reason: str,
                stored: dict[str, StageResult], *, procedure: Procedure | None = None, failures: int | None = None) -> None:
        later = PIPELINE[PIPELINE.index(stage) + 1:]
        stale = [r.pk for s, r in stored.items() if s in later]
        with transaction.atomic():
            if stale:  # results of a previous walk under other prompts or models
                StageResult.objects.filter(pk__in=stale).delete()
            previous = MiningCandidate.objects.filter(pk=candidate.pk).values_list("procedure_id", flat=True).first()
            if previous and (procedure is None or procedure.pk != previous):
                _procedure_discard(previous, self.run)
            fields = dict(status=status, stage=stage, reason=reason, procedure=procedure, claim="", claimed_at=None,
                          finished_at=timezone.now())
            if failures is not None:
                fields["failures"] = failures
            MiningCandidate.objects.filter(pk=candidate.pk).update(**fields)

    def _procedure_store(self, candidate: MiningCandidate, draft: Draft) -> Procedure:
        """The procedure a candidate became, with its provenance. A procedure's identity is
        its source id and goal: the same document and goal mined twice is stored once."""
        document = candidate.document
        results = {r.stage: r for r in StageResult.objects.filter(candidate=candidate)}
        provenance = {
            "mining_run": self.run.name,
            "mining_run_id": self.run.pk,
            "corpus": document.corpus.name,
            "document_id": document.pk,
            "prompt_hashes": self.run.prompt_hashes(),
            "models": {s: p.endpoint.model for s, p in self.plans.items()},
            "processed_example": {s: results[s].answer for s in PIPELINE if s in results},
        }
        identity = procedure_identity(document.doc_id, draft.goal)
        existing = Procedure.objects.filter(identity=identity).first()
        if existing is not None:
            return existing
        # Stored clean: stripped, no empty steps, each resource once (procedure_fields).
        procedure = Procedure(topic_id=candidate.topic_id, **procedure_fields(draft), source_example_id=document.doc_id,
                              source_url=document.url, provenance=provenance)
        try:
            with transaction.atomic():
                procedure.save()
        except IntegrityError:  # another worker stored the same procedure a moment ago
            return Procedure.objects.get(identity=identity)
        return procedure


def _stage_result_write(candidate: MiningCandidate, stage: str, fields: dict[str, Any], *, exists: bool) -> None:
    """Store (or replace) one stage's result, committed at once. The candidate's own row
    is written when its walk ends, not after every stage."""
    if exists and StageResult.objects.filter(candidate=candidate, stage=stage).update(**fields):
        return
    try:
        with transaction.atomic():
            StageResult.objects.create(candidate=candidate, stage=stage, **fields)
    except IntegrityError:  # written a moment ago by a worker that took over the claim
        StageResult.objects.filter(candidate=candidate, stage=stage).update(**fields)


def _procedure_discard(procedure_id: int, run: MiningRun) -> None:
    """A re-walk under changed prompts no longer yields this procedure: delete it when
    this run made it and nothing refers to it (generations, study items); otherwise keep it."""
    procedure = Procedure.objects.filter(pk=procedure_id).first()
    if procedure is None or procedure.provenance.get("mining_run_id") != run.pk:
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
    ids = list(run.corpus.documents.filter(topic_id=topic_id, pk__lte=run.config.get("max_document_id", 0))
               .order_by("pk").values_list("pk", flat=True))
    random.Random(f"{run.seed}:{slug}").shuffle(ids)
    return ids


def candidates_sample(run: MiningRun) -> int:
    """Sample the next documents of every topic that needs more (How2Everything §3.1:
    topic-stratified sampling). A topic gets a new batch when none of its candidates is
    still pending, it has fewer procedures than ``desired_valid_per_topic`` and fewer
    candidates than ``candidates_per_topic``. Returns how many candidates were created."""
    with transaction.atomic():
        run = MiningRun.objects.select_for_update().get(pk=run.pk)
        stats = {row["topic_id"]: row for row in MiningCandidate.objects.filter(run=run).values("topic_id").annotate(
            n=Count("id"), pending=Count("id", filter=Q(status=CandidateStatus.PENDING)),
            passed=Count("id", filter=Q(status=CandidateStatus.PASSED)), rounds=Count("sample_round", distinct=True))}
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
            ids = _topic_order(run, topic.pk, topic.slug)[row["n"]:row["n"] + size]
            if ids:
                per_topic.append((topic.pk, ids, row["rounds"]))
        # Interleave topics so that every topic advances at the same pace.
        new = []
        longest = max((len(ids) for _, ids, _ in per_topic), default=0)
        for i in range(longest):
            for topic_id, ids, sample_round in per_topic:
                if i < len(ids):
                    new.append(MiningCandidate(run=run, document_id=ids[i], topic_id=topic_id, sample_round=sample_round))
        MiningCandidate.objects.bulk_create(new, batch_size=2000, ignore_conflicts=True)
        return len(new)


# -- online execution -----------------------------------------------------------------


def _claim(run: MiningRun, token: str, n: int) -> list[int]:
    now = timezone.now()
    free = Q(claim="") | Q(claimed_at__lt=now - timezone.timedelta(seconds=MINING_CLAIM_LEASE_SECONDS))
    ids = list(MiningCandidate.objects.filter(run=run, status=CandidateStatus.PENDING).filter(free)
               .order_by("id").values_list("id", flat=True)[:n])
    if not ids:
        return []
    MiningCandidate.objects.filter(pk__in=ids, status=CandidateStatus.PENDING).filter(free).update(
        claim=token, claimed_at=now)
    return list(MiningCandidate.objects.filter(pk__in=ids, claim=token).order_by("id").values_list("id", flat=True))


def _release(token: str) -> None:
    MiningCandidate.objects.filter(claim=token).update(claim="", claimed_at=None)


def _pause(run: MiningRun, reason: str) -> str:
    MiningRun.objects.filter(pk=run.pk, status=MiningRunStatus.RUNNING).update(
        status=MiningRunStatus.PAUSED, pause_reason=reason[:300])
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
    return bool(MiningRun.objects.filter(pk=run.pk, status=MiningRunStatus.RUNNING).update(
        status=status, finished_at=timezone.now(), n_retrying=0))


class OnlineRunner:
    """One worker's share of a run: ``concurrency`` threads walking claimed documents."""

    def __init__(self, run: MiningRun):
        self.run = run
        self.token = uuid.uuid4().hex
        self.budget = Budget(run)
        self.walker = Walker(run, budget=self.budget)
        self.queue: deque[int] = deque()
        self.lock = threading.Lock()
        self.claim_lock = threading.Lock()
        self.error: BaseException | None = None

    def next_id(self) -> int | None:
        """The next claimed candidate; claims more (or samples more) when the local queue is empty.
        None when there is no more work for this worker."""
        while True:
            if self.walker.stop_reason is not None:
                return None
            with self.lock:
                if self.queue:
                    return self.queue.popleft()
            with self.claim_lock:
                with self.lock:
                    if self.queue:
                        continue
                ids = _claim(self.run, self.token, self.run.concurrency * MINING_CLAIM_FACTOR)
                if not ids and candidates_sample(self.run):
                    ids = _claim(self.run, self.token, self.run.concurrency * MINING_CLAIM_FACTOR)
                if ids:
                    with self.lock:
                        self.queue.extend(ids)
                    continue
                # Nothing free: others still hold pending documents (a topic waits for its
                # batch to finish before it is sampled again), or the run is complete.
                if not MiningCandidate.objects.filter(run=self.run, status=CandidateStatus.PENDING).exists():
                    return None
            time.sleep(0.2)

    def work(self) -> None:
        try:
            while True:
                candidate_id = self.next_id()
                if candidate_id is None:
                    return
                candidate = MiningCandidate.objects.select_related("document", "document__corpus").get(pk=candidate_id)
                if candidate.status != CandidateStatus.PENDING:
                    continue
                if self.walker.walk(candidate) == "stopped":
                    return
        except BaseException as exc:  # a programming error: stop everyone, re-raised by run()
            with self.lock:
                self.error = self.error or exc
            self.walker.stop_reason = self.walker.stop_reason or "error"
        finally:
            connections.close_all()

    def run_all(self) -> str:
        threads = [threading.Thread(target=self.work, name=f"mining-{self.run.pk}-{n}", daemon=True)
                   for n in range(self.run.concurrency)]
        for thread in threads:
            thread.start()
        try:
            while any(t.is_alive() for t in threads):
                for thread in threads:
                    thread.join(timeout=MINING_STATUS_CHECK_SECONDS / len(threads))
                close_old_connections()
                status = run_status(self.run.pk)
                if status != MiningRunStatus.RUNNING:
                    self.walker.stop_reason = self.walker.stop_reason or (status or "gone")
                if self.walker.stop_reason is not None:
                    self.walker.watch.stop()  # calls waiting for a retry give up now
                MiningRun.objects.filter(pk=self.run.pk).update(n_retrying=self.walker.watch.retrying,
                                                                breaker=self.walker.watch.breaker.streak())
                self.budget.refresh()
        finally:
            _release(self.token)
            self.walker.close()
        if self.error is not None:
            raise self.error
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
    from llm.models import LLMJob
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


def mining_run_batch_step(run: MiningRun) -> str:
    """One step of a run executed in waves: wait for the current jobs; when they are done,
    walk every pending document as far as the ledger answers, and send what they need
    next as new jobs, one per stage with the stage's executor (``batch``, ``vllm_offline``
    with its engine options, ``online``). Returns ``waiting…`` while batches are out,
    ``paused: …`` when a job cannot go on, ``done`` at the end."""
    from llm.models import LLMJob
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
    try:
        while True:
            needed: dict[tuple[str, str], list[LLMRequest]] = {}
            seen: set[str] = set()
            candidates_sample(run)
            for candidate in (MiningCandidate.objects.filter(run=run, status=CandidateStatus.PENDING)
                              .select_related("document", "document__corpus").iterator(chunk_size=500)):
                if run_status(run.pk) != MiningRunStatus.RUNNING:
                    return "stopped"
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
                    job = llm_job_create(run=run.ledger_run, role=plan.endpoint.role, requests=requests,
                                         executor=plan.executor, budget_usd=remaining, concurrency=run.concurrency,
                                         endpoint_overrides=plan.overrides, start=False)
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
        run.save(update_fields=["status", "started_at"])
    if not run_uses_waves(run):
        return mining_run_work(run)
    return mining_run_batch_step(run)
