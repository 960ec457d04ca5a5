"""Benchmark: where the reward endpoint's CPU goes per fresh completion, without the web stack.

Calls ``judging.rewards.rewards_compute`` (what ``POST /api/reward`` runs after validating its
body) from C caller threads, each sending R batches of B unique completions, against the
scripted judge at latency L in this process. Prints, per completion, the CPU of the callers'
threads (ledger lookup, step parsing, token counts, the ledger write) and of the judge loop's
thread (judging/reward_service.py: the judge requests on one asyncio loop), each read from the
thread's own clock (``time.thread_time`` and /proc/self/task/<tid>/stat), so the scripted
server's CPU is left out; the gunicorn figure of bench/reward_throughput.py adds the web stack
(authentication, middleware, the body's validation and rendering) on top. Target (issue 29):
under 1 ms per fresh completion in all.

    .venv/bin/python bench/reward_cpu.py [--callers 8] [--batch 32] [--rounds 8] [--latency 0.2]

Uses PostgreSQL (database how2_bench, created if missing)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from bench.llm_throughput import PG_URL, ensure_database, machine_speed  # noqa: E402
from bench.reward_throughput import REFERENCE, cpu_seconds  # noqa: E402


def thread_cpu(native_id: int) -> float:
    return cpu_seconds(f"self/task/{native_id}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.2)
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
            VAR_DIR=tempfile.mkdtemp(prefix="bench-reward-cpu-"),
            DJANGO_SETTINGS_MODULE="config.django.base",
            OUTBOUND_ALLOWED_HOSTS="127.0.0.1",  # the scripted server (llm/outbound.py)
            DEBUG="false",
            LOG_LEVEL="WARNING",
            JUDGE_BASE_URL=server.base_url,
            JUDGE_MODEL="how2everything/how2judge",
            JUDGE_API_KEY="k",
            LLM_MAX_CONCURRENCY=str(args.callers * args.batch),
            REWARD_CONCURRENCY=str(args.batch),
        )
        os.environ.update(env)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
        import django

        django.setup()
        from django.db import connection

        from judging.rewards import RewardInput, rewards_compute

        tag = uuid.uuid4().hex[:8]
        caller_cpu: list[float] = []
        lock = threading.Lock()

        def items(prefix: str) -> list[RewardInput]:
            return [
                RewardInput(
                    goal=f"Goal {tag} {prefix} {k}: finish the task.",
                    resources=["tool"],
                    reference_steps=REFERENCE,
                    completion="\n".join(f"{n}. Do part {n} of task {prefix}-{k} now." for n in range(1, 6)),
                )
                for k in range(args.batch)
            ]

        def caller(c: int, rounds: int) -> None:
            started = time.thread_time()
            for r in range(rounds):
                statuses = {item["status"] for item in rewards_compute(items(f"{c}-{r}"))}
                assert statuses == {"judged"}, statuses
            with lock:
                caller_cpu.append(time.thread_time() - started)
            connection.close()

        caller(-1, 1)  # warm: the tokenizer, the judge loop, its connection pool
        caller_cpu.clear()
        loop = next(t for t in threading.enumerate() if t.name == "reward-judge-loop")
        assert loop.native_id is not None
        loop_before = thread_cpu(loop.native_id)
        wall = time.perf_counter()
        threads = [threading.Thread(target=caller, args=(c, args.rounds)) for c in range(args.callers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - wall
        loop_cpu = thread_cpu(loop.native_id) - loop_before
    done = args.callers * args.rounds * args.batch
    callers_ms, loop_ms = sum(caller_cpu) / done * 1000, loop_cpu / done * 1000
    print(
        f"{done} fresh completions ({args.callers} callers x {args.rounds} batches of {args.batch}, judge at "
        f"{args.latency * 1000:.0f} ms) in {wall:.1f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"CPU per completion: callers' threads {callers_ms:.2f} ms + judge loop {loop_ms:.2f} ms = "
        f"{callers_ms + loop_ms:.2f} ms (target < 1 ms with the web stack; ratio to it {(callers_ms + loop_ms):.2f})"
    )


if __name__ == "__main__":
    main()
