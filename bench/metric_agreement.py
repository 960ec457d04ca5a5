"""Benchmark: the metric-agreement report and page of a study of about 3,000 items.

Builds a critical-failure study of N items (default 3,000) from as many generations of five
models, with six to twelve reference steps of 8-20 words each and generated steps derived
from them (words dropped and replaced, steps reordered, dropped or repeated), three judges'
verdicts on every generation and three annotations per item, in PostgreSQL (database
how2_bench, or BENCH_DATABASE_URL) when it is reachable, else in a temporary SQLite file.
Then it times, with 1,000 bootstrap resamples:

* the report cold: every per-item signal computed and the bootstrap run (the per-process
  caches and Django's cache emptied first);
* the report warm: read from Django's cache under the digest of its inputs (the database rows
  are still read and hashed on every call, so new data is never answered with an old report),
  wall time and this process's CPU time;
* after one new annotation: a new digest, so the report is computed again (the signals
  still remembered by this process);
* the page (/studies/<slug>/metrics/) through Django, warm;

p50/p95 over R repeats, and a scaling line: the warm report at 1/4, 1/2 and 1x the items.

    .venv/bin/python bench/metric_agreement.py [--items 3000] [--repeats 5] [--cold-repeats 2] [--scales 0.25,0.5,1]"""

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
from tests.services import reachable  # noqa: E402

WORDS = (
    "add remove stir pour heat cool cut slice mix fold press check wait measure place open close clean dry "
    "wash rinse fill empty attach tighten loosen mark sand paint glue trim insert lift lower turn set water "
    "flour sugar salt pan bowl board screw bolt panel hinge wire cable lid bag tray oven knife spoon brush "
    "cloth edge corner surface top bottom side center inch cup minute hour degree gently firmly slowly until "
    "then with into onto over under through about each both small large hot cold dry wet clean even smooth "
    "the a of and to for in on at by from"
).split()


def percentiles(times: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(times, n=20) if len(times) > 1 else times * 19
    return statistics.median(times), q[18]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))).capitalize() + "."


def generated(rng: random.Random, reference: list[str]) -> list[str]:
    steps = []
    for step in reference:
        words = step.rstrip(".").split()
        words = [rng.choice(WORDS) if rng.random() < 0.3 else w for w in words if rng.random() > 0.15]
        steps.append(" ".join(words or ["Check"]).capitalize() + ".")
    if rng.random() < 0.3:
        i, j = rng.randrange(len(steps)), rng.randrange(len(steps))
        steps[i], steps[j] = steps[j], steps[i]
    if rng.random() < 0.2:
        steps.pop(rng.randrange(len(steps)))
    if rng.random() < 0.1:
        steps.append(steps[-1])
    return steps


def build_study(n_items: int, tag: str):
    """A critical-failure study of ``n_items`` items (see the module text), in bulk."""
    from django.utils import timezone

    from annotate.models import Annotation, Annotator, Assignment, Participation, StudyItem
    from annotate.testing import study_make
    from judging.models import Generation, Judgment
    from mining.models import Procedure, Topic, procedure_identity
    from mining.procedure_services import topics_ensure

    rng = random.Random(0)
    study = study_make(n_items=1, name=f"metric bench {tag}")  # one ordinary item, then the bulk below
    topics_ensure()
    topic = Topic.objects.first()
    models = [f"bench-model-{k}" for k in range(5)]
    n_procedures = (n_items + len(models) - 1) // len(models)
    references = [[sentence(rng) for _ in range(rng.randint(6, 12))] for _ in range(n_procedures)]
    procedures = Procedure.objects.bulk_create(
        [
            Procedure(
                topic=topic,
                goal=f"{tag} goal {i}",
                steps=steps,
                source_example_id=f"{tag}-{i}",
                identity=procedure_identity(f"{tag}-{i}", f"{tag} goal {i}"),
            )
            for i, steps in enumerate(references)
        ]
    )
    pairs = [(p, m) for p in procedures for m in models][:n_items]
    generations = Generation.objects.bulk_create(
        [Generation(procedure=p, model=m, predicted_steps=generated(rng, p.steps)) for p, m in pairs], batch_size=1000
    )
    items = StudyItem.objects.bulk_create(
        [
            StudyItem(
                study=study,
                item_id=f"gen-{g.pk}",
                topic=topic.name,
                goal=g.procedure.goal,
                reference_steps=g.procedure.steps,
                candidate_steps=g.predicted_steps,
                position=i + 1,
                source={"generation_id": g.pk, "model": g.model},
            )
            for i, g in enumerate(generations)
        ],
        batch_size=1000,
    )
    skill = {m: 0.3 + 0.1 * k for k, m in enumerate(models)}
    truth = [rng.random() > skill[g.model] for g in generations]
    Judgment.objects.bulk_create(
        [
            Judgment(generation=g, judge=judge, has_failure=t if rng.random() < accuracy else not t)
            for judge, accuracy in (("how2judge", 0.85), ("gpt-5", 0.8), ("weak", 0.6))
            for g, t in zip(generations, truth)
        ],
        batch_size=2000,
    )
    annotators = Annotator.objects.bulk_create([Annotator(pid=f"{tag}{n:04d}".ljust(24, "0")) for n in range(41)])
    participations = Participation.objects.bulk_create(
        [Participation(study=study, annotator=a, state="working") for a in annotators]
    )
    now = timezone.now()
    assignments = []
    for index, item in enumerate(items):
        for k in range(3):
            slot = (index * 3 + k) % (len(annotators) - 1)  # the last annotator is kept for the new annotation
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
    for index, a in enumerate(assignments):
        t = truth[index // 3]
        label = t if rng.random() < 0.8 else not t
        annotations.append(_annotation(a, label, now))
    Annotation.objects.bulk_create(annotations, batch_size=2000)
    return study, items, annotators[-1], participations[-1]


def _annotation(assignment, label: bool, now):
    from annotate.models import Annotation

    failures = [{"description": "d", "L1_steps": [1], "L2_steps": [1]}] if label else []
    return Annotation(
        assignment=assignment,
        study=assignment.study,
        item=assignment.item,
        participation=assignment.participation,
        annotator=assignment.annotator,
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
        active_seconds=100,
    )


def _clear_caches() -> None:
    from django.core.cache import cache

    from annotate.stats import signals

    for remembered in (signals._text_signals, signals._score_signals, signals.rule_components):
        remembered.cache_clear()
    cache.clear()


def _timed(call) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def load() -> str:
    return "load average " + ", ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cold-repeats", type=int, default=2)
    parser.add_argument("--scales", default="0.25,0.5,1", help="fractions of --items, the scaling line (warm)")
    args = parser.parse_args()
    env = dict(
        os.environ,
        VAR_DIR=tempfile.mkdtemp(prefix="bench-metric-"),
        DJANGO_SETTINGS_MODULE="config.django.base",
        DEBUG="false",
        LOG_LEVEL="WARNING",
        ALLOWED_HOSTS="testserver",
    )
    env.pop("CACHE_URL", None)  # the default cache: files under VAR_DIR, shared by every process
    if reachable(PG_URL):
        ensure_database()
        env["DATABASE_URL"] = PG_URL
        where = "PostgreSQL"
    else:
        env["DATABASE_URL"] = f"sqlite:///{env['VAR_DIR']}/bench.sqlite3"
        where = "SQLite (PostgreSQL not reachable)"
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.utils import timezone

    from annotate.models import Annotation, Assignment
    from annotate.reports.metric_selectors import study_metric_agreement_report
    from core.roles import ROLE_RESEARCHER
    from core.services import user_create

    tag = uuid.uuid4().hex[:8]
    scales = [float(x) for x in args.scales.split(",")]
    print(f"{where}; {load()}")
    for scale in scales:
        n = max(1, round(args.items * scale))
        started = time.perf_counter()
        study, items, spare_annotator, spare_participation = build_study(n, f"{tag}x{scale:g}")
        print(
            f"x{scale:g}: built a study of {len(items)} items ({3 * len(items)} annotations, 3 judges, 5 models) "
            f"in {time.perf_counter() - started:.1f} s"
        )
        cold = []
        for _ in range(args.cold_repeats if scale == scales[-1] else 1):
            _clear_caches()
            cold.append(_timed(lambda study=study: study_metric_agreement_report(study))[0])
        report = study_metric_agreement_report(study)
        warm = [_timed(lambda study=study: study_metric_agreement_report(study)) for _ in range(args.repeats)]
        walls, cpus = [w for w, _ in warm], [c for _, c in warm]
        print(
            f"  report with {len(report['signals'])} signals on {report['n_items']} items, 1,000 resamples: "
            f"cold p50 {statistics.median(cold):.2f} s ({len(cold)} runs); warm p50 %.3f s, p95 %.3f s "
            f"(CPU of this process p50 {statistics.median(cpus):.3f} s); {load()}" % percentiles(walls)
        )
        if scale != scales[-1]:
            continue
        # One new annotation that turns a 2-1 item into a tie: a new digest, the report computed again.
        split = next(
            item
            for item in items
            if len(set(Annotation.objects.filter(item=item).values_list("has_failure", flat=True))) == 2
        )
        votes = list(Annotation.objects.filter(item=split).values_list("has_failure", flat=True))
        minority = min((True, False), key=votes.count)
        now = timezone.now()
        assignment = Assignment.objects.create(
            study=study,
            item=split,
            participation=spare_participation,
            annotator=spare_annotator,
            role="main",
            status="submitted",
            reserved_at=now,
            lease_expires_at=now,
            first_served_at=now,
            submitted_at=now,
        )
        _annotation(assignment, minority, now).save()
        again, _ = _timed(lambda study=study: study_metric_agreement_report(study))
        changed = study_metric_agreement_report(study) != report
        print(
            f"  after one new annotation: computed again in {again:.2f} s (signals remembered, bootstrap run); "
            f"report changed: {changed}"
        )
        user = user_create(username=f"bench-{tag}", role=ROLE_RESEARCHER)
        client = Client()
        client.force_login(get_user_model().objects.get(username=user.username))
        page = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            response = client.get(f"/studies/{study.slug}/metrics/")
            assert response.status_code == 200, response.status_code
            page.append(time.perf_counter() - t0)
        p50, p95 = percentiles(page)
        print(f"  page (warm): p50 {p50:.3f} s, p95 {p95:.3f} s over {args.repeats} renders")
        top = report["signals"][0]
        print(f"  first: {top['key']} AUC {top['auc']:.3f} {top['auc_ci95']}")


if __name__ == "__main__":
    main()
