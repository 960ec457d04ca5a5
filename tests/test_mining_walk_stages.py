"""The six mining stages on one base (mining/walk_stages.py, issue 30): the base keeps a stored
result made from the same request and otherwise asks the stage to decide; a stage only says
what it asks and overrides ``decide``. The heuristics are a stage like the others: the walk
has no branch on a stage's name, and a stage put in the walk's list is taken like the six."""

from __future__ import annotations

import pytest

from mining.models import MiningCandidate, MiningRun, StageResult
from mining.run_claims import candidates_sample
from mining.run_services import mining_run_create
from mining.stages import PASSED, PIPELINE, REJECTED, Draft, HeuristicsStage, StageVerdict
from mining.walk_stages import Asked, Decision, HeuristicsWalkStage, LLMWalkStage, Walk, WalkStage
from mining.walker import Walker
from tests.scripted_miner import document_text
from tests.test_mining_runs import config, make_corpus, miner  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


class CountingStage(WalkStage):
    """Passes a draft unless its goal names ``reject``; counts its decisions."""

    name = "heuristics"

    def __init__(self) -> None:
        self.decided = 0

    def ask(self, draft: Draft) -> Asked:
        return Asked(f"goal:{draft.goal}")

    def decide(self, walk: Walk, draft: Draft, asked: Asked, existing: StageResult | None) -> Decision:
        self.decided += 1
        status = REJECTED if "reject" in draft.goal else PASSED
        return Decision(StageVerdict(status, "named" if status == REJECTED else "", draft), {"n": self.decided})


def _run_and_candidate() -> tuple[MiningRun, MiningCandidate]:
    corpus = make_corpus([("d0", "health", document_text("d0", "Stretch"))])
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    candidates_sample(run)
    return run, run.candidates.select_related("document").get()


def _walk(walker: Walker, candidate: MiningCandidate, stored: dict[str, StageResult]) -> Walk:
    return Walk(walker, candidate, stored, {})


def test_the_base_keeps_a_stored_result_of_the_same_request_and_asks_the_stage_otherwise(miner):
    run, candidate = _run_and_candidate()
    walker, stage = Walker(run), CountingStage()
    draft = Draft(document="text", goal="Stretch")

    walk = _walk(walker, candidate, {})
    verdict = stage.take(walk, draft)
    assert isinstance(verdict, StageVerdict) and verdict.passed and stage.decided == 1
    assert walk.pending["heuristics"]["request_key"] == "goal:Stretch"  # kept for the walk's write
    assert walk.pending["heuristics"]["answer"] == {"n": 1}

    def stored(key: str, status: str) -> dict[str, StageResult]:
        return {"heuristics": StageResult(stage="heuristics", request_key=key, status=status, reason="r", draft={})}

    kept = _walk(walker, candidate, stored("goal:Stretch", REJECTED))
    verdict = stage.take(kept, draft)
    assert isinstance(verdict, StageVerdict) and verdict.status == REJECTED and verdict.reason == "r"
    assert stage.decided == 1 and kept.pending == {}  # taken as stored: nothing decided, nothing to write

    for key, status in (("goal:Other", PASSED), ("goal:Stretch", "parse_failed")):  # another request; a failed call
        again = _walk(walker, candidate, stored(key, status))
        assert isinstance(stage.take(again, draft), StageVerdict)
        assert "heuristics" in again.pending
    assert stage.decided == 3
    walker.close()


def test_the_walk_takes_the_six_stages_in_order_and_a_stage_put_in_its_list_like_them(miner):
    run, candidate = _run_and_candidate()
    walker = Walker(run)
    assert [stage.name for stage in walker.stages] == list(PIPELINE)
    kinds = {stage.name: type(stage) for stage in walker.stages}
    assert kinds.pop("heuristics") is HeuristicsWalkStage
    assert set(kinds.values()) == {LLMWalkStage}

    # The walk itself knows no stage by name: a list of one counting stage is walked through.
    counting = CountingStage()
    walker.stages = [counting]
    assert walker.walk(candidate) == "passed" and counting.decided == 1
    result = StageResult.objects.get(candidate=candidate)
    assert (result.stage, result.request_key, result.answer) == ("heuristics", "goal:", {"n": 1})  # a new draft
    walker.close()


def test_the_heuristics_stage_decides_anew_when_its_settings_change_and_keeps_the_draft():
    draft = Draft(document="d", goal="Boil water", steps=("Fill the kettle.", "Switch it on.", "Wait.", "Pour."))
    loose = HeuristicsWalkStage(HeuristicsStage(min_steps=2, max_steps=15))
    strict = HeuristicsWalkStage(HeuristicsStage(min_steps=5, max_steps=15))
    assert loose.ask(draft).key == loose.ask(Draft(document="other", goal="Other goal", steps=draft.steps)).key
    assert loose.ask(draft).key != strict.ask(draft).key  # a changed setting is a new request
    stored = StageResult(stage="heuristics", request_key=loose.ask(draft).key, status=PASSED, draft={"goal": "old"})
    assert loose.stored_draft(stored, draft) is draft  # the key covers only the steps: the draft is today's
