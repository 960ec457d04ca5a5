"""Benchmark: memory and speed of `import_procedures` as the file grows.

Writes flat JSONL files of N records (default 10,000, 100,000 and 1,000,000), imports
each into a fresh SQLite database (or DATABASE_URL if set) in its own process, and
prints records/s and the peak resident memory of that process. Flat memory means the
peak stays the same as N grows 100-fold.

    .venv/bin/python bench/import_procedures.py [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
TOPICS = ["Food & Dining", "Health", "Home & Hobbies", "Transportation"]

CHILD = r"""
import os, resource, sys, time
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from mining.procedure_services import procedure_import
started = time.perf_counter()
result = procedure_import(path=sys.argv[1])
elapsed = time.perf_counter() - started
peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{result.created} {elapsed:.3f} {peak_mib:.1f}")
"""


def write_file(path: Path, n: int) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            record = {
                "source_example_id": f"doc-{i}",
                "topic": TOPICS[i % len(TOPICS)],
                "goal": f"Complete task number {i} by following a short procedure.",
                "steps": [f"Do part {k} of task {i} carefully." for k in range(1, 8)],
                "resources": ["tool", "material"],
            }
            handle.write(json.dumps(record) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    args = parser.parse_args()
    print(f"{'records':>10} {'file MiB':>9} {'seconds':>8} {'records/s':>10} {'peak RSS MiB':>13}")
    for n in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
            path = Path(tmp) / "procedures.jsonl"
            write_file(path, n)
            env = dict(os.environ, VAR_DIR=tmp, DJANGO_SETTINGS_MODULE="config.django.base")
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(path)],
                cwd=BASE_DIR,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            created, seconds, peak = int(out[0]), float(out[1]), float(out[2])
            assert created == n, (created, n)
            size_mib = path.stat().st_size / 2**20
            print(f"{n:>10,} {size_mib:>9.1f} {seconds:>8.1f} {n / seconds:>10,.0f} {peak:>13.1f}", flush=True)


if __name__ == "__main__":
    main()
