"""The rating kind's results, read from its counted main-pool answers (the shared
``annotations_counted`` rule): the mean rating of each item and ordinal Krippendorff's alpha
over the ratings (annotate/stats/levels.py), and a pilot round's alpha read from the round's
rows (the shared fields and the kind's own ``rating`` column)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotate.kinds.base import ROLE_MAIN
from annotate.models import Annotation, Study
from annotate.stats.levels import level_alpha
from annotate.studies.selectors import study_annotations_counted


def _alpha(by_item: dict[str, dict[str, int]]) -> dict[str, Any]:
    annotators = sorted({annotator for ratings in by_item.values() for annotator in ratings})
    matrix: list[list[Any]] = [[ratings.get(a) for a in annotators] for _, ratings in sorted(by_item.items())]
    return level_alpha(matrix, "ordinal")


def rating_results(study: Study) -> dict[str, Any]:
    by_item: dict[str, dict[str, int]] = defaultdict(dict)
    rows = (
        study_annotations_counted(study)
        .order_by("submitted_at", "pk")
        .values_list("item__item_id", "annotator__pid", "answer")
    )
    for item_id, pid, answer in rows:
        by_item[item_id][pid] = answer["rating"]
    alpha = _alpha(by_item)
    return {
        "n_answers": sum(len(ratings) for ratings in by_item.values()),
        "mean_rating": {item_id: sum(ratings.values()) / len(ratings) for item_id, ratings in sorted(by_item.items())},
        "alpha": alpha["alpha"],
        "alpha_n": alpha["alpha_n"],
    }


def rating_round_alpha(study: Study, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Ordinal alpha over the round's rows that count (not excluded, not surplus, not flagged
    broken), read from the kind's ``rating`` column."""
    by_item: dict[str, dict[str, int]] = defaultdict(dict)
    for row in rows:
        if row["excluded"] or row["surplus"] or row["flag"] == "broken" or row["rating"] is None:
            continue
        by_item[row["item_id"]][row["annotator"]] = row["rating"]
    return _alpha(by_item)
