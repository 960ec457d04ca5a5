"""How2Bench / How2Train split with embedding deduplication (How2Everything App. E.1).

Pure NumPy, no Django. The steps:

1. each procedure becomes one text, its goal followed by its numbered steps, one per line
   (``procedure_text``);
2. the texts are embedded and L2-normalised, so a dot product is a cosine;
3. per topic the procedures are put in a seeded random order; candidates are taken from
   the front of that order, and a candidate is dropped when its nearest *other*
   procedure has a cosine above tau; dropped candidates are replaced by the next ones in
   the order until the topic has ``per_topic`` benchmark procedures or runs out
   (``select_benchmark``);
4. everything not selected is training data, and the report gives every benchmark
   procedure its nearest training procedure and cosine.

Why "nearest other procedure" rather than "nearest training procedure": the training
set is the complement of the benchmark, so a candidate's near-duplicate ends up in
training unless it is itself selected, and two near-duplicates in the benchmark are no
better. The rule drops both sides of a near-duplicate pair, does not depend on the order
in which candidates are examined, and guarantees that every benchmark procedure's
nearest training procedure is at or below tau."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def procedure_text(goal: str, steps: Sequence[str]) -> str:
    """The text that is embedded: the goal, then ``1. step`` lines (App. E.1)."""
    lines = [goal.strip()]
    lines += [f"{number}. {step.strip()}" for number, step in enumerate(steps, start=1)]
    return "\n".join(lines)


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, as float32 (a zero row stays zero)."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"expected a 2-d array, got shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


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
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` most similar corpus rows of each query row, most similar first (exact,
    blocked matrix products as in ``nearest_neighbours``).

    ``exclude[i]`` is one corpus row query ``i`` may not match, or -1. With
    ``query_groups`` and ``corpus_groups`` (integer labels) a query never matches a corpus
    row of its own group (e.g. its own topic). Returns ``(index, similarity)`` arrays of
    shape ``(n_queries, k)``; slots without an eligible row hold -1 and -inf."""
    queries = np.asarray(queries, dtype=np.float32)
    corpus = np.asarray(corpus, dtype=np.float32)
    n_queries = queries.shape[0]
    if queries.ndim != 2 or corpus.ndim != 2 or (corpus.shape[0] and queries.shape[1] != corpus.shape[1]):
        raise ValueError(f"shapes do not match: queries {queries.shape}, corpus {corpus.shape}")
    if block_rows < 1:
        raise ValueError("block_rows must be at least 1")
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
    corpus_t = np.ascontiguousarray(corpus.T)
    for start in range(0, n_queries, block_rows):
        stop = min(start + block_rows, n_queries)
        sims = queries[start:stop] @ corpus_t
        rows = np.arange(stop - start)
        if exclude is not None:
            own = exclude[start:stop]
            mask = own >= 0
            sims[rows[mask], own[mask]] = -np.inf
        if query_groups is not None and corpus_groups is not None:  # both or neither (checked above)
            sims[query_groups[start:stop, None] == corpus_groups[None, :]] = -np.inf
        if width == 1:
            top = np.argmax(sims, axis=1)[:, None]
        else:
            top = (
                np.argpartition(-sims, width - 1, axis=1)[:, :width]
                if width < n_corpus
                else np.tile(np.arange(n_corpus), (stop - start, 1))
            )
            order = np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1, kind="stable")
            top = np.take_along_axis(top, order, axis=1)
        best_index[start:stop, :width] = top
        best_sim[start:stop, :width] = np.take_along_axis(sims, top, axis=1)
    best_index[~np.isfinite(best_sim)] = -1
    return best_index, best_sim


def topic_order(n: int, *, seed: int, topic: str) -> np.ndarray:
    """A seeded random order of a topic's ``n`` procedures; the same for the same seed
    and topic name, whatever the other topics hold."""
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(topic.encode("utf-8"))])
    return rng.permutation(n)


@dataclass
class Selection:
    """Indices into the input arrays."""

    bench: list[int]
    train: list[int]
    per_topic: dict[str, dict]
    candidate_neighbour: dict[int, tuple[int, float]]  # every examined candidate -> (nearest other, cosine)
    dropped: list[int]


def select_benchmark(
    *,
    topics: Sequence[str],
    vectors: np.ndarray,
    per_topic: int,
    seed: int,
    tau: float,
    block_rows: int = 1024,
) -> Selection:
    """Choose up to ``per_topic`` benchmark procedures per topic (see the module notes).

    ``topics[i]`` is the topic of row ``i`` of ``vectors`` (L2-normalised). The result
    depends only on the rows, their topics, ``per_topic``, ``seed`` and ``tau``."""
    if per_topic < 0:
        raise ValueError("per_topic must not be negative")
    if len(topics) != len(vectors):
        raise ValueError("one topic per vector is needed")
    members: dict[str, list[int]] = {}
    for index, topic in enumerate(topics):
        members.setdefault(topic, []).append(index)
    queues: dict[str, list[int]] = {}
    for topic, indices in members.items():
        order = topic_order(len(indices), seed=seed, topic=topic)
        queues[topic] = [indices[i] for i in order]
    cursor = {topic: 0 for topic in members}
    chosen: dict[str, list[int]] = {topic: [] for topic in members}
    dropped: dict[str, list[int]] = {topic: [] for topic in members}
    neighbour: dict[int, tuple[int, float]] = {}
    while True:
        batch: list[tuple[str, int]] = []
        for topic in sorted(members):
            need = per_topic - len(chosen[topic])
            take = queues[topic][cursor[topic] : cursor[topic] + max(need, 0)]
            cursor[topic] += len(take)
            batch += [(topic, index) for index in take]
        if not batch:
            break
        rows = np.array([index for _, index in batch], dtype=np.int64)
        found, sims = nearest_neighbours(vectors[rows], vectors, exclude=rows, block_rows=block_rows)
        for (topic, index), other, sim in zip(batch, found.tolist(), sims.tolist()):
            neighbour[index] = (other, sim)
            if other >= 0 and sim > tau:
                dropped[topic].append(index)
            else:
                chosen[topic].append(index)
    bench = sorted(i for indices in chosen.values() for i in indices)
    in_bench = np.zeros(len(topics), dtype=bool)
    in_bench[bench] = True
    train = np.flatnonzero(~in_bench).tolist()
    summary = {
        topic: {
            "procedures": len(members[topic]),
            "bench": len(chosen[topic]),
            "dropped": len(dropped[topic]),
            "ran_out": len(chosen[topic]) < per_topic,
        }
        for topic in sorted(members)
    }
    return Selection(
        bench=bench,
        train=train,
        per_topic=summary,
        candidate_neighbour=neighbour,
        dropped=sorted(i for indices in dropped.values() for i in indices),
    )


def nearest_train(vectors: np.ndarray, bench: Sequence[int], train: Sequence[int], *, block_rows: int = 1024):
    """For each benchmark row, its nearest training row and the cosine: ``[(train_row or -1, cosine or None)]``."""
    if not bench:
        return []
    if not train:
        return [(-1, None) for _ in bench]
    train_rows = np.asarray(train, dtype=np.int64)
    found, sims = nearest_neighbours(vectors[np.asarray(bench)], vectors[train_rows], block_rows=block_rows)
    return [(int(train_rows[i]), float(s)) for i, s in zip(found.tolist(), sims.tolist())]
