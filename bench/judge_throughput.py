"""Benchmark: How2Score judging throughput and the reward endpoint's latency.

1. Judges G generations (default 7,000, the size of How2Bench) with a judge run against the
   scripted server at a fixed latency L and concurrency C; prints generations judged per
   minute and the ratio to the endpoint's ideal C / L.
2. Serves the product with gunicorn on 127.0.0.1 and calls POST /api/reward R times (one
   completion per call) with the judge at latency L; prints p50/p95 latency.

    .venv/bin/python bench/judge_throughput.py [--generations 7000] [--latency 0.2] [--concurrency 64] [--reward-calls 200]

Uses PostgreSQL (database how2_bench, created if missing)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from bench.llm_throughput import PG_URL, ensure_database  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--generations", type=int, default=7000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--reward-calls", type=int, default=200)
    parser.add_argument("--reward-clients", type=int, default=8)
    args = parser.parse_args()
    ensure_database()
    from tests.scripted_llm import Reply, ScriptedLLM

    answer = json.dumps({"reasoning": "Equivalent to L1.", "critical_failures": []})
    with ScriptedLLM(latency=args.latency) as server:
        server.default = lambda body: Reply(answer, prompt_tokens=2500, completion_tokens=120)
        env = dict(os.environ, DATABASE_URL=PG_URL, VAR_DIR=tempfile.mkdtemp(prefix="bench-judge-"),
                   DJANGO_SETTINGS_MODULE="config.django.base", DEBUG="false", LOG_LEVEL="WARNING",
                   JUDGE_BASE_URL=server.base_url, JUDGE_MODEL="how2everything/how2judge", JUDGE_API_KEY="k",
                   LLM_MAX_CONCURRENCY=str(args.concurrency), CELERY_BROKER_URL="memory://")
        os.environ.update(env)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
        import django

        django.setup()
        from judging.models import Generation, GenerationRun, LanguageModel, RunStatus
        from judging.services import judge_run_create, judge_run_execute
        from mining.models import Procedure, Topic, procedure_identity
        from mining.services import topics_ensure

        topics_ensure()
        tag = uuid.uuid4().hex[:8]
        topics = list(Topic.objects.all())
        procedures = Procedure.objects.bulk_create([
            Procedure(topic=topics[i % len(topics)], goal=f"Goal {tag} {i}: finish task {i}.",
                      steps=[f"Do part {k} of task {i}." for k in range(1, 8)], resources=["tool"],
                      source_example_id=f"{tag}-{i}", split="bench",
                      identity=procedure_identity(f"{tag}-{i}", f"Goal {tag} {i}: finish task {i}."))
            for i in range(args.generations)], batch_size=2000)
        model, _ = LanguageModel.objects.get_or_create(name=f"bench-model-{tag}")
        run = GenerationRun.objects.create(name=f"bench-{tag}", language_model=model, prompt_file="(bench)", prompt_hash="",
                                           status=RunStatus.DONE, procedure_ids=[p.pk for p in procedures])
        Generation.objects.bulk_create([
            Generation(procedure=p, run=run, model=model.name, predicted_steps=[f"Do step {k} of {p.pk}." for k in range(1, 8)])
            for p in procedures], batch_size=2000)
        judge = judge_run_create(name=f"judge-{tag}", generation_run=run, judge="how2judge", concurrency=args.concurrency,
                                 start=False)
        started = time.perf_counter()
        judge_run_execute(run_id=judge.pk)
        elapsed = time.perf_counter() - started
        judged = judge.judgments.count()
        per_minute = judged / elapsed * 60
        ideal = args.concurrency / args.latency * 60
        print(f"judge run: {judged} generations in {elapsed:.1f} s = {per_minute:,.0f} per minute; ideal {ideal:,.0f} "
              f"per minute (C={args.concurrency}, L={args.latency * 1000:.0f} ms); ratio {per_minute / ideal:.2f}")

        # The reward endpoint behind gunicorn.
        from django.contrib.auth import get_user_model

        from core.roles import ROLE_RESEARCHER
        from core.services import api_token_create, user_create

        user = user_create(username=f"trainer-{tag}", role=ROLE_RESEARCHER)
        token = api_token_create(user=get_user_model().objects.get(username=user.username)).secret
        port = 8700 + os.getpid() % 200
        gunicorn = subprocess.Popen([sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}",
                                     "--workers", "2", "--threads", "8", "--log-level", "warning"],
                                    cwd=BASE_DIR, env=env)
        try:
            for _ in range(100):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=1)
                    break
                except OSError:
                    time.sleep(0.2)

            def call(i: int) -> float:
                body = json.dumps({"goal": f"Goal {tag} reward {i}", "resources": ["tool"],
                                   "reference_steps": [f"Do part {k}." for k in range(1, 6)],
                                   "completion": "\n".join(f"{k}. Do part {k} now." for k in range(1, 6))}).encode()
                request = urllib.request.Request(f"http://127.0.0.1:{port}/api/reward", data=body, headers={
                    "Content-Type": "application/json", "Authorization": f"Token {token}"})
                t0 = time.perf_counter()
                with urllib.request.urlopen(request, timeout=30) as response:
                    assert response.status == 200, response.status
                    json.loads(response.read())
                return (time.perf_counter() - t0) * 1000

            call(-1)  # warm up (tokenizer load)
            with ThreadPoolExecutor(args.reward_clients) as pool:
                latencies = list(pool.map(call, range(args.reward_calls)))
            q = statistics.quantiles(latencies, n=100)
            print(f"reward endpoint: {args.reward_calls} calls from {args.reward_clients} clients, judge latency "
                  f"{args.latency * 1000:.0f} ms: p50 {q[49]:.0f} ms, p95 {q[94]:.0f} ms "
                  f"(overhead over the judge: p50 {q[49] - args.latency * 1000:.0f} ms)")
        finally:
            gunicorn.terminate()
            gunicorn.wait(timeout=30)


if __name__ == "__main__":
    main()
