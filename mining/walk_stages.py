"""The stages as a mining walk takes them (``mining/walker.py``): the heuristics and the five
LLM stages are classes on one base, and the walk goes through them the same way.

The base (:class:`WalkStage`, ``take``) holds the rule every stage shares, resume: a stored
result made from the same request (its key: the rendered prompt, model, sampling and
schema of an LLM stage; a hash of the heuristics' input and settings) is taken as it is,
and otherwise the stage decides and its result is kept for the walk's write. A stage says
what it would ask (``ask``: the key, and the request of an LLM stage) and overrides
``decide``. Claims, chunks, the ledger lookup of a chunk, the kept and dropped-by-reason
counters (``mining/run_counters.py``) and the write are the walker's and the runner's,
the same for every stage."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llm.call_watch import Interrupted
from llm.constants import EXECUTOR_VLLM_OFFLINE, OUTCOME_OK
from llm.ledger import ledger_lookup
from llm.models import LedgerEntry
from llm.request import LLMRequest, LLMResult
from mining.models import MiningCandidate, StageResult
from mining.stage_plans import GENUINE, StagePlan
from mining.stages import Draft, HeuristicsStage, StageVerdict

if TYPE_CHECKING:
    from mining.walker import Final, Walker


@dataclass
class NeedsRequest:
    """A walk in collect mode stopped at a stage whose answer is not in the ledger yet."""

    stage: str
    request: LLMRequest


@dataclass
class NeedsKey:
    """A dry walk stopped at a request whose ledger entry it has not looked up yet."""

    key: str


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
class Walk:
    """One walk of one candidate: what it read, what it will write, how it is asked.
    ``collect``: stop at a request the ledger cannot answer (waves); ``ledger``: the chunk's
    lookup; ``dry``: send and write nothing; ``fresh``: the last LLM stage was answered by a
    call of this walk."""

    walker: Walker
    candidate: MiningCandidate
    stored: dict[str, StageResult]
    pending: dict[str, dict[str, Any]]
    collect: bool = False
    ledger: LedgerView | None = None
    dry: bool = False
    fresh: bool = False


@dataclass
class Asked:
    """What a stage would ask for a draft: the key its stored result is matched by."""

    key: str
    request: LLMRequest | None = None


@dataclass
class Decision:
    """A stage's verdict with the answer it came from (the stored result's ``answer``)."""

    verdict: StageVerdict
    answer: Any
    result: LLMResult | None = None


# What ends a walk before its last stage: the walk's outcome (a status, "stopped", or what a
# wave or a dry walk needs next) and, when the candidate's state changes, how; None while it
# stays as it is.
Stop = tuple["str | NeedsRequest | NeedsKey", "Final | None"]


class WalkStage:
    """One stage as a walk takes it. Subclasses say what they ask and override ``decide``."""

    name: str
    calls_model = False  # whether a stored result of this stage stands for a model's answer

    def ask(self, draft: Draft) -> Asked:
        raise NotImplementedError

    def decide(self, walk: Walk, draft: Draft, asked: Asked, existing: StageResult | None) -> Decision | Stop:
        raise NotImplementedError

    def stored_draft(self, existing: StageResult, draft: Draft) -> Draft:
        """The draft a stored result left behind."""
        return Draft(
            document=draft.document,
            goal=existing.draft.get("goal", draft.goal),
            steps=tuple(existing.draft.get("steps", draft.steps)),
            resources=tuple(existing.draft.get("resources", draft.resources)),
        )

    def take(self, walk: Walk, draft: Draft) -> StageVerdict | Stop:
        """The stage's verdict on ``draft``: its stored one when made from the same request,
        else a new one, kept for the walk's write. Or what ends the walk here."""
        existing = walk.stored.get(self.name)
        asked = self.ask(draft)
        if existing is not None and existing.request_key == asked.key and existing.status in GENUINE:
            if self.calls_model:
                walk.fresh = False
            return StageVerdict(existing.status, existing.reason, self.stored_draft(existing, draft))
        decided = self.decide(walk, draft, asked, existing)
        if not isinstance(decided, Decision):
            return decided
        walk.pending[self.name] = walk.walker.fields(
            self.name, decided.verdict, key=asked.key, answer=decided.answer, result=decided.result, existing=existing
        )
        return decided.verdict


class HeuristicsWalkStage(WalkStage):
    """The rule-based filter (How2Everything §3.2 (2)): decided here, no call."""

    name = "heuristics"

    def __init__(self, stage: HeuristicsStage):
        self.stage = stage

    def ask(self, draft: Draft) -> Asked:
        rules = self.stage.filter
        payload = [
            list(draft.steps),
            rules.min_steps,
            rules.max_steps,
            sorted(rules.thresholds.items()),
            rules.normalisation,
        ]
        return Asked(hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest())

    def stored_draft(self, existing: StageResult, draft: Draft) -> Draft:
        return draft  # the heuristics never change the draft; their key covers only its steps

    def decide(self, walk: Walk, draft: Draft, asked: Asked, existing: StageResult | None) -> Decision:
        verdict = self.stage.check(draft)
        return Decision(verdict, {"passed": verdict.passed, "reason": verdict.reason, **verdict.details})


class LLMWalkStage(WalkStage):
    """An LLM stage: its request is answered by the ledger or sent (``answer``), and the
    answer judged by the stage (``LLMStage.judge``). A failed call is never a verdict: the
    candidate is asked again later or listed as failed (``Walker.fail``)."""

    calls_model = True

    def __init__(self, plan: StagePlan):
        self.plan = plan
        self.name = plan.stage.name

    def ask(self, draft: Draft) -> Asked:
        request = self.plan.request(draft)
        return Asked(request.key_for(self.plan.endpoint), request)

    def decide(self, walk: Walk, draft: Draft, asked: Asked, existing: StageResult | None) -> Decision | Stop:
        key, request = asked.key, asked.request
        assert request is not None
        retry = existing is not None and existing.request_key == key  # a failed call: ask again
        if retry and existing is not None and walk.collect and self.plan.executor == EXECUTOR_VLLM_OFFLINE:
            # Asked again in the next wave (there is no endpoint to ask at once): an answer
            # written after the failure was stored is the new attempt's.
            if (
                ledger_lookup(key) is None
                and not LedgerEntry.objects.filter(
                    key=key, run=walk.walker.run.ledger_run, created_at__gt=existing.created_at
                ).exists()
            ):
                return NeedsRequest(self.name, request), None
            retry = False
        if walk.dry:
            if walk.ledger is None or not walk.ledger.knows(key):
                return NeedsKey(key), None
            if key not in walk.ledger.found:
                return "unanswered", None
            result: LLMResult | NeedsRequest | str = LLMResult.from_entry(walk.ledger.found[key], cached=True)
        else:
            result = self.answer(walk, request, key, retry=retry)
        if isinstance(result, (NeedsRequest, str)):
            return result, None
        walk.fresh = not result.cached
        if not result.ok:
            if walk.dry:
                return "failed", None
            return walk.walker.fail(walk.candidate, self.name, result, key, walk.pending)
        return Decision(self.plan.stage.judge(result.value, draft), result.value, result)

    def answer(self, walk: Walk, request: LLMRequest, key: str, *, retry: bool) -> LLMResult | NeedsRequest | str:
        """The answer to the stage's request. With the chunk's ledger lookup, a key it found
        is answered from it, a key it found unanswered is sent without a second lookup, and
        so is a request that follows an answer this walk has just received (``walk.fresh``):
        its prompt contains that answer, so the ledger can only hold it if another walk
        received the very same answer (a duplicate document) in the meantime — then it is
        asked again, as when two walks ask at the same moment."""
        walker, ledger = walk.walker, walk.ledger
        if walk.collect and not retry:
            # An ok answer from anywhere; a failure only when this run's batch produced it
            # (a failure left by another run is never an answer: it is asked again).
            entry = ledger_lookup(key) or LedgerEntry.objects.filter(key=key, run=walker.run.ledger_run).first()
            if entry is None:
                return NeedsRequest(self.name, request)
            return LLMResult.from_entry(entry, cached=entry.run != walker.run.ledger_run)
        if ledger is not None and key in ledger.found:  # an ok answer found by the chunk's lookup
            return LLMResult.from_entry(ledger.found[key], cached=True)
        stop = walker.may_not_call()
        if stop is not None:
            return stop
        try:
            known = ledger is not None and (walk.fresh or key in ledger.absent)
            result = walker.client(self.name).complete(
                request,
                run=walker.run.ledger_run,
                role=self.plan.endpoint.role,
                watch=walker.watch,
                known_unfinished=known,
            )
        except Interrupted:
            walker.stop_reason = walker.stop_reason or ("circuit breaker" if walker.watch.tripped else "stopped")
            return "stopped"
        if walker.budget is not None and not result.cached:
            walker.budget.add(result.cost_usd)
        return result


def walk_stages(
    plans: dict[str, StagePlan], heuristics: HeuristicsWalkStage, order: tuple[str, ...]
) -> list[WalkStage]:
    """The stages of a walk in pipeline ``order``: the heuristics at their place, an LLM
    stage with the run's plan for each of the others."""
    return [heuristics if name == heuristics.name else LLMWalkStage(plans[name]) for name in order]
