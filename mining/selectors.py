"""Reads of the mining app."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, TypedDict

from django.db.models import Count, Q, QuerySet, TextField
from django.db.models.functions import Cast

from mining.models import Corpus, CorpusImport, Document, MiningRun, Procedure, Split, SplitReport, Topic


class TopicCounts(TypedDict):
    """The procedure counts ``topic_list`` annotates each topic with."""

    n_procedures: int
    n_bench: int
    n_train: int
    n_constrained: int


if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


def topic_list() -> QuerySet[WithAnnotations[Topic, TopicCounts]]:
    return Topic.objects.annotate(
        n_procedures=Count("procedures"),
        n_bench=Count("procedures", filter=Q(procedures__split=Split.BENCH)),
        n_train=Count("procedures", filter=Q(procedures__split=Split.TRAIN)),
        n_constrained=Count("procedures", filter=Q(procedures__split=Split.CONSTRAINED)),
    ).order_by("position", "name")


def procedures_of_mining_run(queryset: QuerySet[Procedure], name: str) -> QuerySet[Procedure]:
    """The procedures of ``queryset`` that the mining run ``name`` produced: every one its
    documents became, also those an earlier run stored first. A name no run here has is
    looked up in the procedures' provenance (records imported from a file that names the
    run that mined them)."""
    if MiningRun.objects.filter(name=name).exists():
        return queryset.filter(mining_runs__name=name)
    return queryset.filter(provenance__mining_run=name)


def procedure_list(*, q: str = "", topic: str = "", split: str = "", mining_run: str = "") -> QuerySet[Procedure]:
    """Procedures filtered by a free-text query (goal, steps, resources, source id), topic
    slug, split and the mining run that produced them (its name)."""
    queryset = Procedure.objects.select_related("topic").order_by("topic__position", "id")
    if topic:
        queryset = queryset.filter(topic__slug=topic)
    if split:
        queryset = queryset.filter(split=split)
    if mining_run:
        queryset = procedures_of_mining_run(queryset, mining_run)
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
        rows.append(
            {
                "topic": topic.name,
                "slug": topic.slug,
                Split.BENCH.value: topic.n_bench,
                Split.TRAIN.value: topic.n_train,
                Split.CONSTRAINED.value: topic.n_constrained,
                Split.NONE.value: topic.n_procedures - topic.n_bench - topic.n_train - topic.n_constrained,
                "total": topic.n_procedures,
            }
        )
    return rows


def corpus_list() -> QuerySet[Corpus]:
    return Corpus.objects.order_by("name")


def document_list(*, corpus: Corpus, q: str = "", topic: str = "") -> QuerySet[Document]:
    """A corpus's documents, filtered by topic slug (``none``: no topic) and by a query
    contained in the doc id, the URL or the text."""
    queryset = Document.objects.filter(corpus=corpus).select_related("topic").order_by("id")
    if topic == "none":
        queryset = queryset.filter(topic__isnull=True)
    elif topic:
        queryset = queryset.filter(topic__slug=topic)
    q = q.strip()
    if q:
        queryset = queryset.filter(Q(doc_id__icontains=q) | Q(url__icontains=q) | Q(text__icontains=q))
    return queryset


def document_counts_by_topic(*, corpus: Corpus) -> list[dict]:
    """One row per topic that has documents in the corpus (and one for documents without a topic)."""
    counts: dict[int | None, int] = dict(
        Document.objects.filter(corpus=corpus)
        .order_by()
        .values("topic_id")
        .annotate(n=Count("id"))
        .values_list("topic_id", "n")
    )
    rows = [
        {"topic": t.name, "slug": t.slug, "documents": counts[t.pk]}
        for t in Topic.objects.filter(pk__in=[k for k in counts if k is not None]).order_by("position", "name")
    ]
    if counts.get(None):
        rows.append({"topic": "(no topic)", "slug": "none", "documents": counts[None]})
    return rows


def document_sample(*, corpus: Corpus, n: int, seed: int, topic: str = "") -> list[Document]:
    """``n`` documents drawn at random (the same ones for the same seed and corpus), in id order."""
    queryset = document_list(corpus=corpus, topic=topic)
    total = queryset.count()
    positions = sorted(random.Random(seed).sample(range(total), min(max(n, 0), total)))
    return [queryset[position] for position in positions]


def corpus_import_list() -> QuerySet[CorpusImport]:
    return CorpusImport.objects.select_related("corpus").order_by("-created_at", "-id")


def split_report_list() -> QuerySet[SplitReport]:
    return SplitReport.objects.defer("records", "dropped").order_by("-created_at", "-id")
