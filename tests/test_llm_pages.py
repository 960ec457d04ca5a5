"""The admins' LLM pages: endpoints with live figures, jobs with pause/resume/cancel, the ledger browser."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from llm.models import LedgerEntry, LLMJob
from llm.services import llm_job_create, llm_job_execute
from tests.scripted_llm import Reply, ScriptedLLM, Status

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def finished_job(settings):
    settings.LLM_MAX_ATTEMPTS = 1
    from llm.request import LLMRequest

    with ScriptedLLM() as server:
        server.default = lambda body: Reply(json.dumps({"answer": 1}))
        server.on(lambda body: "broken" in body["messages"][-1]["content"], Status(500, "down"))
        roles = dict(settings.LLM_ROLES)
        roles["llm_filter"] = {
            "base_url": server.base_url,
            "api_key": "k",
            "model": "gpt-5",
            "temperature": None,
            "max_tokens": None,
        }
        settings.LLM_ROLES = roles
        schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
        requests = [
            LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": text}], schema=schema)
            for text in ("one", "two", "broken")
        ]
        job = llm_job_create(run="filter-run:7", role="llm_filter", requests=requests, start=False)
        llm_job_execute(job_id=job.pk)
        yield job, server


def test_researchers_cannot_open_the_llm_pages(researcher_client):
    for name in ("llm_overview", "llm_ledger"):
        assert researcher_client.get(reverse(name)).status_code == 403


def test_overview_shows_endpoint_figures_and_the_job(admin_client_, finished_job):
    job, server = finished_job
    html = admin_client_.get(reverse("llm_overview")).content.decode()
    assert server.base_url in html
    assert "ok 2 · parse_failed 0 · truncated 0 · refused 0 · api_error 1" in html
    assert "33%" in html  # 1 error in 3 requests
    assert "filter-run:7" in html and "2 ok · 1 api_error" in html and "done_with_failures" in html
    assert "top-errors" in html and "api_error: 500: " in html  # the most frequent error, shown with the job


def test_ledger_filters_by_outcome_and_opens_an_entry(admin_client_, finished_job):
    html = admin_client_.get(reverse("llm_ledger") + "?outcome=api_error").content.decode()
    assert "1 request" in html
    entry = LedgerEntry.objects.get(outcome="api_error")
    detail = admin_client_.get(reverse("llm_ledger_entry", args=[entry.pk])).content.decode()
    assert "500: " in detail and "down" in detail and "broken" in detail


def test_pause_resume_and_cancel_from_the_page(admin_client_, settings):
    from llm.request import LLMRequest

    roles = dict(settings.LLM_ROLES)
    roles["generate"] = {
        "base_url": "http://127.0.0.1:9/v1",
        "api_key": "k",
        "model": "m",
        "temperature": None,
        "max_tokens": None,
    }
    settings.LLM_ROLES = roles
    job = llm_job_create(
        run="r",
        role="generate",
        requests=[LLMRequest(stage="generate", messages=[{"role": "user", "content": "x"}])],
        start=False,
    )
    admin_client_.post(reverse("llm_job_action", args=[job.pk, "pause"]))
    assert LLMJob.objects.get(pk=job.pk).status == "paused"
    admin_client_.post(reverse("llm_job_action", args=[job.pk, "resume"]))
    assert LLMJob.objects.get(pk=job.pk).status == "pending"
    refused = admin_client_.post(reverse("llm_job_action", args=[job.pk, "cancel"]))
    assert refused.status_code == 400 and "confirm" in refused.content.decode()  # asks first, changes nothing
    assert LLMJob.objects.get(pk=job.pk).status != "cancelled"
    admin_client_.post(reverse("llm_job_action", args=[job.pk, "cancel"]), {"confirm": "yes"})
    assert LLMJob.objects.get(pk=job.pk).status == "cancelled"
    response = admin_client_.post(reverse("llm_job_action", args=[job.pk, "resume"]), follow=True)
    assert "cannot be resumed" in response.content.decode()


def _local_job(settings, server, *, run: str, model: str, texts: tuple[str, ...]) -> LLMJob:
    """A finished job of ``texts`` against ``model`` at the scripted server."""
    from llm.request import LLMRequest

    roles = dict(settings.LLM_ROLES)
    roles["llm_filter"] = {
        "base_url": server.base_url,
        "api_key": "k",
        "model": model,
        "temperature": None,
        "max_tokens": None,
    }
    settings.LLM_ROLES = roles
    requests = [LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": text}]) for text in texts]
    job = llm_job_create(run=run, role="llm_filter", requests=requests, start=False)
    llm_job_execute(job_id=job.pk)
    return LLMJob.objects.get(pk=job.pk)


def test_a_job_of_a_model_without_a_price_costs_unknown_on_the_page_and_in_the_api(admin_client_, settings):
    with ScriptedLLM() as server:
        server.default = lambda body: Reply("fine")
        local = _local_job(settings, server, run="shared", model="local-llama", texts=("a", "b", "c"))
        # A second job under the same label, of a model with a price: its own cost is known.
        priced = _local_job(settings, server, run="shared", model="gpt-5", texts=("d",))
    assert LedgerEntry.objects.filter(run="shared", cost_usd__isnull=True).count() == 3
    assert local.cost_usd == 0 and priced.cost_usd > 0  # what the jobs store: 0 for "nothing priced"

    html = admin_client_.get(reverse("llm_overview")).content.decode()
    local_cell = html.split(f'id="job-{local.pk}-cost">')[1].split("</td>")[0]
    assert local_cell.startswith('<span class="cost-unknown">unknown</span>')
    assert "3 requests without a price" in local_cell and "0.0000" not in local_cell
    priced_cell = html.split(f'id="job-{priced.pk}-cost">')[1].split("</td>")[0]
    assert priced_cell.startswith(f"{priced.cost_usd:.4f}") and "unknown" not in priced_cell

    detail = admin_client_.get(f"/api/llm/jobs/{local.pk}/").json()
    assert detail["cost_usd"] is None and detail["requests_without_price"] == 3
    assert admin_client_.get(f"/api/llm/jobs/{priced.pk}/").json()["cost_usd"] == f"{priced.cost_usd:.6f}"
    rows = {row["id"]: row for row in admin_client_.get("/api/llm/jobs/").json()["results"]}
    assert rows[local.pk]["cost_usd"] is None and rows[local.pk]["requests_without_price"] == 3
    assert rows[priced.pk]["cost_usd"] == f"{priced.cost_usd:.6f}" and rows[priced.pk]["requests_without_price"] == 0
    changelist = admin_client_.get(reverse("admin:llm_llmjob_changelist")).content.decode()
    assert "unknown (3 without a price)" in changelist and f"{priced.cost_usd:.4f}" in changelist
