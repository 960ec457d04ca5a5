"""The demo study: a live critical-failure study over the demo generations and their
How2Judge labels (How2Everything Tables 1 and 17-19), with training, a qualification test
and an attention check, so a newcomer can open the entry URL with any PID and annotate.

Qualification gold items: the coconut-oil example of the paper's interface screenshots
(App. C.1, Figures 7-11) and three demo generations whose labels the paper prints (those three
are kept out of the main pool so nobody sees an item twice). The attention check is built from
a demo procedure: L2 is its own reference steps in reverse order, an unmistakable failure."""

from __future__ import annotations

from django.db import transaction
from django.urls import reverse

from annotate.kinds.base import ROLE_ATTENTION, ROLE_QUALIFICATION, ItemSpec
from annotate.links import default_base_url
from annotate.models import Study
from annotate.studies.item_sources import item_from_judgment
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from judging.models import Judgment
from mining.models import Procedure

DEMO_SLUG = "demo-critical-failures"
DEMO_JUDGE = "How2Judge"
PAPER = "How2Everything (Chang et al., 2026)"

# (source_example_id, model, explanation) of the demo generations used as gold items.
GOLD_GENERATIONS = [
    (
        "paper-t7-crime-law",
        "gemini-2.5-pro",
        "L2 goes ahead with the sale without the 30-day period in which co-owners may say they want to buy "
        "(L1 step 4), so the legal procedure fails (How2Everything Table 1).",
    ),
    (
        "paper-t18-whole-plasmid-pcr",
        "gpt-5",
        "L2 gives no actionable reaction setup or thermocycling program, so nobody could run the PCR from it "
        "(How2Everything Table 18).",
    ),
    (
        "paper-t19-journaling-bible-stamps",
        "claude-opus-4.5",
        "L2 covers the same actions as L1 in its own words; nothing in it stops the goal from being reached "
        "(How2Everything Table 19, labelled no_failure).",
    ),
]

COCONUT = ItemSpec(
    item_id="gold-coconut-oil-pulling",
    topic="Health",
    goal="To perform coconut oil pulling for improved oral health and whiter teeth using coconut oil.",
    reference_steps=[
        "Place a spoonful of coconut oil in your mouth.",
        "Swish the oil around your mouth for 10-20 minutes without swallowing it.",
        "Spit the oil into the trash to avoid clogging drains.",
        "Rinse your mouth thoroughly with water after spitting out the oil.",
    ],
    candidate_steps=[
        "Use a spoon to measure 1 tablespoon of coconut oil.",
        "Swish the coconut oil in your mouth for 10-20 minutes.",
        "Spit the coconut oil out in the trash.",
        "Rinse your mouth with water.",
    ],
    role=ROLE_QUALIFICATION,
    expected=False,
    explanation="L2 follows L1 step for step with small wording differences; the paper's Figure 9 shows this "
    'instance answered "No critical failures identified".',
    source={"demo_source": f"{PAPER}, App. C.1, Figures 7-11"},
)


def _attention_item() -> ItemSpec | None:
    procedure = Procedure.objects.filter(source_example_id="paper-t7-food-dining").first()
    if procedure is None:
        return None
    return ItemSpec(
        item_id="attention-reversed-steps",
        topic=procedure.topic.name,
        goal=procedure.goal,
        reference_steps=list(procedure.steps),
        candidate_steps=list(reversed(procedure.steps)),
        role=ROLE_ATTENTION,
        expected=True,
        explanation="L2 is L1 in reverse order: it serves the stew before cooking anything.",
        source={"demo_source": f"{PAPER}, Table 7 (Food & Dining), steps reversed", "procedure_id": procedure.pk},
    )


def entry_path() -> str:
    return (
        reverse("annotate:entry", args=[DEMO_SLUG])
        + "?PROLIFIC_PID=demo-annotator-1&STUDY_ID=demo&SESSION_ID=demo-session"
    )


def entry_url() -> str:
    return default_base_url() + entry_path()


@transaction.atomic
def load() -> str:
    return _live_study_load() + "; " + _agreement_study_load()


# A second, closed demo study whose annotations come from simulated annotators, so the
# agreement dashboards show something on the first run. Every page of it says so.
DEMO_AGREEMENT_SLUG = "demo-agreement-simulated"
SIMULATED_ANNOTATORS = ("demo-simulated-a", "demo-simulated-b", "demo-simulated-c", "demo-simulated-d")


def _agreement_study_load() -> str:
    from annotate.participation.reservations import assignment_next
    from annotate.participation.submissions import annotation_submit
    from annotate.studies.services import study_update
    from annotate.testing import annotator_start, read_everything

    if Study.objects.filter(slug=DEMO_AGREEMENT_SLUG).exists():
        return f"demo agreement study {DEMO_AGREEMENT_SLUG!r} already present"
    judgments = list(
        Judgment.objects.filter(judge=DEMO_JUDGE, has_failure__isnull=False)
        .select_related("generation__procedure__topic")
        .order_by("pk")
    )
    if not judgments:
        return "no demo judgments; no demo agreement study created"
    study = study_create(
        name="Demo data (simulated annotators): agreement with How2Judge",
        slug=DEMO_AGREEMENT_SLUG,
        items=[item_from_judgment(j) for j in judgments],
        settings=StudySettings(
            annotators_per_item=3,
            min_seconds=0,
            training_enabled=False,
            qualification_enabled=False,
            attention_check_rate=0.0,
            max_items_per_annotator=8,
            completion_code="DEMO-SIM",
            screened_out_code="DEMO-SIM-OUT",
            allow_other_pids=True,
        ),
    )
    by_judgment = {j.pk: j for j in judgments}
    for k, pid in enumerate(SIMULATED_ANNOTATORS):
        participation = annotator_start(study, pid)
        while (assignment := assignment_next(participation=participation)) is not None:
            judgment = by_judgment[assignment.item.source["judgment_id"]]
            # Simulated: agree with the judge, except on a fixed quarter of the items per annotator.
            label = judgment.has_failure if (assignment.item.position + k) % 4 else not judgment.has_failure
            failures = (
                [
                    {"description": f["failure"], "L1_steps": f["L1_steps"], "L2_steps": f["L2_steps"] or [1]}
                    for f in judgment.critical_failures
                ]
                if label
                else []
            )
            if label and not failures:
                failures = [
                    {"description": "Simulated annotator: a step looks unusable.", "L1_steps": [], "L2_steps": [1]}
                ]
            read_everything(participation, assignment)
            annotation_submit(
                participation=participation,
                public_id=assignment.public_id,
                answer={"has_failure": label, "failures": failures, "comments": "simulated demo annotator"},
                submission_id=f"demo-{pid}-{assignment.pk}",
            )
    study_update(study=study, is_open=False)
    return f"demo agreement study {study.slug!r} with {study.annotations.count()} simulated annotations"


def _live_study_load() -> str:
    if Study.objects.filter(slug=DEMO_SLUG).exists():
        return f"demo study already present; annotate at {entry_url()} (any PID works)"
    judgments = list(
        Judgment.objects.filter(judge=DEMO_JUDGE).select_related("generation__procedure__topic").order_by("pk")
    )
    if not judgments:
        return "no demo judgments (load the judging demo first); no demo study created"
    gold_keys = {(source, model): explanation for source, model, explanation in GOLD_GENERATIONS}
    main, gold = [], [COCONUT]
    for judgment in judgments:
        spec = item_from_judgment(judgment)
        key = (judgment.generation.procedure.source_example_id, judgment.generation.model)
        if key in gold_keys:
            spec.role = ROLE_QUALIFICATION
            spec.item_id = f"gold-{spec.item_id}"
            spec.expected = judgment.has_failure
            spec.explanation = gold_keys[key]
            gold.append(spec)
        else:
            main.append(spec)
    items = main + gold
    attention = _attention_item()
    if attention is not None:
        items.append(attention)
    study = study_create(
        name="Demo: critical failures in model-written procedures",
        slug=DEMO_SLUG,
        items=items,
        # Any PID works in the demo (demo-annotator-1, ...), not only Prolific's 24 hex characters.
        settings=StudySettings(
            attention_check_rate=0.2,
            attention_max_failures=1,
            qualification_pass=3,
            completion_code="DEMO-DONE",
            screened_out_code="DEMO-SCREENED",
            allow_other_pids=True,
        ),
    )
    return (
        f"demo study {study.slug!r}: {len(main)} items, {len(gold)} qualification items, "
        f"{int(attention is not None)} attention check; annotate at {entry_url()} (any PID works)"
    )
