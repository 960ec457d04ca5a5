"""The toy kind's results: the mean rating of each main item over its counted answers
(``study_annotations_counted``, the rule every kind's results share)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotate.models import Study
from annotate.studies.selectors import study_annotations_counted


def clarity_results(study: Study) -> dict[str, Any]:
    ratings: dict[str, list[int]] = defaultdict(list)
    rows = study_annotations_counted(study).order_by("submitted_at", "pk").values_list("item__item_id", "answer")
    for item_id, answer in rows:
        ratings[item_id].append(answer["rating"])
    return {
        "n_answers": sum(len(r) for r in ratings.values()),
        "mean_rating": {item_id: sum(r) / len(r) for item_id, r in sorted(ratings.items())},
    }
