"""Benchmark: speed and memory of the heuristics stage (`mine_prefilter`) as the file grows.

For each size N (default 100,000 and 1,000,000) a synthetic JSONL file of N procedure
records is written (a mix of kept procedures, too few and too many steps, and
repetitive extractions), then streamed through ``mining.heuristics.prefilter_file`` —
the function behind ``manage.py mine_prefilter`` — in a fresh Python process. Printed:
the file size, the seconds spent, records/s, and that process's peak resident memory,
both right after the imports (baseline) and after the whole file. Bounded memory means
the peak stays near the baseline and does not grow as N grows tenfold.

    .venv/bin/python bench/mining_prefilter.py [--sizes 100000,1000000] [--compression .zst]
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

CHILD = r"""
import resource, sys, time
from mining.heuristics import prefilter_file


def peak_mib():
    # VmHWM belongs to this process image; ru_maxrss can carry the parent's peak across exec.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


baseline_mib = peak_mib()
started = time.perf_counter()
summary = prefilter_file(sys.argv[1], sys.argv[2])
elapsed = time.perf_counter() - started
print(summary.records, summary.passed, f"{elapsed:.3f}", f"{baseline_mib:.1f}", f"{peak_mib():.1f}")
"""

VERBS = ["Cut", "Fold", "Stir", "Pour", "Sand", "Drill", "Measure", "Attach", "Rinse", "Check", "Press", "Wrap"]
NOUNS = ["board", "fabric", "batter", "bracket", "hinge", "dough", "pipe", "panel", "cable", "filter", "lid", "seam"]


def synthetic_record(i: int) -> dict:
    """Records cycle through five kinds: three with distinct steps (5 to 13 of them),
    one with 3 steps (too few) and one repeating the same step (too repetitive); one
    record in 40 has 16 distinct steps instead (too many)."""
    kind = i % 5
    if kind == 3:
        count = 3
    elif i % 40 == 0:
        count = 16
    else:
        count = 5 + i % 9
    if kind == 4:
        steps = [f"{VERBS[i % 12]} the {NOUNS[i % 12]} again."] * count
    else:
        steps = [
            f"{VERBS[(i + k) % 12]} the {NOUNS[(i * 7 + k) % 12]} number {k} of job {i}, then check step {k}."
            for k in range(count)
        ]
    return {"source_example_id": f"doc-{i}", "topic": "Home & Hobbies", "goal": f"Finish job {i}.", "steps": steps}


def write_file(path: Path, n: int) -> None:
    from core.record_output import open_binary_writer

    with open_binary_writer(path) as handle:
        buffer: list[str] = []
        for i in range(n):
            buffer.append(json.dumps(synthetic_record(i)) + "\n")
            if len(buffer) == 10_000:
                handle.write("".join(buffer).encode("utf-8"))
                buffer.clear()
        handle.write("".join(buffer).encode("utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument(
        "--compression",
        default="",
        choices=["", ".gz", ".zst", ".bz2", ".xz"],
        help="compress the input and the output with this suffix",
    )
    parser.add_argument("--dir", default=None, help="where the temporary files go (default: the system temp dir)")
    args = parser.parse_args()
    sys.path.insert(0, str(BASE_DIR))
    print(
        f"{'records':>10} {'in MiB':>8} {'seconds':>8} {'records/s':>10} {'baseline RSS MiB':>17} {'peak RSS MiB':>13}"
    )
    for n in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="bench-prefilter-", dir=args.dir) as tmp:
            source = Path(tmp) / f"in.jsonl{args.compression}"
            target = Path(tmp) / f"out.jsonl{args.compression}"
            write_file(source, n)
            env = dict(os.environ, PYTHONPATH=str(BASE_DIR))
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(source), str(target)],
                cwd=BASE_DIR,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            records, seconds, baseline, peak = int(out[0]), float(out[2]), float(out[3]), float(out[4])
            assert records == n, (records, n)
            size_mib = source.stat().st_size / 2**20
            print(
                f"{n:>10,} {size_mib:>8.1f} {seconds:>8.1f} {n / seconds:>10,.0f} {baseline:>17.1f} {peak:>13.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
