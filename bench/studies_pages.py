"""Benchmark: the studies list and the study page of a large study, in PostgreSQL.

Builds (with bulk_create, in a database of its own, dropped and created afresh each run:
``studies_bench`` by default) one critical-failure study of 10,000 items, each labelled by 3 of
1,000 participants (30,000 annotations, 30 per participant), plus a few small studies beside it,
then renders ``/studies/`` and the big study's page through the Django test client (logged in as
a researcher) R times each and prints p50 / p95, the ratio to the 1 s target and the number of
SQL queries of one render. With ``--old-list`` it also runs the former studies-list query (three
``Count(distinct=True)`` over items × annotations × participants) under a statement timeout, to
show what the rewrite replaced.

    .venv/bin/python bench/studies_pages.py [--items 10000] [--participants 1000] [--per-item 3]
        [--small-studies 5] [--repeats 20] [--database studies_bench] [--old-list 30]

Prints a Markdown table. Never uses the test databases (``test``, ``test_test``)."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
PG = "postgres://postgres@127.0.0.1:5432/{name}"
TARGET_SECONDS = 1.0
RESERVED_NAMES = {"test", "test_test", "postgres", "template0", "template1"}


def fresh_database(name: str) -> str:
    if name in RESERVED_NAMES:
        raise SystemExit(f"--database {name!r}: that database belongs to something else; pick another name")
    subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", name], check=True)
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", name], check=True)
    return PG.format(name=name)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def build(args: argparse.Namespace):
    """The big study and the small ones; returns the big study."""
    from django.utils import timezone

    from annotate.models import Annotation, Annotator, Assignment, Participation, StudyItem
    from annotate.testing import annotate_next, annotator_start, study_make

    rng = random.Random(0)
    for n in range(args.small_studies):
        small = study_make(n_items=3, annotators_per_item=2, name=f"Small study {n + 1}")
        for pid in (f"{2 * n + 1:x}".rjust(24, "f"), f"{2 * n + 2:x}".rjust(24, "f")):  # Prolific-shaped
            p = annotator_start(small, pid)
            while annotate_next(p, label=rng.random() < 0.5) is not None:
                pass
    study = study_make(n_items=1, annotators_per_item=args.per_item, name="Big study")
    items = list(StudyItem.objects.filter(study=study))
    items += StudyItem.objects.bulk_create(
        [
            StudyItem(
                study=study,
                item_id=f"bench-{i}",
                topic="Food & Dining",
                goal=f"Goal {i}: make a pot of tea.",
                reference_steps=[f"Reference step {s}." for s in range(1, 6)],
                candidate_steps=[f"Candidate step {s}." for s in range(1, 6)],
                position=i + 1,
                role="main",
            )
            for i in range(1, args.items)
        ],
        batch_size=2000,
    )
    annotators = Annotator.objects.bulk_create(
        [Annotator(pid=f"{n:024x}") for n in range(args.participants)], batch_size=2000
    )
    participations = Participation.objects.bulk_create(
        [
            Participation(
                study=study, annotator=a, state="annotating", prolific_study_id="bench", prolific_session_id=f"s{n}"
            )
            for n, a in enumerate(annotators)
        ],
        batch_size=2000,
    )
    now = timezone.now()
    assignments = []
    for index, item in enumerate(items):
        for k in range(args.per_item):
            slot = (index * args.per_item + k) % len(participations)
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
    annotations = []
    for a in assignments:
        label = rng.random() < 0.5
        failures = [{"description": "Step order breaks it.", "L1_steps": [1], "L2_steps": [2]}] if label else []
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
                answer={"has_failure": label, "failures": failures},
                guideline_version="v1",
                l1_hash="h",
                l2_hash="h",
                interface_version="1",
                first_served_at=now - timedelta(seconds=120),
                submitted_at=now,
                wall_seconds=120,
                active_seconds=rng.uniform(60, 140),
            )
        )
    Annotation.objects.bulk_create(annotations, batch_size=2000)
    return study


def time_page(client, url: str, repeats: int) -> dict[str, float]:
    from django.db import connection

    queries: list[str] = []

    def count(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        t0 = time.perf_counter()
        response = client.get(url)
        first = time.perf_counter() - t0
    assert response.status_code == 200, (url, response.status_code)
    size = len(response.content)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - t0)
        assert response.status_code == 200, (url, response.status_code)
    return {
        "first": first,
        "p50": statistics.median(times),
        "p95": percentile(times, 0.95),
        "queries": len(queries),
        "kib": size / 1024,
    }


def old_list_query(study_pk: int, timeout_s: int) -> str:
    """The former studies-list query (three Count(distinct=True) over one join of items,
    annotations and participations) on the big study, under a statement timeout."""
    from django.db import OperationalError, connection, transaction
    from django.db.models import Count, Q
    from django.db.utils import DatabaseError

    from annotate.models import Study

    qs = Study.objects.filter(pk=study_pk).annotate(
        n_items=Count("items", filter=Q(items__role="main"), distinct=True),
        n_annotations=Count("annotations", filter=Q(annotations__source="main"), distinct=True),
        n_participants=Count("participations", distinct=True),
    )
    t0 = time.perf_counter()
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL statement_timeout = {int(timeout_s * 1000)}")
                # The join's sort spills to disk: cap it, or it fills the disk before the timeout.
                cursor.execute("SET LOCAL temp_file_limit = '1GB'")
            row = qs.values_list("n_items", "n_annotations", "n_participants").get()
    except (OperationalError, DatabaseError):
        return (
            f"no answer after {time.perf_counter() - t0:.1f} s (cancelled by the {timeout_s} s statement "
            f"timeout or the 1 GB limit on temporary files)"
        )
    return f"{time.perf_counter() - t0:.1f} s ({row})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--participants", type=int, default=1_000)
    parser.add_argument("--per-item", type=int, default=3, help="annotations per item")
    parser.add_argument("--small-studies", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--database", default="studies_bench")
    parser.add_argument(
        "--old-list",
        type=int,
        default=0,
        metavar="SECONDS",
        help="also run the former studies-list query with this statement timeout",
    )
    args = parser.parse_args()
    if args.per_item > args.participants:
        parser.error("--per-item cannot exceed --participants (nobody labels an item twice)")
    url = fresh_database(args.database)
    env = dict(
        os.environ,
        DATABASE_URL=url,
        VAR_DIR=tempfile.mkdtemp(prefix="bench-studies-"),
        DJANGO_SETTINGS_MODULE="config.django.base",
        DEBUG="false",
        LOG_LEVEL="WARNING",
        ALLOWED_HOSTS="testserver",
    )
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from annotate.models import Annotation, Participation, StudyItem
    from core.roles import ROLE_RESEARCHER
    from core.services import user_create

    t0 = time.perf_counter()
    study = build(args)
    n_items = StudyItem.objects.filter(study=study).count()
    n_annotations = Annotation.objects.filter(study=study).count()
    n_participants = Participation.objects.filter(study=study).count()
    print(
        f"built: study {study.slug!r} with {n_items:,} items, {n_annotations:,} annotations, "
        f"{n_participants:,} participants, beside {args.small_studies} small studies, "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    user = user_create(username="bench-researcher", role=ROLE_RESEARCHER)
    client = Client()
    client.force_login(get_user_model().objects.get(username=user.username))
    client.get("/studies/new/")  # loads the URL configuration, middleware and templates before timing
    rows = [
        ("`/studies/`", time_page(client, "/studies/", args.repeats)),
        (f"`/studies/{study.slug}/`", time_page(client, f"/studies/{study.slug}/", args.repeats)),
    ]
    print()
    print("First render: the study page's first one computes the round alpha (1,000 resamples) and caches it.")
    print(f"| page | first render | p50 | p95 | p95 / {TARGET_SECONDS:g} s target | SQL queries | size |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, r in rows:
        print(
            f"| {name} | {r['first']:.3f} s | {r['p50']:.3f} s | {r['p95']:.3f} s | "
            f"{r['p95'] / TARGET_SECONDS:.2f} | {r['queries']} | {r['kib']:.0f} KiB |"
        )
    print(
        f"\n({args.repeats} renders each after the first; Django test client, PostgreSQL at 127.0.0.1, "
        f"database {args.database!r})"
    )
    if args.old_list:
        print(f"former studies-list query on the big study: {old_list_query(study.pk, args.old_list)}")


if __name__ == "__main__":
    main()
