"""In Chromium, under the Content-Security-Policy: a researcher saves a Prolific token, then from
the study page creates the draft, publishes it (confirming), syncs, reviews (confirming) and pays
a previewed bonus (confirming), against the scripted Prolific server."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.browser import log_in
from tests.scripted_prolific import ScriptedProlific

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def prolific(settings):
    server = ScriptedProlific().start()
    settings.PROLIFIC_API_URL = server.base_url
    settings.PROLIFIC_API_TOKEN = ""
    settings.PROLIFIC_RETRY_BASE_SECONDS = 0.01
    yield server
    server.stop()


def test_a_researcher_goes_from_token_to_paid_bonus_on_the_study_page(live_server, page, prolific):
    from annotate.participation.services import participation_consent, participation_enter
    from annotate.testing import annotate_next, study_make
    from core.roles import ROLE_RESEARCHER
    from core.services import user_create
    from prolific.models import ProlificStudyLink

    study = study_make(
        n_items=3, annotators_per_item=1, max_items_per_annotator=None, payment_per_item=Decimal("0.30"), min_seconds=0
    )
    user_create(username="rita", role=ROLE_RESEARCHER, password="rita-Password-1")
    log_in(page, live_server.url, "rita", "rita-Password-1")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    page.goto(f"{live_server.url}/studies/{study.slug}/")
    assert "No Prolific token saved" in page.locator("#prolific-token-state").inner_text()
    page.locator("#prolific-token-state a").click()
    page.locator("#id_token").fill(prolific.token)
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(f"{live_server.url}/studies/{study.slug}/")
    assert f"…{prolific.token[-4:]}" in page.locator("#prolific-token-state").inner_text()
    assert page.locator("#draft-places").inner_text() == "1"

    page.locator("#prolific-publish").click()
    page.wait_for_selector("#prolific-study-id")
    link = ProlificStudyLink.objects.get(study=study)
    assert page.locator("#prolific-study-id").inner_text() == link.prolific_id
    page.locator("#prolific-publish-now").click()
    page.locator("#prolific-publish-now-yes").click()
    page.wait_for_function("() => document.querySelector('#prolific-status').textContent === 'ACTIVE'")
    assert prolific.studies[link.prolific_id]["status"] == "ACTIVE"

    p = participation_consent(
        participation=participation_enter(study=study, pid="alice", prolific_study_id=link.prolific_id, session_id="s")
    )
    while annotate_next(p) is not None:
        pass
    prolific.add_submission(link.prolific_id, "alice", "AWAITING REVIEW")
    page.locator("#prolific-sync").click()
    page.wait_for_selector("#prolific-participants")
    assert "1 completed" in page.locator("#prolific-review-counts").inner_text()

    page.locator("#prolific-review").click()
    page.locator("#prolific-review-yes").click()
    page.wait_for_selector("#prolific-participants")
    assert prolific.status_of("alice") == "APPROVED"

    page.locator("#bonus-per-item").fill("0.10")
    page.locator("#bonus-quota").fill("1")
    page.locator("#prolific-bonus-preview").click()
    page.wait_for_selector("#prolific-bonus-batches")
    assert "Previewed, not paid" in page.locator("#prolific-bonus-batches").inner_text()
    page.locator("#prolific-pay").click()
    page.locator("#prolific-pay-yes").click()
    page.wait_for_function("() => document.querySelector('#prolific-bonus-batches').textContent.includes('Paid')")
    assert len(prolific.pay_calls) == 1
    assert prolific.bonuses[prolific.pay_calls[0]]["csv"] == "alice,0.20\n"
    assert prolific.token not in page.content()
    assert not [e for e in errors if "Content Security Policy" in e]
