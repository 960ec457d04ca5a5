"""Benchmark: the product's overhead on a real inference server.

The same N chat requests (a short goal each, a JSON schema, greedy, a fixed answer budget)
go to vLLM's CPU build serving SmolLM2-135M-Instruct (tests/real_servers.py) two ways, at 1
and at 4 in flight:

* **straight**: a bare asynchronous HTTP client posts the bodies, nothing else (the ideal);
* **product**: an LLM job through the online executor (llm/executors.py): ledger keys, the
  capability store, budgets fitted to the context, limits, ledger writes on SQLite (with
  truncation retries and parse re-asks off, so that both ways make one attempt per request).

It prints requests/s of each and the product's ratio to the straight path measured in the
same run (target ≥ 0.95). Greedy answers to the same bodies are the same tokens both ways;
vLLM's prefix cache is warmed by one pass before anything is timed, and the two ways take
turns (straight, product, straight, product) so that a drift of the machine hits both.

    .venv/bin/python bench/real_server.py [--n 16] [--max-tokens 32] [--concurrency 1,4] [--rounds 2]

Starts its own vLLM (installed by `make real-servers`), or uses REAL_VLLM_BASE_URL. Load goes
to 127.0.0.1 only, and is bounded: rounds × 2 × N requests per concurrency."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

GOALS = [
    "Make a cup of tea",
    "Change a bicycle tyre",
    "Plant a tomato seedling",
    "Write a thank-you note",
    "Clean a cast-iron pan",
    "Hang a picture frame",
    "Boil an egg",
    "Back up a phone",
]
SCHEMA = {
    "type": "object",
    "properties": {"first_step": {"type": "string", "maxLength": 200}},
    "required": ["first_step"],
    "additionalProperties": False,
}


def bodies(n: int, model: str, max_tokens: int, salt: str) -> list[dict]:
    out = []
    for i in range(n):
        goal = GOALS[i % len(GOALS)]
        out.append(
            {
                "model": model,
                "messages": [
                    {"role": "user", "content": f"Goal: {goal} (request {salt}-{i}). Give the first step as JSON."}
                ],
                "temperature": 0,
                "max_tokens": max_tokens,
                # the same every time: the answer is cut at max_tokens unless the model stops
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "bench", "schema": SCHEMA, "strict": True},
                },
            }
        )
    return out


async def straight(base_url: str, payloads: list[dict], concurrency: int) -> tuple[float, int]:
    """Seconds for all payloads through a bare client at ``concurrency``; output tokens."""
    import httpx2 as http

    queue: asyncio.Queue = asyncio.Queue()
    for body in payloads:
        queue.put_nowait(body)
    tokens = 0

    async with http.AsyncClient(timeout=600) as client:

        async def worker() -> None:
            nonlocal tokens
            while not queue.empty():
                body = queue.get_nowait()
                response = await client.post(f"{base_url}/chat/completions", json=body)
                response.raise_for_status()
                tokens += response.json()["usage"]["completion_tokens"]

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started, tokens


def product(base_url: str, model: str, payloads: list[dict], concurrency: int, label: str) -> tuple[float, int]:
    """Seconds for the same payloads as one LLM job through the online executor."""
    from django.conf import settings

    from llm.models import LedgerEntry
    from llm.request import LLMRequest
    from llm.services import llm_job_create, llm_job_execute

    # One attempt per request, as the straight path makes: a truncated answer is not asked
    # again with a larger budget here, nor an unparseable one re-asked (the same work both ways).
    settings.LLM_TRUNCATION_RETRIES = 0
    settings.LLM_PARSE_REASKS = 0
    roles = dict(settings.LLM_ROLES)
    roles["generate"] = dict(roles["generate"], base_url=base_url, model=model, api_key="")
    settings.LLM_ROLES = roles
    requests = [
        LLMRequest(
            stage="bench",
            messages=body["messages"],
            params={"temperature": 0, "max_tokens": body["max_tokens"]},
            schema=SCHEMA,
        )
        for body in payloads
    ]
    job = llm_job_create(run=label, role="generate", requests=requests, concurrency=concurrency, start=False)
    started = time.perf_counter()
    outcome = llm_job_execute(job_id=job.pk)
    seconds = time.perf_counter() - started
    entries = LedgerEntry.objects.filter(key__in=job.keys)
    if entries.count() != len(payloads) or entries.exclude(outcome__in=("ok", "truncated")).exists():
        raise SystemExit(
            f"the product's job did not answer every request ({outcome}): {list(entries.values('outcome', 'error'))[:3]}"
        )
    paths = set(entries.values_list("path", flat=True))
    if paths != {"json_schema"}:
        raise SystemExit(f"the product asked in {paths}, not json_schema: not the same requests")
    return seconds, sum(entries.values_list("tokens_out", flat=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="bench-real-server-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.django.test")
    os.environ["VAR_DIR"] = workdir
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from tests.real_servers import VLLMProcess, running_vllm

    call_command("migrate", verbosity=0)
    process = None
    if os.environ.get("REAL_VLLM_BASE_URL"):
        server = running_vllm(os.environ["REAL_VLLM_BASE_URL"])
    else:
        process = VLLMProcess(Path(workdir) / "vllm.log")
        server = process.start()
        print(f"vLLM started in {server.started_in_seconds} s")
    try:
        print(f"server: {server.family} {server.model} at {server.base_url}; n={args.n}, max_tokens={args.max_tokens}")
        warm = bodies(args.n, server.model, args.max_tokens, "warm")
        asyncio.run(straight(server.base_url, warm, 4))
        for concurrency in [int(c) for c in args.concurrency.split(",")]:
            straight_rates, product_rates = [], []
            for round_no in range(args.rounds):
                payloads = bodies(args.n, server.model, args.max_tokens, f"c{concurrency}r{round_no}")
                # both ways answer the same bodies; the first pass warms the prefix cache for both
                asyncio.run(straight(server.base_url, payloads, concurrency))
                s_seconds, s_tokens = asyncio.run(straight(server.base_url, payloads, concurrency))
                p_seconds, p_tokens = product(
                    server.base_url, server.model, payloads, concurrency, f"bench-real:{concurrency}:{round_no}"
                )
                straight_rates.append(args.n / s_seconds)
                product_rates.append(args.n / p_seconds)
                print(
                    f"  C={concurrency} round {round_no + 1}: straight {args.n / s_seconds:.2f} req/s "
                    f"({s_tokens} tokens), product {args.n / p_seconds:.2f} req/s ({p_tokens} tokens)"
                )
            s, p = statistics.median(straight_rates), statistics.median(product_rates)
            print(
                json.dumps(
                    {
                        "concurrency": concurrency,
                        "straight_req_per_s": round(s, 3),
                        "product_req_per_s": round(p, 3),
                        "ratio_to_straight": round(p / s, 3),
                        "target": 0.95,
                    }
                )
            )
    finally:
        connection.close()
        if process is not None:
            process.stop()


if __name__ == "__main__":
    main()
