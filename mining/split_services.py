"""The How2Bench / How2Train split: ``procedure_split`` puts up to N procedures per topic in the
benchmark, drops benchmark candidates too close to another procedure (``mining.split_dedup``),
puts the rest in training, and writes the ``SplitReport`` row and its JSON file;
``split_report_document`` is that report as a document."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.db import transaction

from core.app_errors import InvalidInput
from core.record_output import atomic_output, output_problem
from mining.constants import BENCH_PER_TOPIC, DEDUP_TAU
from mining.embeddings import configured_model_name, embed_texts, embedding_device
from mining.models import Procedure, Split, SplitReport
from mining.split_dedup import nearest_train, procedure_text, select_benchmark


def procedure_split(
    *,
    per_topic: int = BENCH_PER_TOPIC,
    seed: int = 0,
    tau: float = DEDUP_TAU,
    embedding_model: str | None = None,
    report_path: str | Path | None = None,
) -> SplitReport:
    """Split every procedure into How2Bench (up to ``per_topic`` per topic, seeded) and
    How2Train (the rest), dropping benchmark candidates whose nearest other procedure is
    above ``tau`` (How2Everything App. E.1; the rule is explained in ``split_dedup``).

    Embedding happens before the transaction; the splits, the ``SplitReport`` row and the
    JSON report file are written together (the file appears only when complete, and a
    failure leaves every split as it was)."""
    if per_topic < 0:
        raise InvalidInput("per_topic must not be negative")
    if not 0.0 <= tau <= 1.0:
        raise InvalidInput("tau must be between 0 and 1")
    if report_path is not None:
        problem = output_problem(report_path)
        if problem:
            raise InvalidInput(problem)
    # Constrained procedures (CoScript) are a slice of their own and keep their split.
    rows = list(
        Procedure.objects.exclude(split=Split.CONSTRAINED)
        .order_by("id")
        .values_list("id", "topic__name", "goal", "steps")
    )
    if not rows:
        raise InvalidInput("there are no procedures to split")
    model_name = configured_model_name(embedding_model or getattr(settings, "EMBEDDING_MODEL", ""))
    vectors = embed_texts((procedure_text(goal, steps) for _, _, goal, steps in rows), model=model_name)
    # The search runs where the embeddings ran (a GPU when there is one), with the same result.
    device = embedding_device(model_name)
    ids = [row[0] for row in rows]
    topics = [row[1] for row in rows]
    del rows
    selection = select_benchmark(topics=topics, vectors=vectors, per_topic=per_topic, seed=seed, tau=tau, device=device)
    neighbours = nearest_train(vectors, selection.bench, selection.train, device=device)
    records = [
        {
            "procedure_id": ids[b],
            "topic": topics[b],
            "nearest_train_id": ids[t] if t >= 0 else None,
            "cosine": None if c is None else round(c, 6),
        }
        for b, (t, c) in zip(selection.bench, neighbours)
    ]
    dropped = []
    for d in selection.dropped:
        other, cosine = selection.candidate_neighbour[d]
        dropped.append(
            {"procedure_id": ids[d], "topic": topics[d], "nearest_id": ids[other], "cosine": round(cosine, 6)}
        )
    topic_rows = [{"topic": topic, **counts} for topic, counts in selection.per_topic.items()]
    with transaction.atomic():
        for split, members in ((Split.TRAIN, selection.train), (Split.BENCH, selection.bench)):
            for start in range(0, len(members), 900):  # SQLite's historical limit of bound variables
                chunk = [ids[i] for i in members[start : start + 900]]
                Procedure.objects.filter(id__in=chunk).update(split=split)
        report = SplitReport.objects.create(
            embedding_model=model_name,
            per_topic=per_topic,
            seed=seed,
            tau=tau,
            n_procedures=len(ids),
            n_bench=len(selection.bench),
            n_train=len(selection.train),
            topics=topic_rows,
            records=records,
            dropped=dropped,
        )
        target = Path(report_path) if report_path else Path(settings.VAR_DIR) / "splits" / f"split-{report.pk}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(target) as handle:
            handle.write(json.dumps(split_report_document(report), ensure_ascii=False, indent=1).encode("utf-8"))
        report.report_file = str(target)
        report.save(update_fields=["report_file"])
    return report


def split_report_document(report: SplitReport) -> dict:
    """The JSON report of a split: its parameters, per-topic counts, and the per-procedure records."""
    return {
        "split_report_id": report.pk,
        "created_at": report.created_at.isoformat() if report.created_at else None,
        "embedding_model": report.embedding_model,
        "per_topic": report.per_topic,
        "seed": report.seed,
        "tau": report.tau,
        "n_procedures": report.n_procedures,
        "n_bench": report.n_bench,
        "n_train": report.n_train,
        "topics": report.topics,
        "bench": report.records,
        "dropped": report.dropped,
    }
