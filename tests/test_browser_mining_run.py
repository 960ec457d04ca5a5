"""In Chromium: an admin starts a mining run from the form, watches it finish on the live
page (the funnel chart, per-topic table and costs), opens a rejected document's stages
and pauses and resumes a second run."""

from __future__ import annotations

import pytest

from core.roles import ROLE_ADMIN
from core.services import user_create
from mining.models import MiningRun
from mining.runner import mining_run_execute
from tests.browser import log_in
from tests.scripted_miner import document_text
from tests.test_mining_runs import make_corpus, miner  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_admin_launches_a_run_and_reads_the_live_page(live_server, page, miner):
    user_create(username="ada", role=ROLE_ADMIN, password="ada-Password-1")
    docs = [
        (f"d{i}", "food-dining" if i % 2 else "health", document_text(f"d{i}", f"Prepare item {i}")) for i in range(6)
    ]
    docs.append(("d6", "health", document_text("d6", "Visit the shop", flags="reject:llm_filter")))
    make_corpus(docs)
    log_in(page, live_server.url, "ada", "ada-Password-1")
    page.get_by_role("link", name="Mining").click()
    page.fill("#id_config", "name: browser-run\ncandidates_per_topic: 10\nconcurrency: 2\n")
    page.get_by_role("button", name="Start").click()
    page.wait_for_selector("#run-status")
    assert page.inner_text("#run-status") == "pending"
    run = MiningRun.objects.get(name="browser-run")
    assert mining_run_execute(run_id=run.pk) == "done"  # the worker's part, in this process
    page.reload()
    assert page.inner_text("#run-status") == "done"
    page.wait_for_selector("#mining-funnel .main-svg")
    assert page.inner_text("#total-procedures") == "6"
    assert "85.7 %" in page.inner_text("#total-yield") and "6 / 7 decided documents" in page.inner_text("#total-yield")
    health = page.locator("#funnel-table tbody tr", has_text="Health").inner_text()
    assert "4 / 4" in health and "4 / 3" in health  # 4 documents reached the filter, 3 passed
    assert "extract_procedure" in page.inner_text("#stage-costs")
    page.locator("#rejection-reasons a", has_text="excluded").click()
    page.get_by_role("link", name="d6").click()
    page.wait_for_selector("#stage-llm_filter")
    assert "It is focused on a named entity." in page.inner_text("#stage-llm_filter")

    page.get_by_role("link", name="Mining").click()
    page.fill("#id_config", "name: second-run\ncandidates_per_topic: 10\n")
    page.get_by_role("button", name="Start").click()
    page.click("#pause-run")
    page.wait_for_selector("#resume-run")
    assert page.inner_text("#run-status") == "paused"
    page.click("#resume-run")
    page.wait_for_selector("#pause-run")
    assert page.inner_text("#run-status") == "pending"
