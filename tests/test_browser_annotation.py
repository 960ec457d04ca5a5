"""In Chromium, the whole annotator path: entry with Prolific parameters, guidelines, training,
a failed and a passed qualification, an item annotated with two failures linked to steps, a
premature submit refused by the server, a reload that restores the draft, and the completion
redirect to Prolific. The study's minimum is shortened to a few seconds (a study field);
the check itself runs as in production."""

from __future__ import annotations

import re

import pytest

from annotate.models import Annotation, Participation
from annotate.testing import study_make

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MIN_SECONDS = 4
PROLIFIC = re.compile(r"https://app\.prolific\.com/.*")


def _stub_prolific(page):
    page.route(
        PROLIFIC,
        lambda route: route.fulfill(
            status=200, content_type="text/html", body="<html><body><h1>Prolific (stub)</h1></body></html>"
        ),
    )


def _enter(page, live_server, study, pid):
    page.goto(f"{live_server.url}/a/{study.slug}/?PROLIFIC_PID={pid}&STUDY_ID=prolific-study&SESSION_ID=sess-{pid}")
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()


def _training(page, *, first_wrong: bool):
    page.get_by_role("heading", name="What is a critical failure?").wait_for()
    page.get_by_role("link", name="Start the examples").click()
    for number in range(1, 12):
        page.get_by_role("heading", name=f"Example {number} of 11").wait_for()
        finding = page.locator(".question-box").inner_text()
        assert finding.startswith("What differs:")
        # The first example (Jacob's Ladder) is a critical failure.
        if number == 1 and first_wrong:
            page.get_by_label("No: an acceptable variation").check()
        else:
            page.get_by_label("Yes: a critical failure").check()
        page.get_by_role("button", name="Check my answer").click()
        feedback = page.locator("#feedback")
        if number == 1 and first_wrong:
            assert "Not quite." in feedback.inner_text()
            assert "no largest or smallest piece" in feedback.inner_text()
        page.locator("#next").click()


def _read_all(page):
    page.get_by_label(
        "I've read the goal and understand that my assessment should focus on how well L2 achieves the goal."
    ).check()
    steps = page.locator("button.step")
    for i in range(steps.count()):
        steps.nth(i).click()
    total = steps.count()
    page.wait_for_function(
        f"() => document.getElementById('step-progress-label').textContent.startsWith('{total}/{total}')"
    )


def _wait_saved(page):
    page.wait_for_function("() => document.getElementById('save-status').textContent === 'All changes saved'")


CURRENT = "(() => { const s = document.getElementById('page-state'); return s ? JSON.parse(s.textContent).assignment : null; })()"


def _submit_and_wait(page, *, keyboard: bool = False):
    """Submit, then wait until the next page (another item, or the completion page) is shown."""
    before = page.evaluate(CURRENT)
    if keyboard:
        page.keyboard.press("Control+Enter")
    else:
        page.get_by_role("button", name="Submit & Continue").click()
    page.wait_for_function(
        f"() => (() => {{ const now = {CURRENT}; return document.readyState === 'complete' && "
        f"(document.getElementById('completion-code') || (now && now !== {before!r})); }})()"
    )


def _answer_item(page, has_failure: bool):
    page.locator("#goal-text").wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    _read_all(page)
    if has_failure:
        page.get_by_label("Critical failures identified", exact=True).check()
        page.get_by_label("Description of failure 1").fill("Wrong on purpose")
        page.get_by_role("button", name="Failure 1: link step L2.1").click()
    else:
        page.get_by_label("No critical failures identified", exact=True).check()
    _wait_saved(page)
    page.wait_for_function(
        "() => document.getElementById('timer-text').textContent.startsWith('Time elapsed')", timeout=20000
    )
    _submit_and_wait(page)


def test_the_whole_annotator_path_in_chromium(live_server, page):
    study = study_make(
        n_items=2,
        annotators_per_item=1,
        n_gold=2,
        gold_answers=[False, False],
        qualification_pass=2,
        training_enabled=True,
        min_seconds=MIN_SECONDS,
        completion_code="DONE-1234",
        screened_out_code="SCREEN-99",
        name="Browser study",
    )
    _stub_prolific(page)
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.on("console", lambda message: script_errors.append(message.text) if message.type == "error" else None)

    # --- someone who fails the qualification: screened out with the screened-out code, sent to Prolific
    _enter(page, live_server, study, "failer01")
    _training(page, first_wrong=False)
    for _ in range(2):
        _answer_item(page, has_failure=True)  # both gold items have no critical failure
    page.locator("#completion-code").wait_for()
    assert page.locator("#completion-code").inner_text() == "SCREEN-99"
    page.wait_for_url(PROLIFIC, timeout=15000)
    assert page.url.endswith("cc=SCREEN-99")
    # No retry on the same guidelines: the same link again shows the same code, and another
    # session under the same PID is refused (a participation is bound to its session).
    page.goto(
        f"{live_server.url}/a/{study.slug}/?PROLIFIC_PID=failer01&STUDY_ID=prolific-study&SESSION_ID=sess-failer01"
    )
    assert page.locator("#completion-code").inner_text() == "SCREEN-99"
    page.goto(f"{live_server.url}/a/{study.slug}/?PROLIFIC_PID=failer01&STUDY_ID=x&SESSION_ID=again")
    assert "another Prolific session" in page.content()
    page.goto("about:blank")

    # --- someone who passes
    _enter(page, live_server, study, "passer02")
    _training(page, first_wrong=True)
    for _ in range(2):
        _answer_item(page, has_failure=False)

    # First main item: a premature submit is refused by the server.
    page.locator("#goal-text").wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    assert "until submission becomes open" in page.locator("#timer-text").inner_text()
    page.keyboard.press("Control+Enter")
    errors = page.locator("#errors")
    errors.wait_for()
    text = errors.inner_text()
    assert "Submission opens" in text and "Confirm that you have read the goal" in text and "not yet read" in text
    assert Annotation.objects.filter(source="main").count() == 0

    # Two failures linked to steps, with the keyboard shortcuts F and A.
    _read_all(page)
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("f")
    page.get_by_label("Description of failure 1").fill("L2 skips the soaking step")
    page.get_by_role("button", name="Failure 1: link step L1.2").click()
    page.get_by_role("button", name="Failure 1: link step L2.1").click()
    page.get_by_label("Description of failure 1").press("Tab")
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("a")
    page.get_by_label("Description of failure 2").fill("L2 step 3 contradicts the goal")
    page.get_by_role("button", name="Failure 2: link step L2.3").click()
    page.get_by_label("Comments (optional)").fill("Typed before the reload")
    assert page.locator("#unsaved").is_visible()
    _wait_saved(page)

    # A reload restores everything from the server.
    page.reload()
    page.locator("#goal-text").wait_for()
    page.wait_for_load_state("load")  # the page's scripts have run: keys are handled
    assert page.get_by_label("Critical failures identified", exact=True).is_checked()
    assert page.get_by_label("Description of failure 1").input_value() == "L2 skips the soaking step"
    assert page.get_by_label("Description of failure 2").input_value() == "L2 step 3 contradicts the goal"
    assert page.get_by_role("button", name="Failure 1: link step L1.2").get_attribute("aria-pressed") == "true"
    assert page.get_by_role("button", name="Failure 2: link step L2.3").get_attribute("aria-pressed") == "true"
    assert page.get_by_label("Comments (optional)").input_value() == "Typed before the reload"
    assert page.get_by_label(
        "I've read the goal and understand that my assessment should focus on how well L2 achieves the goal."
    ).is_checked()
    assert page.locator("#step-progress-label").inner_text().startswith("6/6 steps (100%)")

    page.wait_for_function(
        "() => document.getElementById('timer-text').textContent.startsWith('Time elapsed')", timeout=20000
    )
    _submit_and_wait(page)

    # Second main item, then completion and the redirect to Prolific.
    _read_all(page)
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("n")
    assert page.get_by_label("No critical failures identified", exact=True).is_checked()
    page.wait_for_function(
        "() => document.getElementById('timer-text').textContent.startsWith('Time elapsed')", timeout=20000
    )
    _submit_and_wait(page, keyboard=True)
    page.locator("#completion-code").wait_for()
    assert page.locator("#completion-code").inner_text() == "DONE-1234"
    page.wait_for_url(PROLIFIC, timeout=15000)
    assert page.url == "https://app.prolific.com/submissions/complete?cc=DONE-1234"

    main = list(Annotation.objects.filter(source="main", annotator__pid="passer02").order_by("submitted_at"))
    assert len(main) == 2
    first = main[0]
    assert first.has_failure and first.comments == "Typed before the reload"
    assert first.failures == [
        {"description": "L2 skips the soaking step", "L1_steps": [2], "L2_steps": [1]},
        {"description": "L2 step 3 contradicts the goal", "L1_steps": [], "L2_steps": [3]},
    ]
    assert first.wall_seconds >= MIN_SECONDS and 0 < first.active_seconds <= first.wall_seconds + 3
    assert main[1].has_failure is False
    # No script error; the two failed requests are the refused entry under another session and
    # the refused premature submit (HTTP 400 each).
    assert [e for e in script_errors if "status of 400" not in e] == []
    assert sum("status of 400" in e for e in script_errors) == 2
    passer = Participation.objects.get(annotator__pid="passer02")
    assert passer.state == "completed" and passer.prolific_session_id == "sess-passer02"
    assert passer.training_progress["jacobs-ladder"]["correct"] is False and len(passer.training_progress) == 11
