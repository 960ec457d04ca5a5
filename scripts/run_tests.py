#!/usr/bin/env python
"""The test command (`make test`): the static checks (import-linter's contracts, mypy; ruff
when enabled below), then the whole suite on SQLite, then again on PostgreSQL when it is
reachable (TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test).

Extra arguments go to pytest: `scripts/run_tests.py -k import`. pytest's exit code 5
("no tests collected") counts as a failure: a test command that ran nothing did not pass.
`--static-only` runs the static checks alone. Any failing check fails the command.
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
import time
from pathlib import Path
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


def run_static_checks(names: tuple[str, ...] = ENABLED_CHECKS) -> dict[str, int]:
    """Run the named checks from the repository root; each one's exit code (the first
    non-zero of its commands), printed as it finishes."""
    commands = static_checks()
    results: dict[str, int] = {}
    for name in names:
        print(f"\n===== static check: {name} =====", flush=True)
        started = time.monotonic()
        code = 0
        for command in commands[name]:
            print(
                "$ " + " ".join(Path(command[0]).name if i == 0 else part for i, part in enumerate(command)), flush=True
            )
            try:
                step = subprocess.call(command, cwd=BASE_DIR)
            except OSError as exc:
                print(f"{name}: cannot run {command[0]} ({exc}); install requirements-test.txt", flush=True)
                step = 127
            code = code or step
        print(f"===== {name}: exit code {code} after {time.monotonic() - started:.0f} s =====", flush=True)
        results[name] = code
    return results


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


def run_pytest(label: str, env: dict[str, str], pytest_args: list[str]) -> int:
    print(f"\n===== tests on {label} =====", flush=True)
    started = time.monotonic()
    code = subprocess.call([sys.executable, "-m", "pytest", *pytest_args], cwd=BASE_DIR, env=env)
    print(f"===== {label}: exit code {code} after {time.monotonic() - started:.0f} s =====", flush=True)
    if code == 5:
        print(f"{label}: pytest collected no tests; that is a failure of the test command", flush=True)
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sqlite-only", action="store_true", help="skip the PostgreSQL pass")
    parser.add_argument("--static-only", action="store_true", help="run the static checks and no tests")
    parser.add_argument("--real-servers", action="store_true", help="run only the real-server tests")
    args, pytest_args = parser.parse_known_args()
    base_env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "VAR_DIR")}
    base_env["DJANGO_SETTINGS_MODULE"] = "config.django.test"
    if args.real_servers:
        results = {
            "real servers": run_pytest("real servers (SQLite)", dict(base_env), ["-m", "real_server", *pytest_args])
        }
        return _summary(results)

    results = run_static_checks()
    if args.static_only:
        return _summary(results)
    if not preflight():
        results["preflight"] = 1
        return _summary(results)
    results["SQLite"] = run_pytest("SQLite", dict(base_env), pytest_args)
    if not args.sqlite_only:
        pg_url = os.environ.get("TEST_DATABASE_URL", DEFAULT_PG)
        problem = postgres_problem(pg_url)
        if problem is None:
            results["PostgreSQL"] = run_pytest("PostgreSQL", dict(base_env, DATABASE_URL=pg_url), pytest_args)
        else:
            print(f"\nPostgreSQL is not reachable at {pg_url} ({problem}): the PostgreSQL pass is skipped.", flush=True)
    return _summary(results)


def _summary(results: dict[str, int]) -> int:
    print(
        "\nSummary: "
        + ", ".join(f"{label} {'passed' if code == 0 else f'FAILED (exit {code})'}" for label, code in results.items())
    )
    return 0 if all(code == 0 for code in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
