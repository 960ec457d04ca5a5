"""In Chromium, a rubric's study kind is answered on the real item page: the rubric's questions
are rendered from its data (its text escaped), a missing required answer is refused by the
server naming the question beside it, and Submit & Continue stores the answer in the
questions' shape."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotate.kinds import kind_get
from annotate.kinds.rubric.definition import kind_key
from annotate.kinds.rubric.services import rubric_create, rubric_kinds_forget
from annotate.models import Annotation
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from tests.test_rubric_kind import RUBRIC_YAML

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def rubric_study():
    rubric_kinds_forget()
    row = rubric_create(source=RUBRIC_YAML.replace("Anything else?", "Anything <b>else</b>?"))
    kind = kind_get(kind_key(row.key))
    record = {"item_id": "p-1", "goal": "Brew green tea", "candidate_steps": ["Boil water.", "Steep.", "Pour."]}
    settings = StudySettings(
        training_enabled=False,
        qualification_enabled=False,
        min_seconds=0,
        attention_check_rate=0,
        allow_other_pids=True,
        annotators_per_item=1,
    )
    yield study_create(name="Rubric in Chromium", kind=kind.key, items=[kind.parse_record(record)], settings=settings)
    rubric_kinds_forget()


def test_a_rubric_item_is_answered_on_the_real_page(live_server, rubric_study, page):
    study = rubric_study
    page.goto(f"{live_server.url}/a/{study.slug}/?PROLIFIC_PID=rub01&STUDY_ID=st&SESSION_ID=se-rub01")
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    expect(page.locator("#question-clear")).to_be_visible()
    page.wait_for_function("() => window.AnnotateKind !== undefined && document.readyState === 'complete'")
    # The rubric's text is shown as text, never as markup.
    expect(page.locator("#prompt-notes")).to_have_text("Anything <b>else</b>?")
    assert page.locator("#prompt-notes b").count() == 0

    # Only the Likert answer: the required yes/no question is refused, named beside it.
    page.locator("#question-clear input[value='4']").check()
    page.locator("#submit").click()
    expect(page.locator("#error-answer\\.complete")).to_contain_text("an answer is required", timeout=15000)
    assert not Annotation.objects.exists()

    page.locator("#question-complete input[value='yes']").check()
    page.locator("#question-audience input[value='a hobbyist']").check()
    page.locator("#question-notes textarea").fill("Steeping time is missing.")
    page.locator("#question-unsafe_steps input[value='1']").check()
    page.locator("#question-unsafe_steps input[value='3']").check()
    page.locator("#submit").click()
    page.locator("#completion-code").wait_for(timeout=15000)
    assert Annotation.objects.get().answer == {
        "complete": "yes",
        "clear": 4,
        "audience": "a hobbyist",
        "notes": "Steeping time is missing.",
        "unsafe_steps": [1, 3],
    }
