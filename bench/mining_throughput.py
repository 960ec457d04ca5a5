"""Benchmark: How2Mine runs through Celery workers, and the heuristics stage alone.

N documents (all of which pass every stage, so each costs 5 LLM requests) go through the
six stages against the scripted OpenAI-compatible server with a fixed latency L per
request and total concurrency C, split over W worker processes (each a Celery task of
the run with C / W threads) that share the endpoint's concurrency cap through Redis,
with the database on PostgreSQL. Prints documents per minute, the ratio to the ideal
(C / L requests per second, so N * 5 * L / C seconds for the run), the per-request
overhead (time a concurrency slot spends per request beyond L), p50/p95 of the time a
document takes from its first to its last stage result, and:

* the workers' CPU per document, twice: the run's own figure (the mean of each document's
  walk, as the run page shows it, with its n) and the worker processes' whole CPU time
  (/proc/<pid>/stat, everything: threads, claims, status checks, the HTTP client) / N;
* SQL statements per document in the worker processes, by table, counted with
  ``connection.execute_wrapper`` on every database connection they open (transaction
  begin/commit are not statements sent through a cursor and are not counted);
* the scripted server's own CPU (it runs in this process: the process's CPU time less
  this thread's) and how much of the gap to the ideal it could explain on two cores;
* a scaling line: the same run at 1/4, 1/2 and 1x the documents (each its own documents,
  so nothing is answered from the ledger), then a second run over the 1x documents
  answered entirely from the stored results and the ledger. Then the heuristics stage alone;
* at the 1x size (the paper-scale figure of docs/benchmarks.md): the database's size in all
  and per document, the peak memory (VmHWM) of each worker process and of this process (the
  scripted server and the driver), and the response time of the run's pages at that size
  (the run page, its documents table and its progress API, as an admin, p50 / max of 5).

    .venv/bin/python bench/mining_throughput.py [--docs 2000] [--latency 0.2] [--concurrency 64] [--workers 2]
        [--no-scaling] [--no-second]

The paper-scale figure: ``--docs 100000 --no-scaling --no-second`` (about 35 minutes here);
``--pages-only`` times the run pages again on the database the last run left.

Needs PostgreSQL at 127.0.0.1:5432 (database how2_mining_bench is recreated) and Redis at 127.0.0.1:6379."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
PG_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/how2_mining_bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
TOPICS = ("food-dining", "health", "home-hobbies", "industrial", "travel-tourism", "transportation", "religion")
TABLES = ("llm_ledgerentry", "mining_stageresult", "mining_miningcandidate", "mining_procedure", "mining_miningrun")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def recreate_database() -> None:
    import psycopg

    name = PG_URL.rsplit("/", 1)[1]
    admin = PG_URL.rsplit("/", 1)[0].replace("postgres://", "postgresql://") + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def quantile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100)[p - 1] if len(values) > 1 else (values or [0.0])[0]


def process_cpu_seconds(pid: int | str = "self") -> float:
    """utime + stime of a process (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mib(pid: int | str = "self") -> float:
    """The peak resident memory of a process (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def database_mib() -> float:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        return cursor.fetchone()[0] / 2**20


def page_times(run_id: int) -> dict[str, tuple[float, float]]:
    """p50 and max seconds of 5 GETs of each of the run's pages, as a signed-in admin."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from core.roles import ROLE_ADMIN
    from core.services import user_create

    created = user_create(username=f"bench-admin-{os.getpid()}", role=ROLE_ADMIN)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(get_user_model().objects.get(username=created.username))
    pages = {
        "run page": f"/mining/runs/{run_id}/",
        "documents": f"/mining/runs/{run_id}/documents/",
        "progress API": f"/api/mining/runs/{run_id}/progress/",
    }
    times = {}
    for label, url in pages.items():
        took = []
        for _ in range(5):
            started = time.perf_counter()
            response = client.get(url)
            took.append(time.perf_counter() - started)
            assert response.status_code == 200, (url, response.status_code)
        times[label] = (statistics.median(took), max(took))
    return times


def pages_of_the_last_run() -> None:
    """The run pages' times on the database the last benchmark left (its size printed too)."""
    var_dir = tempfile.mkdtemp(prefix="bench-mining-pages-")
    env = dict(
        os.environ,
        DATABASE_URL=PG_URL,
        VAR_DIR=var_dir,
        DJANGO_SETTINGS_MODULE="config.django.base",
        DEBUG="false",
        LOG_LEVEL="WARNING",
    )
    os.environ.update(env)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=BASE_DIR, env=env, check=True
    )
    import django

    django.setup()
    from mining.models import MiningRun

    run = MiningRun.objects.order_by("-pk").first()
    assert run is not None, "no run in the bench database: run the benchmark first"
    print(f"run {run.pk} ({run.name}): {run.candidates.count():,} documents; database {database_mib():,.0f} MiB")
    for label, (p50, worst) in page_times(run.pk).items():
        print(f"    {label} at this size: p50 {p50 * 1000:.0f} ms, max {worst * 1000:.0f} ms (target < 1 s)")


def heuristics_alone(n: int) -> float:
    from mining.stages import Draft, HeuristicsStage
    from tests.scripted_miner import document_text

    stage = HeuristicsStage(min_steps=5, max_steps=15)
    drafts = []
    for i in range(1000):
        lines = document_text(f"d{i}", f"Make thing {i}", 5 + i % 11).splitlines()[1:]
        drafts.append(Draft(goal=f"Make thing {i}", steps=tuple(line[2:] for line in lines)))
    started = time.perf_counter()
    for i in range(n):
        stage.check(drafts[i % len(drafts)])
    return n / (time.perf_counter() - started)


# -- the worker processes: a Celery worker whose database connections count statements ----


def worker_main(stats_file: str, hostname: str) -> None:
    """Run a Celery worker (solo pool) in this process, every database connection it opens
    counting its statements per table; the counts are written to ``stats_file`` twice a second."""
    import django

    django.setup()
    from django.db.backends.signals import connection_created

    counts: Counter = Counter()
    lock = threading.Lock()

    def count(execute, sql, params, many, context):
        table = next((t for t in TABLES if f'"{t}"' in sql), "other")
        with lock:
            counts[table] += 1
        return execute(sql, params, many, context)

    def on_connection(sender, connection, **kwargs) -> None:
        if count not in connection.execute_wrappers:
            connection.execute_wrappers.append(count)

    connection_created.connect(on_connection, weak=False)

    def dump() -> None:
        while True:
            time.sleep(0.5)
            with lock:
                snapshot = dict(counts)
            Path(stats_file + ".tmp").write_text(json.dumps(snapshot))
            os.replace(stats_file + ".tmp", stats_file)

    threading.Thread(target=dump, daemon=True).start()
    from config.celery import app

    app.worker_main(["worker", "--pool", "solo", "--loglevel", "WARNING", "--hostname", hostname])


def statements(stats_files: list[Path]) -> Counter:
    total: Counter = Counter()
    for path in stats_files:
        if path.exists():
            total.update(json.loads(path.read_text()))
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--heuristics", type=int, default=200_000, help="procedures for the heuristics-alone figure")
    parser.add_argument("--no-scaling", action="store_true", help="only the 1x run (and the second run)")
    parser.add_argument("--no-second", action="store_true", help="no second run from the stored results")
    parser.add_argument(
        "--pages-only",
        action="store_true",
        help="only time the pages of the last run in the bench database (kept from the last benchmark)",
    )
    parser.add_argument("--worker", nargs=2, metavar=("STATS_FILE", "HOSTNAME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(*args.worker)
        return

    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    if args.pages_only:
        pages_of_the_last_run()
        return
    recreate_database()
    var_dir = tempfile.mkdtemp(prefix="bench-mining-")
    from tests.scripted_miner import document_text, scripted_miner_server

    server, _ = scripted_miner_server(latency=args.latency)
    with server:
        env = dict(
            os.environ,
            DATABASE_URL=PG_URL,
            CELERY_BROKER_URL=REDIS_URL,
            CELERY_RESULT_BACKEND=REDIS_URL,
            LLM_LIMITS_REDIS_URL=REDIS_URL,
            LLM_MAX_CONCURRENCY=str(args.concurrency),
            VAR_DIR=var_dir,
            LLM_BASE_URL=server.base_url,
            LLM_MODEL="bench-model",
            LLM_API_KEY="k",
            DJANGO_SETTINGS_MODULE="config.django.base",
            OUTBOUND_ALLOWED_HOSTS="127.0.0.1",  # the scripted server (llm/outbound.py)
            DEBUG="false",
            LOG_LEVEL="WARNING",
        )
        os.environ.update(env)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
        # The run's pages are timed as served with DEBUG off: hashed static files, as in production.
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=BASE_DIR, env=env, check=True
        )
        import django

        django.setup()
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()
        from django.db.models import Max, Min

        from mining.models import Corpus, Document, MiningRun, StageResult, Topic
        from mining.procedure_services import topics_ensure
        from mining.run_selectors import mining_run_cpu
        from mining.run_services import mining_run_create

        topics_ensure()
        by_slug = {t.slug: t for t in Topic.objects.filter(slug__in=TOPICS)}

        def corpus(name: str, n: int, offset: int) -> None:
            made = Corpus.objects.create(name=name)
            Document.objects.bulk_create(
                [
                    Document(
                        corpus=made,
                        doc_id=f"d{offset + i}",
                        topic=by_slug[TOPICS[i % len(TOPICS)]],
                        text_hash=f"h{offset + i}",
                        text=document_text(f"d{offset + i}", f"Make thing {offset + i}"),
                    )
                    for i in range(n)
                ],
                batch_size=1000,
            )

        scales = (
            [(args.docs, 0)]
            if args.no_scaling
            else [(max(args.docs // 4, 1), 1_000_000), (max(args.docs // 2, 1), 2_000_000), (args.docs, 0)]
        )
        for n, offset in scales:
            corpus(f"bench-{n}", n, offset)

        stats_files = [Path(var_dir) / f"statements-{i}.json" for i in range(args.workers)]
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--worker",
                    str(stats_files[i]),
                    f"minebench{i}-{os.getpid()}@%h",
                ],
                cwd=BASE_DIR,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for i in range(args.workers)
        ]
        try:
            time.sleep(8)  # let the workers connect

            def run(name: str, corpus_name: str, n_docs: int) -> dict:
                per_topic = -(-n_docs // len(TOPICS))
                before_sent = len(server.chat_requests())
                before_statements = statements(stats_files)
                before_workers = sum(process_cpu_seconds(w.pid) for w in workers)
                before_process, before_thread = process_cpu_seconds(), time.thread_time()
                started = time.perf_counter()
                config = (
                    f"name: {name}\ncandidates_per_topic: {per_topic}\nconcurrency: "
                    f"{args.concurrency // args.workers}\nworkers: {args.workers}\n"
                )
                mining_run = mining_run_create(config_text=config, source="bench", corpus_name=corpus_name)
                while MiningRun.objects.get(pk=mining_run.pk).status not in ("done", "failed", "paused"):
                    time.sleep(0.1)
                elapsed = time.perf_counter() - started
                server_cpu = (process_cpu_seconds() - before_process) - (time.thread_time() - before_thread)
                workers_cpu = sum(process_cpu_seconds(w.pid) for w in workers) - before_workers
                time.sleep(1.2)  # the workers' statement counts are written twice a second
                counted = statements(stats_files)
                counted.subtract(before_statements)
                mining_run.refresh_from_db()
                documents = mining_run.candidates.count()
                return {
                    "run": mining_run,
                    "elapsed": elapsed,
                    "sent": len(server.chat_requests()) - before_sent,
                    "documents": documents,
                    "server_cpu": server_cpu,
                    "workers_cpu": workers_cpu,
                    "statements": counted,
                    "cpu": mining_run_cpu(mining_run),
                }

            def report(label: str, r: dict) -> None:
                n, elapsed, sent = r["documents"], r["elapsed"], r["sent"]
                ideal = sent * args.latency / args.concurrency
                ratio = ideal / elapsed if elapsed and sent else float("nan")
                st = r["statements"]
                per_doc = sum(st.values()) / n
                by_table = ", ".join(f"{t} {st[t] / n:.1f}" for t in (*TABLES, "other") if st[t])
                gap = elapsed - ideal
                # On two cores a CPU-bound run's wall time is its CPU demand / 2: the server's
                # CPU could have shortened it by at most server_cpu / 2 seconds.
                explained = min(r["server_cpu"] / 2, gap) / gap if gap > 0 else 0.0
                print(
                    f"{label}: {n} documents, {sent} requests in {elapsed:.1f} s = {n / elapsed * 60:,.0f} "
                    f"documents/min; ideal {ideal:.1f} s; ratio {ratio:.2f}"
                )
                print(
                    f"    CPU per document: {r['cpu']['ms_per_document']} ms in its walks (the run's figure, "
                    f"n = {r['cpu']['n']}); {r['workers_cpu'] / n * 1000:.1f} ms of the worker processes' whole CPU"
                )
                print(f"    SQL statements per document in the workers: {per_doc:.1f} ({by_table})")
                print(
                    f"    scripted server CPU {r['server_cpu']:.1f} s ({r['server_cpu'] / elapsed / 2:.0%} of two cores "
                    f"over the run; at most {explained:.0%} of the {gap:.1f} s gap to the ideal)"
                )

            results = []
            for n, _ in scales:
                results.append((n, run(f"first-{n}", f"bench-{n}", n)))
            full = results[-1][1]
            print(
                f"L={args.latency * 1000:.0f} ms C={args.concurrency} workers={args.workers} "
                f"(each {args.concurrency // args.workers} threads) database=postgresql limits=redis; "
                f"max in flight at the server {server.max_in_flight}"
            )
            for n, r in results:
                report(f"first run, {n / args.docs:.2g}x", r)
            mining_run = full["run"]
            per_doc = [
                (row["last"] - row["first"]).total_seconds()
                for row in StageResult.objects.filter(run=mining_run)
                .values("candidate")
                .annotate(first=Min("created_at"), last=Max("created_at"))
            ]
            overhead_ms = (full["elapsed"] * args.concurrency / full["sent"] - args.latency) * 1000
            print(
                f"1x: procedures {mining_run.candidates.filter(status='passed').count()}, status {mining_run.status}; "
                f"per-request overhead {overhead_ms:.0f} ms; one document, first to last stage result: "
                f"p50 {quantile(per_doc, 50):.2f} s, p95 {quantile(per_doc, 95):.2f} s "
                f"({4 * args.latency:.1f} s apart at best)"
            )
            size = database_mib()
            memory = ", ".join(f"worker {i} {peak_rss_mib(w.pid):.0f} MiB" for i, w in enumerate(workers))
            print(
                f"1x at rest: database {size:,.0f} MiB ({size * 2**20 / max(full['documents'], 1) / 1024:.1f} KiB "
                f"per document, all runs and corpora of this benchmark); peak memory {memory}, scripted server "
                f"+ driver {peak_rss_mib():.0f} MiB"
            )
            for label, (p50, worst) in page_times(mining_run.pk).items():
                print(f"    {label} at this size: p50 {p50 * 1000:.0f} ms, max {worst * 1000:.0f} ms (target < 1 s)")
            if not args.no_second:
                second = run("second", f"bench-{args.docs}", args.docs)
                st = second["statements"]
                print(
                    f"second run over the 1x documents: {second['elapsed']:.1f} s, requests sent {second['sent']}, "
                    f"procedures {second['run'].candidates.filter(status='passed').count()}; CPU per document "
                    f"{second['cpu']['ms_per_document']} ms in its walks, {second['workers_cpu'] / args.docs * 1000:.1f} ms "
                    f"whole; statements per document {sum(st.values()) / args.docs:.1f}"
                )
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                try:
                    worker.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    worker.kill()
    print(
        f"heuristics stage alone: {heuristics_alone(args.heuristics):,.0f} procedures/s "
        f"({args.heuristics:,} procedures of 5-15 steps, one process)"
    )
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
