"""Load test of the annotation page against the production-style server.

gunicorn (production settings) serves on 127.0.0.1 with a PostgreSQL database of its own
(created fresh: ``annotate_bench`` by default). For each level of concurrent annotators, a new
study is created, and every simulated annotator runs the real sequence in its own thread with
its own cookies: arrive (spread over the ramp) with Prolific parameters, accept the guidelines,
open the item page, tick the goal box and click every step at reading pace (2-6 s a step; each
click is a save, as in the browser), send the heartbeat autosave with the draft every 5 s, submit
once the study's minimum time (90 s, App. C.1) has passed (one submit in ten is sent twice, like
a network retry), and take the next item, until the level's time is up. By default each request opens its own connection, as requests arrive from a
TLS reverse proxy in production (see docs/operations.md); --keep-alive reuses one per annotator. Afterwards the database is checked: every submit the clients saw accepted
is stored exactly once, and no item has more than k non-surplus annotations.

    .venv/bin/python bench/annotation_load.py [--levels 50,100,200] [--duration 120]
        [--min-seconds 90] [--ramp 10] [--read-seconds 2,6] [--workers 4] [--threads 8]
        [--keep-alive] [--database annotate_bench]

Figures are printed as a Markdown table; the exit status is 1 if any check fails."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from http.cookies import SimpleCookie
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432/{name}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Annotator:
    """One simulated participant: a cookie jar and a keep-alive connection."""

    keep_alive = False
    read_seconds = (2.0, 6.0)  # time spent reading one step before clicking it

    def __init__(self, port: int, pid: str, slug: str, stop_at: float, min_seconds: float, record):
        self.port, self.pid, self.slug, self.stop_at, self.min_seconds = port, pid, slug, stop_at, min_seconds
        self.cookies: dict[str, str] = {}
        self.conn: http.client.HTTPConnection | None = None
        self.record = record
        self.submitted: list[tuple[str, int]] = []  # (assignment, annotation id) the server accepted
        self.errors: list[str] = []

    def request(self, method: str, path: str, body: dict | None = None, kind: str | None = None):
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()), "Host": f"127.0.0.1:{self.port}"}
        if not self.keep_alive:
            headers["Connection"] = "close"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers.update({"Content-Type": "application/json", "X-CSRFToken": self.cookies.get("csrftoken", "")})
        if method == "POST" and body is None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            start = time.perf_counter()
            try:
                payload = data
                if method == "POST" and body is None:
                    payload = f"agree=yes&csrfmiddlewaretoken={self.cookies.get('csrftoken', '')}".encode()
                self.conn.request(method, path, body=payload, headers=headers)
                response = self.conn.getresponse()
                content = response.read()
            except (ConnectionError, http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
                continue
            elapsed = time.perf_counter() - start
            if kind:
                self.record(kind, elapsed)
            for header in response.headers.get_all("Set-Cookie") or []:
                cookie = SimpleCookie()
                cookie.load(header)
                for key, morsel in cookie.items():
                    self.cookies[key] = morsel.value
            if response.getheader("Connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
            return response.status, response.getheader("Location"), content
        raise RuntimeError("unreachable")

    def run(self) -> None:
        try:
            status, location, _ = self.request(
                "GET", f"/a/{self.slug}/?PROLIFIC_PID={self.pid}&STUDY_ID=bench&SESSION_ID=s-{self.pid}"
            )
            status, _, _ = self.request("GET", location)  # the guidelines page (sets the CSRF cookie)
            status, location, _ = self.request("POST", f"/a/{self.slug}/consent/")
            while time.monotonic() < self.stop_at:
                status, location, content = self.request("GET", f"/a/{self.slug}/work/", kind="page")
                if status == 302:
                    break  # nothing left: the completion page
                if status != 200:
                    self.errors.append(f"page {status}")
                    break
                if not self.item(content):
                    break
        except Exception as exc:  # reported, never hidden
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            if self.conn is not None:
                self.conn.close()

    def item(self, content: bytes) -> bool:
        """One item on the page's own timeline: the goal box and every step are clicked at reading
        pace (each click saves at once, as in the browser), a heartbeat autosave with the draft goes
        every 5 s, and the submit follows once the study's minimum time has passed."""
        state = json.loads(
            re.search(rb'id="page-state" type="application/json">(.*?)</script>', content, re.S).group(1)
        )
        served = time.monotonic()
        seq = state["draftSeq"]
        steps = [f"L1.{i}" for i in range(1, state["nL1"] + 1)] + [f"L2.{i}" for i in range(1, state["nL2"] + 1)]
        save = state["saveUrl"]
        clicks = [{"type": "goal_ack"}] + [{"type": "step_open", "target": s} for s in steps]
        click_at, t = [], served
        for _ in clicks:
            t += random.uniform(*self.read_seconds)
            click_at.append(t)
        has_failure = random.random() < 0.5
        draft = {"has_failure": None, "comments": "", "failures": []}
        next_heartbeat = served + 5
        submit_at = max(served + self.min_seconds + 0.5, click_at[-1] + 2)
        while True:
            now = time.monotonic()
            if clicks and click_at[0] <= min(next_heartbeat, submit_at):
                time.sleep(max(0.0, click_at.pop(0) - now))
                body = {"events": [clicks.pop(0)], "active_ms": 1000}
            elif next_heartbeat < submit_at:
                time.sleep(max(0.0, next_heartbeat - now))
                next_heartbeat += 5
                if not clicks:  # answering after reading everything
                    draft = {
                        "has_failure": has_failure,
                        "comments": "",
                        "failures": [
                            {"description": "Step two contradicts the goal.", "L1_steps": [1], "L2_steps": [2]}
                        ]
                        if has_failure
                        else [],
                    }
                seq += 1
                body = {"draft": draft, "seq": seq, "events": [], "active_ms": 5000}
            else:
                time.sleep(max(0.0, submit_at - now))
                break
            status, _, _ = self.request("POST", save, body, kind="autosave")
            if status != 200:
                self.errors.append(f"autosave {status}")
                return False
        body = {"answer": draft, "submission_id": f"{self.pid}-{seq}"}
        status, _, content = self.request("POST", state["submitUrl"], body, kind="submit")
        if status != 200:
            self.errors.append(f"submit {status}: {content[:200]!r}")
            return False
        result = json.loads(content)
        self.submitted.append((state["assignment"], result["annotation"]))
        if random.random() < 0.1:  # a network retry of the same submit
            status, _, content = self.request("POST", state["submitUrl"], body, kind="submit")
            again = json.loads(content)
            if status != 200 or again["created"] or again["annotation"] != result["annotation"]:
                self.errors.append(f"retried submit was not idempotent: {status} {content[:200]!r}")
        return True


def warm_up(port: int, n: int) -> None:
    """Each gunicorn worker loads the URLconf and compiles the templates on its first requests:
    a few throwaway annotators open an item first, so that cost is not measured."""
    from annotate.studies.services import study_create
    from annotate.studies.settings import StudySettings
    from annotate.testing import item_spec

    study = study_create(
        name="warm-up",
        items=[item_spec(i) for i in range(1, n + 1)],
        settings=StudySettings(
            training_enabled=False,
            qualification_enabled=False,
            attention_check_rate=0,
            annotators_per_item=1,
            allow_other_pids=True,
        ),
    )
    for i in range(n):
        a = Annotator(port, f"warm{i}", study.slug, 0, 0, lambda kind, seconds: None)
        a.request("GET", f"/a/{study.slug}/?PROLIFIC_PID=warm{i}")
        a.request("GET", f"/a/{study.slug}/consent/")
        a.request("POST", f"/a/{study.slug}/consent/")
        a.request("GET", f"/a/{study.slug}/work/")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))
    return ordered[index]


def run_level(port: int, n: int, duration: float, min_seconds: float, ramp: float) -> dict:
    from annotate.models import Annotation, Assignment
    from annotate.studies.services import study_create
    from annotate.studies.settings import StudySettings
    from annotate.testing import item_spec

    items_needed = int(n * (duration / min_seconds + 2) / 3) + 10
    study = study_create(
        name=f"bench {n} {time.time():.0f}",
        items=[item_spec(i, n_l1=4, n_l2=4) for i in range(1, items_needed + 1)],
        settings=StudySettings(
            training_enabled=False,
            qualification_enabled=False,
            attention_check_rate=0,
            min_seconds=int(min_seconds),
            allow_other_pids=True,
        ),
    )
    timings: dict[str, list[float]] = defaultdict(list)
    lock = threading.Lock()

    def record(kind: str, seconds: float) -> None:
        with lock:
            timings[kind].append(seconds)

    stop_at = time.monotonic() + duration
    annotators = [Annotator(port, f"b{n}x{i:03d}", study.slug, stop_at, min_seconds, record) for i in range(n)]
    threads = [threading.Thread(target=a.run, daemon=True) for a in annotators]
    started = time.monotonic()
    for t in threads:
        t.start()
        time.sleep(ramp / n)  # arrivals spread evenly over the ramp
    for t in threads:
        t.join(timeout=duration + min_seconds + 120)
    wall = time.monotonic() - started
    errors = [e for a in annotators for e in a.errors]
    accepted = {assignment: annotation for a in annotators for assignment, annotation in a.submitted}
    stored = list(Annotation.objects.filter(study=study).values_list("assignment__public_id", "pk"))
    per_assignment = defaultdict(list)
    for public_id, pk in stored:
        per_assignment[str(public_id)].append(pk)
    exactly_once = all(per_assignment.get(a) == [pk] for a, pk in accepted.items()) and len(stored) == len(accepted)
    from django.db.models import Count

    over_k = (
        Assignment.objects.filter(study=study, status="submitted", surplus=False)
        .values("item")
        .annotate(c=Count("id"))
        .filter(c__gt=study.annotators_per_item)
        .count()
    )
    requests = sum(len(v) for v in timings.values())
    return {
        "n": n,
        "timings": timings,
        "errors": errors,
        "accepted": len(accepted),
        "stored": len(stored),
        "exactly_once": exactly_once,
        "over_k": over_k,
        "wall": wall,
        "rps": requests / wall,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="50,100,200")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds after which nobody starts a new item")
    parser.add_argument(
        "--min-seconds", type=float, default=90.0, help="the study's minimum seconds per item (paper: 90)"
    )
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which the annotators arrive")
    parser.add_argument("--read-seconds", default="2,6", help="seconds to read one step before clicking it (min,max)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--database", default="annotate_bench")
    parser.add_argument(
        "--keep-alive",
        action="store_true",
        help="reuse each annotator's connection (default: one connection per request, as from a "
        "reverse proxy; gunicorn's gthread workers pin kept-alive connections to one process)",
    )
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    Annotator.keep_alive = args.keep_alive
    Annotator.read_seconds = tuple(float(x) for x in args.read_seconds.split(","))

    subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", args.database], check=True)
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", args.database], check=True)
    var_dir = Path(tempfile.mkdtemp(prefix="how2-bench-var-"))
    env = dict(
        os.environ,
        DATABASE_URL=PG.format(name=args.database),
        VAR_DIR=str(var_dir),
        DJANGO_SETTINGS_MODULE="config.django.production",
        SECRET_KEY="bench-" + os.urandom(16).hex(),
        SECURE_COOKIES="false",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        LOG_LEVEL="WARNING",
        # Every simulated annotator comes from 127.0.0.1: no limit of new participants per address.
        ANNOTATE_ENTRY_LIMIT_PER_ADDRESS="0",
    )
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=BASE_DIR, env=env, check=True)
    subprocess.run([python, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=BASE_DIR, env=env, check=True)
    os.environ.update(env)
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()

    port = free_port()
    gunicorn = subprocess.Popen(
        [
            str(Path(python).with_name("gunicorn")),
            "config.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(args.workers),
            "--worker-class",
            "gthread",
            "--threads",
            str(args.threads),
            "--keep-alive",
            "75",
            "--timeout",
            "120",
            "--log-level",
            "warning",
        ],
        cwd=BASE_DIR,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or gunicorn.poll() is not None:
                    raise SystemExit("gunicorn did not start")
                time.sleep(0.3)
        print(
            f"gunicorn: {args.workers} workers x {args.threads} threads on 127.0.0.1:{port}; "
            f"{'keep-alive' if args.keep_alive else 'one connection per request'}; PostgreSQL database "
            f"{args.database}; {args.duration:.0f} s per level; study minimum {args.min_seconds:.0f} s per item; "
            f"{os.cpu_count()} CPUs\n"
        )
        warm_up(port, 4 * args.workers)
        results = []
        for n in levels:
            result = run_level(port, n, args.duration, args.min_seconds, args.ramp)
            results.append(result)
            print(
                f"level {n}: {result['accepted']} submits accepted, {result['stored']} stored, "
                f"errors {len(result['errors'])}{': ' + '; '.join(result['errors'][:3]) if result['errors'] else ''}",
                flush=True,
            )
        print()
        print(
            "| annotators | page p50 / p95 (ms) | autosave p50 / p95 (ms) | submit p50 / p95 (ms) | requests/s | submits | stored exactly once | items over k | errors |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | :---: | ---: | ---: |")
        for r in results:
            cells = []
            for kind in ("page", "autosave", "submit"):
                values = r["timings"].get(kind, [])
                cells.append(
                    f"{1000 * statistics.median(values):.0f} / {1000 * percentile(values, 0.95):.0f}" if values else "—"
                )
            print(
                f"| {r['n']} | {cells[0]} | {cells[1]} | {cells[2]} | {r['rps']:.0f} | {r['accepted']} | "
                f"{'yes' if r['exactly_once'] else 'NO'} | {r['over_k']} | {len(r['errors'])} |"
            )
        ok = all(r["exactly_once"] and r["over_k"] == 0 and not r["errors"] for r in results)
        return 0 if ok else 1
    finally:
        os.killpg(gunicorn.pid, signal.SIGTERM)
        try:
            gunicorn.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(gunicorn.pid, signal.SIGKILL)
        shutil.rmtree(var_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
