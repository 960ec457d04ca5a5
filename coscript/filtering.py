"""Over-generate-then-filter (CoScript §4.3, "Over-Generation and Filtering"). Pure Python
and NumPy, no Django; the embedding function is passed in.

For each candidate script of a target specific goal, the goal set is the target and its
siblings: the other specific goals derived from the same abstract goal (the paper's
negatives, e.g. "make a cake in the microwave" and "make a cake for a wedding" for "make a
cake for a birthday party"). Each goal scores the cosine similarity between its embedding
and the script's (the steps joined by spaces); the target also gets
``keyword_bonus × share of the constraint's keywords found in the script`` ("we reward the
script that explicitly contains the keywords of the target constraint"). The candidate is
kept only if the target scores strictly highest in the goal set. A target without
siblings has nothing to be outranked by: the embedding test passes, which the report
counts (``kept_without_siblings``).

Modes:

* ``embedding+keyword`` (default): as above;
* ``embedding``: no keyword bonus (Table 3 compares embedding models this way);
* ``keyword``: keep a script only if it contains every keyword of the constraint (Table 3,
  f_sim = None: "we only reserve the scripts that contain constraint words").

A constraint's keywords are its content words (:func:`mining.words.content_words`:
stopwords and numbers out, words reduced by a light lemmatiser), matched against the
script's content words. When several candidates of a goal are kept, one is chosen at random
with the run's seed (App. C.1: "If both generations are faithful, we randomly select one
into the dataset")."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.app_errors import InvalidInput
from coscript.constants import (
    CONSTRAINT_TYPES,
    FILTER_EMBEDDING_KEYWORD,
    FILTER_KEYWORD,
    FILTER_MODES,
    KEYWORD_BONUS,
)
from mining.embeddings import Embed
from mining.words import content_words

KEPT = "kept"
NO_SCRIPT = "no_script"  # the call failed or the completion had no steps
OUTRANKED = "outranked"  # a sibling goal scored at least as high as the target
NO_KEYWORDS = "missing_keywords"  # keyword mode: a constraint keyword is absent
REASONS = (KEPT, NO_SCRIPT, OUTRANKED, NO_KEYWORDS)


@dataclass(frozen=True)
class FilterGoal:
    key: int
    group: Any  # the abstract goal the specific goal was derived from
    specific_goal: str
    constraint: str
    constraint_type: str


@dataclass(frozen=True)
class FilterCandidate:
    key: int
    goal_key: int
    steps: tuple[str, ...]  # empty when the call gave no usable script


@dataclass(frozen=True)
class FilterVerdict:
    """What the over-generate-then-filter step decided about one candidate script: kept or
    not, why, and the scores it was decided on."""

    kept: bool
    reason: str
    keyword_share: float
    target_score: float | None = None
    best_sibling_score: float | None = None
    best_sibling_key: int | None = None
    similarities: dict[int, float] | None = None  # goal key -> cosine (embedding modes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kept": self.kept,
            "reason": self.reason,
            "keyword_share": round(self.keyword_share, 4),
            "target_score": None if self.target_score is None else round(self.target_score, 6),
            "best_sibling_score": None if self.best_sibling_score is None else round(self.best_sibling_score, 6),
            "best_sibling_goal": self.best_sibling_key,
            "similarities": {str(k): round(v, 6) for k, v in (self.similarities or {}).items()},
        }


def script_text(steps: Sequence[str]) -> str:
    return " ".join(step.strip() for step in steps)


def keyword_share(constraint: str, steps: Sequence[str]) -> float:
    """Share of the constraint's keywords that the script contains (0 when it has none)."""
    keywords = content_words(constraint)
    if not keywords:
        return 0.0
    return len(keywords & content_words(script_text(steps))) / len(keywords)


def filter_candidates(
    goals: Sequence[FilterGoal],
    candidates: Sequence[FilterCandidate],
    *,
    mode: str,
    embed: Embed | None,
    keyword_bonus: float = KEYWORD_BONUS,
) -> dict[int, FilterVerdict]:
    """A verdict for every candidate, by candidate key."""
    if mode not in FILTER_MODES:
        raise InvalidInput(fields={"mode": f"must be one of {', '.join(FILTER_MODES)}"})
    by_key = {goal.key: goal for goal in goals}
    siblings: dict[Any, list[int]] = defaultdict(list)
    for goal in goals:
        siblings[goal.group].append(goal.key)
    usable = [c for c in candidates if c.steps]
    verdicts: dict[int, FilterVerdict] = {
        c.key: FilterVerdict(kept=False, reason=NO_SCRIPT, keyword_share=0.0) for c in candidates if not c.steps
    }
    shares = {c.key: keyword_share(by_key[c.goal_key].constraint, c.steps) for c in usable}
    if mode == FILTER_KEYWORD:
        for c in usable:
            whole = shares[c.key] == 1.0
            verdicts[c.key] = FilterVerdict(
                kept=whole, reason=KEPT if whole else NO_KEYWORDS, keyword_share=shares[c.key]
            )
        return verdicts
    if embed is None:
        raise InvalidInput(fields={"mode": f"the {mode} filter needs an embedding model"})
    goal_keys = sorted({k for c in usable for k in siblings[by_key[c.goal_key].group]})
    goal_row = {k: n for n, k in enumerate(goal_keys)}
    goal_vectors = embed([by_key[k].specific_goal for k in goal_keys]) if goal_keys else np.zeros((0, 0))
    script_vectors = embed([script_text(c.steps) for c in usable]) if usable else np.zeros((0, 0))
    bonus = keyword_bonus if mode == FILTER_EMBEDDING_KEYWORD else 0.0
    for row, c in enumerate(usable):
        group = siblings[by_key[c.goal_key].group]
        sims = {k: float(np.dot(script_vectors[row], goal_vectors[goal_row[k]])) for k in group}
        target = sims[c.goal_key] + bonus * shares[c.key]
        others = [(score, k) for k, score in sims.items() if k != c.goal_key]
        best_score, best_key = max(others, key=lambda pair: (pair[0], -pair[1])) if others else (None, None)
        kept = best_score is None or target > best_score
        verdicts[c.key] = FilterVerdict(
            kept=kept,
            reason=KEPT if kept else OUTRANKED,
            keyword_share=shares[c.key],
            target_score=target,
            best_sibling_score=best_score,
            best_sibling_key=best_key,
            similarities=sims,
        )
    return verdicts


def select_scripts(
    candidates: Sequence[FilterCandidate], verdicts: dict[int, FilterVerdict], *, seed: int
) -> dict[int, int]:
    """The chosen candidate of each goal with at least one kept candidate: goal key -> candidate key."""
    kept: dict[int, list[int]] = defaultdict(list)
    for c in candidates:
        if verdicts[c.key].kept:
            kept[c.goal_key].append(c.key)
    return {goal_key: random.Random(f"{seed}:{goal_key}").choice(sorted(keys)) for goal_key, keys in kept.items()}


def filter_report(
    goals: Sequence[FilterGoal],
    candidates: Sequence[FilterCandidate],
    verdicts: dict[int, FilterVerdict],
    selected: dict[int, int],
    *,
    mode: str,
) -> dict[str, Any]:
    """Kept rates per constraint type and overall: candidates kept / candidates, and specific
    goals with a chosen script / specific goals; reasons counted."""
    by_key = {goal.key: goal for goal in goals}
    group_sizes: dict[Any, int] = defaultdict(int)
    for goal in goals:
        group_sizes[goal.group] += 1
    rows: dict[str, dict[str, Any]] = {
        t: {"goals": 0, "goals_with_script": 0, "candidates": 0, "kept": 0, "reasons": dict.fromkeys(REASONS, 0)}
        for t in CONSTRAINT_TYPES
    }
    without_siblings = 0
    for goal in goals:
        row = rows.setdefault(
            goal.constraint_type,
            {"goals": 0, "goals_with_script": 0, "candidates": 0, "kept": 0, "reasons": dict.fromkeys(REASONS, 0)},
        )
        row["goals"] += 1
        row["goals_with_script"] += goal.key in selected
    for c in candidates:
        goal = by_key[c.goal_key]
        row = rows[goal.constraint_type]
        verdict = verdicts[c.key]
        row["candidates"] += 1
        row["kept"] += verdict.kept
        row["reasons"][verdict.reason] += 1
        if verdict.kept and mode != FILTER_KEYWORD and group_sizes[goal.group] == 1:
            without_siblings += 1
    total: dict[str, Any] = {
        "goals": 0,
        "goals_with_script": 0,
        "candidates": 0,
        "kept": 0,
        "reasons": dict.fromkeys(REASONS, 0),
    }
    for row in rows.values():
        for name in ("goals", "goals_with_script", "candidates", "kept"):
            total[name] += row[name]
        for reason, n in row["reasons"].items():
            total["reasons"][reason] += n
    for row in [*rows.values(), total]:
        row["kept_rate"] = row["kept"] / row["candidates"] if row["candidates"] else None
        row["goal_rate"] = row["goals_with_script"] / row["goals"] if row["goals"] else None
    return {"mode": mode, "by_type": rows, "total": total, "kept_without_siblings": without_siblings}
