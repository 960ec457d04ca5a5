"""A critical-failure study whose ranking of automatic signals is known by construction,
built through the real services (procedure import, generation and judgment import, a study
from judged generations, annotators submitting through the assignment services).

Twelve procedures, three models (model-a, model-b, model-c), 36 generations. The truth
(has_failure) of each generation: model-a fails on procedures 9-11, model-b on 6-11,
model-c on 3-11, so the human success rates are 9/12 > 6/12 > 3/12. Three annotators label
every item; two give the truth, the third flips every fourth item, so the strict majority
is the truth everywhere. Judges:

* ``oracle`` says the truth: AUC 1, agreement 1, Kendall's tau 1 (rank 1);
* ``noisy`` flips (model-a, 0), (model-a, 1), (model-b, 0) to has_failure and (model-c,
  9..11) to no_failure: it flags 15 of the 18 failures and 3 of the 18 successes, so AUC =
  (15/18 + 15/18) / 2 = 5/6, agreement 30/36; its success rates a 7/12 > c 6/12 > b 5/12
  give tau = (2 - 1) / 3 = 1/3;
* ``always`` says has_failure everywhere: a constant, AUC 1/2, no tau.

Every model writes the same steps for a procedure, so every reference-based signal is
constant within a procedure while the truth is not (procedures 3-8 are mixed): none of them
can reach AUC 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.module_data import module_transaction

MODELS = ("model-a", "model-b", "model-c")
N_PROCEDURES = 12
FIRST_FAILURE = {"model-a": 9, "model-b": 6, "model-c": 3}
NOISY_FLIPS = {("model-a", 0), ("model-a", 1), ("model-b", 0), ("model-c", 9), ("model-c", 10), ("model-c", 11)}
FOODS = (
    "rice",
    "lentils",
    "oats",
    "barley",
    "quinoa",
    "polenta",
    "couscous",
    "millet",
    "farro",
    "bulgur",
    "buckwheat",
    "sorghum",
)


def truth(model: str, procedure: int) -> bool:
    return procedure >= FIRST_FAILURE[model]


def reference_steps(p: int) -> list[str]:
    food = FOODS[p]
    return [
        f"Rinse the {food} under cold water.",
        f"Measure {p + 2} cups of water into a pot.",
        "Bring the water to a boil over high heat.",
        f"Stir in the {food} and a pinch of salt.",
        f"Simmer covered for {10 + p} minutes.",
        f"Fluff the {food} with a fork before serving.",
    ]


def generated_steps(p: int) -> list[str]:
    food = FOODS[p]
    steps = [
        f"Rinse the {food}.",
        "Boil water in a pot.",
        f"Add the {food} and salt.",
        f"Cook for {10 + 2 * p} minutes.",
        f"Serve the {food} warm.",
    ]
    return steps[: 3 + p % 3] + ["Serve it."] * (p % 2)  # varying length, a duplicate-ish tail


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def crafted_study(tmp_path: Path, *, slug_name: str = "Metric agreement crafted"):
    from annotate.participation.reservations import assignment_next
    from annotate.participation.submissions import annotation_submit
    from annotate.studies.item_sources import items_from_judgments
    from annotate.studies.services import study_create
    from annotate.studies.settings import StudySettings
    from annotate.testing import NO_FAILURE, ONE_FAILURE, annotator_start, read_everything
    from judging.judgment_import import judgments_import
    from judging.transfer import generations_import
    from mining.procedure_services import procedure_import, topics_ensure

    topics_ensure()
    procedure_import(
        path=_write(
            tmp_path / "procedures.jsonl",
            [
                {
                    "source_example_id": f"craft-{p}",
                    "topic": "Food & Dining",
                    "goal": f"Cook {FOODS[p]} on the stove.",
                    "resources": [FOODS[p], "water", "salt"],
                    "steps": reference_steps(p),
                }
                for p in range(N_PROCEDURES)
            ],
        )
    )
    for model in MODELS:
        generations_import(
            path=_write(
                tmp_path / f"{model}.jsonl",
                [
                    {"source_example_id": f"craft-{p}", "model": model, "predicted_steps": generated_steps(p)}
                    for p in range(N_PROCEDURES)
                ],
            ),
            run_name=f"craft-{model}",
        )
    judgments = []
    for model in MODELS:
        for p in range(N_PROCEDURES):
            t = truth(model, p)
            for judge, label in (
                ("oracle", t),
                ("noisy", (not t) if (model, p) in NOISY_FLIPS else t),
                ("always", True),
            ):
                judgments.append(
                    {"source_example_id": f"craft-{p}", "model": model, "judge": judge, "has_failure": label}
                )
    judgments_import(path=_write(tmp_path / "judgments.jsonl", judgments))
    items = items_from_judgments(judge="oracle", n=len(MODELS) * N_PROCEDURES, seed=0)
    study = study_create(
        name=slug_name,
        items=items,
        settings=StudySettings(
            training_enabled=False,
            qualification_enabled=False,
            min_seconds=0,
            annotators_per_item=3,
            allow_other_pids=True,
        ),
    )  # the PIDs below are not Prolific's 24 hex characters
    for pid in ("human-1", "human-2", "human-3"):
        participation = annotator_start(study, pid)
        n = 0
        while (assignment := assignment_next(participation=participation)) is not None:
            source = assignment.item.source
            label = truth(source["model"], int(source["source_example_id"].split("-")[1]))
            if pid == "human-3" and n % 4 == 0:
                label = not label
            read_everything(participation, assignment)
            annotation_submit(
                participation=participation,
                public_id=assignment.public_id,
                answer=ONE_FAILURE if label else NO_FAILURE,
                submission_id="t",
            )
            n += 1
    return study


@pytest.fixture(scope="module")
def crafted_once(django_db_setup, django_db_blocker, tmp_path_factory):
    """The crafted study's primary key: built once for a module's tests (tests/module_data.py),
    where building it for each test took 3 s of its set-up."""
    with module_transaction(django_db_blocker):
        yield crafted_study(tmp_path_factory.mktemp("crafted")).pk


@pytest.fixture
def crafted(crafted_once, db):
    """The crafted study, read again for each test (a test may change the instance)."""
    from annotate.models import Study

    return Study.objects.get(pk=crafted_once)
