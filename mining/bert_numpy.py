"""A BERT sentence encoder in NumPy: the forward pass of a sentence-transformers model folder
(``BertModel`` weights in ``model.safetensors``, ``tokenizer.json``, mean pooling, L2
normalisation) with no PyTorch.

The default embedding model, all-MiniLM-L6-v2, is such a folder. Run on the CPU it gives the
same vectors as sentence-transformers to float32 rounding (``bench/embeddings.py`` measures the
agreement of nearest neighbours; ``tests/test_embeddings_numpy.py`` holds reference vectors).

The computation, for a batch of token ids padded to the longest text:

* embeddings: word + absolute position + token type (all type 0), then LayerNorm;
* each layer: multi-head self-attention (scaled dot products, padded keys masked out), a dense
  projection, residual + LayerNorm; a feed-forward block (dense, GELU with erf, dense),
  residual + LayerNorm;
* pooling: the mean of the last hidden states over the real tokens, then unit length.

No Django. Needs ``numpy``, ``safetensors``, ``tokenizers`` and ``threadpoolctl``."""

from __future__ import annotations

import contextlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

# Weights, activations and embeddings: float32 throughout.
Float32Array = npt.NDArray[np.float32]

# Tokens per slice of the feed-forward block (see ``_forward``).
_FFN_ROWS = 256
# Tokens (rows x longest text) per forward pass at most, unless one text is longer.
_BATCH_TOKENS = 4096


class UnsupportedModel(ValueError):
    """The folder holds a model this encoder does not run; the message says what."""


@dataclass(frozen=True)
class _Layer:
    qkv_w: Float32Array  # (hidden, 3 * hidden): query, key and value projections side by side
    qkv_b: Float32Array
    out_w: Float32Array
    out_b: Float32Array
    ln1_g: Float32Array
    ln1_b: Float32Array
    up_w: Float32Array
    up_b: Float32Array
    down_w: Float32Array
    down_b: Float32Array
    ln2_g: Float32Array
    ln2_b: Float32Array


def _read_json(path: Path) -> Any:
    """A JSON file of the model folder: an object (the configurations) or a list (modules.json)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UnsupportedModel(f"{path.name} is missing in {path.parent}") from exc
    except (OSError, ValueError) as exc:
        raise UnsupportedModel(f"{path}: {exc}") from exc


def check_folder(folder: Path) -> dict[str, Any]:
    """The model's ``config.json`` if the folder is a BERT sentence-transformers model with mean
    pooling this encoder runs; otherwise :class:`UnsupportedModel` naming what differs."""
    config: dict[str, Any] = _read_json(folder / "config.json")
    if config.get("model_type") != "bert":
        raise UnsupportedModel(f"model_type {config.get('model_type')!r} is not 'bert'")
    if config.get("hidden_act", "gelu") != "gelu":
        raise UnsupportedModel(f"hidden_act {config.get('hidden_act')!r} is not 'gelu'")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise UnsupportedModel(f"position_embedding_type {config.get('position_embedding_type')!r} is not 'absolute'")
    modules = _read_json(folder / "modules.json") if (folder / "modules.json").exists() else []
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if kinds and kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise UnsupportedModel(f"modules {kinds} are not Transformer, Pooling[, Normalize]")
    pooling_path = next(
        (
            folder / m["path"] / "config.json"
            for m in modules
            if str(m.get("type", "")).endswith("Pooling") and m.get("path")
        ),
        folder / "1_Pooling" / "config.json",
    )
    pooling = _read_json(pooling_path)
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
    if modes != ["pooling_mode_mean_tokens"]:
        raise UnsupportedModel(f"pooling {modes} is not mean pooling")
    if not (folder / "model.safetensors").is_file():
        raise UnsupportedModel(f"model.safetensors is missing in {folder}")
    if not (folder / "tokenizer.json").is_file():
        raise UnsupportedModel(f"tokenizer.json is missing in {folder}")
    return config


def _max_seq_length(folder: Path, config: dict[str, Any]) -> int:
    path = folder / "sentence_bert_config.json"
    limit = _read_json(path).get("max_seq_length") if path.exists() else None
    return int(min(limit or config["max_position_embeddings"], config["max_position_embeddings"]))


def _gelu(x: Float32Array) -> Float32Array:
    """GELU with erf, ``x * Phi(x)``, as BERT's ``hidden_act: gelu``; a new array.

    erf by Abramowitz & Stegun 7.1.26 (absolute error at most 1.5e-7, below float32's
    resolution near 1), written as in-place passes: several times faster than
    ``scipy.special.erf`` on float32 and no less exact at this precision."""
    z = np.abs(x)
    z *= np.float32(0.7071067811865476)  # |x| / sqrt(2)
    t = z * np.float32(0.3275911)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    p = t * np.float32(1.061405429)
    for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        p += np.float32(coefficient)
        p *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    p *= z  # p = 1 - erf(|x| / sqrt(2))
    p *= np.float32(-0.5)
    p += np.float32(0.5)  # erf(|x| / sqrt(2)) / 2
    np.copysign(p, x, out=p)
    p += np.float32(0.5)  # Phi(x)
    p *= x
    return p


# A ThreadpoolController; False when threadpoolctl is not installed; None until first asked.
_blas: Any = None


def _workers() -> int:
    """Python threads that encode batches side by side: ``EMBEDDING_THREADS`` if set, else the
    CPUs this process may use."""
    setting = os.environ.get("EMBEDDING_THREADS", "").strip()
    if setting:
        try:
            return max(1, int(setting))
        except ValueError:
            pass
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """A context in which BLAS runs on one thread: the whole forward pass runs in it. A threaded
    BLAS splits each product among its threads and, when they are busy or the matrices small
    (the attention products: one per text and head; the feed-forward slices), spends most of
    the time waiting for them: on 2 cores at load 3-4, 300 texts took 12-21 s with two BLAS
    threads, 6 s with one. The cores are used instead by encoding separate batches on separate
    Python threads (``_workers``; NumPy releases the GIL in products and ufuncs)."""
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController

            _blas = ThreadpoolController()
        except ImportError:
            _blas = False
    if not _blas:
        return contextlib.nullcontext()
    # threadpoolctl has no type information here; its limit() is a context manager.
    limit: contextlib.AbstractContextManager[object] = _blas.limit(limits=1, user_api="blas")
    return limit


def _layer_norm(x: Float32Array, gain: Float32Array, bias: Float32Array, eps: float) -> Float32Array:
    centred: Float32Array = x - x.mean(axis=-1, keepdims=True)
    var = np.einsum("...i,...i->...", centred, centred)[..., None]
    var /= np.float32(x.shape[-1])
    var += np.float32(eps)
    np.sqrt(var, out=var)
    centred /= var
    centred *= gain
    centred += bias
    return centred


class BertSentenceEncoder:
    """``encode(texts)`` gives L2-normalised float32 rows, like sentence-transformers' ``encode``
    with ``normalize_embeddings=True``."""

    def __init__(self, folder: str | Path):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = Path(folder)
        config = check_folder(folder)
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        if self.hidden % self.heads:
            raise UnsupportedModel(f"hidden_size {self.hidden} is not a multiple of num_attention_heads {self.heads}")
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.max_length = _max_seq_length(folder, config)
        self.dimension = self.hidden

        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length)

        weights = load_file(str(folder / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

        def w(name: str) -> Float32Array:
            try:
                return np.ascontiguousarray(weights[prefix + name], dtype=np.float32)
            except KeyError as exc:
                raise UnsupportedModel(f"model.safetensors has no tensor {prefix + name}") from exc

        self.word = w("embeddings.word_embeddings.weight")
        self.position = w("embeddings.position_embeddings.weight")
        self.token_type0 = w("embeddings.token_type_embeddings.weight")[0]
        self.emb_ln = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            # Linear layers store (out, in); the products below want (in, out).
            self.layers.append(
                _Layer(
                    qkv_w=np.ascontiguousarray(
                        np.concatenate(
                            [w(p + f"attention.self.{n}.weight").T for n in ("query", "key", "value")], axis=1
                        )
                    ),
                    qkv_b=np.concatenate([w(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")]),
                    out_w=np.ascontiguousarray(w(p + "attention.output.dense.weight").T),
                    out_b=w(p + "attention.output.dense.bias"),
                    ln1_g=w(p + "attention.output.LayerNorm.weight"),
                    ln1_b=w(p + "attention.output.LayerNorm.bias"),
                    up_w=np.ascontiguousarray(w(p + "intermediate.dense.weight").T),
                    up_b=w(p + "intermediate.dense.bias"),
                    down_w=np.ascontiguousarray(w(p + "output.dense.weight").T),
                    down_b=w(p + "output.dense.bias"),
                    ln2_g=w(p + "output.LayerNorm.weight"),
                    ln2_b=w(p + "output.LayerNorm.bias"),
                )
            )

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """The token ids of each text, with [CLS] and [SEP], cut to the model's length."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]

    def encode(self, texts: list[str], *, batch_size: int = 64) -> Float32Array:
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        ids = self.token_ids(texts)
        # Longest first, as sentence-transformers does, so a batch pads little; a batch of long
        # texts is cut to about _BATCH_TOKENS tokens (its attention grows with length squared).
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
        batches: list[list[int]] = []
        start = 0
        while start < len(order):
            length = len(ids[order[start]])
            size = max(1, min(batch_size, _BATCH_TOKENS // length))
            batches.append(order[start : start + size])
            start += size

        def run(rows: list[int]) -> None:
            length = len(ids[rows[0]])
            batch = np.zeros((len(rows), length), dtype=np.int64)
            mask = np.zeros((len(rows), length), dtype=np.float32)
            for r, i in enumerate(rows):
                batch[r, : len(ids[i])] = ids[i]
                mask[r, : len(ids[i])] = 1.0
            out[rows] = self._forward(batch, mask)  # each batch writes its own rows

        workers = min(_workers(), len(batches))
        with _one_blas_thread():
            if workers <= 1:
                for rows in batches:
                    run(rows)
            else:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    for _ in pool.map(run, batches):  # re-raises a batch's error
                        pass
        return out

    def _forward(self, ids: npt.NDArray[np.int64], mask: Float32Array) -> Float32Array:
        b, n = ids.shape
        h, d = self.heads, self.hidden // self.heads
        x = self.word[ids] + self.position[:n] + self.token_type0
        x = _layer_norm(x, *self.emb_ln, self.eps)
        # Padded keys get the most negative float32, as transformers' extended attention mask does.
        key_bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(d))
        for layer in self.layers:
            qkv = x.reshape(b * n, self.hidden) @ layer.qkv_w
            qkv += layer.qkv_b
            qkv = qkv.reshape(b, n, 3, h, d)
            # Contiguous copies: a batched product of strided views skips BLAS and is slow.
            q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3))
            k = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))
            v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
            scores = q @ k
            scores *= scale
            scores += key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(b * n, self.hidden)
            attended = context @ layer.out_w
            attended += layer.out_b
            attended = attended.reshape(b, n, self.hidden)
            attended += x
            x = _layer_norm(attended, layer.ln1_g, layer.ln1_b, self.eps)
            # The feed-forward block a few hundred tokens at a time: the wide intermediate rows
            # stay in the CPU's cache through GELU, which is then about as fast as PyTorch's.
            flat = x.reshape(b * n, self.hidden)
            down: Float32Array = np.empty_like(flat)
            for start in range(0, b * n, _FFN_ROWS):
                up = flat[start : start + _FFN_ROWS] @ layer.up_w
                up += layer.up_b
                down[start : start + _FFN_ROWS] = _gelu(up) @ layer.down_w
            down += layer.down_b
            down = down.reshape(b, n, self.hidden)
            down += x
            x = _layer_norm(down, layer.ln2_g, layer.ln2_b, self.eps)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        embeddings: Float32Array = (pooled / norms).astype(np.float32)
        return embeddings
