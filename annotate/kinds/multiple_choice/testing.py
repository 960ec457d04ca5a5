"""Studies of the multiple-choice kind for the tests (no test framework imports; the shared
helpers, such as ``annotator_start``, are annotate/testing.py's)."""

from __future__ import annotations

from annotate.kinds.base import ItemSpec
from annotate.kinds.multiple_choice.definition import KEY
from annotate.models import Study
from annotate.studies.services import study_create
from annotate.testing import plain_settings


def step_inference_study(*, n_items: int, name: str = "Choice", annotators_per_item: int = 2) -> Study:
    """A multiple-choice study of ``n_items`` step-inference questions (q1, q2, ...), each with
    four candidate steps and the first one right, without training or qualification."""
    items = [
        ItemSpec(
            item_id=f"q{n}",
            topic="Food & Dining",
            goal=f"Which step comes first for task {n}?",
            reference_steps=[],
            candidate_steps=["Boil water.", "Pour tea.", "Drink it.", "Wash up."],
            expected=0,
            source={"task": "step_inference"},
        )
        for n in range(1, n_items + 1)
    ]
    settings = plain_settings(annotators_per_item=annotators_per_item)
    return study_create(name=name, kind=KEY, items=items, settings=settings)
