"""Benchmark: the reward endpoint for RL trainers behind gunicorn, at K concurrent completions.

Serves the product with gunicorn on 127.0.0.1 as shipped (config/gunicorn.conf.py; W workers x
T threads) against the scripted judge at latency L. B clients each POST batches of S unique
completions back to back (a list of items, as a trainer sends its rollouts), each over its own
connection kept alive (``--new-connections``: one per batch), so K = B x S completions are in flight; each
round every client sends one batch. Prints, at 1/4, 1/2 and 1x the rounds (the scaling line):

* throughput in completions per second against the judge-bound ideal K / L (every
  completion needs one judge call of L seconds, K of them at once; the judge endpoint's
  limit LLM_MAX_CONCURRENCY is set to K);
* each batch's latency minus L (the product's overhead over the judge), p50 and p95;
* the CPU seconds the gunicorn workers spent per completion, and the share of a core that
  this process (the scripted judge's threads and the clients) used, from /proc/<pid>/stat;
* the same batches again, answered from the ledger (status cached): p50/p95 latency.

    .venv/bin/python bench/reward_throughput.py [--clients 8] [--batch 32] [--rounds 8] [--latency 0.2]
        [--workers 2] [--threads 8] [--scales 0.25,0.5,1] [--new-connections]

bench/judge_throughput.py calls ``reward_bench`` after its judge run. Uses PostgreSQL
(database how2_bench, created if missing)."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from bench.llm_throughput import PG_URL, ensure_database, machine_speed  # noqa: E402

CLOCK = os.sysconf("SC_CLK_TCK")
WARM_ROUNDS = 4
REFERENCE = [f"Do part {k} of the task carefully." for k in range(1, 6)]


def cpu_seconds(pid: int | str) -> float:
    """utime + stime of a process, from /proc/<pid>/stat (``self/task/<tid>``: one thread of this one)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def load() -> str:
    return "load average " + ", ".join(Path("/proc/loadavg").read_text().split()[:3])


def _q(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100)[p - 1] if len(values) > 1 else values[0]


def reward_bench(
    *,
    env: dict[str, str],
    latency: float,
    clients: int,
    batch: int,
    rounds: int,
    scales: list[float],
    workers: int,
    threads: int,
    new_connections: bool = False,
) -> None:
    """Start gunicorn with ``env`` (which must point the judge at the scripted server), and
    measure the reward endpoint at each scale of ``rounds``."""
    from django.contrib.auth import get_user_model

    from core.roles import ROLE_RESEARCHER
    from core.services import api_token_create, user_create

    tag = uuid.uuid4().hex[:8]
    user = user_create(username=f"trainer-{tag}", role=ROLE_RESEARCHER)
    token = api_token_create(user=get_user_model().objects.get(username=user.username)).secret
    port = 8500 + os.getpid() % 200
    gunicorn = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi",
            "--config",  # the shipped server: its worker class (header deadline), hooks and limits
            "config/gunicorn.conf.py",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--log-level",
            "warning",
            "--timeout",
            "120",
        ],
        cwd=BASE_DIR,
        env=env,
    )

    local = threading.local()  # each caller thread's own connection, kept alive between its batches

    def post(items: list[dict]) -> tuple[float, list[dict]]:
        """One batch, as the documented trainer client sends it (a ``requests.Session``: one
        connection per caller, kept alive); with ``new_connections`` a connection per batch
        (curl)."""
        body = json.dumps(items).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Token {token}"}
        t0 = time.perf_counter()
        for attempt in (1, 2):
            conn = getattr(local, "conn", None)
            if conn is None or new_connections:
                conn = local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            try:
                conn.request("POST", "/api/reward", body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()  # the server closed an idle connection: once more on a new one
                local.conn = None
                if attempt == 2:
                    raise
                continue
            if new_connections or response.will_close:
                conn.close()
                local.conn = None
            if response.status != 200:
                raise RuntimeError(f"reward endpoint answered {response.status}: {payload[:300]!r}")
            return (time.perf_counter() - t0) * 1000, json.loads(payload)
        raise AssertionError("unreachable")

    def items_of(prefix: str) -> list[dict]:
        return [
            {
                "goal": f"Goal {tag} {prefix} {k}: finish the task.",
                "resources": ["tool"],
                "reference_steps": REFERENCE,
                "completion": "\n".join(f"{n}. Do part {n} of task {prefix}-{k} now." for n in range(1, 6)),
            }
            for k in range(batch)
        ]

    def run(prefix: str, n_rounds: int) -> tuple[float, list[float], Counter, float, float]:
        latencies: list[float] = []
        statuses: Counter = Counter()
        lock = threading.Lock()

        def client(c: int) -> None:
            for r in range(n_rounds):
                ms, body = post(items_of(f"{prefix}-{c}-{r}"))
                with lock:
                    latencies.append(ms)
                    statuses.update(item["status"] for item in body)

        pids = children(gunicorn.pid)
        cpu_workers = sum(cpu_seconds(p) for p in pids)
        cpu_self = cpu_seconds(os.getpid())
        started = time.perf_counter()
        pool = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        elapsed = time.perf_counter() - started
        return (
            elapsed,
            latencies,
            statuses,
            sum(cpu_seconds(p) for p in pids) - cpu_workers,
            cpu_seconds(os.getpid()) - cpu_self,
        )

    try:
        for _ in range(150):  # until gunicorn answers at all (the API's 401 without a token)
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/reward/", timeout=1)
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.2)
        # Warm up every worker (its tokenizer, its judge loop and connection pool) and each of
        # its threads (a database connection each): a few rounds, as many callers as threads.
        for rounds_warm in range(WARM_ROUNDS):
            warm = [
                threading.Thread(target=post, args=(items_of(f"warm-{rounds_warm}-{i}"),))
                for i in range(workers * threads)
            ]
            for thread in warm:
                thread.start()
            for thread in warm:
                thread.join()
        k = clients * batch
        ideal = k / latency
        print(
            f"reward endpoint behind gunicorn ({workers} workers x {threads} threads, config/gunicorn.conf.py): "
            f"{clients} clients ({'a new connection per batch' if new_connections else 'one kept-alive connection each'}) x "
            f"batches of {batch} = {k} concurrent completions, judge latency {latency * 1000:.0f} ms; "
            f"judge-bound ideal {ideal:,.0f} completions/s"
        )
        for scale in scales:
            n_rounds = max(1, round(rounds * scale))
            prefix = f"x{scale:g}"
            elapsed, latencies, statuses, cpu_workers, cpu_self = run(prefix, n_rounds)
            done = sum(statuses.values())
            rate = done / elapsed
            overhead = [ms - latency * 1000 for ms in latencies]
            print(
                f"  x{scale:g} ({n_rounds} rounds, {done} completions {dict(statuses)}): {rate:,.0f} completions/s, "
                f"ratio {rate / ideal:.2f}; batch latency p50 {_q(latencies, 50):.0f} ms, p95 {_q(latencies, 95):.0f} "
                f"ms; overhead over the judge p50 {_q(overhead, 50):.0f} ms, p95 {_q(overhead, 95):.0f} ms"
            )
            print(
                f"      CPU: gunicorn workers {cpu_workers:.1f} s = {cpu_workers / max(done, 1) * 1000:.2f} ms per "
                f"completion; scripted judge + clients {cpu_self:.1f} s = {cpu_self / elapsed:.0%} of one core; "
                f"{load()}"
            )
            if scale == scales[-1]:
                elapsed, latencies, statuses, cpu_workers, _ = run(prefix, n_rounds)  # the same batches again
                print(
                    f"  again, from the ledger ({dict(statuses)}): {sum(statuses.values()) / elapsed:,.0f} "
                    f"completions/s; batch latency p50 {_q(latencies, 50):.0f} ms, p95 {_q(latencies, 95):.0f} ms; "
                    f"gunicorn CPU {cpu_workers / max(sum(statuses.values()), 1) * 1000:.2f} ms per completion"
                )
    finally:
        gunicorn.terminate()
        gunicorn.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--scales", default="0.25,0.5,1")
    parser.add_argument(
        "--new-connections", action="store_true", help="a new connection per batch (curl), not one kept per caller"
    )
    args = parser.parse_args()
    print(machine_speed(), flush=True)
    ensure_database()
    from tests.scripted_llm import Reply, ScriptedLLM

    answer = json.dumps({"reasoning": "Equivalent to L1.", "critical_failures": []})
    with ScriptedLLM(latency=args.latency) as server:
        server.default = lambda body: Reply(answer, prompt_tokens=2500, completion_tokens=120)
        k = args.clients * args.batch
        env = dict(
            os.environ,
            DATABASE_URL=PG_URL,
            VAR_DIR=tempfile.mkdtemp(prefix="bench-reward-"),
            DJANGO_SETTINGS_MODULE="config.django.base",
            OUTBOUND_ALLOWED_HOSTS="127.0.0.1",  # the scripted server (llm/outbound.py)
            DEBUG="false",
            LOG_LEVEL="WARNING",
            JUDGE_BASE_URL=server.base_url,
            JUDGE_MODEL="how2everything/how2judge",
            JUDGE_API_KEY="k",
            LLM_MAX_CONCURRENCY=str(k),
            REWARD_CONCURRENCY=str(args.batch),
            REWARD_MAX_BATCH=str(max(256, args.batch)),
            CELERY_BROKER_URL="memory://",
        )
        env.pop("LLM_LIMITS_REDIS_URL", None)
        os.environ.update(env)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
        import django

        django.setup()
        reward_bench(
            env=env,
            latency=args.latency,
            clients=args.clients,
            batch=args.batch,
            rounds=args.rounds,
            scales=[float(x) for x in args.scales.split(",")],
            workers=args.workers,
            threads=args.threads,
            new_connections=args.new_connections,
        )


if __name__ == "__main__":
    main()
