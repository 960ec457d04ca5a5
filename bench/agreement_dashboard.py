"""Benchmark: the agreement page of a study with 10,000 annotations, from the database.

Builds a study of 3,334 items labelled by 3 of 40 annotators each (10,002 annotations) with
two judges' labels on every item, in PostgreSQL (database how2_bench), then renders the
agreement page (the full report with 1,000 bootstrap resamples, charts and tables) R times
through Django and prints p50/p95, and the time of the report alone.

    .venv/bin/python bench/agreement_dashboard.py [--items 3334] [--repeats 5]"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from bench.llm_throughput import PG_URL, ensure_database  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=3334)
    parser.add_argument("--annotators", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ensure_database()
    env = dict(
        os.environ,
        DATABASE_URL=PG_URL,
        VAR_DIR=tempfile.mkdtemp(prefix="bench-agree-"),
        DJANGO_SETTINGS_MODULE="config.django.base",
        DEBUG="false",
        LOG_LEVEL="WARNING",
        ALLOWED_HOSTS="testserver",
    )
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
    import django

    django.setup()
    from django.test import Client
    from django.utils import timezone

    from annotate.models import Annotation, Annotator, Assignment, Participation
    from annotate.reports.selectors import study_agreement_report
    from annotate.testing import study_make
    from core.roles import ROLE_RESEARCHER
    from core.services import user_create
    from judging.models import Generation, Judgment, LanguageModel
    from mining.models import Procedure, Topic, procedure_identity
    from mining.procedure_services import topics_ensure

    tag = uuid.uuid4().hex[:8]
    rng = random.Random(0)
    started = time.perf_counter()
    study = study_make(n_items=1, name=f"bench {tag}")  # one ordinary item, then the bulk below
    from annotate.models import StudyItem

    topics_ensure()
    topic = Topic.objects.first()
    model, _ = LanguageModel.objects.get_or_create(name=f"bench-{tag}")
    procedures = Procedure.objects.bulk_create(
        [
            Procedure(
                topic=topic,
                goal=f"{tag} goal {i}",
                steps=["a", "b", "c"],
                source_example_id=f"{tag}-{i}",
                identity=procedure_identity(f"{tag}-{i}", f"{tag} goal {i}"),
            )
            for i in range(args.items)
        ]
    )
    generations = Generation.objects.bulk_create(
        [Generation(procedure=p, model=model.name, predicted_steps=["x", "y", "z"]) for p in procedures]
    )
    items = StudyItem.objects.bulk_create(
        [
            StudyItem(
                study=study,
                item_id=f"bench-{i}",
                topic=topic.name,
                goal=f"goal {i}",
                reference_steps=["a", "b", "c"],
                candidate_steps=["x", "y", "z"],
                position=i + 1,
                source={"generation_id": g.pk},
            )
            for i, g in enumerate(generations)
        ]
    )
    truth = [rng.random() < 0.5 for _ in items]
    Judgment.objects.bulk_create(
        [
            Judgment(generation=g, judge=judge, has_failure=t if rng.random() < 0.85 else not t)
            for judge in ("how2judge", "gpt-5")
            for g, t in zip(generations, truth)
        ]
    )
    annotators = Annotator.objects.bulk_create(
        [Annotator(pid=f"{tag}{n:04d}".ljust(24, "0")) for n in range(args.annotators)]
    )
    participations = Participation.objects.bulk_create(
        [Participation(study=study, annotator=a, state="working") for a in annotators]
    )
    now = timezone.now()
    assignments, annotations = [], []
    for index, (item, _truth) in enumerate(zip(items, truth)):
        for k in range(3):
            slot = (index * 3 + k) % args.annotators
            assignments.append(
                Assignment(
                    study=study,
                    item=item,
                    participation=participations[slot],
                    annotator=annotators[slot],
                    role="main",
                    status="submitted",
                    reserved_at=now,
                    lease_expires_at=now,
                    first_served_at=now,
                    submitted_at=now,
                )
            )
    Assignment.objects.bulk_create(assignments, batch_size=2000)
    for a, index in zip(assignments, range(len(assignments))):
        t = truth[index // 3]
        label = t if rng.random() < 0.8 else not t
        failures = [{"description": "d", "L1_steps": [1], "L2_steps": [rng.randint(1, 3)]}] if label else []
        annotations.append(
            Annotation(
                assignment=a,
                study=study,
                item=a.item,
                participation=a.participation,
                annotator=a.annotator,
                source="main",
                has_failure=label,
                failures=failures,
                guideline_version="v",
                l1_hash="h",
                l2_hash="h",
                interface_version="1",
                first_served_at=now - timedelta(seconds=100),
                submitted_at=now,
                wall_seconds=100,
                active_seconds=rng.uniform(60, 140),
            )
        )
    Annotation.objects.bulk_create(annotations, batch_size=2000)
    print(f"built a study with {len(annotations)} annotations in {time.perf_counter() - started:.1f} s")

    timings = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        study_agreement_report(study)
        timings.append(time.perf_counter() - t0)
    print(f"report alone (1,000 resamples): p50 {statistics.median(timings):.2f} s, max {max(timings):.2f} s")
    user = user_create(username=f"bench-{tag}", role=ROLE_RESEARCHER)
    from django.contrib.auth import get_user_model

    client = Client()
    client.force_login(get_user_model().objects.get(username=user.username))
    page_times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        response = client.get(f"/studies/{study.slug}/agreement/")
        assert response.status_code == 200, response.status_code
        page_times.append(time.perf_counter() - t0)
    q = statistics.quantiles(page_times, n=20) if len(page_times) > 1 else page_times * 19
    print(
        f"agreement page ({len(annotations)} annotations): p50 {statistics.median(page_times):.2f} s, "
        f"p95 {q[18]:.2f} s over {args.repeats} renders"
    )


if __name__ == "__main__":
    main()
