"""In Chromium: the leaderboard of the demo (the paper's own generations and labels)."""
from __future__ import annotations

import pytest

from tests.browser import demo_with_researcher, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_leaderboard_shows_scores_chart_and_heat_map(live_server, page):
    demo_with_researcher()
    log_in(page, live_server.url, "rita", "rita-Password-1")
    page.get_by_role("link", name="Leaderboard").click()
    page.wait_for_selector("#how2score-bars .main-svg")
    page.wait_for_selector("#topic-heatmap .main-svg")
    rows = page.locator("#leaderboard-table tbody tr")
    assert rows.count() == 4  # Claude 4.5 Opus, GPT 5, Gemini 2.5 Pro (Tables 17-19) and Qwen 3 8B (Table 1)
    first = rows.nth(0).inner_text()
    assert "Claude 4.5 Opus" in first and "100.0" in first
    bars = page.locator("#how2score-bars g.point path")
    assert bars.count() == 4
