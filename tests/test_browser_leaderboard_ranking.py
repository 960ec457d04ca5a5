"""In Chromium: the leaderboard of a judge with an incomplete model marks it, ranks the
complete models over their common procedures, and the compare form answers "is A better
than B?" with a paired interval."""

from __future__ import annotations

import pytest

from tests.browser import demo_with_researcher, log_in
from tests.judged_world import judge_model, procedures

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_incomplete_model_is_marked_and_the_compare_form_gives_a_paired_interval(live_server, page):
    demo_with_researcher()
    items = procedures(23)
    judge_model("strong", items, [False] * 20 + [True] * 3)
    judge_model("weak", items, [False] * 12 + [True] * 11)
    judge_model("few-judged", items[:17], [False] * 3 + [None] * 14)
    log_in(page, live_server.url, "rita", "rita-Password-1")
    page.goto(f"{live_server.url}/leaderboard/?judge=how2judge")
    assert "Ranked over the 23 procedures" in page.locator("#ranking-basis").inner_text()
    rows = page.locator("#leaderboard-table tbody tr")
    assert rows.nth(0).inner_text().startswith("1\t") and "strong" in rows.nth(0).inner_text()
    few = page.locator('#leaderboard-table tr[data-model="few-judged"]')
    assert "incomplete" in few.inner_text() and "3/23" in few.inner_text()
    page.select_option("#compare-a", "strong")
    page.select_option("#compare-b", "weak")
    page.locator("#compare-form button").click()
    page.wait_for_selector("#comparison")
    text = page.locator("#comparison").inner_text()
    assert "On the 23 procedures both have a usable judgment for" in text
    assert "strong is better than weak" in text and "1000 times (seed 0)" in text
    page.select_option("#basis", "all")  # submits the form on change
    page.wait_for_url("**basis=all**")
    assert "all its judged procedures" in page.locator("#ranking-basis").inner_text()
