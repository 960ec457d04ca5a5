"""In Chromium: the leaderboard of the demo (the paper's own generations and labels)."""
from __future__ import annotations

import pytest

from core.roles import ROLE_RESEARCHER
from core.services import user_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_leaderboard_shows_scores_chart_and_heat_map(live_server, page):
    from judging import demo as judging_demo
    from mining import demo as mining_demo

    mining_demo.load()
    judging_demo.load()
    user_create(username="rita", role=ROLE_RESEARCHER, password="rita-Password-1")
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("rita")
    page.get_by_label("Password").fill("rita-Password-1")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("link", name="Leaderboard").click()
    page.wait_for_selector("#how2score-bars .main-svg")
    page.wait_for_selector("#topic-heatmap .main-svg")
    rows = page.locator("#leaderboard-table tbody tr")
    assert rows.count() == 4  # Claude 4.5 Opus, GPT 5, Gemini 2.5 Pro (Tables 17-19) and Qwen 3 8B (Table 1)
    first = rows.nth(0).inner_text()
    assert "Claude 4.5 Opus" in first and "100.0" in first
    bars = page.locator("#how2score-bars g.point path")
    assert bars.count() == 4
