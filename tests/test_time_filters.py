"""Time filters of the API lists take every ISO 8601 instant Python can hold, whatever its UTC
offset, on SQLite and PostgreSQL alike (issue 28, F-01: ``created_after=9999-12-31T23:59+18:00``
was a 500 "time zone displacement out of range" on PostgreSQL, which takes offsets up to
15:59 only), and an instant outside the years 1-9999 once in UTC is a 400 naming the filter."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

RUN_LISTS = ("/api/judging/generation-runs/", "/api/judging/judge-runs/", "/api/mining/runs/")
EXTREMES = {
    "created_after": ["9999-12-31T23:59+18:00", "9999-12-31T23:59:59-00:00", "2026-01-31T00:00Z"],
    "created_before": ["0001-01-01T00:00-23:59", "0001-01-01T00:00+00:00"],
}


@pytest.mark.parametrize("url", RUN_LISTS)
def test_run_lists_take_any_offset_at_the_ends_of_time(researcher_client, url):
    for name, values in EXTREMES.items():
        for value in values:
            response = researcher_client.get(url, {name: value})
            assert response.status_code == 200, (name, value, response.content[:300])


@pytest.mark.parametrize("value", ["0001-01-01T00:00+00:01", "9999-12-31T23:59-00:01"])
def test_an_instant_outside_the_calendar_once_in_utc_is_a_400_naming_the_filter(researcher_client, value):
    for name in ("created_after", "created_before"):
        response = researcher_client.get(RUN_LISTS[0], {name: value})
        assert response.status_code == 400 and name in response.json(), (name, value, response.content[:300])


def test_annotation_lists_take_them_too(researcher_client):
    from annotate.testing import study_make

    study = study_make(n_items=2)
    url = f"/api/studies/{study.slug}/annotations/"
    for value in ("9999-12-31T23:59+18:00", "0001-01-01T00:00-23:59"):
        for name in ("submitted_after", "submitted_before"):
            response = researcher_client.get(url, {name: value})
            assert response.status_code == 200, (name, value, response.content[:300])
    response = researcher_client.get(url, {"submitted_after": "0001-01-01T00:00+00:01"})
    assert response.status_code == 400 and "submitted_after" in response.json()
