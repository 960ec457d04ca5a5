"""Benchmark: the metric-agreement report and page of a study of about 3,000 items.

Builds a critical-failure study of N items (default 3,000) from as many generations of five
models, with six to twelve reference steps of 8-20 words each and generated steps derived
from them (words dropped and replaced, steps reordered, dropped or repeated), three judges'
verdicts on every generation and three annotations per item, in PostgreSQL (database
how2_bench, or BENCH_DATABASE_URL) when it is reachable, else in a temporary SQLite file.
Then it times, R times each:

* the report cold: every per-item signal computed (the per-process caches emptied first);
* the report warm: the signals already computed by this process;
* the page (/studies/<slug>/metrics/) through Django, warm;

all with 1,000 bootstrap resamples, and prints p50/p95.

    .venv/bin/python bench/metric_agreement.py [--items 3000] [--repeats 5]"""
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

WORDS = ("add remove stir pour heat cool cut slice mix fold press check wait measure place open close clean dry "
         "wash rinse fill empty attach tighten loosen mark sand paint glue trim insert lift lower turn set water "
         "flour sugar salt pan bowl board screw bolt panel hinge wire cable lid bag tray oven knife spoon brush "
         "cloth edge corner surface top bottom side center inch cup minute hour degree gently firmly slowly until "
         "then with into onto over under through about each both small large hot cold dry wet clean even smooth "
         "the a of and to for in on at by from").split()


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    env = dict(os.environ, VAR_DIR=tempfile.mkdtemp(prefix="bench-metric-"), DJANGO_SETTINGS_MODULE="config.django.base",
               DEBUG="false", LOG_LEVEL="WARNING", ALLOWED_HOSTS="testserver")
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

    from annotate import metric_signals
    from annotate.metric_agreement_selectors import study_metric_agreement_report
    from annotate.models import Annotation, Annotator, Assignment, Participation, StudyItem
    from annotate.testing import study_make
    from core.roles import ROLE_RESEARCHER
    from core.services import user_create
    from judging.models import Generation, Judgment
    from mining.models import Procedure, Topic, procedure_identity
    from mining.services import topics_ensure

    tag = uuid.uuid4().hex[:8]
    rng = random.Random(0)
    started = time.perf_counter()
    study = study_make(n_items=1, name=f"metric bench {tag}")  # one ordinary item, then the bulk below
    topics_ensure()
    topic = Topic.objects.first()
    models = [f"bench-model-{k}" for k in range(5)]
    n_procedures = (args.items + len(models) - 1) // len(models)
    references = [[sentence(rng) for _ in range(rng.randint(6, 12))] for _ in range(n_procedures)]
    procedures = Procedure.objects.bulk_create([
        Procedure(topic=topic, goal=f"{tag} goal {i}", steps=steps, source_example_id=f"{tag}-{i}",
                  identity=procedure_identity(f"{tag}-{i}", f"{tag} goal {i}")) for i, steps in enumerate(references)])
    pairs = [(p, m) for p in procedures for m in models][: args.items]
    generations = Generation.objects.bulk_create([
        Generation(procedure=p, model=m, predicted_steps=generated(rng, p.steps)) for p, m in pairs], batch_size=1000)
    items = StudyItem.objects.bulk_create([
        StudyItem(study=study, item_id=f"gen-{g.pk}", topic=topic.name, goal=g.procedure.goal,
                  reference_steps=g.procedure.steps, candidate_steps=g.predicted_steps, position=i + 1,
                  source={"generation_id": g.pk, "model": g.model}) for i, g in enumerate(generations)], batch_size=1000)
    skill = {m: 0.3 + 0.1 * k for k, m in enumerate(models)}
    truth = [rng.random() > skill[g.model] for g in generations]
    Judgment.objects.bulk_create([Judgment(generation=g, judge=judge, has_failure=t if rng.random() < accuracy else not t)
                                  for judge, accuracy in (("how2judge", 0.85), ("gpt-5", 0.8), ("weak", 0.6))
                                  for g, t in zip(generations, truth)], batch_size=2000)
    annotators = Annotator.objects.bulk_create([Annotator(pid=f"{tag}{n:04d}".ljust(24, "0")) for n in range(40)])
    participations = Participation.objects.bulk_create([Participation(study=study, annotator=a, state="working")
                                                        for a in annotators])
    now = timezone.now()
    assignments = []
    for index, item in enumerate(items):
        for k in range(3):
            slot = (index * 3 + k) % len(annotators)
            assignments.append(Assignment(study=study, item=item, participation=participations[slot],
                                          annotator=annotators[slot], role="main", status="submitted", reserved_at=now,
                                          lease_expires_at=now, first_served_at=now, submitted_at=now))
    Assignment.objects.bulk_create(assignments, batch_size=2000)
    annotations = []
    for index, a in enumerate(assignments):
        t = truth[index // 3]
        label = t if rng.random() < 0.8 else not t
        failures = [{"description": "d", "L1_steps": [1], "L2_steps": [1]}] if label else []
        annotations.append(Annotation(assignment=a, study=study, item=a.item, participation=a.participation,
                                      annotator=a.annotator, source="main", has_failure=label, failures=failures,
                                      guideline_version="v", l1_hash="h", l2_hash="h", interface_version="1",
                                      first_served_at=now - timedelta(seconds=100), submitted_at=now, wall_seconds=100,
                                      active_seconds=100))
    Annotation.objects.bulk_create(annotations, batch_size=2000)
    print(f"{where}: built a study of {len(items)} items ({len(annotations)} annotations, 3 judges, "
          f"{len(models)} models) in {time.perf_counter() - started:.1f} s")

    caches = (metric_signals._text_signals, metric_signals._score_signals, metric_signals.rule_components)
    cold, warm = [], []
    for _ in range(args.repeats):
        for cache in caches:
            cache.cache_clear()
        t0 = time.perf_counter()
        report = study_metric_agreement_report(study)
        cold.append(time.perf_counter() - t0)
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        study_metric_agreement_report(study)
        warm.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    study_metric_agreement_report(study, bootstrap=0)
    no_bootstrap = time.perf_counter() - t0
    print(f"report with {len(report['signals'])} signals on {report['n_items']} items, 1,000 resamples:")
    print("  cold (signals computed): p50 %.2f s, p95 %.2f s" % percentiles(cold))
    print("  warm (signals cached):   p50 %.2f s, p95 %.2f s; without the bootstrap %.2f s" % (*percentiles(warm), no_bootstrap))
    user = user_create(username=f"bench-{tag}", role=ROLE_RESEARCHER)
    client = Client()
    client.force_login(get_user_model().objects.get(username=user.username))
    page = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        response = client.get(f"/studies/{study.slug}/metrics/")
        assert response.status_code == 200, response.status_code
        page.append(time.perf_counter() - t0)
    print("  page (warm):             p50 %.2f s, p95 %.2f s over %d renders" % (*percentiles(page), args.repeats))
    top = report["signals"][0]
    print(f"  first: {top['key']} AUC {top['auc']:.3f} {top['auc_ci95']}")


if __name__ == "__main__":
    main()
