"""Benchmark: the data manager's page and API on a study of 10,000 items and about 30,000
annotations, under each filter and sort, on SQLite and PostgreSQL.

Builds (with bulk_create, in a throwaway database: a temporary SQLite file, and a PostgreSQL
database of its own, ``data_manager_bench``, dropped and created afresh) one critical-failure
study of ``--items`` items over 10 topics, each with its judge's label in its source: 90 % of
them answered by 3 of 300 participants (a label drawn at random, 3 % unsure, 1 % broken, 2 %
excluded), 5 % by one, the rest open. Then it asks ``/studies/<slug>/data/`` (the page) and
``/api/studies/<slug>/data/`` (the API) for each case R times through the Django test client,
logged in as a researcher, and prints p50 and the slowest of each with two ratios: to the 1 s
target, and to the ideal measured in the same run, a plain read of the same page of 50 items
and their count with no annotation counted (what any table of these items costs at least).

    .venv/bin/python bench/data_manager.py [--items 10000] [--repeats 5] [--backend sqlite|postgres|both]

Never uses the test databases."""

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
PG_NAME = "data_manager_bench"
TARGET_SECONDS = 1.0
TOPICS = [f"Topic {n}" for n in range(1, 11)]
PARTICIPANTS = 300

# (name, query parameters): every filter and every sort, each alone, then a few together.
CASES: list[tuple[str, dict[str, str]]] = [
    ("no filter (position)", {}),
    ('search q="tea number 77"', {"q": "tea number 77"}),
    ("topic", {"topic": "Topic 3"}),
    ("judge_label=has_failure", {"judge_label": "has_failure"}),
    ("agreement=split", {"agreement": "split"}),
    ("agreement=judge_disagrees", {"agreement": "judge_disagrees"}),
    ("annotator", {"annotator": f"{7:024x}"}),
    ("status=in_progress", {"status": "in_progress"}),
    ("status=open", {"status": "open"}),
    ("flag=broken", {"flag": "broken"}),
    ("flag=none", {"flag": "none"}),
    ("sort=-disagreement", {"sort": "-disagreement"}),
    ("sort=-annotations", {"sort": "-annotations"}),
    ("sort=-flags", {"sort": "-flags"}),
    ("sort=judge_label", {"sort": "judge_label"}),
    ("sort=-last_submitted", {"sort": "-last_submitted"}),
    ("sort=topic, page 100", {"sort": "topic", "page": "100"}),
    ("topic + split + -disagreement", {"topic": "Topic 5", "agreement": "split", "sort": "-disagreement"}),
    ("judge_disagrees + flag=any + page_size=200", {"agreement": "judge_disagrees", "flag": "any", "page_size": "200"}),
]


def build(n_items: int):
    """The study; returns it with its annotation count."""
    from django.utils import timezone

    from annotate.models import Annotation, Annotator, Assignment, Participation, StudyItem
    from annotate.testing import study_make

    rng = random.Random(0)
    study = study_make(n_items=1, annotators_per_item=3, name="Data manager bench")
    StudyItem.objects.filter(study=study).delete()
    items = StudyItem.objects.bulk_create(
        [
            StudyItem(
                study=study,
                item_id=f"gen-{i}",
                topic=TOPICS[i % len(TOPICS)],
                goal=f"Goal {i}: make a pot of tea number {i}.",
                reference_steps=[f"Reference step {s}." for s in range(1, 6)],
                candidate_steps=[f"Candidate step {s}." for s in range(1, 6)],
                position=i,
                role="main",
                source={
                    "generation_id": i,
                    "judge": "how2judge",
                    "judge_label": rng.choice(["has_failure", "no_failure"]),
                },
            )
            for i in range(1, n_items + 1)
        ],
        batch_size=2000,
    )
    annotators = Annotator.objects.bulk_create([Annotator(pid=f"{n:024x}") for n in range(PARTICIPANTS)])
    participations = Participation.objects.bulk_create(
        [
            Participation(
                study=study, annotator=a, state="annotating", prolific_study_id="b", prolific_session_id=f"s{n}"
            )
            for n, a in enumerate(annotators)
        ]
    )
    now = timezone.now()
    assignments = []
    for index, item in enumerate(items):
        draw = rng.random()
        k = 3 if draw < 0.90 else 1 if draw < 0.95 else 0
        for slot in rng.sample(range(PARTICIPANTS), k):
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
                    submitted_at=now - timedelta(seconds=index),
                )
            )
    Assignment.objects.bulk_create(assignments, batch_size=2000)
    annotations = []
    for a in assignments:
        label = rng.random() < 0.5
        roll = rng.random()
        flag = "unsure" if roll < 0.03 else "broken" if roll < 0.04 else ""
        annotations.append(
            Annotation(
                assignment=a,
                study=study,
                item=a.item,
                participation=a.participation,
                annotator=a.annotator,
                source="main",
                has_failure=None if flag == "broken" else label,
                failures=[],
                answer={"has_failure": label, "failures": []},
                guideline_version="v1",
                l1_hash="h",
                l2_hash="h",
                interface_version="1",
                first_served_at=a.submitted_at - timedelta(seconds=120),
                submitted_at=a.submitted_at,
                wall_seconds=120,
                active_seconds=100,
                flag=flag,
                flag_reason="unreadable" if flag == "broken" else "",
                excluded=rng.random() < 0.02,
            )
        )
    Annotation.objects.bulk_create(annotations, batch_size=2000)
    return study, len(annotations)


def timed(call, repeats: int) -> tuple[float, float]:
    call()  # warm
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), max(times)


def run(backend: str, n_items: int, repeats: int) -> None:
    if backend == "postgres":
        subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", PG_NAME], check=True)
        subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", PG_NAME], check=True)
        url = PG.format(name=PG_NAME)
    else:
        url = "sqlite:///" + str(Path(tempfile.mkdtemp(prefix="bench-data-")) / "bench.sqlite3")
    env = dict(
        os.environ,
        DATABASE_URL=url,
        VAR_DIR=tempfile.mkdtemp(prefix="bench-data-var-"),
        DJANGO_SETTINGS_MODULE="config.django.base",
        DEBUG="false",
        LOG_LEVEL="WARNING",
        ALLOWED_HOSTS="testserver",
    )
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
    # DEBUG off serves hashed static files, as in production: collect them first.
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=BASE_DIR, env=env, check=True
    )
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from annotate.models import StudyItem
    from core.roles import ROLE_RESEARCHER
    from core.services import user_create

    t0 = time.perf_counter()
    study, n_annotations = build(n_items)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(
        f"\n{backend}: built {n_items:,} items and {n_annotations:,} annotations in {time.perf_counter() - t0:.1f} s "
        f"({connection.vendor} {connection.Database.sqlite_version if connection.vendor == 'sqlite' else connection.pg_version})"
    )
    user_create(username="bench-researcher", role=ROLE_RESEARCHER)
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench-researcher"))

    def ideal() -> None:  # one page of 50 plain item rows and their count: the floor of any table
        rows = StudyItem.objects.filter(study=study, role="main").order_by("role", "position", "pk")
        rows.count()
        list(rows[:50])

    ideal_p50, _ = timed(ideal, repeats)
    print(f"ideal (a plain page of 50 items and their count): {ideal_p50 * 1000:.1f} ms")
    print(f"| case ({backend}) | matches | page p50 | page max | API p50 | API max | worst / 1 s | API p50 / ideal |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, params in CASES:
        api = client.get(f"/api/studies/{study.slug}/data/", params)
        assert api.status_code == 200, (name, api.status_code, api.content[:300])
        count = api.json()["count"]

        def page(params=params, name=name) -> None:
            response = client.get(f"/studies/{study.slug}/data/", params)
            assert response.status_code == 200, (name, response.status_code)

        def api_call(params=params, name=name) -> None:
            response = client.get(f"/api/studies/{study.slug}/data/", params)
            assert response.status_code == 200, (name, response.status_code)

        page_p50, page_max = timed(page, repeats)
        api_p50, api_max = timed(api_call, repeats)
        worst = max(page_max, api_max)
        print(
            f"| {name} | {count:,} | {page_p50 * 1000:.0f} ms | {page_max * 1000:.0f} ms | {api_p50 * 1000:.0f} ms | "
            f"{api_max * 1000:.0f} ms | {worst / TARGET_SECONDS:.2f} | {api_p50 / ideal_p50:.0f}× |"
        )
    print(f"({repeats} requests per cell after a first; Django test client, {connection.vendor})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    if args.backend == "both":  # one process per database: Django is set up once per process
        for backend in ("sqlite", "postgres"):
            command = [sys.executable, __file__, "--items", str(args.items), "--repeats", str(args.repeats)]
            subprocess.run([*command, "--backend", backend], check=True)
        return
    run(args.backend, args.items, args.repeats)


if __name__ == "__main__":
    main()
