"""Benchmark: time of ``agreement_report`` on a synthetic study.

Builds N annotations (default 10,000: each item labelled by 3 of 40 annotators who agree
with a hidden truth 85 % of the time, failures linking 0-3 L2 steps out of 5-15) and the
labels of three judges, writes them as JSONL, then times reading the files and computing
the report, with the bootstrap (default 1,000 resamples) and without it, over several runs,
and prints p50 and p95.

    .venv/bin/python bench/agreement_report.py [--annotations 10000] [--runs 7] [--bootstrap 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from annotate.stats.agreement import agreement_report  # noqa: E402
from annotate.stats.records import read_annotations, read_judgments  # noqa: E402

JUDGES = {"gpt-5": 0.83, "how2judge": 0.80, "qwen3-8b": 0.70}


def synthetic_files(directory: Path, n_annotations: int, seed: int = 0) -> tuple[Path, Path]:
    generator = random.Random(seed)
    annotators = [f"prolific-{k:03d}" for k in range(40)]
    annotations, judgments = [], []
    item = 0
    while len(annotations) < n_annotations:
        item_id = f"item-{item:05d}"
        n_steps = generator.randint(5, 15)
        truth = generator.random() < 0.5
        true_step = generator.randint(1, n_steps)
        for annotator in generator.sample(annotators, 3)[: n_annotations - len(annotations)]:
            label = truth if generator.random() < 0.85 else not truth
            failures = []
            if label:
                steps = {true_step} if generator.random() < 0.6 else set()
                steps |= set(generator.sample(range(1, n_steps + 1), generator.randint(0, 2)))
                failures = [{"description": "critical failure", "L1_steps": [1], "L2_steps": sorted(steps)}]
            annotations.append({"item_id": item_id, "annotator": annotator, "has_failure": label, "failures": failures})
        for judge, accuracy in JUDGES.items():
            label = truth if generator.random() < accuracy else not truth
            judgments.append({"item_id": item_id, "judge": judge, "has_failure": label})
        item += 1
    annotations_path, judgments_path = directory / "annotations.jsonl", directory / "judgments.jsonl"
    annotations_path.write_text("".join(json.dumps(r) + "\n" for r in annotations))
    judgments_path.write_text("".join(json.dumps(r) + "\n" for r in judgments))
    return annotations_path, judgments_path


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--annotations", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        annotations_path, judgments_path = synthetic_files(Path(directory), args.annotations)
        read_times, report_times, point_times = [], [], []
        report: dict = {}
        for _ in range(args.runs):
            started = time.perf_counter()
            rows, judgments = read_annotations(annotations_path), read_judgments(judgments_path)
            read_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            report = agreement_report(rows, judgments, bootstrap=args.bootstrap, seed=0)
            report_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            agreement_report(rows, judgments, bootstrap=0)
            point_times.append(time.perf_counter() - started)
    print(
        f"{report['n_annotations']} annotations, {report['n_items']} items, {len(report['judges'])} judges, "
        f"{args.bootstrap} resamples, {args.runs} runs"
    )
    rows_of_times = (
        ("read files", read_times),
        (f"report, {args.bootstrap} resamples", report_times),
        ("report, bootstrap 0", point_times),
    )
    for name, times in rows_of_times:
        print(
            f"{name:>28}: p50 {statistics.median(times) * 1000:8.1f} ms   p95 {percentile(times, 0.95) * 1000:8.1f} ms"
        )
    alpha = ", ".join(f"{k} {v:.3f}" for k, v in report["alpha"].items() if v is not None)
    print(f"{'alpha':>28}: {alpha}")


if __name__ == "__main__":
    main()
