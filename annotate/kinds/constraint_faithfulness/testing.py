"""Studies of the constraint-faithfulness kind for the tests (no test framework imports; the
shared helpers are annotate/testing.py's)."""

from __future__ import annotations

from annotate.kinds import kind_get
from annotate.kinds.constraint_faithfulness.definition import KEY
from annotate.models import Study
from annotate.studies.services import study_create
from annotate.testing import plain_settings


def vanilla_cake_faithfulness_study(*, n_items: int, name: str = "Faithful") -> Study:
    """A constraint-faithfulness study of ``n_items`` copies (cs-1, cs-2, ...) of one "vanilla
    cake" script, two annotators per item, without training, qualification or attention checks."""
    kind = kind_get(KEY)
    lines = [
        {
            "id": f"cs-{n}",
            "abstract_goal": "Make a cake",
            "specific_goal": "Make a vanilla cake",
            "constraint": "Vanilla",
            "constraint_type": "modifier",
            "topic": "Food",
            "steps": ["Gather the ingredients.", "Add vanilla.", "Bake for an hour."],
        }
        for n in range(1, n_items + 1)
    ]
    settings = plain_settings(annotators_per_item=2, attention_check_rate=0)
    return study_create(name=name, kind=KEY, items=[kind.parse_record(line) for line in lines], settings=settings)
