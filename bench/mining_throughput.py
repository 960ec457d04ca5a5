"""Benchmark: How2Mine runs through Celery workers, and the heuristics stage alone.

N documents (all of which pass every stage, so each costs 5 LLM requests) go through the
six stages against the scripted OpenAI-compatible server with a fixed latency L per
request and total concurrency C, split over W worker processes (each a Celery task of
the run with C / W threads) that share the endpoint's concurrency cap through Redis,
with the database on PostgreSQL. Prints documents per minute, the ratio to the ideal
(C / L requests per second, so N * 5 * L / C seconds for the run), the per-request
overhead (time a concurrency slot spends per request beyond L), p50/p95 of the time a
document takes from its first to its last stage result, and a second run over the same
documents answered from the ledger. Then the heuristics stage alone, in procedures/s.

    .venv/bin/python bench/mining_throughput.py [--docs 2000] [--latency 0.2] [--concurrency 64] [--workers 2]

Needs PostgreSQL at 127.0.0.1:5432 (database how2_mining_bench is recreated) and Redis at 127.0.0.1:6379."""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
PG_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/how2_mining_bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
TOPICS = ("food-dining", "health", "home-hobbies", "industrial", "travel-tourism", "transportation", "religion")


def recreate_database() -> None:
    import psycopg

    name = PG_URL.rsplit("/", 1)[1]
    admin = PG_URL.rsplit("/", 1)[0].replace("postgres://", "postgresql://") + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def quantile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100)[p - 1]


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--heuristics", type=int, default=200_000, help="procedures for the heuristics-alone figure")
    args = parser.parse_args()

    recreate_database()
    var_dir = tempfile.mkdtemp(prefix="bench-mining-")
    from tests.scripted_miner import document_text, scripted_miner_server

    server, _ = scripted_miner_server(latency=args.latency)
    with server:
        env = dict(os.environ, DATABASE_URL=PG_URL, CELERY_BROKER_URL=REDIS_URL, CELERY_RESULT_BACKEND=REDIS_URL,
                   LLM_LIMITS_REDIS_URL=REDIS_URL, LLM_MAX_CONCURRENCY=str(args.concurrency), VAR_DIR=var_dir,
                   LLM_BASE_URL=server.base_url, LLM_MODEL="bench-model", LLM_API_KEY="k",
                   DJANGO_SETTINGS_MODULE="config.django.base", DEBUG="false", LOG_LEVEL="WARNING")
        os.environ.update(env)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
        import django

        django.setup()
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()
        from django.db.models import Max, Min

        from mining.models import Corpus, Document, MiningRun, StageResult, Topic
        from mining.run_services import mining_run_create
        from mining.services import topics_ensure

        topics_ensure()
        corpus = Corpus.objects.create(name="bench")
        by_slug = {t.slug: t for t in Topic.objects.filter(slug__in=TOPICS)}
        Document.objects.bulk_create([
            Document(corpus=corpus, doc_id=f"d{i}", topic=by_slug[TOPICS[i % len(TOPICS)]], text_hash=f"h{i}",
                     text=document_text(f"d{i}", f"Make thing {i}")) for i in range(args.docs)], batch_size=1000)
        per_topic = -(-args.docs // len(TOPICS))

        workers = [subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "WARNING",
             "--hostname", f"minebench{i}-{os.getpid()}@%h"],
            cwd=BASE_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(args.workers)]
        try:
            time.sleep(6)  # let the workers connect

            def run(name: str) -> tuple[float, MiningRun]:
                before = len(server.chat_requests())
                started = time.perf_counter()
                config = (f"name: {name}\ncandidates_per_topic: {per_topic}\nconcurrency: "
                          f"{args.concurrency // args.workers}\nworkers: {args.workers}\n")
                mining_run = mining_run_create(config_text=config, source="bench", corpus_name="bench")
                while MiningRun.objects.get(pk=mining_run.pk).status not in ("done", "failed", "paused"):
                    time.sleep(0.1)
                elapsed = time.perf_counter() - started
                mining_run.refresh_from_db()
                sent = len(server.chat_requests()) - before
                return elapsed, mining_run, sent

            elapsed, mining_run, sent = run("first")
            n_docs = mining_run.candidates.count()
            passed = mining_run.candidates.filter(status="passed").count()
            ideal_seconds = sent * args.latency / args.concurrency
            per_doc = [(row["last"] - row["first"]).total_seconds() for row in
                       StageResult.objects.filter(run=mining_run).values("candidate").annotate(
                           first=Min("created_at"), last=Max("created_at"))]
            overhead_ms = (elapsed * args.concurrency / sent - args.latency) * 1000
            print(f"documents={n_docs} (procedures {passed}, status {mining_run.status}) requests sent={sent} "
                  f"L={args.latency * 1000:.0f} ms C={args.concurrency} workers={args.workers} database=postgresql "
                  f"limits=redis")
            print(f"first run : {elapsed:6.1f} s = {n_docs / elapsed * 60:7.0f} documents/min; ideal {ideal_seconds:.1f} s "
                  f"= {n_docs / ideal_seconds * 60:.0f} documents/min; ratio {ideal_seconds / elapsed:.2f}; "
                  f"per-request overhead {overhead_ms:.0f} ms; max in flight at the server {server.max_in_flight}")
            print(f"one document, first to last stage result: p50 {quantile(per_doc, 50):.2f} s, "
                  f"p95 {quantile(per_doc, 95):.2f} s (5 requests of {args.latency * 1000:.0f} ms: "
                  f"{4 * args.latency:.1f} s apart at best)")
            elapsed2, second, sent2 = run("second")
            print(f"second run over the same documents: {elapsed2:6.1f} s, requests sent {sent2}, "
                  f"procedures {second.candidates.filter(status='passed').count()}")
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(timeout=30)
    print(f"heuristics stage alone: {heuristics_alone(args.heuristics):,.0f} procedures/s "
          f"({args.heuristics:,} procedures of 5-15 steps, one process)")


if __name__ == "__main__":
    main()
