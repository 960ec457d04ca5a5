"""In Chromium, under the Content-Security-Policy: a researcher opens a study's data manager from
the study page, filters the table, sorts it, ticks a page of items with the page's own box and
excludes their answers with a reason; the table then says so, and the filters are kept."""

from __future__ import annotations

import pytest

from tests.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_filters_sorts_selects_and_excludes_on_the_real_page(live_server, page):
    from annotate.models import Annotation
    from annotate.testing import annotate_next, annotator_start, study_make
    from core.roles import ROLE_RESEARCHER
    from core.services import user_create

    study = study_make(n_items=6, annotators_per_item=2)
    labels = {"p1": lambda n: True, "p2": lambda n: n % 2 == 0}  # items 1, 3, 5 split; 2, 4, 6 unanimous
    for pid, label in labels.items():
        p = annotator_start(study, pid)
        n = 1
        while annotate_next(p, label=label(n)) is not None:
            n += 1
    user_create(username="rita", role=ROLE_RESEARCHER, password="rita-Password-1")
    log_in(page, live_server.url, "rita", "rita-Password-1")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    page.goto(f"{live_server.url}/studies/{study.slug}/")
    page.locator("#data-manager-link").click()
    page.wait_for_selector("#data-table")
    assert "6 items match" in page.locator("#data-count").inner_text()

    page.locator("#f-agreement").select_option("split")
    page.locator("#apply-filters").click()
    page.wait_for_url("**agreement=split**")
    assert "3 items match" in page.locator("#data-count").inner_text()

    page.locator("th a.sort-link[data-sort='item_id']").click()  # ascending
    page.locator("th a.sort-link[data-sort='item_id']").click()  # then descending
    page.wait_for_url("**sort=-item_id**")
    ids = page.locator("#data-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.itemId)")
    assert ids == sorted(ids, reverse=True) and len(ids) == 3

    page.locator("#select-page").check()
    assert page.locator("input.select-item:checked").count() == 3
    page.locator("#bulk-action").select_option("exclude")
    assert page.locator("#bulk-round").is_hidden() and page.locator("#bulk-reason").is_visible()
    page.locator("#bulk-reason").fill("split items checked by hand")
    page.locator("#bulk-annotator").fill("p2")
    page.locator("#bulk-run").click()
    page.wait_for_selector(".messages")
    assert "Excluded 3 answer(s)" in page.locator(".messages").inner_text()
    assert "agreement=split" in page.url and "sort=-item_id" in page.url  # the page as it was
    # p2's answers on the split items are excluded: each item has one counted answer left.
    assert "No item matches" in page.locator("#data-table").inner_text()
    excluded = Annotation.objects.filter(excluded=True)
    assert excluded.count() == 3 and {a.annotator.pid for a in excluded} == {"p2"}
    page.locator("#f-agreement").select_option("too_few")
    page.locator("#apply-filters").click()
    page.wait_for_url("**agreement=too_few**")
    assert "3 items match" in page.locator("#data-count").inner_text()
    assert page.locator(".answer.excluded").count() == 3
    assert not errors, errors
