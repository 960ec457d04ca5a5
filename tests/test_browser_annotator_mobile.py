"""In Chromium at a phone's 390 × 844 viewport, the annotator's pages fit the screen: no
horizontal overflow on the consent, training, item pages of every kind (with the step lists),
the preview's pages and the completion page; the Submit & Continue button is in view and
answers a click; the completion code's copy button copies it to the clipboard, or selects it
where the clipboard API is refused; and every item page says "item X of N"."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from annotate.kinds import kind_get
from annotate.models import Participation
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import item_spec
from tests.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTH, HEIGHT = 390, 844
SETTINGS: dict[str, Any] = dict(
    training_enabled=False,
    qualification_enabled=False,
    min_seconds=0,
    annotators_per_item=3,
    attention_check_rate=0,
    allow_other_pids=True,
)  # test PIDs are not Prolific's 24 hex characters
# A step with a long unbroken token (a URL) and long sentences: the kind of text that overflows.
LONG_STEP = (
    "Open https://example.org/averyverylongpathsegmentthatneverbreaksonitsownunlessthepageallowsit1234567890 "
    "and follow the instructions there carefully, step by step, before continuing."
)


@pytest.fixture
def phone(browser):
    context = browser.new_context(
        viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=2, is_mobile=True, has_touch=True
    )
    page = context.new_page()
    page.set_default_timeout(15000)
    # The completion page sends the annotator to Prolific after a few seconds: answer that
    # navigation with 204 No Content, so the page stays (and no request leaves the machine).
    page.route("https://app.prolific.com/**", lambda route: route.fulfill(status=204, body=""))
    yield context, page
    context.close()


def _scroll_width(page) -> int:
    return page.evaluate("() => document.documentElement.scrollWidth")


def _assert_fits(page, where: str) -> None:
    # Measure the page as it is shown: with its stylesheet applied. An element can be in the
    # DOM before the stylesheet has arrived (a busy server), and unstyled, the long URL of
    # LONG_STEP is one unbroken 900 px line.
    page.wait_for_load_state("load")
    width = _scroll_width(page)
    assert width <= WIDTH, f"{where}: the page is {width} px wide at a {WIDTH} px viewport"


def _assert_submit_reachable(page) -> None:
    button = page.locator("#submit")
    expect(button).to_be_visible()
    box = button.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= WIDTH
    assert 0 <= box["y"] and box["y"] + box["height"] <= HEIGHT, f"Submit is outside the viewport: {box}"
    assert box["height"] >= 40  # a finger-sized target


def _enter(page, base_url: str, study, pid: str) -> None:
    page.goto(f"{base_url}/a/{study.slug}/?PROLIFIC_PID={pid}&STUDY_ID=prolific-study&SESSION_ID=s-{pid}")


def test_a_critical_failure_walk_fits_a_phone_and_the_completion_code_copies(live_server, phone):
    context, page = phone
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    items = [item_spec(1, n_l1=6, n_l2=7)]
    items[0].reference_steps[2] = LONG_STEP
    items[0].candidate_steps[4] = LONG_STEP
    study = study_create(
        name="Phone study with a rather long name that wraps",
        items=items,
        settings=StudySettings(**{**SETTINGS, "training_enabled": True}),
    )
    _enter(page, live_server.url, study, "phone01")
    expect(page.locator("#terms")).to_be_visible()
    _assert_fits(page, "consent")
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    # Training: the definition, then every example with its two step lists.
    expect(page.get_by_role("heading", name="What is a critical failure?")).to_be_visible()
    _assert_fits(page, "training introduction")
    page.locator("a.button").click()
    while True:
        page.locator("#example-title").wait_for()
        _assert_fits(page, f"training {page.locator('#example-title').inner_text()}")
        page.locator("input[value=critical]").check()
        page.get_by_role("button", name="Check my answer").click()
        page.locator("#next").click()
        if page.locator("#goal-text").count():
            break
    # The item page: both step lists stacked, the submit bar in view, item 1 of 1.
    page.locator("#goal-text").wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    expect(page.locator("#item-position")).to_have_text("item 1 of 1")
    _assert_fits(page, "item page")
    _assert_submit_reachable(page)
    # A click on Submit before anything is read: the server's refusal shows, nothing breaks.
    page.locator("#submit").click()
    expect(page.locator("#errors")).to_be_visible()
    expect(page.locator("#errors")).to_contain_text("Confirm that you have read the goal")
    _assert_fits(page, "item page with errors")
    # Read everything (scrolling through the lists), answer, submit.
    page.locator("#goal-ack").check()
    for step in page.locator("button.step").all():
        step.scroll_into_view_if_needed()
        step.click()
    expect(page.locator("#step-progress-label")).to_contain_text("13/13")
    # A failure with its 13 step toggles wraps within the screen too.
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("f")
    page.keyboard.type("Step 5 skips the part that matters.")
    expect(page.locator(".failure button.toggle")).to_have_count(13)
    _assert_fits(page, "item page with a failure and its step toggles")
    page.locator(".failure button.remove").click()
    expect(page.locator(".failure")).to_have_count(0)
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("n")  # no critical failure
    expect(page.locator("#save-status")).to_have_text("All changes saved")
    _assert_fits(page, "item page, all read")
    _assert_submit_reachable(page)
    page.locator("#submit").click()
    page.locator("#completion-code").wait_for()
    _assert_fits(page, "completion page")
    code = study.completion_code
    assert page.locator("#completion-code").inner_text() == code
    button = page.get_by_role("button", name="Copy code")
    expect(button).to_be_visible()
    button.click()
    expect(page.locator("#copy-status")).to_have_text("Copied.")
    assert page.evaluate("() => navigator.clipboard.readText()") == code
    assert Participation.objects.get(annotator__pid="phone01").state == "completed"


def test_where_the_clipboard_is_refused_the_code_is_selected(live_server, phone):
    context, page = phone
    # A browser that refuses the clipboard (a denied permission): writeText rejects.
    page.add_init_script(
        script="""
      if (navigator.clipboard) {
        navigator.clipboard.writeText = () => Promise.reject(new DOMException("denied", "NotAllowedError"));
      }"""
    )
    study = study_create(
        name="Refused clipboard", items=[item_spec(1, n_l1=2, n_l2=2)], settings=StudySettings(**SETTINGS)
    )
    _enter(page, live_server.url, study, "phone02")
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    page.locator("#goal-text").wait_for()
    # The page's scripts have run before anything is checked: a goal confirmed before they
    # listen is never saved, and the submit is refused (seen under load in CI).
    page.wait_for_load_state("load")
    page.locator("#goal-ack").check()
    for step in page.locator("button.step").all():
        step.click()
    page.keyboard.press("n")
    expect(page.locator("#save-status")).to_have_text("All changes saved")
    page.locator("#submit").click()
    page.locator("#completion-code").wait_for()
    page.get_by_role("button", name="Copy code").click()
    expect(page.locator("#copy-status")).to_contain_text("The code is selected")
    assert page.evaluate("() => window.getSelection().toString().trim()") == study.completion_code


@pytest.mark.parametrize("kind_key", ["multiple_choice", "constraint_faithfulness"])
def test_the_other_kinds_item_pages_fit_a_phone(live_server, phone, kind_key):
    _context, page = phone
    kind = kind_get(kind_key)
    if kind_key == "multiple_choice":
        lines = [
            {
                "id": f"si-{n}",
                "task": "step_inference",
                "prompt": f"Prevent a cold, question {n}",
                "label": 0,
                "topic": "Health",
                "candidates": ["wash your hands", LONG_STEP, "clap your hands", "eat your protein"],
                "source_procedure_ids": [1, 2, 3, 4],
            }
            for n in range(1, 4)
        ]
        settings = {**SETTINGS, "items_per_page": 3}
    else:
        lines = [
            {
                "id": "cf-1",
                "abstract_goal": "Make a cake",
                "specific_goal": "Make a vanilla cake",
                "constraint": "Vanilla",
                "constraint_type": "modifier",
                "topic": "Food",
                "steps": ["Preheat the oven.", LONG_STEP, "Bake."],
            }
        ]
        settings = SETTINGS
    study = study_create(
        name=f"Phone {kind_key}",
        kind=kind_key,
        items=[kind.parse_record(x) for x in lines],
        settings=StudySettings(**settings),
    )
    _enter(page, live_server.url, study, f"phone-{kind_key[:6]}")
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    page.locator("#submit").wait_for()
    expected = "items 1–3 of 3" if kind_key == "multiple_choice" else "item 1 of 1"
    expect(page.locator("#item-position")).to_have_text(expected)
    _assert_fits(page, f"{kind_key} item page")
    _assert_submit_reachable(page)
    page.locator("#submit").click()  # nothing answered yet: the page says what is missing
    expect(page.locator("#errors")).to_be_visible()
    _assert_fits(page, f"{kind_key} item page with errors")
    _assert_submit_reachable(page)


def test_the_preview_fits_a_phone_and_says_nothing_is_saved(live_server, phone):
    from core.roles import ROLE_RESEARCHER
    from core.services import user_create

    _context, page = phone
    user_create(username="rita", role=ROLE_RESEARCHER, password="rita-Password-1")
    study = study_create(name="Phone preview", items=[item_spec(1, n_l1=4, n_l2=4)], settings=StudySettings(**SETTINGS))
    log_in(page, live_server.url, "rita", "rita-Password-1")
    page.goto(f"{live_server.url}/studies/{study.slug}/preview/")
    expect(page.locator("#preview-banner")).to_contain_text("Preview — nothing is saved")
    _assert_fits(page, "preview consent")
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    page.locator("#goal-text").wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    expect(page.locator("#preview-banner")).to_be_visible()
    _assert_fits(page, "preview item page")
    _assert_submit_reachable(page)
    page.locator("#goal-ack").check()
    for step in page.locator("button.step").all():
        step.click()
    page.keyboard.press("n")
    expect(page.locator("#save-status")).to_have_text("All changes saved")
    page.locator("#submit").click()
    page.locator("#completion-code").wait_for()
    expect(page.locator("#preview-banner")).to_be_visible()
    assert not Participation.objects.exists()


def test_flags_and_the_no_failures_switch_work_by_keyboard_at_phone_width(live_server, phone):
    """Issue 31, part 5: on a phone, "critical failures identified" then "no critical failures"
    submits (the empty failure the page added is taken away), and "This item is broken" is
    reached with Tab, ticked with Space, needs its reason (the server's message beside it), and
    submits without the kind's questions."""
    from annotate.models import Annotation

    context, page = phone
    study = study_create(
        name="Flags on a phone", items=[item_spec(1), item_spec(2)], settings=StudySettings(**SETTINGS)
    )
    _enter(page, live_server.url, study, "phoneflags")
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()

    def read_all():
        page.locator("#goal-text").wait_for()
        page.wait_for_load_state("load")
        page.locator("#goal-ack").check()
        for step in page.locator("button.step").all():
            step.scroll_into_view_if_needed()
            step.click()

    read_all()
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("f")  # adds an empty failure and puts the cursor in it
    expect(page.locator(".failure")).to_have_count(1)
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("n")  # back to "no critical failures": the empty failure goes
    expect(page.locator(".failure")).to_have_count(0)
    expect(page.locator("#failures-conflict")).to_be_hidden()
    _assert_fits(page, "item page, flags shown")
    page.locator("#submit").click()
    expect(page.locator("#item-position")).to_have_text("item 2 of 2")

    read_all()
    page.locator("#flag-broken").focus()
    page.keyboard.press("Space")
    expect(page.locator("#flag-broken")).to_be_checked()
    expect(page.locator("#flag-reason")).to_be_visible()
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "flag-reason"
    _assert_fits(page, "item page with the broken flag's reason")
    page.keyboard.press("Control+Enter")  # no reason yet: refused, said beside the flag
    expect(page.locator("#flag-error")).to_contain_text("choose a reason")
    page.locator("#flag-reason").select_option("goal_mismatch")
    page.locator("#flag-note").fill("The goal is about tea, the steps about bicycles.")
    _assert_submit_reachable(page)
    page.locator("#submit").click()
    page.locator("#completion-code").wait_for()
    first, second = Annotation.objects.order_by("submitted_at")
    assert (first.has_failure, first.failures, first.flag) == (False, [], "")
    assert (second.flag, second.flag_reason, second.has_failure) == ("broken", "goal_mismatch", None)
    assert second.flag_note == "The goal is about tea, the steps about bicycles."
