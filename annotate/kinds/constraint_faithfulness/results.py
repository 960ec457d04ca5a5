"""Results of constraint-faithfulness studies as CoScript reports them (Yuan et al. 2023, §4.4,
Table 3, Figure 3). No Django.

Per question (App. D: specific goal ok, meets the constraint, steps correct):

* **Fleiss' kappa** over the three answers (Yes, No, Not sure as three categories), the
  paper's statistic, on the items with exactly k counted answers (Fleiss' kappa needs the
  same number of raters per item; their number is its n, ``kappa_items``), with a bootstrap
  interval over those items;
* **Krippendorff's alpha** (nominal, the same three values) over every counted answer, items
  with fewer than k answers included, with its n (``alpha_n``, items with two or more
  answers) and a bootstrap interval over those items (``nominal_alpha_estimate``);
* the answers given (Yes / No / Not sure).

Each interval is null when every resample gives the same value (``*_ci95_not_estimable``
says so) and each statistic carries its small-sample note (``*_small_sample``).

**Accuracy** per constraint type and overall, on the items with exactly k answers: the share
of items whose strict majority (more than half of the k answers) says Yes to the question,
with its n and 95 % Wilson interval (``ci95``).
"Script correct", our reading of Table 3's accuracy of generated scripts, is an item whose
majority says Yes to both "meets the constraint" and "steps correct".

**Error types** (Table 10): for each type, the answers naming it on at least one step and the
steps marked with it, over every counted answer.

Counted answers: main-pool answers not excluded (failed attention checks) and not surplus;
the caller selects them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from annotate.constants import PAPER_FLEISS_KAPPA_GOALS, PAPER_FLEISS_KAPPA_SCRIPTS
from annotate.kinds.constraint_faithfulness.questions import (
    ANSWERS,
    CONSTRAINT_TYPES,
    ERROR_TYPES,
    NO,
    NOT_SURE,
    OTHER,
    QUESTION_TEXT,
    QUESTIONS,
    YES,
)
from annotate.stats.alpha import nominal_alpha_estimate
from annotate.stats.bootstrap import item_bootstrap_fields, sample_size_note
from annotate.stats.kappa import count_table, fleiss_kappa, fleiss_kappa_estimate
from core.intervals import share_estimate

DEFAULT_BOOTSTRAP = 1000
SCRIPT_CORRECT = "script_correct"  # majority Yes to meets_constraint and to steps_correct
ALL = "all"
ACCURACY_LABELS = {
    "specific_goal_ok": "1. Specific goal inherits the goal and has the constraint",
    "meets_constraint": "2. Script meets the constraint",
    "steps_correct": "3. Steps correct",
    SCRIPT_CORRECT: "Script correct (2 and 3)",
}


@dataclass(frozen=True)
class FaithfulnessItem:
    item_id: str
    constraint_type: str
    topic: str
    answers: tuple[dict[str, Any], ...]  # cleaned answers, one per counted annotator, in submission order


def majority_yes(values: Sequence[str | None]) -> bool:
    """A strict majority of the answers says Yes (2 of 3; "Not sure" counts against)."""
    return bool(values) and sum(v == YES for v in values) * 2 > len(values)


def question_alpha(
    items: Sequence[FaithfulnessItem], question: str, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0
) -> dict[str, Any]:
    """Nominal alpha over every counted answer to ``question`` with its n, interval and notes
    (``nominal_alpha_estimate``): what the results show per question and a pilot round's row
    shows for question 3, with the same resamples."""
    width = max((len(item.answers) for item in items), default=0)
    matrix = [[a.get(question) for a in item.answers] + [None] * (width - len(item.answers)) for item in items]
    index = QUESTIONS.index(question)
    return nominal_alpha_estimate(matrix, bootstrap=bootstrap, seed=np.random.SeedSequence([seed, 10 + index]))


def _question_stats(
    items: Sequence[FaithfulnessItem], complete: Sequence[FaithfulnessItem], question: str, bootstrap: int, seed: int
) -> dict[str, Any]:
    ratings = [[a.get(question) for a in item.answers] for item in complete]
    table = count_table(ratings, ANSWERS) if complete else np.zeros((0, len(ANSWERS)))
    labels = [a.get(question) for item in items for a in item.answers]
    index = QUESTIONS.index(question)
    kappa = fleiss_kappa(table) if complete and table.sum(axis=1)[0] >= 2 else None
    kappa_ci95, kappa_not_estimable = (
        fleiss_kappa_estimate(table, bootstrap=bootstrap, seed=np.random.SeedSequence([seed, index]))
        if kappa is not None
        else (None, None)
    )
    return {
        "text": QUESTION_TEXT[question],
        "fleiss_kappa": kappa,
        "fleiss_kappa_ci95": kappa_ci95,
        "fleiss_kappa_ci95_not_estimable": kappa_not_estimable,
        "fleiss_kappa_small_sample": sample_size_note(len(complete), kappa_ci95) if kappa is not None else None,
        "kappa_items": len(complete),
        "fleiss_kappa_interval": item_bootstrap_fields(len(complete)),
        **question_alpha(items, question, bootstrap=bootstrap, seed=seed),
        "answers": {value: sum(label == value for label in labels) for value in (YES, NO, NOT_SURE)},
    }


def _accuracy(complete: Sequence[FaithfulnessItem]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    n = len(complete)
    for question in (*QUESTIONS, SCRIPT_CORRECT):
        if question == SCRIPT_CORRECT:
            correct = sum(
                majority_yes([a.get("meets_constraint") for a in item.answers])
                and majority_yes([a.get("steps_correct") for a in item.answers])
                for item in complete
            )
        else:
            correct = sum(majority_yes([a.get(question) for a in item.answers]) for item in complete)
        rows[question] = {
            "correct": correct,
            "items": n,
            "accuracy": correct / n if n else None,
            "ci95": share_estimate(correct, n)["ci95"],
        }
    return rows


def error_type_counts(items: Iterable[FaithfulnessItem]) -> dict[str, dict[str, Any]]:
    """Per error type of Table 10 (and "other"): answers naming it, steps marked with it."""
    counts: dict[str, dict[str, Any]] = {
        key: {"label": e["label"], "aspect": e["aspect"], "explanation": e["explanation"], "answers": 0, "steps": 0}
        for key, e in ERROR_TYPES.items()
    }
    counts[OTHER] = {
        "label": "Other",
        "aspect": "",
        "explanation": "Described by the annotator.",
        "answers": 0,
        "steps": 0,
    }
    for item in items:
        for answer in item.answers:
            named: set[str] = set()
            for entry in answer.get("wrong_steps") or []:
                for error_type in entry.get("error_types") or []:
                    if error_type in counts:
                        counts[error_type]["steps"] += 1
                        named.add(error_type)
            for error_type in named:
                counts[error_type]["answers"] += 1
    return counts


def study_results(
    items: Sequence[FaithfulnessItem], k: int, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0
) -> dict[str, Any]:
    """Everything the study page shows (see the module docstring); undefined values are None."""
    complete = [item for item in items if len(item.answers) == k]
    by_type: dict[str, list[FaithfulnessItem]] = {t: [] for t in CONSTRAINT_TYPES}
    for item in complete:
        by_type.setdefault(item.constraint_type, []).append(item)
    answers = sum(len(item.answers) for item in items)
    accuracy = {**{t: _accuracy(rows) for t, rows in by_type.items()}, ALL: _accuracy(complete)}
    return {
        "k": k,
        "items": len(items),
        "complete_items": len(complete),
        "answers": answers,
        "answers_with_wrong_steps": sum(bool(a.get("wrong_steps")) for item in items for a in item.answers),
        "questions": {q: _question_stats(items, complete, q, bootstrap, seed) for q in QUESTIONS},
        "accuracy": accuracy,
        # The same figures as rows (one per question, then script correct) of cells (one per
        # constraint type, then all), for tables.
        "accuracy_columns": list(accuracy),
        "accuracy_table": [
            {"question": q, "label": ACCURACY_LABELS[q], "cells": [accuracy[t][q] for t in accuracy]}
            for q in (*QUESTIONS, SCRIPT_CORRECT)
        ],
        "error_types": error_type_counts(items),
        "paper_fleiss_kappa": {"specific_goals": PAPER_FLEISS_KAPPA_GOALS, "scripts": PAPER_FLEISS_KAPPA_SCRIPTS},
    }
