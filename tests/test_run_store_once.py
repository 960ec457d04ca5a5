"""Workers that finish a run's last shards together store its answers one after the other,
and the one that finds the run settled on a finished job stores nothing again
(llm/run_lifecycle.py, ``owned_run_execute``): the judge benchmark's two workers both stored
all 7,000 judgments at once before, each pass taking a core for seconds."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, connections

from judging.models import GenerationRun, JudgeRun, LanguageModel
from llm.models import LLMJob
from llm.run_lifecycle import owned_run_execute
from llm.run_models import RunStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("concurrent workers are proved on PostgreSQL (row locks): run with DATABASE_URL=postgres://...")


def _finished_judge_run() -> JudgeRun:
    model = LanguageModel.objects.get_or_create(name="store-once")[0]
    generation = GenerationRun.objects.create(name="g", language_model=model, prompt_file="p", prompt_hash="h")
    run = JudgeRun.objects.create(name="judge", generation_run=generation, judge="j", prompt_file="p", prompt_hash="h")
    job = LLMJob.objects.create(
        run=f"judge-run:{run.pk}", role="judge", requests=[], keys=[], n_total=0, status=LLMJob.Status.DONE
    )
    run.llm_job = job
    run.status = RunStatus.RUNNING
    run.save()
    return run


def test_two_workers_finishing_together_store_one_after_the_other_and_once(postgresql_only):
    run = _finished_judge_run()
    spans: list[tuple[float, float]] = []
    start = threading.Barrier(2)

    def collect(_run: Any) -> None:
        began = time.monotonic()
        time.sleep(0.4)  # a store that takes a while, as 7,000 judgments do
        spans.append((began, time.monotonic()))

    outcomes: list[str] = []

    def worker() -> None:
        try:
            mine = JudgeRun.objects.get(pk=run.pk)
            start.wait()
            outcomes.append(owned_run_execute(mine, collect=collect))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert outcomes == ["done", "done"]
    assert len(spans) == 1, f"stored {len(spans)} times"
    run.refresh_from_db()
    assert run.status == RunStatus.DONE


def test_a_store_for_a_run_not_settled_yet_happens_again():
    """The skip is only for a run settled on a finished job: a run whose job is still going
    (a worker that stops while another holds shards, or a paused job) stores each time."""
    run = _finished_judge_run()
    LLMJob.objects.filter(run=f"judge-run:{run.pk}").update(
        status=LLMJob.Status.PAUSED, pause_reason="paused by the user"
    )
    stores: list[str] = []
    for _ in range(2):
        JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
        owned_run_execute(JudgeRun.objects.get(pk=run.pk), collect=lambda r: stores.append(r.name))
    assert stores == ["judge", "judge"]
    run.refresh_from_db()
    assert run.status == RunStatus.PAUSED and run.pause_reason == "paused by the user"
