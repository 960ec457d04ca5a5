"""Benchmark: How2Score judging throughput and the reward endpoint's latency.

1. Judges G generations (default 7,000, the size of How2Bench) with a judge run against the
   scripted server at a fixed latency L and concurrency C, executed by W Celery worker
   processes (default 2) that share the run's shards (llm/shards.py) and the endpoint's
   limits through Redis; prints generations judged per minute and the ratio to the
   endpoint's ideal C / L, at 1/4, 1/2 and 1x the generations (the scaling line), with the
   CPU the workers and this process (the scripted server's threads, plus a light poll)
   spent per judgment.
2. The reward endpoint behind gunicorn (bench/reward_throughput.py ``reward_bench``): B
   clients (--reward-clients) send batches of S completions (--reward-batch), B x S in flight,
   with the judge at latency L; prints throughput against the judge-bound ideal and the p95
   overhead of a batch over the judge's latency, at 1/4, 1/2 and 1x the rounds.

    .venv/bin/python bench/judge_throughput.py [--generations 7000] [--latency 0.2] [--concurrency 64]
        [--workers 2] [--scales 0.25,0.5,1] [--reward-rounds 8] [--reward-batch 32] [--skip-reward]

Uses PostgreSQL (database how2_bench, created if missing) and Redis (BENCH_JUDGE_REDIS_URL,
default database 13) as the broker and for the shared limits."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from bench.llm_throughput import PG_URL, ensure_database, machine_speed  # noqa: E402

REDIS_URL = os.environ.get("BENCH_JUDGE_REDIS_URL", "redis://127.0.0.1:6379/13")
CLOCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK


def load() -> str:
    return "load average " + ", ".join(Path("/proc/loadavg").read_text().split()[:3])


def judge_run_bench(args, server, tag: str) -> None:
    """The judge run over ``args.generations`` generations at each scale, executed by
    ``args.workers`` Celery workers that claim its shards."""
    from celery import Celery
    from django.db import connection

    from judging.models import Generation, GenerationRun, JudgeRun, LanguageModel, RunStatus
    from judging.services import judge_run_create
    from llm.models import LLMJob
    from llm.shards import llm_job_tasks
    from mining.models import Procedure, Topic, procedure_identity
    from mining.procedure_services import topics_ensure

    topics_ensure()
    topics = list(Topic.objects.all())
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--pool",
                "solo",
                "--loglevel",
                "WARNING",
                "--hostname",
                f"judge{i}-{os.getpid()}@%h",
            ],
            cwd=BASE_DIR,
            env=os.environ.copy(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(args.workers)
    ]
    client = Celery("bench-judge", broker=REDIS_URL, backend=REDIS_URL)
    ideal = args.concurrency / args.latency * 60
    try:
        deadline = time.monotonic() + 120
        while len(client.control.ping(timeout=1.0)) < args.workers:  # every worker connected
            if time.monotonic() > deadline:
                raise SystemExit("the Celery workers did not start")
        for scale in [float(x) for x in args.scales.split(",")]:
            n = max(1, round(args.generations * scale))
            prefix = f"{tag}-{n}"
            procedures = Procedure.objects.bulk_create(
                [
                    Procedure(
                        topic=topics[i % len(topics)],
                        goal=f"Goal {prefix} {i}: finish task {i}.",
                        steps=[f"Do part {k} of task {i}." for k in range(1, 8)],
                        resources=["tool"],
                        source_example_id=f"{prefix}-{i}",
                        split="bench",
                        identity=procedure_identity(f"{prefix}-{i}", f"Goal {prefix} {i}: finish task {i}."),
                    )
                    for i in range(n)
                ],
                batch_size=2000,
            )
            model, _ = LanguageModel.objects.get_or_create(name=f"bench-model-{prefix}")
            run = GenerationRun.objects.create(
                name=f"bench-{prefix}",
                language_model=model,
                prompt_file="(bench)",
                prompt_hash="",
                status=RunStatus.DONE,
                procedure_ids=[p.pk for p in procedures],
            )
            Generation.objects.bulk_create(
                [
                    Generation(
                        procedure=p,
                        run=run,
                        model=model.name,
                        predicted_steps=[f"Do step {k} of {p.pk}." for k in range(1, 8)],
                    )
                    for p in procedures
                ],
                batch_size=2000,
            )
            judge = judge_run_create(
                name=f"judge-{prefix}", generation_run=run, judge="how2judge", concurrency=args.concurrency, start=False
            )
            n_shards = judge.llm_job.shards.count()
            # The run slows as the database grows (0.79 on a new database, 0.72-0.76 at 3.7 GB):
            # its size is printed with the figures. Drop the database to start afresh.
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_database_size(current_database())")
                db_mb = cursor.fetchone()[0] / 2**20
            sent_before = len(server.chat_requests())
            cpu_workers = sum(cpu_seconds(w.pid) for w in workers)
            cpu_self = cpu_seconds(os.getpid())
            started = time.perf_counter()
            for _ in range(llm_job_tasks(judge.llm_job_id)):  # what judge_run_create(start=True) sends
                client.send_task("judging.judge_run_execute", args=[judge.pk])
            while JudgeRun.objects.filter(pk=judge.pk).values_list("status", flat=True).first() not in (
                "done",
                "done_with_failures",
                "failed",
                "cancelled",
                "paused",
            ):
                time.sleep(0.1)
            elapsed = time.perf_counter() - started
            cpu_workers = sum(cpu_seconds(w.pid) for w in workers) - cpu_workers
            cpu_self = cpu_seconds(os.getpid()) - cpu_self
            judge.refresh_from_db()
            judged = judge.judgments.filter(outcome="ok").count()
            sent = len(server.chat_requests()) - sent_before
            hosts = sorted(set(LLMJob.objects.filter(parent_id=judge.llm_job_id).values_list("worker", flat=True)))
            per_minute = judged / elapsed * 60
            from django.db.models import Max, Min

            span = LLMJob.objects.filter(parent_id=judge.llm_job_id).aggregate(
                first=Min("started_at"), last=Max("finished_at")
            )
            shards_s = (span["last"] - span["first"]).total_seconds()
            store_s = (judge.finished_at - span["last"]).total_seconds()
            print(
                f"judge run x{scale:g}: {judged} of {n} generations judged ({judge.status}) in {elapsed:.1f} s = "
                f"{per_minute:,.0f} per minute; ideal {ideal:,.0f} per minute (C={args.concurrency}, "
                f"L={args.latency * 1000:.0f} ms); ratio {per_minute / ideal:.2f}; {n_shards} shards over "
                f"{len(hosts)} of {args.workers} workers; requests sent {sent}; max in flight {server.max_in_flight}; "
                f"database {db_mb:,.0f} MB before the run"
            )
            print(
                f"    phases: tasks picked up and first shard claimed {elapsed - shards_s - store_s:.1f} s, shards "
                f"{shards_s:.1f} s ({n / shards_s:.0f} requests/s = {n / shards_s / (args.concurrency / args.latency):.2f} "
                f"of C / L), storing the judgments and settling the run {store_s:.1f} s"
            )
            print(
                f"    CPU: workers {cpu_workers:.1f} s ({cpu_workers / max(judged, 1) * 1000:.2f} ms per judgment), "
                f"scripted server + poll {cpu_self:.1f} s = {cpu_self / elapsed:.0%} of one core "
                f"({cpu_self / elapsed / os.cpu_count():.0%} of the machine's {os.cpu_count()} cores); {load()}"
            )
    finally:
        client.close()
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--generations", type=int, default=7000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--reward-rounds", type=int, default=8, help="batches each reward client sends (at 1x)")
    parser.add_argument("--reward-batch", type=int, default=32, help="completions per reward request")
    parser.add_argument("--reward-clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scales", default="0.25,0.5,1", help="fractions of --generations, the scaling line")
    parser.add_argument("--skip-reward", action="store_true")
    args = parser.parse_args()
    print(machine_speed(), flush=True)
    ensure_database()
    from tests.scripted_llm import Reply, ScriptedLLM

    answer = json.dumps({"reasoning": "Equivalent to L1.", "critical_failures": []})
    with ScriptedLLM(latency=args.latency) as server:
        server.default = lambda body: Reply(answer, prompt_tokens=2500, completion_tokens=120)
        env = dict(
            os.environ,
            DATABASE_URL=PG_URL,
            VAR_DIR=tempfile.mkdtemp(prefix="bench-judge-"),
            DJANGO_SETTINGS_MODULE="config.django.base",
            OUTBOUND_ALLOWED_HOSTS="127.0.0.1",  # the scripted server (llm/outbound.py)
            DEBUG="false",
            LOG_LEVEL="WARNING",
            JUDGE_BASE_URL=server.base_url,
            JUDGE_MODEL="how2everything/how2judge",
            JUDGE_API_KEY="k",
            LLM_MAX_CONCURRENCY=str(args.concurrency),
            CELERY_BROKER_URL=REDIS_URL,
            CELERY_RESULT_BACKEND=REDIS_URL,
            LLM_LIMITS_REDIS_URL=REDIS_URL,
        )
        os.environ.update(env)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
        import django

        django.setup()
        tag = uuid.uuid4().hex[:8]
        judge_run_bench(args, server, tag)
        if args.skip_reward:
            return

        # The reward endpoint behind gunicorn (bench/reward_throughput.py): K = clients x batch
        # completions in flight, the judge endpoint's limit set to K.
        from bench.reward_throughput import reward_bench

        k = args.reward_clients * args.reward_batch
        reward_bench(
            env=dict(env, LLM_MAX_CONCURRENCY=str(k), REWARD_CONCURRENCY=str(args.reward_batch)),
            latency=args.latency,
            clients=args.reward_clients,
            batch=args.reward_batch,
            rounds=args.reward_rounds,
            scales=[0.25, 0.5, 1.0],
            workers=2,
            threads=8,
        )


if __name__ == "__main__":
    main()
