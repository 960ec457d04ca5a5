"""Build judged generations directly in the database for the leaderboard and score tests:
procedures of a split, one generation per (model, procedure) and one judgment per generation."""

from __future__ import annotations

from collections.abc import Sequence

from judging.models import Generation, Judgment
from mining.models import Procedure, Topic

STEPS = ["Gather what you need.", "Do the main part.", "Check the result.", "Clean up.", "Put things away."]


def procedures(n: int, *, prefix: str = "goal", split: str = "bench") -> list[Procedure]:
    topic, _ = Topic.objects.get_or_create(name="Home & Garden", defaults={"slug": "home-garden"})
    return [
        Procedure.objects.create(
            topic=topic, goal=f"{prefix} {i}: do task {i}", steps=STEPS, split=split, source_example_id=f"{prefix}-{i}"
        )
        for i in range(n)
    ]


def judge_model(
    model: str, items: list[Procedure], verdicts: Sequence[bool | None], *, judge: str = "how2judge"
) -> None:
    """One generation of ``model`` per item, judged with ``verdicts`` (True: has_failure,
    False: no_failure, None: the judge's answer could not be used, outcome parse_failed)."""
    assert len(items) == len(verdicts)
    for procedure, verdict in zip(items, verdicts):
        generation, _ = Generation.objects.get_or_create(
            procedure=procedure, model=model, run=None, defaults={"predicted_steps": STEPS}
        )
        Judgment.objects.create(
            generation=generation,
            judge=judge,
            has_failure=verdict,
            outcome="ok" if verdict is not None else "parse_failed",
            critical_failures=[{"failure": "Wrong.", "L1_steps": [1], "L2_steps": [1]}] if verdict else [],
        )
