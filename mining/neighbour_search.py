"""Exact nearest-neighbour search over L2-normalised embeddings (dot product = cosine), for
the How2Bench / How2Train split (mining/split_dedup.py) and the goal-step negatives
(goalstep/item_pool.py). No Django; NumPy, and PyTorch only for the search on a GPU
(imported there).

The split's search (``NeighbourIndex``) is one blocked algorithm over a small set
of array operations (``SearchOps``): NumPy in float32 on the CPU, PyTorch in half precision
on a CUDA device (where the embeddings were computed, ``select_benchmark(device=...)``).
Each library only *screens*: it keeps every corpus row whose screened similarity is within
twice its error bound of the best screened one, and those few candidates are then scored
again in float64 on the host by the same NumPy code on both paths. The nearest row is the
float64 maximum (ties: the lowest index), so the neighbours, their cosines and the
selection are identical on the CPU and on the GPU, however the half precision rounds."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from mining.constants import NN_BLOCK_COLUMNS, NN_BLOCK_ROWS, NN_GPU_BLOCK_COLUMNS, NN_GPU_BLOCK_ROWS


def nearest_neighbours(
    queries: np.ndarray,
    corpus: np.ndarray,
    *,
    exclude: np.ndarray | None = None,
    block_rows: int = 1024,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest neighbour by dot product (cosine for unit rows) of each query row.

    ``exclude[i]`` is a corpus row that query ``i`` may not match (itself), or -1.
    Returns ``(index, similarity)`` per query; index -1 and similarity -inf when the
    corpus has no eligible row. Work is done in blocks of ``block_rows`` queries, so
    memory is ``block_rows x len(corpus)`` floats whatever the number of queries."""
    index, sims = top_neighbours(queries, corpus, k=1, exclude=exclude, block_rows=block_rows)
    return index[:, 0], sims[:, 0]


def top_neighbours(
    queries: np.ndarray,
    corpus: np.ndarray,
    *,
    k: int,
    exclude: np.ndarray | None = None,
    query_groups: np.ndarray | None = None,
    corpus_groups: np.ndarray | None = None,
    block_rows: int = 1024,
    block_columns: int = NN_BLOCK_COLUMNS,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` most similar corpus rows of each query row, most similar first (exact,
    blocked matrix products as in ``nearest_neighbours``, over blocks of ``block_columns``
    corpus rows too, so memory is ``block_rows x block_columns`` floats whatever the corpus:
    at the paper's 351,000 procedures one unblocked row block was 1.4 GB). Among rows tied at
    the k-th similarity, which ones are kept is not specified.

    ``exclude[i]`` is one corpus row query ``i`` may not match, or -1. With
    ``query_groups`` and ``corpus_groups`` (integer labels) a query never matches a corpus
    row of its own group (e.g. its own topic). Returns ``(index, similarity)`` arrays of
    shape ``(n_queries, k)``; slots without an eligible row hold -1 and -inf."""
    queries = np.asarray(queries, dtype=np.float32)
    corpus = np.asarray(corpus, dtype=np.float32)
    n_queries = queries.shape[0]
    if queries.ndim != 2 or corpus.ndim != 2 or (corpus.shape[0] and queries.shape[1] != corpus.shape[1]):
        raise ValueError(f"shapes do not match: queries {queries.shape}, corpus {corpus.shape}")
    if block_rows < 1 or block_columns < 1:
        raise ValueError("block_rows and block_columns must be at least 1")
    if k < 1:
        raise ValueError("k must be at least 1")
    best_index = np.full((n_queries, k), -1, dtype=np.int64)
    best_sim = np.full((n_queries, k), -np.inf, dtype=np.float32)
    n_corpus = corpus.shape[0]
    if n_queries == 0 or n_corpus == 0:
        return best_index, best_sim
    if exclude is not None:
        exclude = np.asarray(exclude, dtype=np.int64)
        if exclude.shape != (n_queries,):
            raise ValueError("exclude needs one entry per query")
    if (query_groups is None) != (corpus_groups is None):
        raise ValueError("query_groups and corpus_groups go together")
    if query_groups is not None:
        query_groups = np.asarray(query_groups)
        corpus_groups = np.asarray(corpus_groups)
        if query_groups.shape != (n_queries,) or corpus_groups.shape != (n_corpus,):
            raise ValueError("one group per query row and one per corpus row are needed")
    width = min(k, n_corpus)
    for start in range(0, n_queries, block_rows):
        stop = min(start + block_rows, n_queries)
        rows = np.arange(stop - start)
        found_index = np.full((stop - start, width), -1, dtype=np.int64)
        found_sim = np.full((stop - start, width), -np.inf, dtype=np.float32)
        for first in range(0, n_corpus, block_columns):
            last = min(first + block_columns, n_corpus)
            sims = queries[start:stop] @ corpus[first:last].T
            if exclude is not None:
                own = exclude[start:stop]
                mask = (own >= first) & (own < last)
                sims[rows[mask], own[mask] - first] = -np.inf
            if query_groups is not None and corpus_groups is not None:  # both or neither (checked above)
                sims[query_groups[start:stop, None] == corpus_groups[None, first:last]] = -np.inf
            take = min(width, last - first)
            top = (
                np.argpartition(-sims, take - 1, axis=1)[:, :take]
                if take < last - first
                else np.tile(np.arange(last - first), (stop - start, 1))
            )
            # The best so far and this block's best, ordered by similarity, then by corpus row.
            index = np.concatenate([found_index, top + first], axis=1)
            sim = np.concatenate([found_sim, np.take_along_axis(sims, top, axis=1)], axis=1)
            order = np.lexsort((np.where(index < 0, n_corpus, index), -sim), axis=1)[:, :width]
            found_index = np.take_along_axis(index, order, axis=1)
            found_sim = np.take_along_axis(sim, order, axis=1)
        best_index[start:stop, :width] = found_index
        best_sim[start:stop, :width] = found_sim
    best_index[~np.isfinite(best_sim)] = -1
    return best_index, best_sim


# --- the screened search: one blocked algorithm, two array libraries ----------------------

_FLOAT32_UNIT = 2.0**-24  # unit roundoff of float32
_HALF_UNIT = 2.0**-11  # unit roundoff of float16
_HALF_SUBNORMAL = 2.0**-25  # largest rounding error of a float16 subnormal
_CONFIRM_PAIRS = 16_384  # candidate pairs scored in float64 at a time (memory: pairs x dim x 16 bytes)


class SearchOps(Protocol):
    """The array operations the blocked search needs. ``load`` puts float32 host rows (scaled
    to norms of at most 2) where the library computes; ``scores`` multiplies a block of
    queries by a block of corpus rows; the rest work on such a block of scores.
    ``error_bound(dim)`` bounds ``|screened - exact|`` per unit of ``|q| |c|``."""

    name: str
    block_rows: int
    block_columns: int

    def error_bound(self, dim: int) -> float: ...

    def load(self, rows: np.ndarray) -> Any: ...

    def scores(self, queries: Any, corpus: Any, start: int, stop: int) -> Any: ...

    def mask_out(self, scores: Any, rows: np.ndarray, columns: np.ndarray) -> None: ...

    def row_max(self, scores: Any) -> np.ndarray: ...

    def at_least(self, scores: Any, floors: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


class NumpySearchOps:
    """NumPy on the CPU: float32 products (BLAS). With ``half=True`` the arithmetic of the GPU
    path is reproduced on the CPU (inputs and scores rounded to float16, products summed in
    float32, as cuBLAS does), so its screening can be tested without a GPU."""

    def __init__(self, *, half: bool = False, block_rows: int = NN_BLOCK_ROWS, block_columns: int = NN_BLOCK_COLUMNS):
        self.half = half
        self.name = "numpy-float16" if half else "numpy-float32"
        self.block_rows = block_rows
        self.block_columns = block_columns

    def error_bound(self, dim: int) -> float:
        return _half_error_bound(dim) if self.half else _float32_error_bound(dim)

    def load(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.float32)
        return rows.astype(np.float16).astype(np.float32) if self.half else rows

    def scores(
        self, queries: npt.NDArray[np.float32], corpus: npt.NDArray[np.float32], start: int, stop: int
    ) -> npt.NDArray[np.float32] | npt.NDArray[np.float16]:
        block: npt.NDArray[np.float32] = queries @ corpus[start:stop].T
        return block.astype(np.float16) if self.half else block

    def mask_out(self, scores: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> None:
        scores[rows, columns] = -np.inf

    def row_max(self, scores: np.ndarray) -> npt.NDArray[np.float32]:
        # ndarray.max along an axis is typed Any; astype makes it float32.
        maxima: npt.NDArray[np.float32] = scores.max(axis=1).astype(np.float32)
        return maxima

    def at_least(self, scores: np.ndarray, floors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # flatnonzero of the flat mask: several times faster than a 2-d nonzero
        found = np.flatnonzero(scores >= floors[:, None])
        return np.divmod(found, scores.shape[1])


class TorchSearchOps:
    """PyTorch on a CUDA device, in half precision: float16 rows and scores, products summed
    in float32 (reduced-precision reductions switched off for the product)."""

    def __init__(
        self, *, device: str = "cuda", block_rows: int = NN_GPU_BLOCK_ROWS, block_columns: int = NN_GPU_BLOCK_COLUMNS
    ):
        try:
            import torch
        except ImportError as exc:
            raise RuntimeError(
                "the nearest-neighbour search on a GPU needs PyTorch (pip install -r requirements-torch.txt)"
            ) from exc
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError(f"the nearest-neighbour search was asked to run on {device}, but no CUDA device is seen")
        self.torch = torch
        self.device = torch.device(device)
        self.name = f"torch-float16 on {device}"
        self.block_rows = block_rows
        self.block_columns = block_columns

    def error_bound(self, dim: int) -> float:
        return _half_error_bound(dim)

    def load(self, rows: np.ndarray) -> Any:
        host = self.torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32))
        return host.to(self.device).to(self.torch.float16)

    def scores(self, queries: Any, corpus: Any, start: int, stop: int) -> Any:
        matmul = self.torch.backends.cuda.matmul
        reduced = matmul.allow_fp16_reduced_precision_reduction
        matmul.allow_fp16_reduced_precision_reduction = False
        try:
            return queries @ corpus[start:stop].T
        finally:
            matmul.allow_fp16_reduced_precision_reduction = reduced

    def mask_out(self, scores: Any, rows: np.ndarray, columns: np.ndarray) -> None:
        scores[self.torch.from_numpy(rows).to(self.device), self.torch.from_numpy(columns).to(self.device)] = -math.inf

    def row_max(self, scores: Any) -> npt.NDArray[np.float32]:
        # A tensor (torch has no type information here): its float32 maxima as a NumPy array.
        maxima: npt.NDArray[np.float32] = scores.max(dim=1).values.float().cpu().numpy()
        return maxima

    def at_least(self, scores: Any, floors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        floor = self.torch.from_numpy(np.ascontiguousarray(floors, dtype=np.float32)).to(self.device)
        found = (scores >= floor[:, None]).nonzero().cpu().numpy()
        return found[:, 0].astype(np.int64), found[:, 1].astype(np.int64)


def _float32_error_bound(dim: int) -> float:
    # Rows already float32; a sum of dim products in float32 errs by at most dim * u * sum|q||c|
    # <= dim * u per unit of |q| |c| (Higham, Accuracy and Stability of Numerical Algorithms, 3.1).
    # Doubled for safety.
    return 2.0 * (dim + 2) * _FLOAT32_UNIT


def _half_error_bound(dim: int) -> float:
    # Rows rounded to float16 (2u relative, plus the subnormals' absolute error on each of the
    # 2 x dim components: at most 2 sqrt(dim) x 2^-25 by Cauchy-Schwarz), the float32 sum
    # (dim x 2^-24) and the float16 score (u + 2^-25), per unit of |q| |c|. Doubled for safety.
    inputs = 2 * _HALF_UNIT + _HALF_UNIT**2 + 2 * math.sqrt(dim) * _HALF_SUBNORMAL
    return 2.0 * (inputs + (dim + 2) * _FLOAT32_UNIT + _HALF_UNIT + _HALF_SUBNORMAL)


def search_ops(device: str = "cpu") -> SearchOps:
    """The operations for ``device``: ``cpu`` (NumPy, float32) or ``cuda`` / ``cuda:N``
    (PyTorch, float16)."""
    if device == "cpu":
        return NumpySearchOps()
    if device.startswith("cuda"):
        return TorchSearchOps(device=device)
    raise ValueError(f"unknown search device {device!r}: expected cpu or cuda")


def _power_of_two_scale(rows: np.ndarray) -> tuple[float, float]:
    """``(scale, largest norm after scaling)``: 1 when the largest row norm is within [1/2, 2]
    (unit rows: nothing is copied), else the power of two that brings it into (1/2, 1]
    (exact in any precision; float16 ends at 65,504)."""
    largest = float(np.sqrt(np.max(np.einsum("ij,ij->i", rows, rows, dtype=np.float64)))) if len(rows) else 0.0
    if not np.isfinite(largest):
        raise ValueError("the vectors hold a NaN or an infinity")
    if largest == 0.0 or 0.5 <= largest <= 2.0:
        return 1.0, largest
    scale = 2.0 ** -math.ceil(math.log2(largest))
    return scale, largest * scale


def _scaled(rows: np.ndarray, scale: float) -> np.ndarray:
    return rows if scale == 1.0 else rows * np.float32(scale)


class NeighbourIndex:
    """A corpus loaded once (into host memory or onto the GPU) for repeated exact
    nearest-neighbour searches (see the module notes).

    Memory: the corpus in the library's precision, plus one block of ``block_rows`` x
    ``block_columns`` scores at a time; candidates are confirmed ``_CONFIRM_PAIRS`` at a time."""

    def __init__(self, corpus: np.ndarray, *, ops: SearchOps | None = None):
        corpus = np.asarray(corpus, dtype=np.float32)
        if corpus.ndim != 2:
            raise ValueError(f"expected a 2-d corpus, got shape {corpus.shape}")
        self.ops = ops if ops is not None else NumpySearchOps()
        self.corpus = corpus
        self.scale, self.norm = _power_of_two_scale(corpus)
        self.loaded = self.ops.load(_scaled(corpus, self.scale))

    def __len__(self) -> int:
        return int(self.corpus.shape[0])

    def nearest(self, queries: np.ndarray, *, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Each query row's nearest corpus row by dot product, computed in float64: ``(index,
        similarity)``; ``exclude[i]`` is a corpus row query ``i`` may not match (itself), or
        -1. A query without an eligible row gets -1 and -inf. Ties go to the lowest index."""
        queries = np.asarray(queries, dtype=np.float32)
        n_queries, n_corpus = queries.shape[0] if queries.ndim == 2 else 0, len(self)
        if queries.ndim != 2 or (n_corpus and queries.shape[1] != self.corpus.shape[1]):
            raise ValueError(f"shapes do not match: queries {queries.shape}, corpus {self.corpus.shape}")
        if exclude is not None:
            exclude = np.asarray(exclude, dtype=np.int64)
            if exclude.shape != (n_queries,):
                raise ValueError("exclude needs one entry per query")
        best_index = np.full(n_queries, -1, dtype=np.int64)
        best_sim = np.full(n_queries, -np.inf, dtype=np.float64)
        if n_queries == 0 or n_corpus == 0:
            return best_index, best_sim
        ops = self.ops
        query_scale, query_norm = _power_of_two_scale(queries)
        # Twice the error bound: the true nearest row's screened score is at most one bound
        # below its cosine, which is at least the screened best's cosine, itself at most one
        # bound below the screened best score (the bound is per unit of |q| |c|).
        band = np.float32(2.0 * ops.error_bound(queries.shape[1]) * query_norm * self.norm)
        for start in range(0, n_queries, ops.block_rows):
            stop = min(start + ops.block_rows, n_queries)
            block = ops.load(_scaled(queries[start:stop], query_scale))
            running = np.full(stop - start, -np.inf, dtype=np.float32)
            own = exclude[start:stop] if exclude is not None else None
            for column in range(0, n_corpus, ops.block_columns):
                column_stop = min(column + ops.block_columns, n_corpus)
                scores = ops.scores(block, self.loaded, column, column_stop)
                if own is not None:
                    inside = (own >= column) & (own < column_stop)
                    if inside.any():
                        ops.mask_out(scores, np.flatnonzero(inside), own[inside] - column)
                running = np.maximum(running, ops.row_max(scores))
                # The floor only rises, so every row that passes the final floor is confirmed
                # when its block is screened; rows without an eligible column get none.
                floors = np.where(np.isfinite(running), running - band, np.inf).astype(np.float32)
                rows, columns = ops.at_least(scores, floors)
                del scores
                self._confirm(queries, start, rows, columns + column, best_index, best_sim)
        return best_index, best_sim

    def _confirm(
        self,
        queries: np.ndarray,
        start: int,
        rows: np.ndarray,
        columns: np.ndarray,
        best_index: np.ndarray,
        best_sim: np.ndarray,
    ) -> None:
        """Score candidate pairs in float64 and keep each query's best (ties: lowest index;
        columns arrive in increasing blocks, so an equal later one never replaces it)."""
        for chunk in range(0, len(rows), _CONFIRM_PAIRS):
            r = rows[chunk : chunk + _CONFIRM_PAIRS] + start
            c = columns[chunk : chunk + _CONFIRM_PAIRS]
            exact = (queries[r].astype(np.float64) * self.corpus[c].astype(np.float64)).sum(axis=1)
            order = np.lexsort((c, -exact, r))
            r, c, exact = r[order], c[order], exact[order]
            first = np.ones(len(r), dtype=bool)
            first[1:] = r[1:] != r[:-1]
            r, c, exact = r[first], c[first], exact[first]
            better = (exact > best_sim[r]) | ((exact == best_sim[r]) & (c < best_index[r]))
            best_index[r[better]] = c[better]
            best_sim[r[better]] = exact[better]


class Index(Protocol):
    """A corpus ready for nearest-neighbour searches (``NeighbourIndex``, ``ExactIndex``)."""

    def nearest(self, queries: np.ndarray, *, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]: ...


# Where a search runs: "cpu", "cuda" (or "cuda:N"), or a function that makes an Index of a corpus.
SearchDevice = str | Callable[[np.ndarray], Index]


class ExactIndex:
    """The plain exact search (``nearest_neighbours``: float32 products, the float32 argmax)
    behind the ``Index`` interface: the reference the screened search is compared with."""

    def __init__(self, corpus: np.ndarray):
        self.corpus = np.asarray(corpus, dtype=np.float32)

    def nearest(self, queries: np.ndarray, *, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        return nearest_neighbours(queries, self.corpus, exclude=exclude)


def neighbour_index(corpus: np.ndarray, device: SearchDevice = "cpu") -> Index:
    """An index of ``corpus`` on ``device`` (see ``SearchDevice``)."""
    if callable(device):
        return device(corpus)
    return NeighbourIndex(corpus, ops=search_ops(device))
