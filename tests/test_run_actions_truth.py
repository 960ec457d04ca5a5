"""What a page or the API says after a run action is true: an action that does not apply is
refused on the pages as through the API (never "requested" when nothing changes), a retry
counts requests without an ok answer (not "failed" ones that were never asked), resuming a
run a worker holds is refused, and a cancelled run's unanswered requests are "not asked",
not pending."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from judging.models import GenerationRun
from llm.models import LLMJob
from mining.models import Document, MiningCandidate, MiningRun
from tests.test_judging_runs import server  # noqa: F401  (fixture)
from tests.test_mining_runs import miner  # noqa: F401  (fixture)
from tests.test_run_api import coscript_world_, generation_world, mining_world  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def _messages(response) -> str:
    return " | ".join(str(m) for m in response.context["messages"])


def test_pausing_a_paused_run_on_its_page_is_refused_as_the_api_refuses_it(generation_world, admin_client_):  # noqa: F811
    world = generation_world
    url = lambda action: reverse("judging_run_action", args=["generation", world.pk, action])  # noqa: E731
    first = admin_client_.post(url("pause"), follow=True)
    assert "pause requested" in _messages(first)
    again = admin_client_.post(url("pause"), follow=True)
    said = _messages(again)
    assert "pause requested" not in said and "is paused; only a pending or running run can be paused" in said
    api = admin_client_.post(world.action("pause"))
    assert api.status_code == 409 and "only a pending or running run can be paused" in api.json()["detail"]


def test_retry_of_a_run_paused_before_it_asked_anything_counts_unanswered_not_failed(generation_world, admin_client_):  # noqa: F811
    world = generation_world
    admin_client_.post(world.action("pause"))
    detail = admin_client_.get(world.detail()).json()
    n = detail["outcomes"]["pending"]
    assert n > 0 and detail["n_failed"] == 0
    response = admin_client_.post(world.action("retry-failed")).json()
    assert response["asked_again"] == n
    assert f"{n} requests without an ok answer will be asked again" in response["detail"]
    assert "failed will be asked" not in response["detail"]


def test_resume_is_refused_while_a_worker_holds_the_run_and_requeues_a_run_nobody_holds(
    generation_world, admin_client_
):  # noqa: F811
    world = generation_world
    job = GenerationRun.objects.get(pk=world.pk).llm_job
    assert job is not None
    LLMJob.objects.filter(pk=job.pk).update(
        status="running", claimed_by="worker-1", claim_expires=timezone.now() + timedelta(minutes=5)
    )
    GenerationRun.objects.filter(pk=world.pk).update(status="running")
    held = admin_client_.post(world.action("resume"))
    assert held.status_code == 409 and "a worker is at work on it" in held.json()["detail"]
    page = admin_client_.post(reverse("judging_run_action", args=["generation", world.pk, "resume"]), follow=True)
    assert "a worker is at work on it" in _messages(page) and "resume requested" not in _messages(page)
    # The worker was lost: its lease ran out, and resume puts the run back in the queue.
    LLMJob.objects.filter(pk=job.pk).update(claim_expires=timezone.now() - timedelta(seconds=1))
    lost = admin_client_.post(world.action("resume"))
    assert lost.status_code == 200 and lost.json()["run"]["status"] == "pending"


def test_a_cancelled_runs_unanswered_requests_are_not_asked_and_nothing_points_to_retry(
    generation_world, admin_client_
):  # noqa: F811
    world = generation_world
    total = admin_client_.get(world.detail()).json()["outcomes"]["pending"]
    admin_client_.post(world.action("cancel"), {"confirm": "yes"}, content_type="application/json")
    detail = admin_client_.get(world.detail()).json()
    assert detail["status"] == "cancelled"
    assert detail["outcomes"]["pending"] == 0 and detail["outcomes"]["not_asked"] == total
    page = admin_client_.get(reverse("generation_run_detail", args=[world.pk])).content.decode()
    assert f"{total} not asked (cancelled)" in page and f"{total} pending" not in page
    resumed = admin_client_.post(reverse("judging_run_action", args=["generation", world.pk, "resume"]), follow=True)
    retried = admin_client_.post(reverse("judging_run_action", args=["generation", world.pk, "retry"]), follow=True)
    for said in (_messages(resumed), _messages(retried)):
        assert "a cancelled run cannot be resumed, paused or retried (start a new run)" in said
        assert "Retry failed asks" not in said


def test_resuming_a_mining_run_whose_worker_holds_documents_is_refused(mining_world, admin_client_):  # noqa: F811
    world = mining_world
    MiningRun.objects.filter(pk=world.pk).update(status="running")
    document = Document.objects.first()
    assert document is not None and document.topic is not None
    candidate = MiningCandidate.objects.create(
        run_id=world.pk, document=document, topic=document.topic, claim="worker-1", claimed_at=timezone.now()
    )
    held = admin_client_.post(world.action("resume"))
    assert held.status_code == 409 and "a worker is at work on it" in held.json()["detail"]
    page = admin_client_.post(reverse("mining_run_action", args=[world.pk, "resume"]), follow=True)
    assert "a worker is at work on it" in _messages(page)
    candidate.refresh_from_db()
    assert candidate.claim == "worker-1"  # the worker's claim was not released under it
    MiningCandidate.objects.filter(pk=candidate.pk).update(claimed_at=timezone.now() - timedelta(hours=1))
    lost = admin_client_.post(world.action("resume"))  # its lease ran out: the worker is gone
    assert lost.status_code == 200 and lost.json()["run"]["status"] == "pending"
    candidate.refresh_from_db()
    assert candidate.claim == ""


def test_a_coscript_run_held_by_a_worker_refuses_resume_on_its_page_and_in_the_api_alike(
    coscript_world_, admin_client_
):  # noqa: F811
    from coscript.models import CoScriptRun

    world = coscript_world_
    run = CoScriptRun.objects.get(pk=world.pk)
    assert run.goals_job_id is not None
    CoScriptRun.objects.filter(pk=world.pk).update(status="running")
    LLMJob.objects.filter(pk=run.goals_job_id).update(
        status="running", claimed_by="worker-1", claim_expires=timezone.now() + timedelta(minutes=5)
    )
    api = admin_client_.post(world.action("resume"))
    assert api.status_code == 409 and "a worker is at work on it" in api.json()["detail"]
    page = admin_client_.post(reverse("coscript_run_action", args=[world.pk, "resume"]), follow=True)
    assert "a worker is at work on it" in _messages(page)
