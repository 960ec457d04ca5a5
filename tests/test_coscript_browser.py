"""In Chromium: an admin launches a CoScript run from the form (the scripted model
answers), reads the run page's kept rates per constraint type, approves the flagged goal
on the review list, and downloads the export, which the faithfulness study accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate.kinds.constraint_faithfulness.definition import parse_record
from core.intervals import wilson_interval
from core.roles import ROLE_ADMIN
from core.services import user_create
from coscript.models import CandidateScript, CoScriptRun, Review
from coscript.phase_services import coscript_run_execute
from judging.services import language_model_register
from tests import coscript_world
from tests.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FLAGGED = "Clean your skin with medication"


@pytest.fixture
def server(settings):
    with coscript_world.scripted_server(settings) as scripted:
        yield scripted


def test_an_admin_launches_a_run_reviews_and_downloads_the_export(live_server, page, server, tmp_path):
    coscript_world.make_procedures()
    language_model_register(name="scripted-model")
    user_create(username="rita", role=ROLE_ADMIN, password="rita-Password-1")
    log_in(page, live_server.url, "rita", "rita-Password-1")

    page.get_by_role("link", name="CoScript").click()
    page.get_by_label("Name").fill("browser-coscript")
    page.get_by_label("Model").select_option(label="scripted-model")
    page.get_by_label("Source split").select_option("bench")
    page.locator("#id_k").fill("0")
    page.get_by_role("button", name="Start").click()
    # Refused by the server, beside the field, with what was typed kept.
    page.locator("#coscript-run-form .errorlist").wait_for()
    assert "greater than or equal to 1" in page.locator("#coscript-run-form").inner_text()
    assert page.get_by_label("Name").input_value() == "browser-coscript"
    assert not CoScriptRun.objects.exists()
    page.locator("#id_k").fill("2")
    page.get_by_role("button", name="Start").click()

    page.wait_for_selector("#run-status")
    assert page.inner_text("#run-status") == "pending"
    assert "0 / 12" in page.inner_text("#phase-goals")
    run = CoScriptRun.objects.get(name="browser-coscript")
    assert coscript_run_execute(run_id=run.pk) == "done"  # the worker's part, in this process
    page.reload()
    assert page.inner_text("#run-status") == "done"
    assert page.inner_text("#run-phase") == "done"
    for constraint_type in ("modifier", "method", "intent"):
        candidates = CandidateScript.objects.filter(goal__run=run, goal__constraint_type=constraint_type)
        kept, total = candidates.filter(kept=True).count(), candidates.count()
        row = page.locator(f'#kept-rates tr[data-type="{constraint_type}"]')
        shown = row.locator(".kept-rate").inner_text()
        # the rate, its 95 % Wilson interval and its counts
        interval = wilson_interval(kept, total)
        assert interval is not None
        low, high = interval
        assert shown == f"{100 * kept / total:.1f} % [{100 * low:.1f} %–{100 * high:.1f} %] {kept} / {total}", shown
    assert "1 flagged" in page.inner_text("#screen-summary")
    page.locator("#goal-filters select[name=constraint_type]").select_option("intent")
    page.get_by_role("button", name="Filter", exact=True).click()
    page.wait_for_url("**constraint_type=intent**")
    assert page.locator("#goal-table tbody > tr").count() == 3
    assert page.locator("#goal-table .selected-marker").count() == 3  # each intent goal has a chosen script

    page.get_by_role("link", name="review list").click()
    flagged = page.locator("#pending-table tr", has_text=FLAGGED)
    assert "sensitive" in flagged.inner_text()
    flagged.get_by_role("button", name="Approve").click()
    page.locator("#reviewed-table tr", has_text=FLAGGED).wait_for()
    decided = page.locator("#reviewed-table tr", has_text=FLAGGED).inner_text()
    assert "approved" in decided and "rita" in decided
    assert "Nothing waiting for review." in page.inner_text("#pending-table")
    assert run.goals.get(specific_goal=FLAGGED).review == Review.APPROVED

    page.goto(f"{live_server.url}/coscript/runs/{run.pk}/")
    page.locator("#export-form select").select_option("all")
    with page.expect_download() as download_info:
        page.click("#export-button")
    download = download_info.value
    assert download.suggested_filename == f"coscript-run-{run.pk}-all.jsonl"
    target = tmp_path / download.suggested_filename
    download.save_as(target)
    records = [json.loads(line) for line in Path(target).read_text(encoding="utf-8").splitlines()]
    assert len(records) == CandidateScript.objects.filter(goal__run=run).exclude(steps=[]).count()
    assert FLAGGED in {r["specific_goal"] for r in records}  # approved, so exported
    specs = [parse_record(record) for record in records]  # the faithfulness study's own parser
    assert {spec.source["constraint_type"] for spec in specs} == {"modifier", "method", "intent"}
