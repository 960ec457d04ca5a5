"""One run lifecycle: every kind of run (generation, judge and components runs, goal-step
evaluations, CoScript runs, mining runs) goes through pause -> resume -> Retry failed ->
cancel by the same functions (``llm.run_lifecycle.run_control``, what the pages call) and
the same API controls, with the same statuses, the same pause reason in the same field,
the jobs it owns following it, and the same refusals (409 ``run_state``) where an action
does not apply."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.urls import reverse

from coscript.models import CoScriptRun
from goalstep.models import TaskEvaluation, TaskSet
from judging.models import ComponentsRun, GenerationRun, JudgeRun, LanguageModel
from llm.models import LLMJob
from llm.run_lifecycle import run_control
from llm.run_models import PAUSED_BY_USER, Run, RunStateConflict
from mining.models import Corpus, Document, MiningCandidate, MiningRun, Topic
from mining.stages import LLM_STAGES

pytestmark = pytest.mark.django_db

KEYS = ["k1", "k2"]  # two requests without an ok answer in the ledger: what Retry failed asks again


def _job(label: str) -> LLMJob:
    return LLMJob.objects.create(run=label, role="generate", requests=[], keys=KEYS, n_total=len(KEYS))


def _model() -> LanguageModel:
    return LanguageModel.objects.get_or_create(name="lifecycle-model")[0]


def _generation() -> GenerationRun:
    run = GenerationRun.objects.create(name="gen", language_model=_model(), prompt_file="p.txt", prompt_hash="h")
    run.llm_job = _job(f"generation-run:{run.pk}")
    run.save()
    return run


def _judge() -> JudgeRun:
    generation = GenerationRun.objects.create(name="g0", language_model=_model(), prompt_file="p", prompt_hash="h")
    run = JudgeRun.objects.create(
        name="judge", generation_run=generation, judge="how2judge", prompt_file="p", prompt_hash="h"
    )
    run.llm_job = _job(f"judge-run:{run.pk}")
    run.save()
    return run


def _components() -> ComponentsRun:
    generation = GenerationRun.objects.create(name="g1", language_model=_model(), prompt_file="p", prompt_hash="h")
    run = ComponentsRun.objects.create(
        name="components", generation_run=generation, extractor="llm:m@abc", prompt_file="p", prompt_hash="h"
    )
    run.llm_job = _job(f"components-run:{run.pk}")
    run.save()
    return run


def _evaluation() -> TaskEvaluation:
    task_set = TaskSet.objects.create(task="step_inference", split="bench")
    run = TaskEvaluation.objects.create(task_set=task_set, language_model=_model(), prompt_file="p", prompt_hash="h")
    run.llm_job = _job(f"goalstep-evaluation:{run.pk}")
    run.save()
    return run


def _coscript() -> CoScriptRun:
    run = CoScriptRun.objects.create(name="cos", language_model=_model(), abstract_ids=[1])
    run.goals_job = _job(f"coscript:{run.pk}:goals")
    run.save()
    return run


def _mining() -> MiningRun:
    """A run in a Batch API wave (its one job), with two documents whose stage call failed."""
    corpus = Corpus.objects.create(name="lifecycle")
    topic = Topic.objects.order_by("pk").first() or Topic.objects.create(name="Health", slug="health")
    stages = {stage: {"role": stage} for stage in LLM_STAGES}
    run = MiningRun.objects.create(name="mine", corpus=corpus, candidates_per_topic=2, executor="batch", stages=stages)
    for i in range(2):
        document = Document.objects.create(corpus=corpus, doc_id=f"d{i}", text=f"text {i}", topic=topic)
        MiningCandidate.objects.create(run=run, document=document, topic=topic, status="failed", failures=1)
    run.batch_job_ids = [_job(f"mining-run:{run.pk}").pk]
    run.save()
    return run


@dataclass(frozen=True)
class Kind:
    make: Callable[[], Run]
    basename: str  # the API's URL names


KINDS = {
    "generation": Kind(_generation, "generation-run"),
    "judge": Kind(_judge, "judge-run"),
    "components": Kind(_components, "components-run"),
    "goalstep": Kind(_evaluation, "goalstep-evaluation"),
    "coscript": Kind(_coscript, "coscript-run"),
    "mining": Kind(_mining, "mining-run"),
}

CANCELLED_REFUSAL = "a cancelled run cannot be resumed, paused or retried (start a new run)"
# (action, the run's status and pause reason after it; or the refusal it gets)
STEPS: list[tuple[str, Any]] = [
    ("pause", ("paused", PAUSED_BY_USER)),
    ("pause", "only a pending or running run can be paused"),
    ("resume", ("pending", "")),
    ("retry", "its failures are retried once it has stopped"),
    ("pause", ("paused", PAUSED_BY_USER)),
    ("retry", ("pending", "")),
    ("cancel", ("cancelled", "")),
    ("resume", CANCELLED_REFUSAL),
    ("pause", CANCELLED_REFUSAL),
    ("retry", CANCELLED_REFUSAL),
    ("cancel", CANCELLED_REFUSAL),
]
# What each status leaves the jobs the run owns in.
JOB_STATUS = {"paused": "paused", "pending": "pending", "cancelled": "cancelled"}


def _by_function(run: Run, action: str) -> tuple[int | None, str]:
    try:
        return run_control(type(run)._default_manager.get(pk=run.pk), action), ""
    except RunStateConflict as exc:
        return None, str(exc)


def _by_api(client, basename: str) -> Callable[[Run, str], tuple[int | None, str]]:
    def act(run: Run, action: str) -> tuple[int | None, str]:
        name = "retry-failed" if action == "retry" else action
        body = {"confirm": "yes"} if action == "cancel" else {}
        response = client.post(reverse(f"{basename}-{name}", args=[run.pk]), body, content_type="application/json")
        if response.status_code == 409:
            assert response.json()["code"] == "run_state"
            return None, response.json()["detail"]
        assert response.status_code == 200, response.content
        return response.json()["asked_again"] or 0, ""

    return act


@pytest.mark.parametrize("way", ["functions", "api"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_run_goes_through_one_lifecycle_with_the_same_refusals(kind, way, admin_client_):
    run = KINDS[kind].make()
    act = _by_function if way == "functions" else _by_api(admin_client_, KINDS[kind].basename)
    for action, expected in STEPS:
        asked, refusal = act(run, action)
        stored = type(run)._default_manager.get(pk=run.pk)
        if isinstance(expected, str):
            assert asked is None and expected in refusal, (action, refusal)
            continue
        assert refusal == "", (action, refusal)
        assert (stored.status, stored.pause_reason, stored.error) == (*expected, ""), action
        assert stored.reason == expected[1]
        assert {job.status for job in stored.owned_jobs()} == {JOB_STATUS[stored.status]}, action
        if action == "retry":
            # Two requests without an ok answer (a mining run: two failed documents, walked again).
            assert asked == 2
            if kind == "mining":
                assert not MiningCandidate.objects.filter(run_id=run.pk, status="failed").exists()


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_run_done_with_nothing_to_ask_again_stays_done(kind):
    run = KINDS[kind].make()
    type(run)._default_manager.filter(pk=run.pk).update(status="done")
    MiningCandidate.objects.all().delete()
    for job in run.owned_jobs():
        LLMJob.objects.filter(pk=job.pk).update(status="done", keys=[])
    if kind == "coscript":  # a finished CoScript run keeps its accepted failures in its report
        with pytest.raises(RunStateConflict, match="start a new run"):
            run_control(run, "retry")
    else:
        assert run_control(type(run)._default_manager.get(pk=run.pk), "retry") == 0
    assert type(run)._default_manager.get(pk=run.pk).status == "done"
    with pytest.raises(RunStateConflict, match="a finished run cannot be resumed"):
        run_control(run, "resume")
    with pytest.raises(RunStateConflict, match="a finished run has nothing to cancel"):
        run_control(run, "cancel")
