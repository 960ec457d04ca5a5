"""Run pages act as the API does: a page's pause, resume, cancel and *Retry failed* go
through the one entry point the API calls (``llm.run_lifecycle.run_control``), so every
kind of run ends in the same status with the same pause reason, and an action that does not
apply is refused on the page with the words of the API's 409 ``detail``. A pause reason is
kept whole and shown escaped."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.urls import reverse

from llm.models import LLMJob
from llm.run_models import Run
from mining.models import MiningRun
from mining.waves import _wave_job_execute
from tests.test_run_lifecycle import JOB_STATUS, KINDS, STEPS, Kind, _job, _mining

pytestmark = pytest.mark.django_db


def _judging_page(kind: str) -> Callable[[Run, str], str]:
    return lambda run, action: reverse("judging_run_action", args=[kind, run.pk, action])


@dataclass(frozen=True)
class Page:
    url: Callable[[Run, str], str]
    # The page's name for each action it offers (pause, resume, cancel, retry); the API
    # takes the steps of an action the page has no button for.
    actions: dict[str, str]


FOUR = {"pause": "pause", "resume": "resume", "cancel": "cancel", "retry": "retry"}
PAGES = {
    "generation": Page(_judging_page("generation"), FOUR),
    "judge": Page(_judging_page("judge"), FOUR),
    "components": Page(_judging_page("components"), FOUR),
    "goalstep": Page(
        lambda run, action: reverse("goalstep_evaluation_action", args=[run.pk, action]),
        {"resume": "resume", "retry": "retry"},
    ),
    "coscript": Page(
        lambda run, action: reverse("coscript_run_action", args=[run.pk, action]),
        {"resume": "resume", "cancel": "cancel", "retry": "retry-failed"},
    ),
    "mining": Page(
        lambda run, action: reverse("mining_run_action", args=[run.pk, action]),
        {**FOUR, "retry": "retry-failures"},
    ),
    "job": Page(lambda run, action: reverse("llm_job_action", args=[run.pk, action]), FOUR),
}
ALL_KINDS = {**KINDS, "job": Kind(lambda: _job("plain-job"), "llm-job")}


def _api(client, kind: str, run: Run, action: str):
    name = "retry-failed" if action == "retry" else action
    body = {"confirm": "yes"} if action == "cancel" else {}
    url = reverse(f"{ALL_KINDS[kind].basename}-{name}", args=[run.pk])
    return client.post(url, body, content_type="application/json")


def _page(client, kind: str, run: Run, action: str) -> list[tuple[str, str]]:
    """The page's POST (a cancel confirmed as its form confirms it), and the messages the
    page it goes back to shows: (level, text)."""
    body = {"confirm": "yes"} if action == "cancel" else {}
    page = PAGES[kind]
    response = client.post(page.url(run, page.actions[action]), body, follow=True)
    assert response.status_code == 200, response.content[:500]
    return [(message.level_tag, str(message)) for message in response.context["messages"]]


def _stored(run: Run) -> Run:
    return type(run)._default_manager.get(pk=run.pk)


@pytest.mark.parametrize("kind", list(PAGES))
def test_a_run_page_acts_as_the_api_and_refuses_with_the_apis_words(kind, admin_client_):
    run = ALL_KINDS[kind].make()
    for action, expected in STEPS:
        if action not in PAGES[kind].actions:  # no such button on this page: the API takes the step
            assert _api(admin_client_, kind, run, action).status_code == (409 if isinstance(expected, str) else 200)
            continue
        if isinstance(expected, str):  # refused: the page says what the API's 409 says, word for word
            before = _stored(run)
            api = _api(admin_client_, kind, run, action)
            assert api.status_code == 409 and api.json()["code"] == "run_state"
            detail = api.json()["detail"]
            assert expected in detail, (action, detail)
            assert _page(admin_client_, kind, run, action) == [("error", detail)], action
            after = _stored(run)
            assert (after.status, after.pause_reason) == (before.status, before.pause_reason), action
            continue
        said = _page(admin_client_, kind, run, action)
        assert [level for level, _ in said] == ["success"], (action, said)
        stored = _stored(run)
        # What the API's action leads to (tests/test_run_lifecycle.py drives the API through the same steps).
        assert (stored.status, stored.pause_reason, stored.error) == (*expected, ""), action
        if not isinstance(stored, LLMJob):
            assert {job.status for job in stored.owned_jobs()} == {JOB_STATUS[stored.status]}, action


def test_a_run_page_refuses_resuming_a_run_a_worker_holds_as_the_api_does(admin_client_):
    from datetime import timedelta

    from django.utils import timezone

    for kind in ("generation", "goalstep"):
        run = KINDS[kind].make()
        type(run)._default_manager.filter(pk=run.pk).update(status="running")
        LLMJob.objects.filter(pk=run.owned_jobs()[0].pk).update(
            status="running", claimed_by="worker-1", claim_expires=timezone.now() + timedelta(minutes=5)
        )
        detail = _api(admin_client_, kind, run, "resume").json()["detail"]
        assert "a worker is at work on it" in detail
        assert _page(admin_client_, kind, run, "resume") == [("error", detail)]
        assert _stored(run).status == "running"


def test_a_long_pause_reason_is_kept_whole_and_the_run_page_shows_it_escaped(admin_client_, monkeypatch):
    from llm.vllm_offline import ExecutorUnavailable

    run = _mining()
    MiningRun.objects.filter(pk=run.pk).update(status="running")
    reason = "the engine cannot start: <b>no GPU</b> " + "x" * 2000

    def unavailable(*, job_id: int) -> str:
        raise ExecutorUnavailable(reason)

    monkeypatch.setattr("llm.services.llm_job_execute", unavailable)
    assert _wave_job_execute(MiningRun.objects.get(pk=run.pk), run.batch_job_ids[0]) == f"paused: {reason}"
    stored = MiningRun.objects.get(pk=run.pk)
    assert (stored.status, stored.pause_reason) == ("paused", reason)
    page = admin_client_.get(reverse("mining_run_detail", args=[run.pk])).content.decode()
    assert "&lt;b&gt;no GPU&lt;/b&gt; " + "x" * 2000 in page and "<b>no GPU</b>" not in page
