"""Runs cut into shards (llm/shards.py): any number of workers claim the shards of a
generation or judge run with a lease, a killed worker's shard is taken over once its lease
ran out, nothing answered is sent twice and nothing is lost; the run's state adds up its
shards, and pause, cancel, resume and Retry failed act on all of them."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from celery import Celery
from django.urls import reverse

from judging.models import Generation, Judgment
from judging.services import (
    generation_run_create,
    generation_run_execute,
    judge_run_create,
    judge_run_execute,
    language_model_register,
    run_cancel,
    run_pause,
    run_resume,
    run_retry_failed,
)
from llm.models import LedgerEntry, LLMJob
from llm.runs import owned_run_state
from tests.scripted_llm import Reply, ScriptedLLM, last_user_message
from tests.services import celery_worker
from tests.test_llm_workers import _database_url, _wait

pytestmark = pytest.mark.django_db(transaction=True)

N_PROCEDURES = 17  # the demo's bench split


def _steps_answer(body):
    import re

    n = int(re.findall(r"(?:exactly |Exactly |return exactly )(\d+) steps", last_user_message(body))[-1])
    return Reply("\n".join(f"{i}. Do part {i} of the task." for i in range(1, n + 1)))


def _answer(body):
    if body.get("response_format"):
        return Reply(json.dumps({"reasoning": "Equivalent.", "critical_failures": []}))
    return _steps_answer(body)


def _point_roles_at(settings, server: ScriptedLLM) -> None:
    roles = dict(settings.LLM_ROLES)
    for role in ("generate", "how2score_judge"):
        roles[role] = {
            "base_url": server.base_url,
            "api_key": "k",
            "model": "scripted-model",
            "temperature": None,
            "max_tokens": None,
        }
    settings.LLM_ROLES = roles
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01


def _generations(name: str = "sharded"):
    model = language_model_register(name=name)
    run = generation_run_create(name=f"{name}-bench", language_model=model, start=False)
    assert generation_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    return run


@pytest.fixture
def sharded(settings, demo):
    settings.LLM_SHARD_REQUESTS = 6
    with ScriptedLLM() as server:
        _point_roles_at(settings, server)
        server.default = _answer
        yield server


def test_a_run_larger_than_a_shard_is_cut_into_shards_and_one_task_executes_them_all(sharded):
    run = _generations()  # executed in this process: one task takes every shard in turn
    shards = list(run.llm_job.shards.order_by("shard_index"))
    assert [s.n_total for s in shards] == [6, 6, 5] and sum((s.keys for s in shards), []) == run.llm_job.keys
    assert all(s.status == "done" and s.run == run.llm_job.run for s in shards)
    assert run.status == "done" and run.llm_job.status == "done" and run.generations.count() == N_PROCEDURES
    sent = Counter(last_user_message(b) for b in sharded.chat_requests())
    assert len(sent) == N_PROCEDURES and set(sent.values()) == {1}
    state = owned_run_state(run)
    assert state["outcomes"]["ok"] == N_PROCEDURES and state["n_total"] == N_PROCEDURES
    assert [w["shard"] for w in state["workers"]] == [0, 1, 2]
    assert all(w["n_done"] == w["n_total"] and w["worker"] for w in state["workers"])


def test_a_judge_run_stores_each_shards_judgments_as_the_shard_ends(sharded, monkeypatch):
    """Each shard's judgments are stored as soon as the shard is through, while the next is
    asked; the store at the end finds nothing left to store."""
    from judging import services

    generations = _generations()
    run = judge_run_create(name="judge-by-shard", generation_run=generations, judge="j", start=False)
    stores: list[tuple[int | None, int, int]] = []
    collect = services.judge_run_collect

    def recording(run, shard=None):
        stored = collect(run, shard=shard)
        stores.append((None if shard is None else shard.shard_index, stored, run.judgments.count()))
        return stored

    monkeypatch.setattr(services, "judge_run_collect", recording)
    assert judge_run_execute(run_id=run.pk) == "done"
    assert stores == [(0, 6, 6), (1, 6, 12), (2, 5, 17), (None, 0, 17)]
    judged = list(run.judgments.order_by("generation_id").values_list("generation_id", flat=True))
    assert judged == sorted(generations.generations.values_list("id", flat=True))


def test_a_small_run_is_not_cut(sharded, settings):
    settings.LLM_SHARD_REQUESTS = 500
    run = _generations()
    assert run.llm_job is not None
    assert not run.llm_job.shards.exists() and run.status == "done"
    assert owned_run_state(run)["workers"] == []


def test_pause_cancel_and_resume_act_on_every_shard(sharded):
    generations = _generations()
    run = judge_run_create(name="judge-pause", generation_run=generations, judge="j", start=False)
    assert run.llm_job is not None
    assert run.llm_job.shards.count() == 3
    run_pause(run=run)
    assert set(run.llm_job.shards.values_list("status", flat=True)) == {"paused"}
    assert judge_run_execute(run_id=run.pk).startswith("not active")
    assert not [b for b in sharded.chat_requests() if b.get("response_format")]  # nothing asked while paused
    run.refresh_from_db()
    run_resume(run=run)
    assert set(run.llm_job.shards.values_list("status", flat=True)) == {"pending"}
    assert judge_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    assert run.status == "done" and run.judgments.count() == N_PROCEDURES

    other = judge_run_create(name="judge-cancel", generation_run=generations, judge="k", start=False)
    run_cancel(run=other)
    assert other.llm_job is not None
    assert set(other.llm_job.shards.values_list("status", flat=True)) == {"cancelled"}


def test_a_failing_shard_makes_the_run_done_with_failures_and_retry_failed_asks_only_those(sharded):
    generations = _generations()
    asked_to_fail = {g.procedure.goal for g in generations.generations.select_related("procedure").order_by("id")[7:9]}

    def answer(body):
        if body.get("response_format") and any(goal in body["messages"][0]["content"] for goal in asked_to_fail):
            return Reply("I think this procedure is fine overall.")  # never JSON, even when re-asked
        return _answer(body)

    sharded.default = answer
    run = judge_run_create(name="judge-fail", generation_run=generations, judge="j", start=False)
    assert run.llm_job is not None
    judge_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "done_with_failures"
    state = owned_run_state(run)
    assert state["outcomes"]["ok"] == N_PROCEDURES - 2 and state["n_failed"] == 2
    assert sorted(run.llm_job.shards.values_list("status", flat=True)) == ["done", "done", "done_with_failures"]

    sharded.default = _answer
    before = len(sharded.chat_requests())
    assert run_retry_failed(run=run) == 2
    assert list(run.llm_job.shards.order_by("shard_index").values_list("status", flat=True)) == [
        "done",
        "pending",
        "done",
    ]
    assert judge_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    assert run.status == "done" and len(sharded.chat_requests()) - before == 2
    assert run.judgments.filter(outcome="ok").count() == N_PROCEDURES


def test_the_run_page_shows_the_workers_at_work(sharded, admin_client):
    generations = _generations()
    page = admin_client.get(reverse("generation_run_detail", args=[generations.pk])).content.decode()
    assert f'id="generation-{generations.pk}-workers"' in page and page.count('class="run-shard"') == 3
    assert page.count("6 of 6") == 2 and "5 of 5" in page


# -- real worker processes ----------------------------------------------------------


def _broker(folder) -> Celery:
    """A Celery client on this test's own embedded broker (the workers' VAR_DIR), so no
    other test's workers take its tasks and the tasks the workers send back reach them."""
    queue, processed = folder / "celery" / "queue", folder / "celery" / "processed"
    for path in (queue, processed):
        path.mkdir(parents=True, exist_ok=True)
    client = Celery("test-shards", broker="filesystem://", set_as_current=False)
    client.conf.broker_transport_options = {
        "data_folder_in": str(queue),
        "data_folder_out": str(queue),
        "processed_folder": str(processed),
        "store_processed": False,
    }
    return client


@pytest.mark.integration
def test_three_shards_over_two_workers_one_killed_mid_shard_ends_done_with_every_request_answered_once(
    sharded, settings, tmp_path
):
    generations = _generations("workers")
    sharded.latency = 0.4
    var = tmp_path / "var"
    env = {
        "LLM_BASE_URL": sharded.base_url,
        "LLM_MODEL": "scripted-model",
        "LLM_API_KEY": "k",
        "DATABASE_URL": _database_url(),
        "LLM_JOB_LEASE_SECONDS": "3",
        "LLM_SHARD_REQUESTS": "6",
        "LLM_BACKOFF_BASE_SECONDS": "0.01",
        "VAR_DIR": str(var),
    }
    run = judge_run_create(name="judge-workers", generation_run=generations, judge="j", concurrency=2, start=False)
    job = run.llm_job
    assert job is not None
    shards = list(job.shards.order_by("shard_index"))
    assert len(shards) == 3
    judge_requests = lambda: [b for b in sharded.chat_requests() if b.get("response_format")]  # noqa: E731
    client = _broker(var)
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    try:
        with celery_worker(first_dir, env=env) as first, celery_worker(second_dir, env=env) as second:
            for _ in range(3):  # what judge_run_create sends: one task per shard
                client.send_task("judging.judge_run_execute", args=[run.pk])

            def first_is_mid_shard() -> bool:
                for shard in LLMJob.objects.filter(parent=job, worker__endswith=f"pid {first.pid}", status="running"):
                    done = LedgerEntry.objects.filter(key__in=shard.keys).count()
                    if 2 <= done < shard.n_total:
                        return True
                return False

            _wait(first_is_mid_shard, 90, "the first worker to be half-way through a shard")
            first.kill()  # SIGKILL: its claim stays behind until the lease runs out
            first.wait()
            answered_before_kill = set(LedgerEntry.objects.filter(key__in=job.keys).values_list("key", flat=True))
            held = LLMJob.objects.get(parent=job, worker__endswith=f"pid {first.pid}", status="running")
            assert len(answered_before_kill) < N_PROCEDURES

            _wait(lambda: _status(run.pk) == "done", 120, "the run to finish on the second worker")
            taken_over = LLMJob.objects.get(pk=held.pk)
            assert taken_over.status == "done" and taken_over.worker.endswith(f"pid {second.pid}")
    finally:
        client.close()

    run.refresh_from_db()
    assert run.llm_job is not None
    assert run.status == "done" and run.llm_job.status == "done"
    # Nothing lost: one ok ledger entry and one judgment for every request.
    entries = LedgerEntry.objects.filter(key__in=job.keys)
    assert entries.count() == N_PROCEDURES and set(entries.values_list("outcome", flat=True)) == {"ok"}
    assert Judgment.objects.filter(run=run, outcome="ok").count() == N_PROCEDURES
    # Nothing answered sent again: counted at the server, per request.
    by_key = {key: request["messages"][0]["content"] for key, request in zip(job.keys, job.requests)}
    sent = Counter(b["messages"][0]["content"] for b in judge_requests())
    assert set(sent) == set(by_key.values())
    for key in answered_before_kill:
        assert sent[by_key[key]] == 1, "a request answered before the kill was sent again"
    # Only what was in flight on the killed worker (its shard's concurrency) may have gone twice.
    assert sum(n - 1 for n in sent.values()) <= 2
    assert Generation.objects.filter(run=generations).count() == N_PROCEDURES


def _status(pk: int) -> str | None:
    from judging.models import JudgeRun

    return JudgeRun.objects.filter(pk=pk).values_list("status", flat=True).first()


# -- components runs and goal-step evaluations are sharded the same way ---------------------


def test_a_sharded_goal_step_evaluation_gives_the_same_accuracy(settings):
    from goalstep.models import TaskItem, TaskSet
    from goalstep.selectors import task_evaluation_accuracy
    from goalstep.services import task_evaluation_create, task_evaluation_execute
    from tests.test_goalstep_evaluation import ANSWERS, CANDIDATES

    settings.LLM_SHARD_REQUESTS = 2
    task_set = TaskSet.objects.create(task="step_inference", split="bench", seed=0, n_items=4)
    for position, (prompt, label) in enumerate(
        [("Prevent Coronavirus", 0), ("Keep a cat calm", 1), ("Clean silver", 3), ("Plant tulips", 2)]
    ):
        TaskItem.objects.create(
            task_set=task_set,
            item_id=f"item-{position}",
            position=position,
            prompt=prompt,
            candidates=CANDIDATES,
            label=label,
            topic="Health",
            source_procedure_ids=[position],
        )
    with ScriptedLLM() as server:
        _point_roles_at(settings, server)
        server.default = lambda body: Reply(ANSWERS[next(p for p in ANSWERS if p in last_user_message(body))])
        model = language_model_register(name="scripted-model")
        evaluation = task_evaluation_create(task_set=task_set, language_model=model, start=False)
        assert evaluation.llm_job is not None
        assert evaluation.llm_job.shards.count() == 2
        assert task_evaluation_execute(evaluation_id=evaluation.pk) == "done"
        assert len(server.chat_requests()) == 4
    evaluation.refresh_from_db()
    result = task_evaluation_accuracy(evaluation)
    assert evaluation.status == "done" and (result["correct"], result["answered"], result["unparseable"]) == (2, 4, 1)


def test_a_sharded_components_run_stores_every_step_list_once(sharded, settings):
    from judging.models import ComponentExtraction
    from judging.score_services import components_run_create, components_run_execute
    from tests.test_score_components_runs import _components_answer

    generations = _generations()
    settings.LLM_PARSE_REASKS = 0
    roles = dict(settings.LLM_ROLES)
    roles["extract_components"] = dict(roles["generate"])
    settings.LLM_ROLES = roles

    def answer(body):
        return _components_answer(body) if body.get("response_format") else _answer(body)

    sharded.default = answer
    before = len(sharded.chat_requests())
    run = components_run_create(name="components-sharded", generation_run=generations, start=False)
    assert run.llm_job is not None
    n = run.llm_job.n_total
    assert run.llm_job.shards.count() == -(-n // 6) >= 2
    components_run_execute(run_id=run.pk)
    run.refresh_from_db()
    sent = [b["messages"][-1]["content"] for b in sharded.chat_requests()[before:]]
    assert len(sent) == len(set(sent)) == n  # every step list asked once
    assert ComponentExtraction.objects.filter(extractor=run.extractor, steps_hash__in=run.steps_hashes).count() == n
    assert run.status in ("done", "done_with_failures") and run.llm_job.status == run.status
