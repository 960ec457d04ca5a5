"""The toy kind's results: the mean rating of each main item over its counted answers."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotate.kinds.base import ROLE_MAIN
from annotate.models import Annotation, Study


def clarity_results(study: Study) -> dict[str, Any]:
    ratings: dict[str, list[int]] = defaultdict(list)
    rows = (
        Annotation.objects.filter(study=study, source=ROLE_MAIN, excluded=False, surplus=False, is_test=False)
        .order_by("submitted_at", "pk")
        .values_list("item__item_id", "answer")
    )
    for item_id, answer in rows:
        ratings[item_id].append(answer["rating"])
    return {
        "n_answers": sum(len(r) for r in ratings.values()),
        "mean_rating": {item_id: sum(r) / len(r) for item_id, r in sorted(ratings.items())},
    }
