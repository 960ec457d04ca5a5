"""The known answers of study items move from three per-kind columns into one JSON field
(annotate migrations 0009-0011): every value arrives, and migrating back restores each to its
own column."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.sqlite  # migrations, forwards and back, on the embedded default too

BEFORE = [("annotate", "0008_kind_choices_from_the_registry")]
AFTER = [("annotate", "0011_remove_studyitem_expected_columns")]


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


@pytest.fixture
def migrator(transactional_db):
    yield _migrate
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # the latest schema again


def _items(apps, kinds: dict[str, list[dict]]) -> None:
    Study = apps.get_model("annotate", "Study")
    GuidelineVersion = apps.get_model("annotate", "GuidelineVersion")
    StudyItem = apps.get_model("annotate", "StudyItem")
    for kind, rows in kinds.items():
        guidelines = GuidelineVersion.objects.create(
            kind=kind, instructions="i", codebook_version="1", content_hash=kind, label=kind
        )
        study = Study.objects.create(name=kind, slug=kind.replace("_", "-"), kind=kind, guideline_version=guidelines)
        for n, row in enumerate(rows, start=1):
            StudyItem.objects.create(study=study, item_id=f"{kind}-{n}", position=n, goal="g", **row)


def test_every_known_answer_moves_into_the_json_field_and_back(migrator):
    apps = migrator(BEFORE)
    _items(
        apps,
        {
            "critical_failure": [
                {"role": "attention", "expected_has_failure": True},
                {"role": "qualification", "expected_has_failure": False},
                {"role": "main"},
            ],
            "multiple_choice": [
                {"role": "main", "expected_choice": 0},
                {"role": "main", "expected_choice": 3},
                {"role": "attention", "expected_choice": 1},
            ],
            "constraint_faithfulness": [
                {"role": "attention", "expected_answer": {"meets_constraint": "no"}},
                {"role": "qualification", "expected_answer": {"steps_correct": "yes", "specific_goal_ok": "yes"}},
                {"role": "main"},
            ],
        },
    )

    apps = migrator(AFTER)
    StudyItem = apps.get_model("annotate", "StudyItem")
    moved = dict(StudyItem.objects.values_list("item_id", "expected"))
    assert moved == {
        "critical_failure-1": True,
        "critical_failure-2": False,
        "critical_failure-3": None,
        "multiple_choice-1": 0,
        "multiple_choice-2": 3,
        "multiple_choice-3": 1,
        "constraint_faithfulness-1": {"meets_constraint": "no"},
        "constraint_faithfulness-2": {"steps_correct": "yes", "specific_goal_ok": "yes"},
        "constraint_faithfulness-3": None,
    }
    assert {f.name for f in StudyItem._meta.get_fields()} & {
        "expected_has_failure",
        "expected_choice",
        "expected_answer",
    } == set()

    apps = migrator(BEFORE)
    StudyItem = apps.get_model("annotate", "StudyItem")
    back = {
        i: (h, c, a)
        for i, h, c, a in StudyItem.objects.values_list(
            "item_id", "expected_has_failure", "expected_choice", "expected_answer"
        )
    }
    assert back == {
        "critical_failure-1": (True, None, None),
        "critical_failure-2": (False, None, None),
        "critical_failure-3": (None, None, None),
        "multiple_choice-1": (None, 0, None),
        "multiple_choice-2": (None, 3, None),
        "multiple_choice-3": (None, 1, None),
        "constraint_faithfulness-1": (None, None, {"meets_constraint": "no"}),
        "constraint_faithfulness-2": (None, None, {"steps_correct": "yes", "specific_goal_ok": "yes"}),
        "constraint_faithfulness-3": (None, None, None),
    }
