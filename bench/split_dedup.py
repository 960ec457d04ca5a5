"""Benchmark: the How2Bench / How2Train split (How2Everything App. E.1) on the CPU and on a GPU.

1. **Search**: ``select_benchmark`` (every candidate against all other procedures, refilled
   until each topic has ``--per-topic``) and ``nearest_train`` (every benchmark procedure
   against the training set) on N synthetic L2-normalised vectors (``planted_vectors``:
   random rows plus planted near-duplicates, with cosines spread around tau and crowded
   within 0.003 of it, where float16 cannot tell the sides apart), timed on each path:

   * ``numpy``: the screened blocked search in float32 on the CPU (``neighbour_search.NeighbourIndex``);
   * ``torch``: the same algorithm in float16 on a CUDA device (when torch sees one);
   * ``exact``: the plain float32 search (``ExactIndex``), the reference;
   * ``numpy16`` (not by default): the GPU's float16 arithmetic emulated on the CPU.

   Every path's selection (benchmark, training, dropped), neighbours and cosines are compared
   with the first path's; the script exits 1 if any differ.
2. **Embedding**: texts/s of the configured model on the NumPy backend and, when torch sees a
   CUDA device, on the torch backend at each ``--gpu-batch-sizes``, with the ratio; the
   vectors of the two are compared (minimum cosine), and the backend that ``auto`` picks is
   printed.

    .venv/bin/python bench/split_dedup.py [--procedures 100000] [--dim 384] [--per-topic 500]
        [--paths numpy,torch,exact] [--texts 2000] [--gpu-texts 20000] [--gpu-batch-sizes 64,512]
        [--model NAME_OR_PATH] [--json FILE]

The paper's pool is 351,000 procedures (``--procedures 351000``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BASE_DIR / "bench"))

import numpy as np  # noqa: E402

from mining.constants import DEDUP_TAU, EMBEDDING_BATCH_SIZE  # noqa: E402
from mining.neighbour_search import ExactIndex, NeighbourIndex, NumpySearchOps, SearchDevice  # noqa: E402
from mining.split_dedup import Selection, l2_normalise, nearest_train, select_benchmark  # noqa: E402

# Offsets from tau of the planted "near-tie" pairs: inside float16's error (about 0.0015 at
# dim 384), outside float32's (about 0.00002), so the screen cannot decide them alone.
NEAR_TIE_OFFSETS = (-3e-3, -1e-3, -3e-4, -1e-4, -3e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3)
STRADDLE_OFFSETS = (5e-5, 1e-4, 3e-4, 6e-4, 1e-3)


def _partner(anchor: np.ndarray, cosine: float, rng: np.random.Generator) -> np.ndarray:
    """A unit row whose cosine with the unit row ``anchor`` is ``cosine`` (computed in float64)."""
    a = anchor.astype(np.float64)
    noise = rng.standard_normal(a.shape[0])
    noise -= (noise @ a) * a
    noise /= np.linalg.norm(noise)
    return cosine * a + np.sqrt(1.0 - cosine**2) * noise


def planted_vectors(
    n: int, *, dim: int = 384, topics: int = 14, tau: float = DEDUP_TAU, seed: int = 0
) -> tuple[np.ndarray, list[str], dict[str, int]]:
    """``n`` float32 unit rows and their topics, seeded: random rows (cosines near 0), and

    * near-duplicates: 4 % of the rows are a partner of another row, at a cosine uniform
      in [tau - 0.1, tau + 0.1] (half of them above tau), some in another topic;
    * near-ties at the threshold: 2 % of the rows are a partner at tau + one of
      ``NEAR_TIE_OFFSETS``;
    * near-ties between two neighbours that straddle tau: 0.5 % of the rows get two partners,
      at tau + d and tau - d with d one of ``STRADDLE_OFFSETS``: float16 may rank the wrong one
      first and so put the row on the wrong side of tau;
    * exact copies: 0.2 % of the rows are a copy of another row (cosine 1, ties).

    Returns ``(vectors, topics, counts)``."""
    rng = np.random.default_rng(seed)
    vectors = l2_normalise(rng.standard_normal((n, dim), dtype=np.float32)).astype(np.float64)
    order = rng.permutation(n)
    counts = {"near_duplicates": n // 25, "near_ties": n // 50, "two_neighbour_ties": n // 200, "copies": n // 500}
    used = 0

    def take(k: int) -> np.ndarray:
        nonlocal used
        rows = order[used : used + k]
        used += k
        return rows

    anchors, partners = take(counts["near_duplicates"]), take(counts["near_duplicates"])
    cosines = rng.uniform(tau - 0.1, tau + 0.1, len(anchors))
    for a, p, c in zip(anchors, partners, cosines):
        vectors[p] = _partner(vectors[a], c, rng)
    anchors, partners = take(counts["near_ties"]), take(counts["near_ties"])
    for i, (a, p) in enumerate(zip(anchors, partners)):
        vectors[p] = _partner(vectors[a], tau + NEAR_TIE_OFFSETS[i % len(NEAR_TIE_OFFSETS)], rng)
    anchors = take(counts["two_neighbour_ties"])
    first, second = take(len(anchors)), take(len(anchors))
    for i, (a, p, q) in enumerate(zip(anchors, first, second)):
        offset = STRADDLE_OFFSETS[i % len(STRADDLE_OFFSETS)]
        vectors[p] = _partner(vectors[a], tau + offset, rng)
        vectors[q] = _partner(vectors[a], tau - offset, rng)
    anchors, copies = take(counts["copies"]), take(counts["copies"])
    vectors[copies] = vectors[anchors]
    names = [f"topic-{i % topics:02d}" for i in rng.permutation(n)]
    return vectors.astype(np.float32), names, counts


def run_split(
    vectors: np.ndarray, topics: list[str], *, per_topic: int, tau: float, device: SearchDevice
) -> tuple[Selection, list[tuple[int, float | None]], float, float]:
    """``select_benchmark`` and ``nearest_train`` on ``device``: (selection, neighbours, seconds of each)."""
    started = time.perf_counter()
    selection = select_benchmark(topics=topics, vectors=vectors, per_topic=per_topic, seed=0, tau=tau, device=device)
    select_seconds = time.perf_counter() - started
    started = time.perf_counter()
    neighbours = nearest_train(vectors, selection.bench, selection.train, device=device)
    return selection, neighbours, select_seconds, time.perf_counter() - started


def differences(
    vectors: np.ndarray,
    a: tuple[Selection, list[tuple[int, float | None]]],
    b: tuple[Selection, list[tuple[int, float | None]]],
) -> dict[str, float]:
    """How two runs of the split differ: items on another side, other neighbours, the largest
    cosine change. Two neighbours at the same float64 cosine (within 1e-7: copies of one row,
    which float32 products cannot order) are a tie, counted apart: the screened search takes
    the lowest index, the plain float32 one whichever its products round up."""
    (sa, na), (sb, nb) = a, b
    ties = 0

    def other(query: int, x: int | None, y: int | None) -> bool:
        nonlocal ties
        if x == y:
            return False
        if x is not None and y is not None and x >= 0 and y >= 0:
            q = vectors[query].astype(np.float64)
            if abs(q @ vectors[x].astype(np.float64) - q @ vectors[y].astype(np.float64)) <= 1e-7:
                ties += 1
                return False
        return True

    cand = sorted(set(sa.candidate_neighbour) | set(sb.candidate_neighbour))
    candidate_differs = sum(
        other(i, sa.candidate_neighbour.get(i, (None,))[0], sb.candidate_neighbour.get(i, (None,))[0]) for i in cand
    )
    cosine = [
        abs(sa.candidate_neighbour[i][1] - sb.candidate_neighbour[i][1])
        for i in cand
        if i in sa.candidate_neighbour and i in sb.candidate_neighbour
    ]
    cosine += [abs(x[1] - y[1]) for x, y in zip(na, nb) if x[1] is not None and y[1] is not None]
    train_differs = abs(len(na) - len(nb))
    if sa.bench == sb.bench:
        train_differs += sum(other(q, x[0], y[0]) for q, x, y in zip(sa.bench, na, nb))
    return {
        "bench_differs": len(set(sa.bench) ^ set(sb.bench)),
        "dropped_differs": len(set(sa.dropped) ^ set(sb.dropped)),
        "train_differs": len(set(sa.train) ^ set(sb.train)),
        "candidate_neighbour_differs": candidate_differs,
        "nearest_train_differs": train_differs,
        "tied_neighbours": ties,
        "largest_cosine_difference": max(cosine, default=0.0),
    }


def _gpu() -> str:
    """ "cuda" when torch is installed and sees a CUDA device, else ""."""
    try:
        import torch
    except ImportError:
        return ""
    return "cuda" if torch.cuda.is_available() else ""


def bench_search(args: argparse.Namespace, report: dict) -> bool:
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    gpu = _gpu()
    if "torch" in paths and not gpu:
        print("torch path: skipped (torch is not installed or sees no CUDA device)")
        paths.remove("torch")
    started = time.perf_counter()
    vectors, topics, counts = planted_vectors(args.procedures, dim=args.dim, tau=args.tau)
    print(
        f"data: {len(vectors):,} synthetic procedures, dim {args.dim}, {len(set(topics))} topics, "
        f"{args.per_topic} per topic, tau {args.tau}; planted {counts} ({time.perf_counter() - started:.1f} s)"
    )
    devices: dict[str, SearchDevice] = {
        "numpy": "cpu",
        "torch": gpu,
        "exact": ExactIndex,
        "numpy16": lambda corpus: NeighbourIndex(corpus, ops=NumpySearchOps(half=True)),
    }
    runs: dict[str, tuple[Selection, list[tuple[int, float | None]]]] = {}
    seconds: dict[str, float] = {}
    for path in paths:
        if path not in devices:
            raise SystemExit(f"unknown path {path!r}: expected numpy, torch, exact or numpy16")
        if path == "torch":  # the first CUDA call pays for the context: not part of the search
            import torch

            torch.zeros(1, device="cuda").sum().item()
        selection, neighbours, select_s, train_s = run_split(
            vectors, topics, per_topic=args.per_topic, tau=args.tau, device=devices[path]
        )
        runs[path] = (selection, neighbours)
        seconds[path] = select_s + train_s
        label = {
            "numpy": "float32 screen, CPU",
            "torch": "float16 screen, CUDA",
            "exact": "float32 argmax, CPU",
            "numpy16": "the GPU's float16 arithmetic emulated on the CPU",
        }[path]
        print(
            f"search {path} ({label}): select_benchmark {select_s:.2f} s ({len(selection.candidate_neighbour):,} "
            f"candidates x {len(vectors):,}; {len(selection.bench):,} bench, {len(selection.dropped):,} dropped), "
            f"nearest_train {train_s:.2f} s; total {select_s + train_s:.2f} s",
            flush=True,
        )
        report.setdefault("search", {})[path] = {
            "select_seconds": round(select_s, 3),
            "nearest_train_seconds": round(train_s, 3),
            "bench": len(selection.bench),
            "dropped": len(selection.dropped),
            "candidates": len(selection.candidate_neighbour),
        }
    identical = True
    if runs:
        first = next(iter(runs))
        for path in list(runs)[1:]:
            diff = differences(vectors, runs[first], runs[path])
            same = not any(v for k, v in diff.items() if k not in ("largest_cosine_difference", "tied_neighbours"))
            exact_cosines = diff["largest_cosine_difference"] == 0.0
            identical &= same and (path == "exact" or exact_cosines)
            print(
                f"{path} vs {first}: {'IDENTICAL' if same else 'DIFFERENT'} selections "
                f"({diff['bench_differs']} bench, {diff['dropped_differs']} dropped, {diff['train_differs']} train "
                f"items differ; {diff['candidate_neighbour_differs']} candidate neighbours and "
                f"{diff['nearest_train_differs']} nearest training neighbours differ, {diff['tied_neighbours']} "
                f"exact ties resolved apart; largest cosine difference "
                f"{diff['largest_cosine_difference']:.2e}); time ratio {first}/{path} = "
                f"{seconds[first] / seconds[path]:.1f}",
                flush=True,
            )
            report.setdefault("comparisons", {})[f"{path}_vs_{first}"] = {
                **diff,
                "identical": same,
                "ratio": seconds[first] / seconds[path],
            }
    return identical


def bench_embedding(args: argparse.Namespace, report: dict) -> None:
    from embedding_texts import embedding_test_texts

    from mining.embeddings import (
        Embedder,
        backend_order,
        configured_model_name,
        cuda_present,
        torch_stack_importable,
    )

    name = configured_model_name(args.model)
    importable = torch_stack_importable()
    gpu = importable and cuda_present()
    auto = backend_order("auto", cuda_present=gpu, torch_importable=importable)
    print(f"EMBEDDING_BACKEND=auto here: {auto[0]} (torch stack installed: {importable}, CUDA device: {gpu})")
    texts = embedding_test_texts(args.texts)
    embedders = {"numpy": Embedder(name, "numpy")}
    if gpu:
        embedders["torch"] = Embedder(name, "auto")  # what EMBEDDING_BACKEND=auto loads here
        picked = embedders["torch"]
        print(f"EMBEDDING_BACKEND=auto loaded: {picked.backend} on {picked.device}")
        report["auto_loaded"] = f"{picked.backend} on {picked.device}"
    vectors: dict[str, np.ndarray] = {}
    best: dict[str, float] = {}  # on the same texts, for the ratio
    for backend, embedder in embedders.items():
        embedder.encode(texts[:64])  # warm up
        runs = [(EMBEDDING_BATCH_SIZE, texts)]
        if backend == "torch":
            more = embedding_test_texts(args.gpu_texts)
            runs = [(b, texts) for b in args.gpu_batch_sizes] + [(b, more) for b in args.gpu_batch_sizes]
        for batch_size, some in runs:
            started = time.perf_counter()
            out = embedder.encode(some, batch_size=batch_size)
            rate = len(some) / (time.perf_counter() - started)  # encode returns host arrays: the GPU is done
            if some is texts:
                vectors.setdefault(backend, out)
                best[backend] = max(best.get(backend, 0.0), rate)
            mean_chars = sum(len(t) for t in some) / len(some)
            print(
                f"embedding {backend} ({embedder.device}) batch {batch_size}: {len(some):,} texts "
                f"(mean {mean_chars:.0f} characters), {rate:,.0f} texts/s",
                flush=True,
            )
            report.setdefault("embedding", {})[f"{backend}_batch_{batch_size}_texts_{len(some)}"] = {
                "texts_per_second": round(rate, 1),
                "mean_characters": round(mean_chars),
                "device": embedder.device,
            }
    if "torch" in best:
        cosine = (vectors["numpy"] * vectors["torch"]).sum(axis=1)
        print(
            f"embedding torch/numpy speed on the same {len(texts):,} texts: {best['torch'] / best['numpy']:.1f} x; vectors: "
            f"minimum cosine {cosine.min():.6f}",
        )
        report["embedding"]["ratio_torch_numpy"] = best["torch"] / best["numpy"]
        report["embedding"]["min_cosine_torch_numpy"] = float(cosine.min())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--procedures", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--per-topic", type=int, default=500)
    parser.add_argument("--tau", type=float, default=DEDUP_TAU)
    parser.add_argument("--paths", default="numpy,torch,exact", help="search paths to time, first is the reference")
    parser.add_argument("--texts", type=int, default=2000, help="texts for the NumPy backend (0: skip embedding)")
    parser.add_argument("--gpu-texts", type=int, default=20_000, help="texts for the torch backend on a GPU")
    parser.add_argument("--gpu-batch-sizes", type=lambda v: [int(b) for b in v.split(",")], default=[64, 512])
    parser.add_argument("--model", default=None, help="EMBEDDING_MODEL to time (default: the configured one)")
    parser.add_argument("--json", default="", help="also write the figures to this JSON file")
    args = parser.parse_args()

    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f}, numpy {np.__version__}", flush=True)
    report: dict = {"cpus": os.cpu_count(), "load_average": load, "procedures": args.procedures, "dim": args.dim}
    identical = bench_search(args, report) if args.procedures else True
    if args.texts:
        bench_embedding(args, report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    if not identical:
        print("FAILED: the paths' selections differ")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
