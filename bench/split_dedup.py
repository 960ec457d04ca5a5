"""Benchmark: the nearest-neighbour search and the embedding throughput of the
How2Bench / How2Train split (How2Everything App. E.1).

1. Exact nearest neighbour of B benchmark vectors among T training vectors (random,
   L2-normalised float32, dimension D), by blocked matrix products, as
   ``split_procedures`` does it (default 7,000 x 100,000 at D = 384, the size of
   all-MiniLM-L6-v2's vectors; pass --dim 1024 for Qwen3-Embedding-0.6B's).
2. The candidate pass of ``select_benchmark`` on the same vectors (each candidate
   against all other rows).
3. Embedding throughput of the configured model on N short procedure texts.

    .venv/bin/python bench/split_dedup.py [--bench 7000] [--train 100000] [--dim 384] [--texts 2000] [--model NAME_OR_PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

import numpy as np  # noqa: E402

from mining.constants import NN_BLOCK_ROWS  # noqa: E402
from mining.split_dedup import l2_normalise, nearest_neighbours, procedure_text, select_benchmark  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=int, default=7000)
    parser.add_argument("--train", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--block-rows", type=int, default=NN_BLOCK_ROWS)
    parser.add_argument("--texts", type=int, default=2000, help="texts to embed (0: skip the embedding part)")
    parser.add_argument("--model", default=None, help="EMBEDDING_MODEL to time (default: the configured one)")
    args = parser.parse_args()

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, numpy {np.__version__}")
    rng = np.random.default_rng(0)
    train = l2_normalise(rng.standard_normal((args.train, args.dim), dtype=np.float32))
    bench = l2_normalise(rng.standard_normal((args.bench, args.dim), dtype=np.float32))

    started = time.perf_counter()
    index, sims = nearest_neighbours(bench, train, block_rows=args.block_rows)
    seconds = time.perf_counter() - started
    check = slice(0, 50)
    exact = (bench[check] @ train.T).argmax(axis=1)
    assert (exact == index[check]).all(), "blocked search disagrees with brute force"
    print(
        f"nearest neighbour, {args.bench:,} bench x {args.train:,} train, dim {args.dim}: {seconds:.2f} s "
        f"({args.bench * args.train / seconds / 1e9:.2f} G cosines/s; mean best cosine {sims.mean():.3f})"
    )

    vectors = np.vstack([train, bench])
    topics = [f"topic-{i % 14}" for i in range(len(vectors))]
    started = time.perf_counter()
    selection = select_benchmark(
        topics=topics, vectors=vectors, per_topic=args.bench // 14, seed=0, tau=0.65, block_rows=args.block_rows
    )
    seconds = time.perf_counter() - started
    print(
        f"select_benchmark, {len(vectors):,} procedures, {args.bench // 14} per topic: {seconds:.2f} s "
        f"({len(selection.bench):,} bench, {len(selection.dropped):,} dropped)"
    )

    if args.texts:
        from mining.embeddings import configured_model_name, load_embedder

        name = configured_model_name(args.model)
        started = time.perf_counter()
        embedder = load_embedder(name)
        load_seconds = time.perf_counter() - started
        texts = [
            procedure_text(
                f"Goal number {i}: prepare item {i % 97}",
                [
                    f"Take part {i % 13} and place it on the bench.",
                    "Fasten it with two screws.",
                    f"Check the result after {i % 7 + 1} minutes.",
                    "Clean the tools.",
                ],
            )
            for i in range(args.texts)
        ]
        started = time.perf_counter()
        out = embedder.encode(texts)
        seconds = time.perf_counter() - started
        print(
            f"embedding with {name}: load {load_seconds:.1f} s; {args.texts:,} texts in {seconds:.1f} s "
            f"= {args.texts / seconds:.0f} texts/s (dim {out.shape[1]})"
        )


if __name__ == "__main__":
    main()
