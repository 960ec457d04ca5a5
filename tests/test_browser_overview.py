"""In Chromium: a researcher logs in, sees the chart on the home page and opens a procedure."""

from __future__ import annotations

import pytest

from tests.browser import demo_with_researcher, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_log_in_see_the_chart_and_open_a_procedure(live_server, page):
    demo_with_researcher()
    page.goto(f"{live_server.url}/")
    assert "/login/" in page.url  # anonymous visitors are sent to the login page
    log_in(page, live_server.url, "rita", "rita-Password-1")

    # plotly draws the stacked bars as SVG paths inside the chart's div.
    page.wait_for_selector("#procedures-per-topic .main-svg")
    bars = page.locator("#procedures-per-topic g.point path")
    assert bars.count() >= 14
    legend = page.locator("#procedures-per-topic .legendtext").all_text_contents()
    assert "How2Bench" in legend

    page.get_by_role("link", name="Crime & Law").click()
    page.get_by_role("link", name="Sell your share of a common property apartment").click()
    assert page.locator("h1#goal").inner_text().startswith("Sell your share")
    steps = page.locator("#reference-steps li").all_inner_texts()
    assert len(steps) == 5 and steps[3].startswith("4. Wait 30 days")
    assert page.locator("#generations .badge.bad").count() == 1
