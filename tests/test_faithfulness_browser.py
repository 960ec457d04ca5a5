"""In Chromium, the constraint-faithfulness study (CoScript App. D): Prolific entry with
PROLIFIC_PID, the guidelines with the Table 10 error types, the three questions answered with
the keyboard, wrong steps marked with the keyboard and the mouse and given error types, a
premature submit refused by the server with its reasons beside the fields, a reload that
keeps the draft, and the completion code with its redirect."""

from __future__ import annotations

import re

import pytest

from annotate.kinds import kind_get
from annotate.models import Annotation
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MIN_SECONDS = 5
PROLIFIC = re.compile(r"https://app\.prolific\.com/.*")
LINE = {
    "id": "vanilla-1",
    "abstract_goal": "Make a cake",
    "specific_goal": "Make a vanilla cake",
    "constraint": "Vanilla",
    "constraint_type": "modifier",
    "topic": "Food",
    "steps": [
        "Preheat the oven to 325 °F and grease and flour a cake pan.",
        "Gather your ingredients.",
        "Cream the butter and sugar.",
        "Add the eggs.",
        "Pour the batter into the pan.",
        "Bake the cake for 1 hour 15 minutes.",
    ],
}


def _saved(page):
    page.wait_for_function("() => document.getElementById('save-status').textContent === 'All changes saved'")


def test_the_three_questions_and_wrong_steps_in_chromium(live_server, page):
    kind = kind_get("constraint_faithfulness")
    study = study_create(
        name="Constrained scripts",
        kind="constraint_faithfulness",
        items=[kind.parse_record(LINE)],
        settings=StudySettings(
            training_enabled=False,
            qualification_enabled=False,
            min_seconds=MIN_SECONDS,
            annotators_per_item=1,
            attention_check_rate=0,
            completion_code="FS-DONE-1",
            screened_out_code="FS-OUT-1",
            allow_other_pids=True,
        ),
    )  # PID fspid01 is not Prolific's shape
    page.route(
        PROLIFIC, lambda route: route.fulfill(status=200, content_type="text/html", body="<h1>Prolific (stub)</h1>")
    )
    page.goto(f"{live_server.url}/a/{study.slug}/?PROLIFIC_PID=fspid01&STUDY_ID=prolific-study&SESSION_ID=s1")
    guidelines = page.locator("#instructions").inner_text()
    assert "Repeat steps" in guidelines
    assert "Steps that are related to the goal, but are not coherent within the script." in guidelines
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()

    page.locator("#specific-goal").wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    assert page.locator("#specific-goal mark.constraint").inner_text() == "vanilla"
    assert page.locator("#abstract-goal").inner_text() == "Make a cake"
    assert page.locator("#constraint-type").inner_text() == "modifier"
    assert page.locator(".fs-step").count() == 6 and page.locator(".fs-step").first.is_disabled()

    # Keyboard: Y answers question 1 and moves on, N question 2, N question 3, which opens
    # the steps for marking and puts the focus on step 1; Space marks it.
    page.keyboard.press("y")
    page.keyboard.press("n")
    page.keyboard.press("n")
    assert page.locator("#specific_goal_ok-yes").is_checked()
    assert page.locator("#meets_constraint-no").is_checked() and page.locator("#steps_correct-no").is_checked()
    page.wait_for_function("() => document.activeElement && document.activeElement.dataset.step === '1'")
    page.keyboard.press("Space")
    # The mouse: step 4 misses the vanilla.
    page.locator('.fs-step[data-step="4"]').click()
    assert page.locator('.fs-step[data-step="1"]').get_attribute("aria-pressed") == "true"
    assert page.locator('.fs-step[data-step="4"]').get_attribute("aria-pressed") == "true"
    page.locator("#wrong-step-4").get_by_label("No constraint").check()
    page.locator("#wrong-step-4").get_by_label("Missing steps").check()
    _saved(page)

    # Too early, and step 1 has no error type yet: the server refuses and says both.
    page.keyboard.press("Control+Enter")
    page.locator("#errors").wait_for()
    errors = page.locator("#errors").inner_text()
    assert "Submission opens" in errors and "Step 1: select at least one error type" in errors
    assert "Step 1: select at least one error type" in page.locator("#wrong-step-1-error").inner_text()
    assert Annotation.objects.count() == 0

    # A reload keeps the draft: the answers, the marked steps and their error types.
    page.reload()
    page.locator("#specific-goal").wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    assert page.locator("#specific_goal_ok-yes").is_checked() and page.locator("#steps_correct-no").is_checked()
    assert page.locator('.fs-step[data-step="1"]').get_attribute("aria-pressed") == "true"
    assert page.locator("#wrong-step-4").get_by_label("No constraint").is_checked()
    assert not page.locator("#wrong-step-1").get_by_label("Wrong order").is_checked()

    page.locator("#wrong-step-1").get_by_label("Wrong order").check()
    page.locator("#step-1-other").fill("Gathering the ingredients should come first.")
    assert page.locator("#wrong-step-1").get_by_label("Other", exact=True).is_checked()
    _saved(page)
    page.wait_for_function(
        "() => document.getElementById('timer-text').textContent.startsWith('Time elapsed')",
        timeout=(MIN_SECONDS + 5) * 1000,
    )
    page.get_by_role("button", name="Submit & Continue").click()
    page.locator("#completion-code").wait_for()
    assert page.locator("#completion-code").inner_text() == "FS-DONE-1"
    annotation = Annotation.objects.get()
    assert annotation.answer == {
        "specific_goal_ok": "yes",
        "meets_constraint": "no",
        "steps_correct": "no",
        "comments": "",
        "wrong_steps": [
            {
                "step": 1,
                "error_types": ["wrong_order", "other"],
                "other": "Gathering the ingredients should come first.",
            },
            {"step": 4, "error_types": ["missing_steps", "no_constraint"], "other": ""},
        ],
    }
    assert annotation.has_failure is None and annotation.participation.prolific_session_id == "s1"
    assert any(e["type"] == "shortcut" for e in annotation.click_log)
    page.wait_for_url(PROLIFIC, timeout=15000)
