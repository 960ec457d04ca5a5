"""What a goal-step build draws from and makes (goalstep/items.py): the procedures of the
pool, flattened into steps and goals with their embeddings and topic numbers, the choice of a
positive's negatives among its nearest neighbours, and the items, each first a draft with
what the filters and the baselines need. No Django."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from goalstep.constants import N_NEGATIVES, SEARCH_BLOCK_FLOATS
from mining.embeddings import Embed
from mining.words import normalise_text


@dataclass(frozen=True)
class PoolProcedure:
    """A procedure of the pool: ``id`` is its database id, ``topic`` its topic's name."""

    id: int
    topic: str
    goal: str
    steps: tuple[str, ...]


@dataclass
class Item:
    """One multiple-choice item. ``source_procedure_ids`` holds the procedure of each
    candidate in candidate order (so ``source_procedure_ids[label]`` is the prompt's
    procedure); for step ordering, the one procedure both steps come from."""

    id: str
    task: str
    prompt: str
    candidates: list[str]
    label: int
    topic: str
    source_procedure_ids: list[int]

    def as_record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "prompt": self.prompt,
            "candidates": list(self.candidates),
            "label": self.label,
            "topic": self.topic,
            "source_procedure_ids": list(self.source_procedure_ids),
        }


@dataclass
class Draft:
    """An item before filtering, with what the filters and the baselines need."""

    item: Item
    original_label: int | None  # index of the positive before reassignment (inference tasks)
    candidate_rows: list[int] = field(default_factory=list)  # embedding rows of the candidates


def item_id(task: str, prompt: str, candidates: Sequence[str]) -> str:
    payload = "\x1f".join([task, prompt, *candidates]).encode("utf-8")
    return f"{task}-{hashlib.sha256(payload).hexdigest()[:16]}"


class ProcedurePool:
    """Flattened steps and goals of the pool with their embeddings and topic numbers."""

    def __init__(self, procedures: Sequence[PoolProcedure], embed: Embed, *, need_goals: bool, need_steps: bool):
        self.procedures = list(procedures)
        topics = sorted({p.topic for p in self.procedures})
        self.topic_number = {topic: n for n, topic in enumerate(topics)}
        self.proc_topic = np.array([self.topic_number[p.topic] for p in self.procedures], dtype=np.int64)
        self.step_proc: list[int] = []
        self.step_texts: list[str] = []
        self.proc_step_rows: list[list[int]] = []
        for index, procedure in enumerate(self.procedures):
            rows = []
            for step in procedure.steps:
                rows.append(len(self.step_texts))
                self.step_texts.append(step)
                self.step_proc.append(index)
            self.proc_step_rows.append(rows)
        self.step_topic = (
            self.proc_topic[np.asarray(self.step_proc, dtype=np.int64)] if self.step_proc else np.zeros(0, np.int64)
        )
        self.step_vectors = _embed(embed, self.step_texts) if need_steps else None
        self.goal_vectors = _embed(embed, [p.goal for p in self.procedures]) if need_goals else None
        self.step_norm = [normalise_text(t) for t in self.step_texts]
        self.goal_norm = [normalise_text(p.goal) for p in self.procedures]

    def steps_embedded(self) -> np.ndarray:
        """The step embeddings (made when the pool was built for a task that needs them)."""
        if self.step_vectors is None:
            raise ValueError("this pool was built without step embeddings")
        return self.step_vectors

    def goals_embedded(self) -> np.ndarray:
        """The goal embeddings (made when the pool was built for a task that needs them)."""
        if self.goal_vectors is None:
            raise ValueError("this pool was built without goal embeddings")
        return self.goal_vectors


def _embed(embed: Embed, texts: list[str]) -> np.ndarray:
    vectors = np.asarray(embed(texts), dtype=np.float32) if texts else np.zeros((0, 1), dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise ValueError(f"the embedding function returned shape {vectors.shape} for {len(texts)} texts")
    return vectors


def search_block_rows(n_corpus: int) -> int:
    return max(1, min(1024, SEARCH_BLOCK_FLOATS // max(n_corpus, 1)))


def choose_negatives(
    neighbours: Iterable[int],
    *,
    positive_topic: int,
    positive_text: str,
    topic_of: np.ndarray,
    norm_of: Sequence[str],
    forbidden_texts: set[str],
) -> list[int]:
    """The first 3 neighbours (most similar first) from 3 further topics with new texts."""
    used_topics = {positive_topic}
    used_texts = {positive_text} | forbidden_texts
    chosen: list[int] = []
    for row in neighbours:
        if row < 0:
            break
        topic = int(topic_of[row])
        if topic in used_topics or norm_of[row] in used_texts:
            continue
        chosen.append(row)
        used_topics.add(topic)
        used_texts.add(norm_of[row])
        if len(chosen) == N_NEGATIVES:
            break
    return chosen
