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
    # The constrained slice, which the demo leaves empty: the demo's 17 How2Bench procedures
    # would count against these imported generations (they should cover all of How2Bench).
    items = procedures(23, split="constrained")
    judge_model("strong", items, [False] * 20 + [True] * 3)
    judge_model("weak", items, [False] * 12 + [True] * 11)
    judge_model("few-judged", items[:17], [False] * 3 + [None] * 14)
    log_in(page, live_server.url, "rita", "rita-Password-1")
    page.goto(f"{live_server.url}/leaderboard/?judge=how2judge&split=constrained")
    assert "Ranked over the 23 procedures" in page.locator("#ranking-basis").inner_text()
    rows = page.locator("#leaderboard-table tbody tr")
    # rank 1, with the ranks its interval allows (weak's interval overlaps strong's)
    assert rows.nth(0).inner_text().startswith("1 (1–2)") and "strong" in rows.nth(0).inner_text()
    few = page.locator('#leaderboard-table tr[data-model="few-judged"]')
    assert "incomplete" in few.inner_text() and "3/23" in few.inner_text()
    page.select_option("#compare-a", "strong")
    page.select_option("#compare-b", "weak")
    page.locator("#compare-form button").click()
    page.wait_for_selector("#comparison")
    text = page.locator("#comparison").inner_text()
    assert "On the 23 procedures both have a usable judgment for" in text
    # 8 discordant procedures all one way: exact McNemar p = 0.0078, Holm over 3 pairs 0.023
    assert "strong is better than weak" in text and "exact McNemar" in text and "p = 0.0234" in text
    page.select_option("#basis", "all")  # submits the form on change
    page.wait_for_url("**basis=all**")
    assert "all its judged procedures" in page.locator("#ranking-basis").inner_text()
