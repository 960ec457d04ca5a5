"""In Chromium: a researcher opens the agreement page of the demo study and sees the charts."""

from __future__ import annotations

import pytest

from tests.browser import demo_with_researcher, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_agreement_page_of_the_demo_study_shows_its_charts(live_server, page):
    from annotate import demo as annotate_demo

    demo_with_researcher()
    annotate_demo.load()
    log_in(page, live_server.url, "rita", "rita-Password-1")
    page.goto(f"{live_server.url}/studies/{annotate_demo.DEMO_AGREEMENT_SLUG}/agreement/")
    assert "simulated annotators" in page.locator("#simulated-banner").inner_text()
    page.wait_for_selector("#alpha-rounds .main-svg")
    page.wait_for_selector("#judge-agreement .main-svg")
    assert page.locator("#judge-table tbody tr").count() == 1  # How2Judge
    bars = page.locator("#judge-agreement g.point path")
    assert bars.count() >= 2
    page.goto(f"{live_server.url}/studies/{annotate_demo.DEMO_AGREEMENT_SLUG}/annotators/")
    page.wait_for_selector("#annotator-scatter .main-svg")
    assert page.locator("#annotator-table tbody tr").count() == 4
