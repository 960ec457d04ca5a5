"""In Chromium, the keyboard never eats typing: F adds a failure and puts the cursor in its
description, text typed there (every shortcut letter and every digit) arrives intact and
changes neither the verdict nor the number of failures, no shortcut fires in any kind of text
field (input, textarea, select, contenteditable) on any study kind's page, and a failure's
steps are linked with digits instead of a Tab press per step."""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import expect

from annotate.kinds import kind_get
from annotate.models import Assignment
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import item_spec

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Every letter a study kind's page uses as a shortcut (critical failure: N F A; constraint
# faithfulness: Y N S; multiple choice: J K), both cases, and every digit.
TYPED = "bad step: n f a y s j k N F A Y S J K 0123456789 done"
SETTINGS: dict[str, Any] = dict(
    training_enabled=False,
    qualification_enabled=False,
    min_seconds=600,
    annotators_per_item=1,
    attention_check_rate=0,
    allow_other_pids=True,
)  # test PIDs are not Prolific's 24 hex characters
# Text fields a page could hold; the guard must treat each as typing.
PROBES = """(() => {
  const host = document.createElement('div');
  host.id = 'probes';
  host.innerHTML = '<input type="search" id="probe-search" aria-label="probe search">'
    + '<input type="email" id="probe-email" aria-label="probe email">'
    + '<select id="probe-select" aria-label="probe select"><option>a</option><option>n</option><option>y</option></select>'
    + '<div contenteditable="true" id="probe-editable" aria-label="probe editable" style="min-height:1em"></div>';
  document.querySelector('form').appendChild(host);
})()"""


def _enter(page, live_server, study, pid):
    page.goto(f"{live_server.url}/a/{study.slug}/?PROLIFIC_PID={pid}&STUDY_ID=prolific-study&SESSION_ID=s-{pid}")
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()


def _stored_draft(pid: str, expected: dict) -> dict:
    """The draft the server holds once the page's autosave caught up (0.7 s after a change)."""
    deadline = time.monotonic() + 10
    while True:
        draft = Assignment.objects.get(participation__annotator__pid=pid).draft
        if all(draft.get(k) == v for k, v in expected.items()) or time.monotonic() > deadline:
            return draft
        time.sleep(0.2)


def _critical_failure_study(n_l1: int = 4, n_l2: int = 12):
    return study_create(
        name="Keyboard study", items=[item_spec(1, n_l1=n_l1, n_l2=n_l2)], settings=StudySettings(**SETTINGS)
    )


def _active(page) -> str:
    return page.evaluate(
        "document.activeElement ? (document.activeElement.id || document.activeElement.dataset.link || '') : ''"
    )


def _type_into_probes(page):
    """Type shortcut keys into each probe field; return what the contenteditable holds."""
    page.evaluate(PROBES)
    for probe in ("#probe-search", "#probe-email"):
        page.locator(probe).click()
        page.keyboard.type(TYPED)
        assert page.locator(probe).input_value() == TYPED
    page.locator("#probe-select").focus()
    for key in "nayfsjk0123":
        page.keyboard.press(key)
    page.locator("#probe-editable").click()
    page.keyboard.type(TYPED)
    assert page.locator("#probe-editable").inner_text() == TYPED


def test_f_focuses_the_new_failure_and_a_typed_description_arrives_intact(live_server, page):
    study = _critical_failure_study()
    _enter(page, live_server, study, "typist01")
    page.locator("#goal-text").wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("f")
    assert page.get_by_label("Critical failures identified", exact=True).is_checked()
    expect(page.get_by_label("Description of failure 1")).to_be_focused()

    page.keyboard.type(TYPED)
    assert page.get_by_label("Description of failure 1").input_value() == TYPED
    assert page.get_by_label("Critical failures identified", exact=True).is_checked()
    assert page.locator("#failures > li").count() == 1

    page.get_by_label("Comments (optional)").click()
    page.keyboard.type(TYPED)
    assert page.get_by_label("Comments (optional)").input_value() == TYPED

    # Any other text field: search and e-mail inputs, a select, a contenteditable.
    _type_into_probes(page)
    assert page.get_by_label("Critical failures identified", exact=True).is_checked()
    assert not page.get_by_label("No critical failures identified", exact=True).is_checked()
    assert page.locator("#failures > li").count() == 1
    assert page.get_by_label("Description of failure 1").input_value() == TYPED

    # Outside text fields the shortcuts still work: A adds failure 2 and focuses it.
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("a")
    expect(page.get_by_label("Description of failure 2")).to_be_focused()
    page.keyboard.type("n is not the verdict")
    assert page.get_by_label("Description of failure 2").input_value() == "n is not the verdict"
    assert page.get_by_label("Critical failures identified", exact=True).is_checked()

    failures = [
        {"description": TYPED, "L1_steps": [], "L2_steps": []},
        {"description": "n is not the verdict", "L1_steps": [], "L2_steps": []},
    ]
    draft = _stored_draft("typist01", {"failures": failures})
    assert draft == {"has_failure": True, "failures": failures, "comments": TYPED}


def test_choosing_critical_failures_with_the_mouse_also_focuses_the_description(live_server, page):
    study = _critical_failure_study(n_l1=3, n_l2=3)
    _enter(page, live_server, study, "mouse01")
    page.locator("#goal-text").wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    page.get_by_label("Critical failures identified", exact=True).check()
    expect(page.get_by_label("Description of failure 1")).to_be_focused()
    page.keyboard.type("no soaking")
    assert page.get_by_label("Description of failure 1").input_value() == "no soaking"
    assert page.get_by_label("Critical failures identified", exact=True).is_checked()


def test_digits_link_steps_of_the_focused_failure_without_a_tab_per_step(live_server, page):
    study = _critical_failure_study(n_l1=4, n_l2=12)
    _enter(page, live_server, study, "linker01")
    page.locator("#goal-text").wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    help_text = page.locator("#shortcut-help").inner_text()
    assert "1" in help_text and "9" in help_text and "digit" in help_text.lower()

    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("f")
    page.keyboard.type("L2 skips the soaking step")
    # One Tab reaches the L1 steps of this failure, a second the L2 steps.
    page.keyboard.press("Tab")
    assert _active(page).startswith("L1.")
    page.keyboard.press("2")
    l1_2 = page.get_by_role("button", name="Failure 1: link step L1.2", exact=True)
    expect(l1_2).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("9")  # L1 has 4 steps: nothing to link
    page.keyboard.press("Tab")
    assert _active(page).startswith("L2.")
    # Two digits in a row name a two-digit step; a lone digit links after a short pause.
    page.keyboard.press("1")
    page.keyboard.press("2")
    expect(page.get_by_role("button", name="Failure 1: link step L2.12", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )
    page.keyboard.press("3")
    expect(page.get_by_role("button", name="Failure 1: link step L2.3", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )
    page.keyboard.press("1")
    expect(page.get_by_role("button", name="Failure 1: link step L2.1", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )
    page.keyboard.press("3")  # again: unlinks
    expect(page.get_by_role("button", name="Failure 1: link step L2.3", exact=True)).to_have_attribute(
        "aria-pressed", "false"
    )
    assert _active(page).startswith("L2.")
    # The arrow keys move within a list; Tab leaves it.
    page.keyboard.press("ArrowRight")
    assert _active(page).startswith("L2.")
    page.keyboard.press("Tab")
    assert not _active(page).startswith("L")

    # The description was not touched, the verdict did not change, one failure.
    assert page.get_by_label("Description of failure 1").input_value() == "L2 skips the soaking step"
    assert page.get_by_label("Critical failures identified", exact=True).is_checked()
    assert page.locator("#failures > li").count() == 1
    expect(l1_2).to_have_attribute("aria-pressed", "true")
    failures = [{"description": "L2 skips the soaking step", "L1_steps": [2], "L2_steps": [1, 12]}]
    assert _stored_draft("linker01", {"failures": failures})["failures"] == failures


def test_constraint_faithfulness_shortcuts_do_not_fire_in_text_fields(live_server, page):
    kind = kind_get("constraint_faithfulness")
    line = {
        "id": "cf-1",
        "abstract_goal": "Make a cake",
        "specific_goal": "Make a vanilla cake",
        "constraint": "Vanilla",
        "constraint_type": "modifier",
        "topic": "Food",
        "steps": ["Preheat the oven.", "Mix.", "Bake."],
    }
    study = study_create(
        name="Keyboard faithfulness",
        kind="constraint_faithfulness",
        items=[kind.parse_record(line)],
        settings=StudySettings(**SETTINGS),
    )
    _enter(page, live_server, study, "cftypist01")
    page.locator("#specific-goal").wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    page.get_by_label("Comments (optional)").click()
    page.keyboard.type(TYPED)
    assert page.get_by_label("Comments (optional)").input_value() == TYPED
    _type_into_probes(page)
    assert page.locator(".fs-question input[type=radio]:checked").count() == 0
    # Outside text fields Y answers the current question.
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("y")
    expect(page.locator("#specific_goal_ok-yes")).to_be_checked()


def test_multiple_choice_shortcuts_do_not_fire_in_text_fields(live_server, page):
    kind = kind_get("multiple_choice")
    line = {
        "id": "si-1",
        "task": "step_inference",
        "prompt": "Prevent Coronavirus",
        "label": 0,
        "topic": "Health",
        "candidates": ["wash your hands", "wash your cat", "clap your hands", "eat your protein"],
        "source_procedure_ids": [1, 2, 3, 4],
    }
    study = study_create(
        name="Keyboard choices",
        kind="multiple_choice",
        items=[kind.parse_record(line)],
        settings=StudySettings(**SETTINGS),
    )
    _enter(page, live_server, study, "mctypist01")
    page.locator("fieldset.mc-item").first.wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    _type_into_probes(page)
    assert page.locator("fieldset.mc-item input[type=radio]:checked").count() == 0
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("2")
    expect(page.locator("fieldset.mc-item input[type=radio]").nth(1)).to_be_checked()
