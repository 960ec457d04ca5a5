"""In Chromium, the multiple-choice study of the goal-step tasks: Prolific entry, guidelines,
a page of four questions answered with the keyboard (a candidate, "None of the above is
likely", and "Neutral" on the step-ordering question), a premature submit refused by the
server, a reload that keeps the choices, and the completion code with its redirect."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotate.kinds import kind_get
from annotate.models import Annotation
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MIN_SECONDS = 4
PROLIFIC = re.compile(r"https://app\.prolific\.com/.*")
LINES = [
    {
        "id": "si-1",
        "task": "step_inference",
        "prompt": "Prevent Coronavirus",
        "label": 0,
        "topic": "Health",
        "candidates": ["wash your hands", "wash your cat", "clap your hands", "eat your protein"],
        "source_procedure_ids": [1, 2, 3, 4],
    },
    {
        "id": "gi-1",
        "task": "goal_inference",
        "prompt": "choose a color of lipstick",
        "label": 0,
        "topic": "Beauty",
        "candidates": ["Get Pink Lips", "Read One's Lips", "Lip Sync", "Draw Lips"],
        "source_procedure_ids": [5, 6, 7, 8],
    },
    {
        "id": "si-2",
        "task": "step_inference",
        "prompt": "Play Guitar",
        "label": 2,
        "topic": "Music",
        "candidates": [
            "buy a used car",
            "gather the ingredients",
            "practice basic scales",
            "wind down with meditation",
        ],
        "source_procedure_ids": [9, 10, 11, 12],
    },
    {
        "id": "so-1",
        "task": "step_ordering",
        "prompt": "Clean Silver",
        "label": 1,
        "topic": "Home",
        "candidates": ["dry the silver", "handwash the silver"],
        "source_procedure_ids": [13],
    },
]


def test_a_page_of_questions_answered_with_the_keyboard_in_chromium(live_server, page):
    kind = kind_get("multiple_choice")
    study = study_create(
        name="Goal-step validation",
        kind="multiple_choice",
        items=[kind.parse_record(line) for line in LINES],
        settings=StudySettings(
            training_enabled=False,
            qualification_enabled=False,
            min_seconds=MIN_SECONDS,
            items_per_page=4,
            annotators_per_item=1,
            completion_code="MC-DONE-1",
            screened_out_code="MC-OUT-1",
            allow_other_pids=True,
        ),
    )  # PID mcpid01 is not Prolific's shape
    page.route(
        PROLIFIC, lambda route: route.fulfill(status=200, content_type="text/html", body="<h1>Prolific (stub)</h1>")
    )
    page.goto(f"{live_server.url}/a/{study.slug}/?PROLIFIC_PID=mcpid01&STUDY_ID=prolific-study&SESSION_ID=s1")
    assert "you have to choose one" in page.locator("main").inner_text()
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()

    questions = page.locator("fieldset.mc-item")
    questions.first.wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    assert questions.count() == 4
    assert "If multiple options seem equally likely, you have to choose one" in page.locator("#guidance").inner_text()
    texts = [questions.nth(i).inner_text() for i in range(4)]
    by_id = {q.get_attribute("data-assignment"): text for q, text in zip([questions.nth(i) for i in range(4)], texts)}
    assert len(by_id) == 4
    ordering = next(i for i, text in enumerate(texts) if "Clean Silver" in text)
    assert "Neutral" in texts[ordering] and "None of the above" not in texts[ordering]
    assert all("None of the above is likely" in t for i, t in enumerate(texts) if i != ordering)

    # Keyboard: each key answers the current question and moves on to the next one.
    wanted = {}
    for i, text in enumerate(texts):
        if i == ordering:
            page.keyboard.press("0")
            wanted[i] = "neutral"
        elif "Play Guitar" in text:
            page.keyboard.press("3")
            wanted[i] = "2"
        elif "lipstick" in text:
            page.keyboard.press("0")
            wanted[i] = "none"
        else:
            page.keyboard.press("1")
            wanted[i] = "0"
    for i, value in wanted.items():
        expect(questions.nth(i).locator(f'input[value="{value}"]')).to_be_checked()  # waits for the key handler
    page.wait_for_function("() => document.getElementById('save-status').textContent === 'All changes saved'")

    # Too early: the server refuses, and says why.
    page.keyboard.press("Control+Enter")
    errors = page.locator("#errors")
    errors.wait_for()
    assert "seconds to go" in errors.inner_text() or "Submission opens" in errors.inner_text()
    assert Annotation.objects.count() == 0

    # A reload keeps every choice (server drafts).
    page.reload()
    questions.first.wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    for i, value in wanted.items():
        expect(page.locator("fieldset.mc-item").nth(i).locator(f'input[value="{value}"]')).to_be_checked()

    page.wait_for_function(
        "() => document.getElementById('timer-text').textContent.startsWith('Time elapsed')",
        timeout=(MIN_SECONDS + 5) * 1000,
    )
    page.get_by_role("button", name="Submit & Continue").click()
    page.locator("#completion-code").wait_for()
    assert page.locator("#completion-code").inner_text() == "MC-DONE-1"
    stored = {a.item.item_id: a for a in Annotation.objects.select_related("item")}
    assert {k: a.answer["choice"] for k, a in stored.items()} == {
        "si-1": 0,
        "gi-1": "none",
        "si-2": 2,
        "so-1": "neutral",
    }
    assert [stored[k].correct for k in ("si-1", "gi-1", "si-2", "so-1")] == [True, False, True, False]
    assert all(a.participation.prolific_session_id == "s1" for a in stored.values())
    page.wait_for_url(PROLIFIC, timeout=15000)


def test_a_question_flagged_broken_goes_in_without_a_choice_at_phone_width(live_server, browser):
    """Issue 31 part 5 on the page of several questions, at a 390 px phone: "This item is
    broken" on one question is reached with Tab and ticked with Space; without a reason the
    server's message shows beside that question's flag while the answered questions go in; the
    reason and note are kept in the question's draft across a reload, and the question is then
    submitted without a choice."""
    from annotate.models import Assignment

    kind = kind_get("multiple_choice")
    study = study_create(
        name="Goal-step flags",
        kind="multiple_choice",
        items=[kind.parse_record(line) for line in LINES[:3]],
        settings=StudySettings(
            training_enabled=False,
            qualification_enabled=False,
            min_seconds=0,
            items_per_page=3,
            annotators_per_item=1,
            completion_code="MC-FLAG-1",
            screened_out_code="MC-OUT-2",
            allow_other_pids=True,
        ),
    )
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.set_default_timeout(15000)
    page.route(PROLIFIC, lambda route: route.fulfill(status=204, body=""))
    try:
        page.goto(f"{live_server.url}/a/{study.slug}/?PROLIFIC_PID=mcflag01&STUDY_ID=prolific-study&SESSION_ID=s2")
        page.get_by_label("I have read the guidelines and agree to take part.").check()
        page.get_by_role("button", name="Continue").click()
        questions = page.locator("fieldset.mc-item")
        questions.first.wait_for()
        page.wait_for_load_state("load")  # the page's scripts have run
        texts = [questions.nth(i).inner_text() for i in range(3)]
        flagged = next(i for i, text in enumerate(texts) if "lipstick" in text)
        card = questions.nth(flagged)
        number = flagged + 1

        broken = card.get_by_label("This item is broken")
        broken.focus()
        page.keyboard.press("Space")
        expect(broken).to_be_checked()
        reason = card.get_by_label("Why is it broken?")
        expect(reason).to_be_visible()
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.activeElement.id") == f"question-{number}-flag-reason"
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        for i, text in enumerate(texts):
            if i != flagged:
                questions.nth(i).locator('input[value="2"]' if "Play Guitar" in text else 'input[value="0"]').check()

        # No reason yet: the other questions go in, this one is refused and says why beside its flag.
        page.locator("#submit").click()
        expect(card.locator('[data-flag-part="error"]')).to_contain_text("choose a reason")
        expect(page.locator("#errors")).to_contain_text(f"Question {number}")
        assert Annotation.objects.count() == 2 and not card.is_disabled()

        reason.select_option("unreadable")
        card.get_by_label("Say more").fill("The action is cut off mid-word.")

        def saved_note():
            draft = Assignment.objects.get(item__item_id="gi-1").draft
            return (draft.get("flag") or {}).get("note")

        for _ in range(100):  # the note is saved 0.7 s after typing stops
            if saved_note() == "The action is cut off mid-word.":
                break
            page.wait_for_timeout(100)
        assert Assignment.objects.get(item__item_id="gi-1").draft["flag"]["reason"] == "unreadable"

        page.reload()  # the draft brings the flag back
        only = page.locator("fieldset.mc-item")
        expect(only).to_have_count(1)
        page.wait_for_load_state("load")
        expect(only.get_by_label("This item is broken")).to_be_checked()
        expect(only.get_by_label("Why is it broken?")).to_have_value("unreadable")
        expect(only.get_by_label("Say more")).to_have_value("The action is cut off mid-word.")
        page.get_by_role("button", name="Submit & Continue").click()
        page.locator("#completion-code").wait_for()

        stored = {a.item.item_id: a for a in Annotation.objects.select_related("item")}
        assert {k: (a.answer["choice"], a.correct, a.flag) for k, a in stored.items()} == {
            "si-1": (0, True, ""),
            "si-2": (2, True, ""),
            "gi-1": (None, None, "broken"),
        }
        gi = stored["gi-1"]
        assert (gi.flag_reason, gi.flag_note, gi.has_failure) == ("unreadable", "The action is cut off mid-word.", None)
    finally:
        context.close()
