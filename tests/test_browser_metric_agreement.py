"""In Chromium: a researcher goes from the study page to "Which metric agrees with people"
and sees the ranked table and the chart, the judge equal to the human majority on top."""

from __future__ import annotations

import pytest

from tests.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_metric_page_ranks_the_judge_equal_to_the_majority_first(live_server, page, tmp_path):
    from core.roles import ROLE_RESEARCHER
    from core.services import user_create
    from tests.metric_study import crafted_study

    study = crafted_study(tmp_path)
    user_create(username="rita", role=ROLE_RESEARCHER, password="rita-Password-1")
    log_in(page, live_server.url, "rita", "rita-Password-1")
    page.goto(f"{live_server.url}/studies/{study.slug}/")
    page.locator("#metric-agreement-link").click()
    page.wait_for_url(f"{live_server.url}/studies/{study.slug}/metrics/")
    page.wait_for_selector("#metric-agreement-chart .main-svg")
    rows = page.locator("#metric-table tbody tr")
    assert rows.count() == 13
    assert rows.nth(0).get_attribute("data-signal") == "judge:oracle"
    assert rows.nth(0).locator("td.auc").inner_text().startswith("1.000")
    order = [rows.nth(i).get_attribute("data-signal") for i in range(rows.count())]
    assert order.index("judge:noisy") < order.index("judge:always")
    # One marker per signal in each of the two panels (AUC, Kendall's tau).
    assert page.locator("#metric-agreement-chart g.points path").count() >= 13
    with page.expect_download() as download:
        page.locator("#download-csv").click()
    assert download.value.suggested_filename == f"{study.slug}-metric-agreement.csv"
