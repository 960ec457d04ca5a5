"""In Chromium, active time is counted one way on every annotator page (core.js's clock): the
time the page spends hidden (another tab in front, the window minimised) is not in the
active time the server stores, on the multiple-choice page as on the critical-failure page.
The page is hidden the way the browser hides it: document.visibilityState turns "hidden" and
a visibilitychange event fires, then the reverse."""

from __future__ import annotations

import time
from typing import Any

import pytest

from annotate.kinds import kind_get
from annotate.models import Annotation, Assignment
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import study_make

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HIDDEN_SECONDS = 5
SETTINGS: dict[str, Any] = dict(
    training_enabled=False,
    qualification_enabled=False,
    min_seconds=600,
    annotators_per_item=1,
    attention_check_rate=0,
    allow_other_pids=True,
)  # test PIDs are not Prolific's 24 hex characters
MC_LINE = {
    "id": "si-1",
    "task": "step_inference",
    "prompt": "Prevent Coronavirus",
    "label": 0,
    "topic": "Health",
    "candidates": ["wash your hands", "wash your cat", "clap your hands", "eat your protein"],
    "source_procedure_ids": [1, 2, 3, 4],
}
# Sets the page's visibility as the browser would, and keeps in window.hiddenMs how long the
# page itself (by its own clock) was hidden.
VISIBILITY = """(state) => {
  Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => state });
  Object.defineProperty(document, 'hidden', { configurable: true, get: () => state === 'hidden' });
  if (state === 'hidden') window.hiddenAt = performance.now();
  else window.hiddenMs = (window.hiddenMs || 0) + performance.now() - window.hiddenAt;
  document.dispatchEvent(new Event('visibilitychange'));
}"""
SAVED = "() => document.getElementById('save-status').textContent === 'All changes saved'"


def _enter(page, live_server, study, pid):
    page.goto(f"{live_server.url}/a/{study.slug}/?PROLIFIC_PID={pid}&STUDY_ID=prolific-study&SESSION_ID=s-{pid}")
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()


def _hide_for_a_while(page) -> float:
    """Hide the page for HIDDEN_SECONDS, show it again; the seconds it was hidden. Waits for
    the page's load event first: hidden before its script listens, the page would log only
    the return to visible (the CI failure)."""
    page.wait_for_load_state("load")
    page.evaluate(VISIBILITY, "hidden")
    time.sleep(HIDDEN_SECONDS)
    page.evaluate(VISIBILITY, "visible")
    return page.evaluate("window.hiddenMs") / 1000


def _saved_after(page, act) -> None:
    """Do act (which saves), then wait until the page says that save arrived. Waits for the
    page's load event first: a choice checked before the page's script listens saves nothing
    (seen when the other core was busy with another test worker)."""
    page.wait_for_load_state("load")
    page.evaluate("document.getElementById('save-status').textContent = ''")
    act()
    page.wait_for_function(SAVED)


def _assert_hidden_time_not_counted(pid: str, hidden: float) -> None:
    a = Assignment.objects.get(participation__annotator__pid=pid)
    assert a.last_activity_at is not None and a.first_served_at is not None
    wall = (a.last_activity_at - a.first_served_at).total_seconds()
    assert hidden >= HIDDEN_SECONDS - 0.5 and wall >= hidden, (hidden, wall)
    # Visible time alone: the wall time between the first serve and the last save, less the
    # time hidden (the page's clock starts after the serve; 0.25 s covers rounding).
    assert 0 < a.active_seconds <= wall - hidden + 0.25, (a.active_seconds, wall, hidden)


def test_a_multiple_choice_page_does_not_count_the_time_it_is_hidden(live_server, page):
    kind = kind_get("multiple_choice")
    study = study_create(
        name="Hidden time, choices",
        kind="multiple_choice",
        items=[kind.parse_record(MC_LINE)],
        settings=StudySettings(**SETTINGS),
    )
    _enter(page, live_server, study, "mchidden01")
    question = page.locator("fieldset.mc-item").first
    question.wait_for()
    _saved_after(page, lambda: question.locator('input[value="1"]').check())
    hidden = _hide_for_a_while(page)
    # The next save carries the time since the previous one, less the time hidden.
    _saved_after(page, lambda: question.locator('input[value="0"]').check())
    assert Assignment.objects.get(participation__annotator__pid="mchidden01").draft["choice"] == 0
    _assert_hidden_time_not_counted("mchidden01", hidden)


def test_a_critical_failure_page_does_not_count_the_time_it_is_hidden(live_server, page):
    study = study_make(n_items=1, annotators_per_item=1, min_seconds=600, name="Hidden time, failures")
    _enter(page, live_server, study, "cfhidden01")
    page.locator("#goal-text").wait_for()
    hidden = _hide_for_a_while(page)
    _saved_after(page, lambda: page.get_by_label("No critical failures identified", exact=True).check())
    # The status may come from an autosave that left before the change: wait for the draft itself.
    deadline = time.monotonic() + 15
    while "has_failure" not in Assignment.objects.get(participation__annotator__pid="cfhidden01").draft:
        assert time.monotonic() < deadline, "the draft with the answer never reached the server"
        time.sleep(0.1)
    a = Assignment.objects.get(participation__annotator__pid="cfhidden01")
    assert a.draft["has_failure"] is False
    assert [e["type"] for e in a.click_log if e["type"] in ("hidden", "visible")] == ["hidden", "visible"]
    _assert_hidden_time_not_counted("cfhidden01", hidden)


def test_a_multiple_choice_page_credits_the_time_after_its_last_change(live_server, page):
    """Time spent reading after the last choice reaches the server: with the save sent when the
    page is hidden, and with the save sent before a submit (as on the one-item page)."""
    kind = kind_get("multiple_choice")
    lines = [dict(MC_LINE, id=f"si-{n}") for n in (1, 2)]
    study = study_create(
        name="Time after the last change",
        kind="multiple_choice",
        items=[kind.parse_record(line) for line in lines],
        settings=StudySettings(**{**SETTINGS, "min_seconds": 0, "items_per_page": 1}),
    )
    _enter(page, live_server, study, "mclast01")
    question = page.locator("fieldset.mc-item").first
    question.wait_for()
    _saved_after(page, lambda: question.locator('input[value="1"]').check())
    first = Assignment.objects.get(participation__annotator__pid="mclast01", draft_seq__gt=0)
    before = first.active_seconds
    time.sleep(2)
    # Hiding the page sends what was counted since that save.
    page.evaluate("document.getElementById('save-status').textContent = ''")
    page.evaluate(VISIBILITY, "hidden")
    page.wait_for_function(SAVED)
    first.refresh_from_db()
    assert first.active_seconds >= before + 1.8, (before, first.active_seconds)
    page.evaluate(VISIBILITY, "visible")
    time.sleep(2)
    # Submitting sends what was counted since the page was shown again.
    before = first.active_seconds
    # The submit's answer sends the page on to the next item: the test waits for it to load,
    # since a request still being served when the test's database is emptied made the empty
    # fail (an assignment reserved for an annotator the empty had removed).
    with page.expect_navigation():
        page.locator("#submit").click()
    deadline = time.monotonic() + 15
    while not Annotation.objects.filter(assignment=first).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert Annotation.objects.filter(assignment=first).exists()
    first.refresh_from_db()
    assert first.active_seconds >= before + 1.8, (before, first.active_seconds)
