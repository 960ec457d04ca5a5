"""Benchmark: LLM request throughput through Celery workers, with the ledger on PostgreSQL.

Against the scripted OpenAI-compatible server (its own process, so its CPU is measured
apart) with a fixed latency L per request, sends N requests with total concurrency C split
over W worker processes (each runs one job with C / W in flight; the endpoint's limits are
shared through Redis) and prints, for every (C, W):

* achieved requests/s and its ratio to the ideal C / L;
* the ceiling measured in the same run: a bare asynchronous client (no product code, no
  ledger) sending to the same server at concurrency C, and its ratio to C / L; the gap
  between the two is the product's own cost;
* CPU seconds of the scripted server and of the workers per 1,000 requests, and the share of
  the machine's two cores the server used while the job ran;
* a scaling line (¼, ½ and 1× N at C = 64, one worker), a second, fully cached run, and the
  ledger's own cost per request (one statement each, and in groups).

    .venv/bin/python bench/llm_throughput.py [--n 5000] [--latency 0.2] [--concurrency 64,256] [--workers 1,2]

Needs PostgreSQL at 127.0.0.1:5432 (database how2_bench is created) and Redis at 127.0.0.1:6379.
Load goes to 127.0.0.1 only."""

from __future__ import annotations

import argparse
import asyncio
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
TICKS = os.sysconf("SC_CLK_TCK")


def ensure_database() -> None:
    import psycopg

    name = PG_URL.rsplit("/", 1)[1]
    with psycopg.connect(
        PG_URL.rsplit("/", 1)[0].replace("postgres://", "postgresql://") + "/postgres", autocommit=True
    ) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def machine_speed() -> str:
    """How fast this machine runs Python now, to compare figures measured on different days:
    the CPU seconds of a plain loop of 10 million additions, in this thread (best of three).
    Machines of the same kind differ from day to day: the same commit's figures moved by a
    factor of two between two days (docs/benchmarks.md, "Machine speed")."""
    best = float("inf")
    for _ in range(3):
        started, total = time.thread_time(), 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.thread_time() - started)
    return f"machine speed: 10 M Python additions in {best:.2f} s of CPU"


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def serve(latency: float) -> None:
    """The scripted server in this process, until stdin closes; each line ``count`` on stdin
    is answered with the number of completion requests it has received."""
    from tests.scripted_llm import Reply, ScriptedLLM, last_user_message

    with ScriptedLLM(latency=latency) as server:
        server.default = lambda body: Reply(json.dumps({"answer": len(last_user_message(body))}))
        print(server.base_url, flush=True)
        for line in sys.stdin:
            if line.strip() == "count":
                print(len(server.chat_requests()), flush=True)


async def bare_client(base_url: str, n: int, concurrency: int) -> float:
    """Requests/s of a bare asynchronous HTTP client at ``concurrency``: the server's ceiling."""
    import openai

    try:
        import httpx2 as http
    except ImportError:  # pragma: no cover
        import httpx as http
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key="k",
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(
            limits=http.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        ),
    )
    todo = list(range(n))

    async def worker() -> None:
        while todo:
            i = todo.pop()
            response = await client.post(
                "/chat/completions",
                cast_to=http.Response,
                body={"model": "bench-model", "messages": [{"role": "user", "content": f"bare {i}"}], "max_tokens": 16},
            )
            json.loads(response.content)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    await client.close()
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", default="64,256")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--scaling", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.latency)
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    worker_counts = [int(w) for w in args.workers.split(",")]

    ensure_database()
    var_dir = tempfile.mkdtemp(prefix="bench-llm-")
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--latency", str(args.latency)],
        cwd=BASE_DIR,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    base_url = server.stdout.readline().strip()
    env = dict(
        os.environ,
        DATABASE_URL=PG_URL,
        CELERY_BROKER_URL=REDIS_URL,
        CELERY_RESULT_BACKEND=REDIS_URL,
        LLM_LIMITS_REDIS_URL=REDIS_URL,
        LLM_MAX_CONCURRENCY=str(max(concurrencies)),
        VAR_DIR=var_dir,
        LLM_BASE_URL=base_url,
        LLM_MODEL="bench-model",
        LLM_API_KEY="k",
        DJANGO_SETTINGS_MODULE="config.django.base",
        OUTBOUND_ALLOWED_HOSTS="127.0.0.1",  # the scripted server (llm/outbound.py)
        DEBUG="false",
        LOG_LEVEL="WARNING",
    )
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
    import django

    django.setup()
    from celery import Celery

    from llm.ledger import ledger_lookup, ledger_write, ledger_write_many
    from llm.models import LedgerEntry, LLMJob
    from llm.request import LLMRequest
    from llm.services import llm_job_create

    load = os.getloadavg()
    print(
        f"N={args.n} L={args.latency * 1000:.0f} ms ledger=postgresql broker+limits=redis "
        f"load average at start {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (2 cores)"
    )
    client = Celery("bench", broker=REDIS_URL, backend=REDIS_URL)
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    run_id = uuid.uuid4().hex[:8]
    workers: list[subprocess.Popen] = []
    ceilings: dict[int, float] = {}

    def make_jobs(tag: str, n: int, concurrency: int, w: int, items: str | None = None) -> list[LLMJob]:
        jobs = []
        for k in range(w):
            requests = [
                LLMRequest(
                    stage="bench",
                    messages=[{"role": "user", "content": f"{run_id} {items or tag} {k}-{i}"}],
                    schema=schema,
                )
                for i in range(n // w)
            ]
            jobs.append(
                llm_job_create(
                    run=f"bench-{run_id}-{tag}-{k}",
                    role="llm_filter",
                    requests=requests,
                    concurrency=max(1, concurrency // w),
                    start=False,
                )
            )
        return jobs

    def measure(jobs: list[LLMJob], queues: list[str], deadline: float) -> dict:
        ids = [j.pk for j in jobs]
        sent_before = server_requests()
        cpu_server, cpu_workers = cpu_seconds(server.pid), sum(cpu_seconds(p.pid) for p in workers)
        started = time.perf_counter()
        for job, queue in zip(jobs, queues):
            client.send_task("llm.job_execute", args=[job.pk], queue=queue)
        while LLMJob.objects.filter(pk__in=ids, status="done").count() < len(ids):
            if time.perf_counter() - started > deadline:
                raise SystemExit(
                    f"jobs not done after {deadline:.0f} s: "
                    f"{list(LLMJob.objects.filter(pk__in=ids).values_list('status', 'n_done'))}"
                )
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
        return {
            "elapsed": elapsed,
            "n": sum(j.n_total for j in jobs),
            "sent": server_requests() - sent_before,
            "ok": LedgerEntry.objects.filter(run__in=[j.run for j in jobs], outcome="ok").count(),
            "cpu_server": cpu_seconds(server.pid) - cpu_server,
            "cpu_workers": sum(cpu_seconds(p.pid) for p in workers) - cpu_workers,
        }

    def server_requests() -> int:
        server.stdin.write("count\n")
        server.stdin.flush()
        return int(server.stdout.readline())

    def report(label: str, m: dict, concurrency: int) -> None:
        achieved = m["n"] / m["elapsed"]
        ideal = concurrency / args.latency
        ceiling = ceilings.get(concurrency)
        per_k = 1000 / max(1, m["n"])
        line = f"{label}: {m['elapsed']:6.2f} s, {achieved:7.1f} req/s, ideal C/L {ideal:.0f}, ratio {achieved / ideal:.2f}"
        if ceiling:
            line += f" (bare-client ceiling {ceiling:.0f} req/s = {ceiling / ideal:.2f} of ideal; product/ceiling {achieved / ceiling:.2f})"
        print(line)
        print(
            f"    requests sent {m['sent']}, ok {m['ok']}; CPU per 1,000 requests: server {m['cpu_server'] * per_k:.2f} s, "
            f"workers {m['cpu_workers'] * per_k:.2f} s; server busy {m['cpu_server'] / m['elapsed'] / 2:.0%} of the 2 cores"
        )

    try:
        for concurrency in concurrencies:
            n_bare = min(args.n, 3000)
            cpu0 = cpu_seconds(server.pid)
            ceilings[concurrency] = asyncio.run(bare_client(base_url, n_bare, concurrency))
            print(
                f"bare async client, C={concurrency}: {ceilings[concurrency]:.0f} req/s over {n_bare} requests, "
                f"ratio {ceilings[concurrency] / (concurrency / args.latency):.2f} of C/L; server CPU "
                f"{(cpu_seconds(server.pid) - cpu0) * 1000 / n_bare:.2f} s per 1,000 requests"
            )
        for w in worker_counts:
            queues = [f"bench-{uuid.uuid4().hex[:6]}-{k}" for k in range(w)]
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
                        "-Q",
                        queue,
                        "--loglevel",
                        "WARNING",
                        "--hostname",
                        f"bench{k}-{os.getpid()}@%h",
                    ],
                    cwd=BASE_DIR,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for k, queue in enumerate(queues)
            ]
            time.sleep(8)  # let the workers connect
            try:
                for concurrency in concurrencies:
                    deadline = 20 * args.n * args.latency / concurrency + 120
                    tag = f"c{concurrency}w{w}"
                    m = measure(make_jobs(tag, args.n, concurrency, w), queues, deadline)
                    report(f"C={concurrency:<3} W={w} N={m['n']}", m, concurrency)
                    if w == worker_counts[0] and concurrency == concurrencies[0]:
                        again = measure(make_jobs(tag + "-again", args.n, concurrency, w, items=tag), queues, deadline)
                        print(f"    second, identical run: {again['elapsed']:.2f} s, requests sent {again['sent']}")
                        if args.scaling:
                            for share, label in ((4, "1/4"), (2, "1/2")):
                                n = args.n // share
                                m = measure(make_jobs(f"{tag}-{share}", n, concurrency, w), queues, deadline)
                                report(f"    scaling {label} N={m['n']}", m, concurrency)
            finally:
                for worker in workers:
                    worker.terminate()
                for worker in workers:
                    worker.wait(timeout=30)
                workers = []

        # The ledger's own cost per request: one statement each, and in groups of 64.
        fields = dict(
            stage="bench",
            role="",
            run="bench-overhead",
            base_url="x",
            model="m",
            executor="online",
            request={"messages": [{"role": "user", "content": "x" * 400}]},
            response={"choices": []},
            response_text="{}",
            outcome="ok",
            parsed={"answer": 1},
            path="json_schema",
        )
        keys = [uuid.uuid4().hex + uuid.uuid4().hex for _ in range(1024)]
        one_ms = []
        for key in keys[:512]:
            t0 = time.perf_counter()
            ledger_lookup(key)
            ledger_write(key, fields)
            one_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        for start in range(512, 1024, 64):
            ledger_write_many([(key, fields) for key in keys[start : start + 64]])
        grouped = (time.perf_counter() - t0) * 1000 / 512

        def q(xs: list[float], p: int) -> float:
            return statistics.quantiles(xs, n=100)[p - 1]

        print(
            f"ledger cost per request: lookup + write one at a time p50 {q(one_ms, 50):.2f} ms p95 {q(one_ms, 95):.2f} ms; "
            f"written in groups of 64: {grouped:.3f} ms"
        )
        load = os.getloadavg()
        print(f"load average at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    finally:
        client.close()
        for worker in workers:
            worker.terminate()
        server.stdin.close()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
