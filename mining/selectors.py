"""Reads of the mining app."""
from __future__ import annotations

from django.db.models import Count, Q, QuerySet, TextField
from django.db.models.functions import Cast

from mining.models import Procedure, Split, Topic


def topic_list() -> QuerySet[Topic]:
    return Topic.objects.annotate(
        n_procedures=Count("procedures"),
        n_bench=Count("procedures", filter=Q(procedures__split=Split.BENCH)),
        n_train=Count("procedures", filter=Q(procedures__split=Split.TRAIN)),
    ).order_by("position", "name")


def procedure_list(*, q: str = "", topic: str = "", split: str = "") -> QuerySet[Procedure]:
    """Procedures filtered by a free-text query (goal, steps, resources, source id), topic slug and split."""
    queryset = Procedure.objects.select_related("topic").order_by("topic__position", "id")
    if topic:
        queryset = queryset.filter(topic__slug=topic)
    if split:
        queryset = queryset.filter(split=split)
    q = q.strip()
    if q:
        queryset = queryset.annotate(
            steps_text=Cast("steps", TextField()), resources_text=Cast("resources", TextField())
        ).filter(
            Q(goal__icontains=q)
            | Q(steps_text__icontains=q)
            | Q(resources_text__icontains=q)
            | Q(source_example_id__icontains=q)
        )
    return queryset


def procedure_counts_by_topic_and_split() -> list[dict]:
    """One row per topic: its name, slug and the number of procedures in each split."""
    rows = []
    for topic in topic_list():
        rows.append({
            "topic": topic.name,
            "slug": topic.slug,
            Split.BENCH.value: topic.n_bench,
            Split.TRAIN.value: topic.n_train,
            Split.NONE.value: topic.n_procedures - topic.n_bench - topic.n_train,
            "total": topic.n_procedures,
        })
    return rows
