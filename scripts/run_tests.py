#!/usr/bin/env python
"""The test command (`make test`): the static checks (ruff, import-linter's contracts, mypy),
the whole suite once on PostgreSQL, the production database (TEST_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/test), and on SQLite, the embedded default that `make run`
serves, only the tests marked ``sqlite``: what differs there (migrations, the worker beside the
web process on one file, bulk inserts without COPY, concurrency under SQLite's locking, the
demo). The three run at once: the PostgreSQL pass in the foreground on pytest-xdist's workers,
one per CPU and one more (TEST_WORKERS=N chooses, 1 runs in one process), the static checks and the SQLite
pass (one process) beside it, their output printed when the PostgreSQL pass ends. When
PostgreSQL is not reachable (and CI is not set) the whole suite runs on SQLite instead, on the
xdist workers, and the command says so.

Extra arguments go to pytest: `scripts/run_tests.py -k import`. pytest's exit code 5
("no tests collected") counts as a failure: a test command that ran nothing did not pass.
`--static-only` runs the static checks alone; `--sqlite-only` runs the whole suite on SQLite.
Any failing check fails the command.
`--real-servers` (`make test-real`) runs only the tests marked ``real_server``, against the real
inference server that `make real-servers` installs (tests/real_servers.py), on SQLite.

Under CI=true the services the integration and browser tests need (PostgreSQL, Redis,
RabbitMQ, Chromium) must all be there: the preflight names what is missing and the command
fails before running anything; tests/conftest.py turns a test's skip for a missing service
into a failure. Without CI=true the preflight only reports, and such tests skip."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/test"
# The same defaults as the tests' own (tests/services.py, tests/browser.py).
DEFAULT_REDIS = "redis://127.0.0.1:6379/15"
DEFAULT_RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"
DEFAULT_CHROMIUM = "/usr/bin/chromium"

# The static checks that run, in this order (each command is listed in static_checks()).
ENABLED_CHECKS: tuple[str, ...] = ("ruff", "lint-imports", "mypy")


def ci_strict(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """CI=true (or 1): missing services fail the command instead of skipping tests."""
    return environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _tool(name: str) -> str:
    """A console script of this virtual environment (beside its python), else from PATH."""
    local = Path(sys.executable).with_name(name)
    return str(local) if local.exists() else (shutil.which(name) or name)


def static_checks() -> dict[str, list[list[str]]]:
    """Every static check by name: the commands it runs (all must exit 0)."""
    return {
        "lint-imports": [[_tool("lint-imports"), "--no-cache"]],
        # The packages it checks are listed in pyproject.toml ([tool.mypy] files).
        "mypy": [[sys.executable, "-m", "mypy"]],
        "ruff": [
            [sys.executable, "-m", "ruff", "check", "."],
            [sys.executable, "-m", "ruff", "format", "--check", "."],
        ],
    }


def run_static_checks(names: tuple[str, ...] = ENABLED_CHECKS, out: TextIO | None = None) -> dict[str, int]:
    """Run the named checks from the repository root; each one's exit code (the first
    non-zero of its commands), printed as it finishes (into ``out`` when given, else to the
    terminal)."""
    commands = static_checks()
    results: dict[str, int] = {}
    for name in names:
        print(f"\n===== static check: {name} =====", file=out, flush=True)
        started = time.monotonic()
        code = 0
        for command in commands[name]:
            print(
                "$ " + " ".join(Path(command[0]).name if i == 0 else part for i, part in enumerate(command)),
                file=out,
                flush=True,
            )
            try:
                step = subprocess.call(command, cwd=BASE_DIR, stdout=out, stderr=None if out is None else out)
            except OSError as exc:
                print(f"{name}: cannot run {command[0]} ({exc}); install requirements-test.txt", file=out, flush=True)
                step = 127
            code = code or step
        print(f"===== {name}: exit code {code} after {time.monotonic() - started:.0f} s =====", file=out, flush=True)
        results[name] = code
    return results


def run_beside(label: str, work: Callable[[TextIO], dict[str, int]]) -> Callable[[], dict[str, int]]:
    """Start ``work`` (given the file its output goes to) in a thread beside what the command
    does next. The function returned waits for it, prints its output under ``label`` and gives
    its results; an error of the thread itself is a failure named ``label``."""
    log = tempfile.TemporaryFile("w+", encoding="utf-8")
    results: dict[str, int] = {}

    def target() -> None:
        try:
            results.update(work(log))
        except Exception as exc:  # reported with the rest of its output, and a failure
            print(f"{label} could not run: {exc!r}", file=log, flush=True)
            results[label] = 1

    thread = threading.Thread(target=target, name=label, daemon=True)
    thread.start()

    def finish() -> dict[str, int]:
        thread.join()
        log.seek(0)
        print(f"\n########## {label}, run beside the PostgreSQL pass: its output ##########", flush=True)
        sys.stdout.write(log.read())
        sys.stdout.flush()
        log.close()
        return results

    return finish


def postgres_problem(url: str) -> str | None:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - psycopg is in requirements.txt
        return f"psycopg is not installed ({exc})"
    try:
        with psycopg.connect(url.replace("postgres://", "postgresql://", 1), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"{exc.__class__.__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return None


def tcp_problem(url: str, timeout: float = 2.0) -> str | None:
    """Why nothing answers at the URL's host and port, or None when something does."""
    parts = urlsplit(url)
    if not parts.hostname or not parts.port:
        return f"{url!r} names no host and port"
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout):
            return None
    except OSError as exc:
        return f"{exc.__class__.__name__}: {exc}"


def chromium_problem(path: str) -> str | None:
    return None if os.path.isfile(path) and os.access(path, os.X_OK) else "no executable there"


def missing_services(environ: dict[str, str] | os._Environ[str] = os.environ) -> dict[str, str]:
    """Each service the integration and browser tests need that is not there, with where it
    was looked for and why it failed (the same variables and defaults as the tests)."""
    pg_url = environ.get("TEST_DATABASE_URL", DEFAULT_PG)
    redis_url = environ.get("TEST_REDIS_URL", DEFAULT_REDIS)
    rabbitmq_url = environ.get("TEST_RABBITMQ_URL", DEFAULT_RABBITMQ)
    chromium = environ.get("CHROMIUM_PATH", DEFAULT_CHROMIUM)
    checks = (
        ("PostgreSQL", urlsplit(pg_url).netloc.rpartition("@")[2] or pg_url, lambda: postgres_problem(pg_url)),
        ("Redis", urlsplit(redis_url).netloc.rpartition("@")[2], lambda: tcp_problem(redis_url)),
        ("RabbitMQ", urlsplit(rabbitmq_url).netloc.rpartition("@")[2], lambda: tcp_problem(rabbitmq_url)),
        ("Chromium", chromium, lambda: chromium_problem(chromium)),
    )
    missing = {}
    for name, where, check in checks:
        problem = check()
        if problem is not None:
            missing[name] = f"{where} ({problem})"
    return missing


def preflight(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Print what is missing; False (the command must fail) when something is and CI=true."""
    missing = missing_services(environ)
    for name, detail in missing.items():
        print(f"preflight: {name} is missing: {detail}", flush=True)
    if not missing:
        print("preflight: PostgreSQL, Redis, RabbitMQ and Chromium are all there", flush=True)
        return True
    if ci_strict(environ):
        print(
            f"preflight: CI=true and {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing: "
            "the tests that need them would not run, so the test command fails",
            flush=True,
        )
        return False
    print("preflight: the tests that need them will be skipped (CI=true makes this a failure)", flush=True)
    return True


def test_workers(environ: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """How many pytest-xdist workers: TEST_WORKERS, else one per CPU and one more (a part of
    the suite waits on subprocesses, servers and browsers: on this 2-core machine the cores
    were busy 84 % of the PostgreSQL pass with two workers, 95 % with three, which took 772 s
    instead of about 870); 1 when xdist is absent."""
    try:
        import xdist  # noqa: F401  (requirements-test.txt)
    except ImportError:
        return 1
    raw = environ.get("TEST_WORKERS", "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            print(f"TEST_WORKERS={raw!r} is not a number: one worker per CPU and one more instead", flush=True)
    return (os.cpu_count() or 1) + 1


def parallel_args(workers: int) -> list[str]:
    """pytest's arguments for ``workers`` processes (none for one: no xdist at all)."""
    return [] if workers <= 1 else ["-n", str(workers), "--dist", "worksteal"]


#: The SQLite pass of a run that also has PostgreSQL: only what differs there.
SQLITE_ONLY_WHAT_DIFFERS = ["-m", "sqlite and not real_server"]


def plan_passes(*, postgres: str | None, sqlite_only: bool, pg_url: str) -> list[tuple[str, dict[str, str], list[str]]]:
    """The pytest passes to run, each as (label, extra environment, extra pytest arguments).

    ``postgres`` is why PostgreSQL cannot be used (None when it can). With it: the SQLite
    pass takes the tests marked ``sqlite``, the PostgreSQL pass the whole suite. Without it,
    or with ``sqlite_only``: the whole suite on SQLite."""
    if sqlite_only or postgres is not None:
        return [("SQLite (whole suite)", {}, [])]
    return [
        ("SQLite (tests marked sqlite)", {}, list(SQLITE_ONLY_WHAT_DIFFERS)),
        ("PostgreSQL (whole suite)", {"DATABASE_URL": pg_url}, []),
    ]


def run_pytest(label: str, env: dict[str, str], pytest_args: list[str], out: TextIO | None = None) -> int:
    print(f"\n===== tests on {label} =====", file=out, flush=True)
    started = time.monotonic()
    code = subprocess.call(
        [sys.executable, "-m", "pytest", *pytest_args], cwd=BASE_DIR, env=env, stdout=out, stderr=out
    )
    print(f"===== {label}: exit code {code} after {time.monotonic() - started:.0f} s =====", file=out, flush=True)
    if code == 5:
        print(f"{label}: pytest collected no tests; that is a failure of the test command", file=out, flush=True)
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sqlite-only", action="store_true", help="the whole suite on SQLite, no PostgreSQL pass")
    parser.add_argument("--static-only", action="store_true", help="run the static checks and no tests")
    parser.add_argument("--real-servers", action="store_true", help="run only the real-server tests")
    args, pytest_args = parser.parse_known_args()
    base_env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "VAR_DIR")}
    base_env["DJANGO_SETTINGS_MODULE"] = "config.django.test"
    started = time.monotonic()
    if args.real_servers:
        results = {
            "real servers": run_pytest("real servers (SQLite)", dict(base_env), ["-m", "real_server", *pytest_args])
        }
        return _summary(results, started)

    if args.static_only:
        return _summary(run_static_checks(), started)
    # The static checks (mostly mypy, one core) run beside the tests; their output follows.
    static_finish = run_beside("static checks", lambda out: run_static_checks(out=out))
    if not preflight():
        return _summary({**static_finish(), "preflight": 1}, started)
    pg_url = os.environ.get("TEST_DATABASE_URL", DEFAULT_PG)
    problem = None if args.sqlite_only else postgres_problem(pg_url)
    if problem is not None:
        print(f"\nPostgreSQL is not reachable at {pg_url} ({problem}): the whole suite runs on SQLite.", flush=True)
    workers = test_workers()
    passes = plan_passes(postgres=problem, sqlite_only=args.sqlite_only, pg_url=pg_url)
    results: dict[str, int] = {}
    finishes = [static_finish]
    if len(passes) == 2:
        # The SQLite pass (a few minutes in one process, much of it waiting on its Celery
        # workers) runs beside the PostgreSQL pass, which takes the xdist workers.
        sqlite_label, sqlite_env, sqlite_args = passes.pop(0)
        finishes.append(
            run_beside(
                sqlite_label, _pass_work(sqlite_label, dict(base_env, **sqlite_env), [*sqlite_args, *pytest_args])
            )
        )
        print(f"{sqlite_label}: running beside, in one process; its output follows the PostgreSQL pass", flush=True)
    print(f"pytest workers: {workers} (TEST_WORKERS chooses)", flush=True)
    for label, extra_env, extra_args in passes:
        args_for_pass = [*extra_args, *parallel_args(workers), *pytest_args]
        results[label] = run_pytest(label, dict(base_env, **extra_env), args_for_pass)
    beside: dict[str, int] = {}
    for finish in finishes:
        beside.update(finish())
    return _summary({**beside, **results}, started)


def _pass_work(label: str, env: dict[str, str], pytest_args: list[str]) -> Callable[[TextIO], dict[str, int]]:
    """A pytest pass as work for ``run_beside``."""
    return lambda out: {label: run_pytest(label, env, pytest_args, out)}


def _summary(results: dict[str, int], started: float | None = None) -> int:
    took = "" if started is None else f" ({time.monotonic() - started:.0f} s in all)"
    print(
        f"\nSummary{took}: "
        + ", ".join(f"{label} {'passed' if code == 0 else f'FAILED (exit {code})'}" for label, code in results.items())
    )
    return 0 if all(code == 0 for code in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
