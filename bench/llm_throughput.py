"""Benchmark: LLM request throughput through Celery workers, with the ledger on PostgreSQL.

Against the scripted OpenAI-compatible server with a fixed latency L per request, sends N
requests with total concurrency C (split over W worker processes that share the endpoint's
concurrency cap through Redis) and prints achieved requests/s, its ratio to the ideal C/L,
the ledger's own cost per request, and a second, fully cached run.

    .venv/bin/python bench/llm_throughput.py [--n 2000] [--latency 0.2] [--concurrency 64] [--workers 2]

Needs PostgreSQL at 127.0.0.1:5432 (database how2_bench is created) and Redis at 127.0.0.1:6379."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
PG_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/how2_bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")


def ensure_database() -> None:
    import psycopg

    name = PG_URL.rsplit("/", 1)[1]
    with psycopg.connect(PG_URL.rsplit("/", 1)[0].replace("postgres://", "postgresql://") + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    ensure_database()
    var_dir = tempfile.mkdtemp(prefix="bench-llm-")
    from tests.scripted_llm import Reply, ScriptedLLM, last_user_message

    with ScriptedLLM(latency=args.latency) as server:
        server.default = lambda body: Reply(json.dumps({"answer": len(last_user_message(body))}))
        env = dict(os.environ, DATABASE_URL=PG_URL, CELERY_BROKER_URL=REDIS_URL, CELERY_RESULT_BACKEND=REDIS_URL,
                   LLM_LIMITS_REDIS_URL=REDIS_URL, LLM_MAX_CONCURRENCY=str(args.concurrency), VAR_DIR=var_dir,
                   LLM_BASE_URL=server.base_url, LLM_MODEL="bench-model", LLM_API_KEY="k",
                   DJANGO_SETTINGS_MODULE="config.django.base", DEBUG="false", LOG_LEVEL="WARNING")
        os.environ.update(env)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
        import django

        django.setup()
        from celery import Celery
        from django.db import connection

        from llm.client import LLMRequest, ledger_lookup, ledger_write
        from llm.models import LedgerEntry, LLMJob
        from llm.services import llm_job_create

        queue = f"bench-{uuid.uuid4().hex[:6]}"
        workers = [subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "-Q", queue,
             "--loglevel", "WARNING", "--hostname", f"bench{i}-{os.getpid()}@%h"],
            cwd=BASE_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(args.workers)]
        client = Celery("bench", broker=REDIS_URL, backend=REDIS_URL)
        try:
            time.sleep(6)  # let the workers connect
            schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
            run_id = uuid.uuid4().hex[:8]

            def make_jobs(tag: str) -> list[LLMJob]:
                per_worker = args.n // args.workers
                jobs = []
                for w in range(args.workers):
                    requests = [LLMRequest(stage="bench", messages=[{"role": "user", "content": f"{run_id} item {w}-{i}"}],
                                           schema=schema) for i in range(per_worker)]
                    jobs.append(llm_job_create(run=f"bench-{run_id}-{tag}-{w}", role="llm_filter", requests=requests,
                                               concurrency=args.concurrency // args.workers, start=False))
                return jobs

            def run(jobs: list[LLMJob]) -> float:
                started = time.perf_counter()
                for job in jobs:
                    client.send_task("llm.job_execute", args=[job.pk], queue=queue)
                while LLMJob.objects.filter(pk__in=[j.pk for j in jobs], status="done").count() < len(jobs):
                    time.sleep(0.05)
                return time.perf_counter() - started

            first = make_jobs("first")
            before = len(server.chat_requests())
            elapsed = run(first)
            sent = len(server.chat_requests()) - before
            n = sum(j.n_total for j in first)
            ok = LedgerEntry.objects.filter(run__in=[j.run for j in first], outcome="ok").count()
            achieved = n / elapsed
            ideal = args.concurrency / args.latency
            print(f"N={n} L={args.latency * 1000:.0f} ms C={args.concurrency} workers={args.workers} "
                  f"ledger={connection.vendor} broker+limits=redis")
            print(f"first run : {elapsed:6.2f} s, {achieved:7.1f} req/s, ideal {ideal:.0f} req/s, ratio {achieved / ideal:.2f}, "
                  f"requests sent {sent}, ok {ok}, max in flight at the server {server.max_in_flight}")

            second = make_jobs("second")
            before = len(server.chat_requests())
            elapsed2 = run(second)
            print(f"second run (same requests): {elapsed2:6.2f} s, requests sent {len(server.chat_requests()) - before}")

            # The ledger's own cost per request: a lookup that misses plus a write, then a lookup that hits.
            keys = [uuid.uuid4().hex + uuid.uuid4().hex for _ in range(500)]
            fields = dict(stage="bench", role="", run="bench-overhead", base_url="x", model="m", executor="online",
                          request={"messages": [{"role": "user", "content": "x" * 400}]}, response={"choices": []},
                          response_text="{}", outcome="ok", parsed={"answer": 1}, path="json_schema")
            write_ms, hit_ms = [], []
            for key in keys:
                t0 = time.perf_counter()
                ledger_lookup(key)
                ledger_write(key, fields)
                write_ms.append((time.perf_counter() - t0) * 1000)
            for key in keys:
                t0 = time.perf_counter()
                ledger_lookup(key)
                hit_ms.append((time.perf_counter() - t0) * 1000)
            q = lambda xs, p: statistics.quantiles(xs, n=100)[p - 1]
            print(f"ledger overhead per request: miss+write p50 {q(write_ms, 50):.2f} ms p95 {q(write_ms, 95):.2f} ms; "
                  f"cached hit p50 {q(hit_ms, 50):.2f} ms p95 {q(hit_ms, 95):.2f} ms")
        finally:
            client.close()
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(timeout=30)


if __name__ == "__main__":
    main()
