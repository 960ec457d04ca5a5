"""In Chromium, under the Content-Security-Policy: a researcher reviews a study's annotations
from the study page (bulk accept; a rejection refused until its reason is long enough, then
recorded with its category; a correction), settles an item into a gold label, and reads
agreement with gold beside agreement with the majority."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotate.models import Annotation
from annotate.review.models import GoldLabel
from tests.browser import log_in
from tests.test_review_adjudication import REASON, label_items

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_reviews_and_adjudicates_from_the_browser(live_server, page):
    from annotate.testing import study_make
    from core.roles import ROLE_RESEARCHER
    from core.services import user_create

    study = study_make(n_items=2, annotators_per_item=3, name="Tea review")
    for pid, says in (("p1", {"item-1"}), ("p2", {"item-1"}), ("p3", set())):
        label_items(study, pid, says)
    user_create(username="rita", role=ROLE_RESEARCHER, password="rita-Password-1")
    log_in(page, live_server.url, "rita", "rita-Password-1")

    page.goto(f"{live_server.url}/studies/{study.slug}/")
    page.locator("#review-link").click()
    expect(page.locator("#review-counts")).to_contain_text("Not reviewed: 6")
    item2 = Annotation.objects.filter(study=study, item__item_id="item-2").values_list("pk", flat=True)
    for pk in item2:
        page.get_by_label(f"Annotation {pk}").check()
    page.locator("#review-bulk-submit").click()
    expect(page.locator("#review-counts")).to_contain_text("accepted: 3")

    page.get_by_role("link", name="item-1").first.click()
    p1 = Annotation.objects.get(study=study, item__item_id="item-1", annotator__pid="p1")
    card = page.locator(f"#annotation-{p1.pk}")
    card.locator("input[value=reject]").check()
    card.locator("select[name=rejection_category]").select_option("LOW_EFFORT")
    card.locator("textarea[name=reason]").fill("Too short.")
    card.get_by_role("button", name="Record the decision").click()
    expect(page.locator("#review-error")).to_contain_text("reason")
    card = page.locator(f"#annotation-{p1.pk}")
    card.locator("input[value=reject]").check()
    card.locator("select[name=rejection_category]").select_option("LOW_EFFORT")
    card.locator("textarea[name=reason]").fill(REASON)
    card.get_by_role("button", name="Record the decision").click()
    expect(page.locator(f"#annotation-{p1.pk} .review-state")).to_have_text("Rejected")
    p1.refresh_from_db()
    assert p1.excluded and p1.reviews.get().rejection_category == "LOW_EFFORT"

    page.locator("#gold-answer").fill('{"has_failure": false, "failures": []}')
    page.locator("#gold-note").fill("Step 2 does boil the water; the failure reported is a misreading.")
    page.locator("#gold-submit").click()
    expect(page.locator("#gold-label")).to_contain_text("Step 2 does boil the water")
    assert GoldLabel.objects.get().has_failure is False

    page.goto(f"{live_server.url}/studies/{study.slug}/agreement/?human=gold")
    expect(page.locator("#calibration-human-source")).to_have_text("the adjudicated gold labels only")
    p3_row = page.locator("#gold-agreement-annotators tr[data-rater=p3]")
    expect(p3_row).to_contain_text("1.000")
    expect(p3_row).to_contain_text("n = 1")
