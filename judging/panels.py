"""The procedure page's panel of model generations and their How2Score judgments."""

from __future__ import annotations

from typing import Any

from mining.models import Procedure


def generations_panel(procedure: Procedure) -> tuple[str, dict] | None:
    generations = list(procedure.generations.prefetch_related("judgments").order_by("model"))
    if not generations:
        return None
    rows = []
    for generation in generations:
        judgments: list[dict[str, Any]] = []
        for judgment in generation.judgments.all():
            l1 = sorted({n for f in judgment.critical_failures for n in f.get("L1_steps", [])})
            l2 = sorted({n for f in judgment.critical_failures for n in f.get("L2_steps", [])})
            judgments.append({"judgment": judgment, "l1_linked": l1, "l2_linked": l2})
        linked_l2 = {n for j in judgments for n in j["l2_linked"]}
        steps = [(n, text, n in linked_l2) for n, text in enumerate(generation.predicted_steps, start=1)]
        rows.append({"generation": generation, "steps": steps, "judgments": judgments})
    return "judging/generations_panel.html", {"rows": rows}
