"""Run pages act as the API does: a page's pause, resume, cancel and *Retry failed* go
through the one entry point the API calls (``llm.run_lifecycle.run_control``), so every
kind of run ends in the same status with the same pause reason, and an action that does not
apply is refused on the page with the words of the API's 409 ``detail``. A pause reason is
kept whole and shown escaped."""

from __future__ import annotations

import pytest
from django.urls import reverse

from mining.models import MiningRun
from mining.runner import _wave_job_execute
from tests.test_run_lifecycle import _mining

pytestmark = pytest.mark.django_db


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
