"""Benchmark: a *running* mining run's page and progress API at paper scale, as the code at
``--before`` serves them and as this checkout does (every count kept as the run goes: the
run's counters and the ledger's totals), and what keeping them costs each stored document.

The run is not mined (100,000 documents take 35 minutes through the scripted server,
bench/mining_throughput.py): the database is filled directly with bulk inserts of rows
shaped as a run writes them. N documents over seven topics, of which 90 % are finished
(rejected at the heuristics 20 %, at extraction 10 %, by the filter 25 %, at validation
10 %, failed 1 %, the rest passed and became procedures) and 10 % in flight with the
stage results they have so far; each LLM stage result with its ledger entry (the request,
about 1.5 KB, and the answer, priced), its parsed answer and draft; finished documents
spread over the last 35 minutes. The run's status is ``running``. Its counters and its
ledger totals are then counted from these rows by ``mining_run_counters_verify`` (timed: it
is what the first read of a run made before the counters costs).

Timed, as a signed-in admin with the Django test client (DEBUG off, hashed static files),
p50 / p95 of ``--requests`` GETs and the first one apart:

* **before**: the run page and the progress API as the code at ``--before`` (default: the
  last commit that read the ledger's entries and the documents' table for the page) serves
  them, from a copy of that commit (``git archive``) run in a subprocess on the same
  database;
* **after**: the same pages as this checkout serves them (from the counters and totals).

Then what a stored document costs the workers, per document: worker CPU (thread time), wall
time, the PostgreSQL backend's CPU (/proc of the connection's backend, when the server runs
here) and statements (``connection.execute_wrapper``), in alternating rounds:

* the walk's write (``mining.walker.Walker._write``: its six stage results and its
  document's new state) over ``--writes`` pending documents of a second run, with the
  counters and with them switched off (``candidate_lock`` answering None, so neither the
  lock-and-read statement nor the counters' upsert runs); and the same write as the code at
  ``--before`` does it (its ``write_cost``, in the subprocess), for its counters' cost;
* the five ledger writes of a document's LLM stages (``llm.ledger.ledger_write``, one per
  request as the online executor stores them), with the ledger's totals and without
  (``ledger_totals_add`` switched off: the write as it was before the totals).

    .venv/bin/python bench/mining_run_page.py [--docs 100000] [--requests 10] [--writes 2000]
        [--before REF] [--keep]

Needs PostgreSQL at 127.0.0.1:5432 (the database h_mining_bench, or BENCH_DATABASE_URL, is
recreated unless --keep)."""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
PG_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/h_mining_bench")
TOPICS = ("food-dining", "health", "home-hobbies", "industrial", "travel-tourism", "transportation", "religion")
LLM = ("extract_procedure", "llm_filter", "rewrite", "extract_resources", "final_validation")
TARGET_S = 1.0
# The last commit whose run page read the ledger's entries and the documents' table (the
# ledger's totals and the documents' counters came after it).
BEFORE_REF = "56aa511"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# Where a finished document stops (the stage that decided, its status) and how often.
ENDINGS = [
    (0.20, "heuristics", "rejected", "too_few_steps: 3 < 5"),
    (0.10, "extract_procedure", "rejected", "no_procedure: the page holds no procedure"),
    (0.25, "llm_filter", "rejected", "excluded: a recipe whose quantities depend on taste"),
    (0.10, "final_validation", "rejected", "failed_validation: q2: steps skip the setup"),
    (0.01, "rewrite", "failed", "parse_failed: the answer is not JSON"),
    (0.34, "final_validation", "passed", ""),
]
STEPS = [f"Step {i}: do the {i}th thing with care, checking the result before going on." for i in range(1, 8)]


def ending(draw: float) -> tuple[str, str, str]:
    """The ending (stage, status, reason) a draw in [0, 1) falls on."""
    for share, stage, status, reason in ENDINGS:
        draw -= share
        if draw <= 0:
            return stage, status, reason
    return ENDINGS[-1][1:]


def recreate_database() -> None:
    import psycopg

    name = PG_URL.rsplit("/", 1)[1]
    admin = PG_URL.rsplit("/", 1)[0].replace("postgres://", "postgresql://") + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def quantile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100)[p - 1] if len(values) > 1 else values[0]


def environment(var_dir: str) -> dict[str, str]:
    return dict(
        os.environ,
        DATABASE_URL=PG_URL,
        VAR_DIR=var_dir,
        DJANGO_SETTINGS_MODULE="config.django.base",
        LLM_BASE_URL="http://127.0.0.1:9/v1",  # never asked: nothing is sent
        LLM_MODEL="bench-model",
        LLM_API_KEY="k",
        OUTBOUND_ALLOWED_HOSTS="127.0.0.1",
        DEBUG="false",
        LOG_LEVEL="WARNING",
    )


def page_times(run_id: int, requests: int) -> dict[str, dict[str, float]]:
    """The first GET and p50 / p95 of ``requests`` more of the run page and the progress API."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from core.roles import ROLE_ADMIN
    from core.services import user_create

    username = f"bench-admin-{os.getpid()}"
    if not get_user_model().objects.filter(username=username).exists():
        user_create(username=username, role=ROLE_ADMIN)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(get_user_model().objects.get(username=username))
    times = {}
    for label, url in (
        ("run page", f"/mining/runs/{run_id}/"),
        ("progress API", f"/api/mining/runs/{run_id}/progress/"),
    ):
        took = []
        for _ in range(requests + 1):
            started = time.perf_counter()
            response = client.get(url)
            took.append(time.perf_counter() - started)
            assert response.status_code == 200, (url, response.status_code)
        rest = took[1:]
        times[label] = {"first": took[0], "p50": statistics.median(rest), "p95": quantile(rest, 95), "n": len(rest)}
    return times


def fill(n_docs: int) -> int:
    """The running run of ``n_docs`` documents, written directly (see the module docstring)."""
    from django.db import connection
    from django.utils import timezone

    from core.bulk_insert import bulk_insert
    from llm.models import LedgerEntry
    from mining.models import (
        Corpus,
        Document,
        MiningCandidate,
        MiningRun,
        Procedure,
        StageResult,
        Topic,
        procedure_identity,
    )
    from mining.procedure_services import topics_ensure
    from mining.run_services import mining_run_create

    topics_ensure()
    topics = [Topic.objects.get(slug=slug) for slug in TOPICS]
    corpus = Corpus.objects.create(name="paper-scale")
    rng = random.Random(29)
    chunk = 5000
    for start in range(0, n_docs, chunk):
        bulk_insert(
            Document,
            [
                Document(
                    corpus=corpus,
                    doc_id=f"d{i}",
                    topic=topics[i % len(topics)],
                    text_hash=f"h{i}",
                    text=f"How to make thing {i}\n" + "\n".join(STEPS),
                )
                for i in range(start, min(start + chunk, n_docs))
            ],
        )
    Corpus.objects.filter(pk=corpus.pk).update(n_documents=n_docs)
    config = f"name: paper-scale\ncandidates_per_topic: {n_docs}\nconcurrency: 64\n"
    run = mining_run_create(config_text=config, source="bench.yaml", corpus_name=corpus.name, start=False)
    now = timezone.now()
    MiningRun.objects.filter(pk=run.pk).update(status="running", started_at=now - timedelta(minutes=35))
    documents = list(Document.objects.filter(corpus=corpus).order_by("pk").values_list("pk", "topic_id", "doc_id"))
    request = {"messages": [{"role": "user", "content": "Read the page and answer. " + " ".join(STEPS) * 2}]}
    answer = {"goal": "Make a thing", "steps": STEPS, "judgment": False, "reason": ""}
    draft = {"goal": "Make a thing", "steps": STEPS, "resources": ["a tool", "some time"]}
    cost = Decimal("0.00128")
    for start in range(0, len(documents), chunk):
        candidates, results, entries, procedures = [], [], [], []
        plan = []
        for pk, topic_id, doc_id in documents[start : start + chunk]:
            pending = rng.random() < 0.10
            stage, status, reason = ending(rng.random())
            reached = PIPELINE_ORDER[: PIPELINE_ORDER.index(stage) + 1]
            if pending:  # in flight: somewhere before its end, no decision yet
                reached = reached[: rng.randint(1, len(reached))]
                stage, status, reason = reached[-1], "pending", ""
            finished = None if pending else now - timedelta(seconds=rng.uniform(0, 35 * 60))
            candidates.append(
                MiningCandidate(
                    run_id=run.pk,
                    document_id=pk,
                    topic_id=topic_id,
                    status=status,
                    stage=stage,
                    reason=reason,
                    finished_at=finished,
                    cpu_ms=15.0 if finished else None,
                )
            )
            plan.append((pk, doc_id, reached, status, reason))
        bulk_insert(MiningCandidate, candidates)
        by_document = dict(
            MiningCandidate.objects.filter(run=run, document_id__in=[p[0] for p in plan]).values_list(
                "document_id", "pk"
            )
        )
        for pk, doc_id, reached, status, reason in plan:
            for stage in reached:
                last = stage == reached[-1]
                stage_status = status if last and status in ("rejected",) else "passed"
                if last and status == "failed":
                    stage_status = "parse_failed"
                if last and status == "pending":
                    stage_status = "passed"
                key = f"{doc_id}:{stage}"
                results.append(
                    StageResult(
                        candidate_id=by_document[pk],
                        run_id=run.pk,
                        stage=stage,
                        status=stage_status,
                        reason=reason if stage_status != "passed" else "",
                        answer=answer,
                        draft=draft,
                        request_key=key,
                        model="bench-model" if stage != "heuristics" else "",
                        tokens_in=400 if stage != "heuristics" else 0,
                        tokens_out=60 if stage != "heuristics" else 0,
                        cost_usd=cost if stage != "heuristics" else 0,
                        latency_ms=200,
                        created_at=now,
                    )
                )
                if stage != "heuristics":
                    entries.append(
                        LedgerEntry(
                            key=key,
                            stage=stage,
                            run=run.ledger_run,
                            base_url="http://127.0.0.1:9/v1",
                            model="bench-model",
                            request=request,
                            response={"choices": [{"message": {"content": json.dumps(answer)}}]},
                            response_text=json.dumps(answer),
                            outcome="ok" if stage_status != "parse_failed" else "parse_failed",
                            parsed=answer if stage_status != "parse_failed" else None,
                            error="" if stage_status != "parse_failed" else "the answer is not JSON",
                            tokens_in=400,
                            tokens_out=60,
                            latency_ms=200,
                            cost_usd=cost,
                        )
                    )
            if status == "passed":
                goal = f"Make thing {doc_id}"
                procedures.append(
                    Procedure(
                        topic_id=topics[0].pk,
                        goal=goal,
                        steps=STEPS,
                        source_example_id=doc_id,
                        identity=procedure_identity(doc_id, goal),
                        provenance={"mining_run_id": run.pk},
                    )
                )
        bulk_insert(StageResult, results)
        bulk_insert(LedgerEntry, entries)
        bulk_insert(Procedure, procedures)
        print(f"  filled {min(start + chunk, len(documents)):,} of {len(documents):,} documents", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return run.pk


PIPELINE_ORDER = ["heuristics", *LLM]


def before_times(ref: str, run_id: int, requests: int, writes: int) -> dict:
    """The pages as the code at ``ref`` serves them, and its write path's cost, on the same
    database (a subprocess)."""
    from mining.models import MiningRun

    MiningRun.objects.filter(name="write-path").delete()  # the earlier code's write run, from a last --keep
    tree = tempfile.mkdtemp(prefix="bench-mining-before-")
    archive = subprocess.run(["git", "archive", ref], cwd=BASE_DIR, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
    var_dir = tempfile.mkdtemp(prefix="bench-mining-before-var-")
    env = environment(var_dir)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=tree, env=env, check=True
    )
    # the earlier tree's own bench module (its page_times and write_cost), run against its code
    script = (
        "import json, sys; sys.path.insert(0, '.'); import django; django.setup(); "
        "from bench.mining_run_page import page_times, write_cost; "
        f"print('TIMES ' + json.dumps(page_times({run_id}, {requests}))); "
        f"print('WRITES ' + json.dumps(write_cost({writes})))"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=tree, env=env, check=True, capture_output=True, text=True)
    found = {}
    for line in out.stdout.splitlines():
        for tag in ("TIMES", "WRITES"):
            if line.startswith(tag + " "):
                found[tag] = json.loads(line[len(tag) + 1 :])
    return found


def backend_cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def write_cost(n_writes: int, rounds: int = 10) -> dict[str, dict[str, float]]:
    """The write path with and without the counters, alternating in rounds (see the docstring)."""
    from django.db import connection
    from django.utils import timezone

    from core.bulk_insert import bulk_insert
    from mining import walker as walker_module
    from mining.models import Corpus, MiningCandidate, MiningRun
    from mining.run_counters import DocumentRows, candidate_lock
    from mining.walker import Final, Walker

    corpus = Corpus.objects.get(name="paper-scale")
    config = f"name: write-path-{os.getpid()}\ncandidates_per_topic: {n_writes}\n"
    from mining.run_services import mining_run_create

    run = mining_run_create(config_text=config, source="bench.yaml", corpus_name=corpus.name, start=False)
    MiningRun.objects.filter(pk=run.pk).update(status="running")
    documents = list(corpus.documents.order_by("pk").values_list("pk", "topic_id")[:n_writes])
    bulk_insert(MiningCandidate, [MiningCandidate(run_id=run.pk, document_id=pk, topic_id=t) for pk, t in documents])
    candidates = list(MiningCandidate.objects.filter(run=run).order_by("pk"))
    walker = Walker(run, plans={})
    statements = [0]

    def count(execute, sql, params, many, context):
        statements[0] += 1
        return execute(sql, params, many, context)

    def fields(stage: str) -> dict:
        return dict(
            run_id=run.pk,
            status="passed" if stage != "final_validation" else "rejected",
            reason="" if stage != "final_validation" else "failed_validation: q2: no",
            answer={"goal": "Make a thing", "steps": STEPS},
            draft={"goal": "Make a thing", "steps": STEPS, "resources": []},
            request_key=f"w:{stage}",
            prompt_hash="",
            model="bench-model",
            cached=False,
            tokens_in=400,
            tokens_out=60,
            cost_usd=Decimal("0.00128") if stage != "heuristics" else 0,
            latency_ms=200,
            created_at=timezone.now(),
        )

    def no_lock(candidate_id: int) -> DocumentRows | None:
        return None  # the write without its counters: no lock-and-read, no upsert

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    totals = {mode: {"cpu": 0.0, "wall": 0.0, "db_cpu": 0.0, "statements": 0, "n": 0} for mode in ("with", "without")}
    per_round = len(candidates) // (2 * rounds)
    final = Final("rejected", "final_validation", "failed_validation: q2: no")
    with connection.execute_wrapper(count):
        for r in range(rounds):
            for mode in ("with", "without") if r % 2 == 0 else ("without", "with"):
                batch, candidates = candidates[:per_round], candidates[per_round:]
                walker_module.candidate_lock = candidate_lock if mode == "with" else no_lock
                statements[0] = 0
                db_before = backend_cpu_seconds(backend)
                cpu, wall = time.thread_time(), time.perf_counter()
                for candidate in batch:
                    pending = {stage: fields(stage) for stage in PIPELINE_ORDER}
                    walker._write(candidate, {}, pending, final, cpu_ms=0.0)
                row = totals[mode]
                row["cpu"] += time.thread_time() - cpu
                row["wall"] += time.perf_counter() - wall
                db_after = backend_cpu_seconds(backend)
                if db_before is not None and db_after is not None:
                    row["db_cpu"] += db_after - db_before
                row["statements"] += statements[0]
                row["n"] += len(batch)
    walker_module.candidate_lock = candidate_lock
    return {
        mode: {
            "n": row["n"],
            "cpu_ms": row["cpu"] * 1000 / row["n"],
            "wall_ms": row["wall"] * 1000 / row["n"],
            "db_cpu_ms": row["db_cpu"] * 1000 / row["n"],
            "statements": row["statements"] / row["n"],
        }
        for mode, row in totals.items()
    }


def ledger_cost(n_docs: int, rounds: int = 10) -> dict[str, dict[str, float]]:
    """The five ledger writes of a document's LLM stages with the ledger's totals and with
    them switched off, alternating in rounds (see the docstring)."""
    from django.db import connection

    from llm import ledger
    from llm.ledger_totals import ledger_totals_add

    statements = [0]

    def count(execute, sql, params, many, context):
        statements[0] += 1
        return execute(sql, params, many, context)

    request = {"messages": [{"role": "user", "content": "Read the page and answer. " + " ".join(STEPS) * 2}]}
    label = f"mining-run:ledger-cost-{os.getpid()}"

    def fields(stage: str) -> dict:
        return dict(
            stage=stage,
            run=label,
            base_url="http://127.0.0.1:9/v1",
            model="bench-model",
            request=request,
            response_text='{"judgment": true}',
            outcome="ok",
            parsed={"judgment": True},
            tokens_in=400,
            tokens_out=60,
            latency_ms=200,
            cost_usd=Decimal("0.00128"),
        )

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    totals = {mode: {"cpu": 0.0, "wall": 0.0, "db_cpu": 0.0, "statements": 0, "n": 0} for mode in ("with", "without")}
    per_round = n_docs // (2 * rounds)
    document = 0
    with connection.execute_wrapper(count):
        for r in range(rounds):
            for mode in ("with", "without") if r % 2 == 0 else ("without", "with"):
                ledger.ledger_totals_add = ledger_totals_add if mode == "with" else (lambda delta, **_: None)
                statements[0] = 0
                db_before = backend_cpu_seconds(backend)
                cpu, wall = time.thread_time(), time.perf_counter()
                for _ in range(per_round):
                    document += 1
                    for stage in LLM:
                        ledger.ledger_write(f"ledger-cost:{os.getpid()}:{document}:{stage}", fields(stage))
                row = totals[mode]
                row["cpu"] += time.thread_time() - cpu
                row["wall"] += time.perf_counter() - wall
                db_after = backend_cpu_seconds(backend)
                if db_before is not None and db_after is not None:
                    row["db_cpu"] += db_after - db_before
                row["statements"] += statements[0]
                row["n"] += per_round
    ledger.ledger_totals_add = ledger_totals_add
    return {
        mode: {
            "n": row["n"],
            "cpu_ms": row["cpu"] * 1000 / row["n"],
            "wall_ms": row["wall"] * 1000 / row["n"],
            "db_cpu_ms": row["db_cpu"] * 1000 / row["n"],
            "statements": row["statements"] / row["n"],
        }
        for mode, row in totals.items()
    }


def print_costs(title: str, costs: dict[str, dict[str, float]], on: str) -> None:
    for mode, row in costs.items():
        print(
            f"  {title} {mode} {on} (n = {row['n']}): {row['cpu_ms']:.2f} ms worker CPU, "
            f"{row['wall_ms']:.2f} ms wall, {row['db_cpu_ms']:.2f} ms PostgreSQL CPU, "
            f"{row['statements']:.2f} statements per document"
        )
    extra = {k: costs["with"][k] - costs["without"][k] for k in ("cpu_ms", "wall_ms", "db_cpu_ms", "statements")}
    print(
        f"  {title}: the {on} add {extra['cpu_ms']:.2f} ms worker CPU, {extra['wall_ms']:.2f} ms wall, "
        f"{extra['db_cpu_ms']:.2f} ms PostgreSQL CPU and {extra['statements']:.2f} statements per document"
    )


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=10, help="timed GETs of each page after the first")
    parser.add_argument("--writes", type=int, default=2000, help="documents written for the write path's cost")
    parser.add_argument("--before", default=BEFORE_REF, help="the commit whose pages count from the rows")
    parser.add_argument("--keep", action="store_true", help="reuse the bench database's last run")
    args = parser.parse_args()

    var_dir = tempfile.mkdtemp(prefix="bench-mining-page-")
    env = environment(var_dir)
    os.environ.update(env)
    if not args.keep:
        recreate_database()
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, check=True)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=BASE_DIR, env=env, check=True
    )
    import django

    django.setup()
    from django.db import connection

    from mining.models import MiningRun, MiningRunCounter, StageResult
    from mining.run_counters import mining_run_counters_verify

    print(f"at the start: {load()}")
    if args.keep:
        run = MiningRun.objects.filter(name="paper-scale").get()
    else:
        started = time.perf_counter()
        run = MiningRun.objects.get(pk=fill(args.docs))
        print(f"filled in {time.perf_counter() - started:.0f} s")
        started = time.perf_counter()
        report = mining_run_counters_verify(run)
        took = time.perf_counter() - started
        print(
            f"counters counted from the rows (a first read of an earlier run): {took:.2f} s, {report['counters']} counters"
        )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        size = cursor.fetchone()[0] / 2**20
    n_docs = run.candidates.count()
    print(
        f"run {run.pk} ({run.status}): {n_docs:,} documents, {StageResult.objects.filter(run=run).count():,} stage "
        f"results, {MiningRunCounter.objects.filter(run=run).count()} counters; database {size:,.0f} MiB"
    )
    print(load())
    before = before_times(args.before, run.pk, args.requests, args.writes)
    print(f"the code at {args.before} done; {load()}")
    after = page_times(run.pk, args.requests)
    print(f"this checkout done; {load()}")
    for label in ("run page", "progress API"):
        for name, times in ((f"before ({args.before})", before["TIMES"][label]), ("after", after[label])):
            print(
                f"  {label}, {name}: first {times['first'] * 1000:,.0f} ms; p50 {times['p50'] * 1000:,.0f} ms, "
                f"p95 {times['p95'] * 1000:,.0f} ms (n = {times['n']}); p50 / target {times['p50'] / TARGET_S:.2f}"
            )
    print_costs(f"walk's write, the code at {args.before},", before["WRITES"], "counters")
    print(load())
    print_costs("walk's write, this checkout,", write_cost(args.writes), "counters")
    print(load())
    print_costs("a document's five ledger writes,", ledger_cost(args.writes), "ledger totals")
    print(f"at the end: {load()}")


if __name__ == "__main__":
    main()
