"""The studies list and the study page read linearly: no query joins two of a study's
multi-valued relations (items, annotations, participations) at once, whose product grows as
items × annotations × participants; the number of queries does not grow with the number of
studies; and the counts equal hand counts (bench/studies_pages.py times the pages)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotate.models import Annotation, Participation
from annotate.studies.selectors import study_list
from annotate.testing import annotate_next, annotator_start, study_make

pytestmark = pytest.mark.django_db

MULTI_VALUED = ("annotate_studyitem", "annotate_annotation", "annotate_participation", "annotate_assignment")


def _pid(n: int) -> str:
    return f"{n:024x}"


def _labelled(name: str, *, n_items: int, per_item: int, n_annotators: int, n_attention: int = 0):
    """``n_annotators`` annotators each label up to every item (k = ``per_item``)."""
    attention: dict[str, Any] = {"attention_check_rate": 0.5} if n_attention else {}
    study = study_make(
        n_items=n_items,
        annotators_per_item=per_item,
        name=name,
        n_attention=n_attention,
        **attention,
    )
    # Everyone enters before anyone labels (a full study turns new participants away).
    people = [annotator_start(study, _pid(1000 * study.pk + n)) for n in range(n_annotators)]
    for p in people:
        while annotate_next(p, label=True) is not None:  # right on every attention check (expected: True)
            pass
    return study


def _outer_joins(sql: str) -> list[str]:
    """Tables the outermost query joins (joins inside parenthesised subqueries left out)."""
    depth, outer = 0, []
    for char in sql:
        depth += char == "("
        depth -= char == ")"
        outer.append(char if depth == 0 else " ")
    return re.findall(r'JOIN\s+"?(\w+)"?', "".join(outer))


def test_the_studies_list_query_joins_no_multi_valued_relation():
    sql = str(study_list().query)
    assert [t for t in _outer_joins(sql) if t in MULTI_VALUED] == []
    assert "DISTINCT" not in sql.upper()


def test_the_studies_list_counts_equal_hand_counts():
    a = _labelled("Three by two", n_items=3, per_item=2, n_annotators=3)
    b = _labelled("Five by three", n_items=5, per_item=3, n_annotators=4, n_attention=2)
    empty = study_make(n_items=2, name="Nobody yet")
    annotator_start(empty, _pid(99))  # entered, no work yet
    by_slug: dict[str, Any] = {s.slug: s for s in study_list()}  # with the counts study_list annotates
    for study in (a, b, empty):
        row = by_slug[study.slug]
        hand = (
            study.items.filter(role="main").count(),
            Annotation.objects.filter(study=study, source="main").count(),
            Participation.objects.filter(study=study).count(),
        )
        assert (row.n_items, row.n_annotations, row.n_participants) == hand
    assert (by_slug[a.slug].n_items, by_slug[a.slug].n_annotations, by_slug[a.slug].n_participants) == (3, 6, 3)
    assert (by_slug[b.slug].n_items, by_slug[b.slug].n_annotations, by_slug[b.slug].n_participants) == (5, 15, 4)
    # Attention-check answers are not main-pool annotations.
    assert Annotation.objects.filter(study=b, source="attention").exists()
    assert (by_slug[empty.slug].n_items, by_slug[empty.slug].n_annotations, by_slug[empty.slug].n_participants) == (
        2,
        0,
        1,
    )


def test_the_studies_page_shows_the_counts(researcher_client):
    study = _labelled("Shown", n_items=3, per_item=2, n_annotators=2)
    html = researcher_client.get(reverse("annotate:study_list")).content.decode()
    row = html.split(f'href="/studies/{study.slug}/"')[1].split("</tr>")[0]
    assert re.findall(r'<td class="num">(\d+)</td>', row) == ["3", "6", "2"]


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def test_the_number_of_queries_of_the_studies_page_does_not_grow_with_studies(researcher_client):
    _labelled("First", n_items=2, per_item=1, n_annotators=1)
    one = _queries(researcher_client, reverse("annotate:study_list"))
    for n in range(6):
        _labelled(f"More {n}", n_items=2, per_item=2, n_annotators=2)
    assert _queries(researcher_client, reverse("annotate:study_list")) == one


def test_the_number_of_queries_of_the_study_page_does_not_grow_with_items_annotators_or_rounds(researcher_client):
    small = _labelled("Small", n_items=2, per_item=1, n_annotators=1)
    big = _labelled("Big", n_items=8, per_item=3, n_annotators=5)
    assert _queries(researcher_client, reverse("annotate:study_detail", args=[small.slug])) == _queries(
        researcher_client, reverse("annotate:study_detail", args=[big.slug])
    )


def test_the_study_progress_counts_equal_hand_counts():
    from annotate.participation.reservations import assignment_next
    from annotate.studies.selectors import study_progress_get

    study = study_make(n_items=5, annotators_per_item=2, name="Progress")
    for n in range(2):  # two annotators label items 1-3 (complete); a third labels item 4
        p = annotator_start(study, _pid(n))
        for _ in range(3):
            assert annotate_next(p, label=True) is not None
    p = annotator_start(study, _pid(7))
    held = assignment_next(participation=p)  # a live reservation on item 4 or 5 (1-3 are full)
    assert held is not None and held.item.item_id in ("item-4", "item-5")
    progress = study_progress_get(study)
    # Items 1-3: 2 of 2 (complete); the held item: in progress; the other: open.
    assert (
        progress["items_total"],
        progress["items_complete"],
        progress["items_in_progress"],
        progress["items_open"],
    ) == (5, 3, 1, 1)
    assert progress["annotations_main"] == 6 and progress["annotations_excluded"] == 0
    assert progress["participants"] == 3 and progress["live_annotators"] == 3
    assert progress["live_reservations"] == 1


def test_the_study_page_shows_one_page_of_items_and_of_annotators(researcher_client, monkeypatch):
    import annotate.studies.selectors as selectors

    monkeypatch.setattr(selectors, "STUDY_PAGE_ITEMS", 3)
    monkeypatch.setattr(selectors, "STUDY_PAGE_ANNOTATORS", 2)
    monkeypatch.setattr(selectors.study_items_page, "__kwdefaults__", {"page": 1, "per_page": 3})
    monkeypatch.setattr(selectors.study_annotators_page, "__kwdefaults__", {"page": 1, "per_page": 2})
    study = _labelled("Paged", n_items=7, per_item=3, n_annotators=3)
    url = reverse("annotate:study_detail", args=[study.slug])
    first = researcher_client.get(url)
    assert [r["item"].item_id for r in first.context["items"]] == ["item-1", "item-2", "item-3"]
    assert all(len(r["annotations"]) == 3 for r in first.context["items"])
    assert len(first.context["annotators"]) == 2
    html = first.content.decode()
    assert "Items 1–3 of 7" in html and "Annotators 1–2 of 3" in html
    last = researcher_client.get(url, {"items_page": 3, "annotators_page": 2})
    assert [r["item"].item_id for r in last.context["items"]] == ["item-7"]
    assert [r["pid"] for r in last.context["annotators"]] == [_pid(1000 * study.pk + 2)]


@pytest.mark.parametrize("hostile", ["abc", "-1", "0", "1e9", "9" * 5000, "1; DROP TABLE x", "２", "1" * 13])
def test_a_hostile_page_number_on_the_study_page_is_not_an_error(researcher_client, hostile):
    study = _labelled("Hostile pages", n_items=2, per_item=1, n_annotators=1)
    response = researcher_client.get(
        reverse("annotate:study_detail", args=[study.slug]), {"items_page": hostile, "annotators_page": hostile}
    )
    assert response.status_code == 200
    assert len(response.context["items"]) == 2


def test_the_round_alpha_is_recomputed_when_annotations_arrive():
    from annotate.studies.round_selectors import study_round_summaries

    study = _labelled("Fresh", n_items=3, per_item=2, n_annotators=1)
    before = study_round_summaries(study)[0]
    assert before["n_annotations"] == 3 and "as_of" not in before
    p = annotator_start(study, _pid(555))
    assert annotate_next(p, label=False) is not None
    after = study_round_summaries(study)[0]
    assert after["n_annotations"] == 4 and "as_of" not in after
    assert after["alpha"] is not None  # one item now has two annotations that disagree


def test_a_slow_round_alpha_is_shown_with_its_time_and_the_annotations_since(monkeypatch):
    import annotate.studies.round_selectors as selectors

    monkeypatch.setattr(selectors, "ROUND_ALPHA_SLOW_SECONDS", 0.0)  # every computation counts as slow
    study = _labelled("Slow", n_items=3, per_item=2, n_annotators=1)
    first = selectors.study_round_summaries(study)[0]
    p = annotator_start(study, _pid(556))
    assert annotate_next(p, label=False) is not None
    shown = selectors.study_round_summaries(study)[0]
    assert shown["n_annotations"] == first["n_annotations"] == 3
    assert shown["n_new"] == 1 and shown["as_of"] is not None
    monkeypatch.setattr(selectors, "ROUND_ALPHA_REUSE_SECONDS", 0)  # the minute is over
    again = selectors.study_round_summaries(study)[0]
    assert again["n_annotations"] == 4 and "as_of" not in again
