#!/usr/bin/env python
"""The test command (`make test`): the whole suite on SQLite, then again on PostgreSQL
when it is reachable (TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test).

Extra arguments go to pytest: `scripts/run_tests.py -k import`. pytest's exit code 5
("no tests collected") counts as a failure: a test command that ran nothing did not pass."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/test"


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
    args, pytest_args = parser.parse_known_args()
    base_env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "VAR_DIR")}
    base_env["DJANGO_SETTINGS_MODULE"] = "config.django.test"

    results = {"SQLite": run_pytest("SQLite", dict(base_env), pytest_args)}
    if not args.sqlite_only:
        pg_url = os.environ.get("TEST_DATABASE_URL", DEFAULT_PG)
        problem = postgres_problem(pg_url)
        if problem is None:
            results["PostgreSQL"] = run_pytest("PostgreSQL", dict(base_env, DATABASE_URL=pg_url), pytest_args)
        else:
            print(f"\nPostgreSQL is not reachable at {pg_url} ({problem}): the PostgreSQL pass is skipped.", flush=True)
    print("\nSummary: " + ", ".join(f"{label} {'passed' if code == 0 else f'FAILED (exit {code})'}" for label, code in results.items()))
    return 0 if all(code == 0 for code in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
