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


def test_choosing_a_split_shows_that_slice_and_keeps_it_in_the_address(live_server, page):
    from judging.models import Generation, Judgment
    from mining.models import Procedure, Split, Topic

    demo_with_researcher()
    constrained = Procedure.objects.create(
        topic=Topic.objects.get(name="Food & Dining"),
        goal="Make a cake for diabetics",
        split=Split.CONSTRAINED,
        steps=["Mix flour, eggs and a sugar substitute.", "Bake for 30 minutes."],
        source_example_id="coscript:1:1",
    )
    generation = Generation.objects.create(
        procedure=constrained, model="olmo-3-7b", predicted_steps=["Mix flour, eggs and sugar.", "Bake."]
    )
    Judgment.objects.create(
        generation=generation,
        judge="How2Judge",
        has_failure=True,
        critical_failures=[{"failure": "Uses sugar.", "L1_steps": [1], "L2_steps": [1]}],
    )
    log_in(page, live_server.url, "rita", "rita-Password-1")
    page.get_by_role("link", name="Leaderboard").click()
    assert page.locator("#leaderboard-table tbody tr").count() == 5
    assert page.locator("#leaderboard-heading").inner_text() == "Leaderboard: all splits"
    page.select_option("#split", "constrained")  # submits the form on change
    page.wait_for_url("**split=constrained**")
    assert page.locator("#leaderboard-heading").inner_text() == "Leaderboard: Constrained (CoScript)"
    rows = page.locator("#leaderboard-table tbody tr")
    assert rows.count() == 1 and "olmo-3-7b" in rows.nth(0).inner_text() and "0.0" in rows.nth(0).inner_text()
    page.select_option("#split", "bench")
    page.wait_for_url("**split=bench**")
    assert page.locator("#leaderboard-heading").inner_text() == "How2Bench leaderboard"
    assert page.locator("#leaderboard-table tbody tr").count() == 4
    assert "olmo-3-7b" not in page.locator("#leaderboard-table").inner_text()
