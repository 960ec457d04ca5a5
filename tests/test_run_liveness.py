"""Stalled is derived (issue 28, F-11): a run whose stored status is ``running`` and whose
newest heartbeat is older than the lease reads ``stalled`` with that heartbeat — the same for
every kind of run (mining, generation, judge, components, goal-step, CoScript, plain LLM
jobs) in the API's detail and list, on the run pages and in the status commands — and is
resumed at once, while a run whose worker beat within the lease refuses a resume. (The real
worker killed by SIGKILL is tests/test_stalled_runs.py.)"""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from coscript.models import CoScriptRun
from goalstep.models import TaskEvaluation
from judging.models import ComponentsRun, GenerationRun, JudgeRun
from llm.models import LLMJob
from llm.runs import STALLED, run_liveness, run_state
from mining.models import MiningRun
from tests.test_goalstep_evaluation import server as goalstep_server  # noqa: F401  (fixture)
from tests.test_goalstep_evaluation import task_set  # noqa: F401  (fixture)
from tests.test_judging_runs import server  # noqa: F401  (fixture)
from tests.test_mining_runs import miner  # noqa: F401  (fixture)
from tests.test_run_api import (  # noqa: F401  (fixtures)
    KINDS,
    World,
    components_world,
    coscript_world_,
    generation_world,
    goalstep_world,
    judge_world,
    llm_job_world,
    mining_world,
    world,
)

pytestmark = pytest.mark.django_db(transaction=True)

LEASE = 60.0


# -- the rule ------------------------------------------------------------------------------------


def test_a_running_run_reads_stalled_only_once_its_last_beat_is_older_than_the_lease():
    now = timezone.now()
    beat = lambda seconds_ago: now - timedelta(seconds=seconds_ago)  # noqa: E731
    rule = lambda **kw: run_liveness(now=now, lease_seconds=LEASE, **kw)  # noqa: E731

    within = rule(status="running", last_beat=beat(59))
    assert within.held and not within.stalled
    gone = rule(status="running", last_beat=beat(61))
    assert gone.stalled and not gone.held and gone.last_beat == beat(61)
    # Never beaten: nothing is known of a worker yet (a run waiting for its first task).
    assert not rule(status="running", last_beat=None).stalled
    # A stored status other than running is shown as it is, however old the beat.
    for status in ("pending", "paused", "done", "done_with_failures", "cancelled", "failed"):
        assert not rule(status=status, last_beat=beat(3600)).stalled
    # A live claim is a worker at work, and a worker silent on purpose (a Batch API job's task
    # comes back after its poll) is stalled only after that silence and a lease.
    assert rule(status="running", last_beat=beat(3600), claimed=True).held
    assert rule(status="running", last_beat=beat(100), silent_seconds=60).held
    assert rule(status="running", last_beat=beat(121), silent_seconds=60).stalled


def test_run_state_shows_stalled_with_the_last_heartbeat_and_keeps_the_stored_status(settings):
    settings.LLM_JOB_LEASE_SECONDS = LEASE
    old = timezone.now() - timedelta(seconds=LEASE + 5)
    job = LLMJob.objects.create(run="x", role="llm_filter", requests=[], keys=[], status="running", heartbeat_at=old)
    state = run_state(status="running", jobs=[job])
    assert state["status"] == STALLED and state["stored_status"] == "running" and state["last_heartbeat"] == old
    assert state["can_resume"] and not state["held"] and "stopped beating" in state["reason"]
    # A shard that beat a moment ago keeps its parent's run at work.
    LLMJob.objects.create(
        run="x", role="llm_filter", requests=[], keys=[], parent=job, shard_index=0, heartbeat_at=timezone.now()
    )
    fresh = run_state(status="running", jobs=[job])
    assert fresh["status"] == "running" and fresh["held"] and not fresh["can_resume"]


# -- every kind of run, through the API, the pages and the commands --------------------------------

KIND_OF_COLLECTION = {
    "/api/mining/runs/": "mining",
    "/api/judging/generation-runs/": "generation",
    "/api/judging/judge-runs/": "judge",
    "/api/judging/components-runs/": "components",
    "/api/goalstep/evaluations/": "goalstep",
    "/api/coscript/runs/": "coscript",
    "/api/llm/jobs/": "llm_job",
}
RUN_MODELS: dict[str, type[GenerationRun | JudgeRun | ComponentsRun | TaskEvaluation | CoScriptRun]] = {
    "generation": GenerationRun,
    "judge": JudgeRun,
    "components": ComponentsRun,
    "goalstep": TaskEvaluation,
    "coscript": CoScriptRun,
}


def _set_running(world: World, kind: str, beat) -> None:
    """What a worker leaves behind: the run ``running``, its work beaten last at ``beat``, a
    claim that ran out with it."""
    lease = timedelta(seconds=LEASE)
    job_fields = {"status": "running", "heartbeat_at": beat, "claimed_by": "worker-1", "claim_expires": beat + lease}
    if kind == "mining":
        MiningRun.objects.filter(pk=world.pk).update(status="running", heartbeat_at=beat)
        return
    if kind == "llm_job":
        LLMJob.objects.filter(pk=world.pk).update(**job_fields)
        return
    model = RUN_MODELS[kind]
    model.objects.filter(pk=world.pk).update(status="running")
    run = model.objects.get(pk=world.pk)
    ids = (
        [run.goals_job_id, run.screen_job_id, run.scripts_job_id] if isinstance(run, CoScriptRun) else [run.llm_job_id]
    )
    LLMJob.objects.filter(pk__in=[pk for pk in ids if pk]).update(**job_fields)


@pytest.mark.parametrize("world", KINDS, indirect=True)
def test_a_run_whose_worker_stopped_beating_reads_stalled_and_resumes_at_once_while_a_beating_one_refuses(
    world, admin_client_, settings
):
    kind = KIND_OF_COLLECTION[world.url]
    settings.LLM_JOB_LEASE_SECONDS = LEASE
    _set_running(world, kind, timezone.now() - timedelta(seconds=5))
    detail = admin_client_.get(world.detail()).json()
    assert detail["status"] == "running" and detail["last_heartbeat"] is not None
    refused = admin_client_.post(world.action("resume"))
    assert refused.status_code == 409 and "a worker is at work on it" in refused.json()["detail"]

    beat = timezone.now() - timedelta(seconds=LEASE + 1)
    _set_running(world, kind, beat)
    detail = admin_client_.get(world.detail()).json()
    assert detail["status"] == "stalled", detail
    assert detail["last_heartbeat"].replace("Z", "+00:00")[:19] == beat.isoformat()[:19]
    assert "stopped beating" in detail["reason"]
    listing = admin_client_.get(world.url).json()["results"]
    assert [row["status"] for row in listing if row["id"] == world.pk] == ["stalled"]

    resumed = admin_client_.post(world.action("resume"))
    assert resumed.status_code == 200, resumed.content
    assert resumed.json()["run"]["status"] == "pending"


def test_the_generation_run_page_and_bench_run_status_say_stalled_and_offer_resume(
    generation_world, admin_client_, settings
):
    settings.LLM_JOB_LEASE_SECONDS = LEASE
    _set_running(generation_world, "generation", timezone.now() - timedelta(minutes=5))
    run = GenerationRun.objects.get(pk=generation_world.pk)
    page = admin_client_.get(reverse("generation_run_detail", args=[run.pk])).content.decode()
    assert 'data-status="stalled"' in page and "its worker stopped beating" in page
    assert reverse("judging_run_action", args=["generation", run.pk, "resume"]) in page
    listing = admin_client_.get(reverse("judging_runs")).content.decode()
    assert "status-stalled" in listing
    out = StringIO()
    call_command("bench_run", "status", run.name, stdout=out)
    printed = json.loads(out.getvalue())
    assert printed["status"] == "stalled" and printed["last_heartbeat"]


def test_the_mining_run_page_and_mine_run_status_say_stalled_and_offer_resume(mining_world, admin_client_, settings):
    settings.LLM_JOB_LEASE_SECONDS = LEASE
    _set_running(mining_world, "mining", timezone.now() - timedelta(minutes=5))
    run = MiningRun.objects.get(pk=mining_world.pk)
    page = admin_client_.get(reverse("mining_run_detail", args=[run.pk])).content.decode()
    assert 'id="run-status" class="badge bad">stalled<' in page and 'id="resume-run"' in page
    assert "status-stalled" in admin_client_.get(reverse("mining_run_list")).content.decode()
    out = StringIO()
    call_command("mine_run", "--status", run.name, stdout=out)
    assert json.loads(out.getvalue())["status"] == "stalled"


def test_the_schema_lists_stalled_among_the_statuses_a_run_shows(admin_client_):
    schema = yaml.safe_load(admin_client_.get("/api/schema/").content)
    for name in ("GenerationRun", "MiningRun", "LLMJob"):
        field = schema["components"]["schemas"][name]["properties"]["status"]
        ref = (field.get("allOf") or [field])[0]["$ref"]
        enum = schema["components"]["schemas"][ref.split("/")[-1]]["enum"]
        assert "stalled" in enum and "running" in enum
    assert "last_heartbeat" in schema["components"]["schemas"]["MiningRun"]["properties"]


def test_a_run_whose_worker_died_while_storing_its_answers_resumes_and_stores_them_without_asking_again(
    generation_world, admin_client_, settings
):
    """Killed after its job was done but before the run stored what it answered: the job is
    ``done`` and the run ``running``. Resume must not refuse a done job: the run's task
    stores the answers from the ledger and asks nothing again."""
    from judging.models import Generation

    settings.LLM_JOB_LEASE_SECONDS = LEASE
    generation_world.failing["on"] = False
    assert generation_world.execute() == "done"
    run = GenerationRun.objects.get(pk=generation_world.pk)
    n = Generation.objects.filter(run=run).count()
    asked = len(generation_world.server.chat_requests())
    Generation.objects.filter(run=run).delete()  # what the killed worker never stored
    GenerationRun.objects.filter(pk=run.pk).update(status="running", finished_at=None)
    assert run.llm_job_id is not None
    LLMJob.objects.filter(pk=run.llm_job_id).update(heartbeat_at=timezone.now() - timedelta(seconds=LEASE + 1))
    assert admin_client_.get(generation_world.detail()).json()["status"] == "stalled"

    resumed = admin_client_.post(generation_world.action("resume"))
    assert resumed.status_code == 200, resumed.content
    assert generation_world.execute() == "done"
    run.refresh_from_db()
    assert run.status == "done" and Generation.objects.filter(run=run).count() == n
    assert len(generation_world.server.chat_requests()) == asked  # nothing asked again
