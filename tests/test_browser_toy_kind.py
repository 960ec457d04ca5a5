"""In Chromium, a study kind that brings only a definition and templates (the toy clarity-rating
kind of tests/toy_kind/, no script of its own) works on the real item page: the shared
form-field script saves its draft, a reload shows the saved answer, the server's refusal names
the field beside it, and Submit & Continue stores the annotation."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from annotate.models import Annotation, Assignment
from tests.test_toy_kind import _study, toy  # noqa: F401  (the fixture that registers the kind)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_kind_without_a_script_of_its_own_is_annotated_in_the_browser(live_server, toy, page):  # noqa: F811
    # (toy before page: the page closes before the kind is taken away, so no late autosave
    # reaches a server that no longer knows the kind)
    study = _study(toy, annotators_per_item=1)
    page.goto(f"{live_server.url}/a/{study.slug}/?PROLIFIC_PID=toy01&STUDY_ID=st&SESSION_ID=se-toy01")
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    expect(page.locator("#toy-rating")).to_be_visible()
    page.wait_for_function("() => window.AnnotateKind !== undefined && document.readyState === 'complete'")
    first_goal = page.locator("#toy-goal").inner_text()

    # Submit with nothing chosen: the server refuses and names the field, shown beside it.
    page.locator("#submit").click()
    expect(page.locator("#errors")).to_be_visible(timeout=15000)
    expect(page.locator("#error-rating")).to_have_text("choose a rating from 1 to 5", timeout=15000)

    # A choice is saved as the draft (a number, as the kind's template asks) and survives a reload.
    page.locator("#toy-rating input[value='4']").check()
    deadline = time.monotonic() + 15
    while not Assignment.objects.filter(draft_seq__gt=0).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [a.draft for a in Assignment.objects.filter(draft_seq__gt=0)] == [{"rating": 4}]
    page.evaluate("() => localStorage.clear()")  # the reload shows the server's draft, not this browser's copy
    page.reload()
    expect(page.locator("#toy-rating input[value='4']")).to_be_checked(timeout=15000)
    assert page.locator("#toy-goal").inner_text() == first_goal

    rated = 0
    while page.locator("#toy-rating").count():
        if not page.locator("#toy-rating input:checked").count():
            page.locator("#toy-rating input[value='2']").check()
        goal = page.locator("#toy-goal").inner_text()
        page.locator("#submit").click()
        rated += 1
        page.wait_for_function(
            "(goal) => { const g = document.getElementById('toy-goal'); return !g || g.textContent !== goal; }",
            arg=goal,
        )
    page.locator("#completion-code").wait_for()
    answers = {a.assignment.item.goal: a.answer for a in Annotation.objects.select_related("assignment__item")}
    assert rated == len(answers) == 2  # the two main items (no attention checks drawn at rate 0)
    assert answers[first_goal] == {"rating": 4}
    assert all(answer["rating"] in (2, 4) for answer in answers.values())
