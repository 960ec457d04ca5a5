"""The studies list and the study page read linearly: no query joins two of a study's
multi-valued relations (items, annotations, participations) at once, whose product grows as
items × annotations × participants; the number of queries does not grow with the number of
studies; and the counts equal hand counts (bench/studies_pages.py times the pages)."""
from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotate.models import Annotation, Participation
from annotate.selectors import study_list
from annotate.testing import annotate_next, annotator_start, study_make

pytestmark = pytest.mark.django_db

MULTI_VALUED = ("annotate_studyitem", "annotate_annotation", "annotate_participation", "annotate_assignment")


def _pid(n: int) -> str:
    return f"{n:024x}"


def _labelled(name: str, *, n_items: int, per_item: int, n_annotators: int, n_attention: int = 0):
    """``n_annotators`` annotators each label up to every item (k = ``per_item``)."""
    study = study_make(n_items=n_items, annotators_per_item=per_item, name=name, n_attention=n_attention,
                       **({"attention_check_rate": 0.5} if n_attention else {}))
    for n in range(n_annotators):
        p = annotator_start(study, _pid(1000 * study.pk + n))
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
    by_slug = {s.slug: s for s in study_list()}
    for study in (a, b, empty):
        row = by_slug[study.slug]
        hand = (study.items.filter(role="main").count(),
                Annotation.objects.filter(study=study, source="main").count(),
                Participation.objects.filter(study=study).count())
        assert (row.n_items, row.n_annotations, row.n_participants) == hand
    assert (by_slug[a.slug].n_items, by_slug[a.slug].n_annotations, by_slug[a.slug].n_participants) == (3, 6, 3)
    assert (by_slug[b.slug].n_items, by_slug[b.slug].n_annotations, by_slug[b.slug].n_participants) == (5, 15, 4)
    # Attention-check answers are not main-pool annotations.
    assert Annotation.objects.filter(study=b, source="attention").exists()
    assert (by_slug[empty.slug].n_items, by_slug[empty.slug].n_annotations, by_slug[empty.slug].n_participants) == (2, 0, 1)


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
    assert _queries(researcher_client, reverse("annotate:study_detail", args=[small.slug])) == \
        _queries(researcher_client, reverse("annotate:study_detail", args=[big.slug]))
