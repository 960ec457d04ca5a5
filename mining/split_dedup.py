"""How2Bench / How2Train split with embedding deduplication (How2Everything App. E.1).

No Django; NumPy, and PyTorch only for the search on a GPU (imported there). The steps:

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
nearest training procedure is at or below tau.

The search of steps 3 and 4 is mining/neighbour_search.py (``NeighbourIndex``): exact,
screened on the GPU when the embeddings were computed there, with the same neighbours, cosines
and selection on the CPU and on the GPU."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from mining.neighbour_search import SearchDevice, neighbour_index


def procedure_text(goal: str, steps: Sequence[str]) -> str:
    """The text that is embedded: the goal, then ``1. step`` lines (App. E.1)."""
    lines = [goal.strip()]
    lines += [f"{number}. {step.strip()}" for number, step in enumerate(steps, start=1)]
    return "\n".join(lines)


def l2_normalise(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length, as float32 (a zero row stays zero)."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"expected a 2-d array, got shape {matrix.shape}")
    norms: npt.NDArray[np.float32] = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def topic_order(n: int, *, seed: int, topic: str) -> np.ndarray:
    """A seeded random order of a topic's ``n`` procedures; the same for the same seed
    and topic name, whatever the other topics hold."""
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(topic.encode("utf-8"))])
    return rng.permutation(n)


class TopicSelection(TypedDict):
    """One topic's part of a selection: its procedures, those chosen for the benchmark, those
    dropped as near-duplicates, and whether it ran out before ``per_topic``."""

    procedures: int
    bench: int
    dropped: int
    ran_out: bool


@dataclass
class Selection:
    """Indices into the input arrays."""

    bench: list[int]
    train: list[int]
    per_topic: dict[str, TopicSelection]
    candidate_neighbour: dict[int, tuple[int, float]]  # every examined candidate -> (nearest other, cosine)
    dropped: list[int]


def select_benchmark(
    *,
    topics: Sequence[str],
    vectors: np.ndarray,
    per_topic: int,
    seed: int,
    tau: float,
    device: SearchDevice = "cpu",
) -> Selection:
    """Choose up to ``per_topic`` benchmark procedures per topic (see the module notes).

    ``topics[i]`` is the topic of row ``i`` of ``vectors`` (L2-normalised). The result
    depends only on the rows, their topics, ``per_topic``, ``seed`` and ``tau``: the search
    runs on ``device`` (``cpu`` or ``cuda``, see ``SearchDevice``) with the same result."""
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
    search = neighbour_index(vectors, device)
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
        found, sims = search.nearest(vectors[rows], exclude=rows)
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
    summary: dict[str, TopicSelection] = {
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


def nearest_train(
    vectors: np.ndarray,
    bench: Sequence[int],
    train: Sequence[int],
    *,
    device: SearchDevice = "cpu",
) -> list[tuple[int, float | None]]:
    """For each benchmark row, its nearest training row and the cosine: ``[(train_row or -1, cosine or None)]``
    (the search as in ``select_benchmark``)."""
    if not bench:
        return []
    if not train:
        return [(-1, None) for _ in bench]
    train_rows = np.asarray(train, dtype=np.int64)
    search = neighbour_index(np.asarray(vectors)[train_rows], device)
    found, sims = search.nearest(np.asarray(vectors)[np.asarray(bench)])
    return [(int(train_rows[i]), float(s)) for i, s in zip(found.tolist(), sims.tolist())]
