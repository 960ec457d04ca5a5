"""In Chromium: third-party text (procedures, topics, documents, model outputs, judge answers,
annotators' comments, study names) holding script in every common form is shown as text on
every page a researcher or an annotator opens; no script runs (a dialog handler records any
alert, confirm or prompt)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAYLOADS = [
    "<script>alert('s1')</script>",
    "<img src=x onerror=alert('s2')>",
    "\"><svg onload=alert('s3')>",
    "</textarea><script>alert('s4')</script>",
    "{{ 7*7 }}<iframe src=\"javascript:alert('s5')\"></iframe>",
    "'-alert('s6')-'",
]
HOSTILE = " ".join(PAYLOADS)


def _plant_hostile_text() -> dict[str, str]:
    """Demo data with hostile text in every field a page shows; returns the pages to visit."""
    from annotate.models import Annotation, Study
    from judging.models import Generation, Judgment
    from mining.models import Corpus, Document, Procedure, Topic

    call_command("load_demo", verbosity=0)
    procedure = Procedure.objects.order_by("pk").first()
    assert procedure is not None
    procedure.goal = f"Goal {HOSTILE}"
    procedure.steps = [f"Step {payload}" for payload in PAYLOADS]
    procedure.resources = PAYLOADS[:3]
    procedure.source_example_id = PAYLOADS[2][:100]
    procedure.save()
    topic = procedure.topic
    topic.name = PAYLOADS[1][:100]
    topic.save(update_fields=["name"])
    generation = Generation.objects.filter(procedure=procedure).first() or Generation.objects.first()
    assert generation is not None
    generation.predicted_steps = [f"Model step {payload}" for payload in PAYLOADS]
    generation.model_completion = HOSTILE
    generation.save()
    Judgment.objects.filter(generation=generation).update(
        critical_failures=[{"description": HOSTILE, "L1_steps": [1], "L2_steps": [1]}],
        reasoning=HOSTILE,
    )
    corpus = Corpus.objects.create(name=f"corpus {PAYLOADS[0]}"[:200], description=HOSTILE)
    document = Document.objects.create(
        corpus=corpus,
        doc_id=PAYLOADS[1][:100],
        url="https://example.org/?q=<script>alert(1)</script>",
        text=HOSTILE,
        text_hash="0" * 64,
        topic=Topic.objects.first(),
    )
    study = Study.objects.order_by("pk").first()
    assert study is not None
    study.name = f"Study {PAYLOADS[1]}"[:200]
    study.save(update_fields=["name"])
    Annotation.objects.filter(study=study).update(comments=HOSTILE)
    annotated = Annotation.objects.filter(study=study).select_related("item").first()
    pages = {
        "home": "/",
        "procedures": "/procedures/",
        "procedure": f"/procedures/{procedure.pk}/",
        "leaderboard": "/leaderboard/",
        "cross-judge": "/leaderboard/judges/",
        "corpus": f"/corpora/{corpus.pk}/",
        "document": f"/corpora/{corpus.pk}/documents/{document.pk}/",
        "studies": "/studies/",
        "study": f"/studies/{study.slug}/",
        "agreement": f"/studies/{study.slug}/agreement/",
        "annotators": f"/studies/{study.slug}/annotators/",
        "disagreements": f"/studies/{study.slug}/disagreements/",
        "metrics": f"/studies/{study.slug}/metrics/",
        "llm": "/llm/",
        "runs": "/runs/",
    }
    if annotated is not None:
        pages["item"] = f"/studies/{study.slug}/items/{annotated.item.item_id}/"
    return pages


def test_hostile_text_from_every_source_never_runs_as_script(live_server, page):
    from core.roles import ROLE_ADMIN
    from core.services import user_create

    pages = _plant_hostile_text()
    user_create(username="ada", role=ROLE_ADMIN, password="ada-Password-1")
    dialogs: list[str] = []

    def record(dialog) -> None:
        dialogs.append(f"{page.url}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", record)
    log_in(page, live_server.url, "ada", "ada-Password-1")
    shown: dict[str, bool] = {}
    for name, path in pages.items():
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None and response.status < 500, f"{name} answered {response and response.status}"
        page.wait_for_load_state("load")
        page.wait_for_timeout(150)
        shown[name] = "alert('s" in page.locator("body").inner_text()
    assert dialogs == [], f"script ran: {dialogs}"
    # The payloads are on the pages, as text: the test looked where they are.
    for name in ("procedure", "document", "study"):
        assert shown[name], f"the hostile text should be shown as text on the {name} page"


def test_hostile_text_on_the_annotation_page_never_runs_as_script(live_server, page):
    from annotate.models import StudyItem

    call_command("load_demo", verbosity=0)
    StudyItem.objects.filter(study__slug="demo-critical-failures").update(
        goal=f"Goal {HOSTILE}",
        candidate_steps=[f"Step {p}" for p in PAYLOADS],
        reference_steps=[f"Reference {p}" for p in PAYLOADS],
    )
    dialogs: list[str] = []

    def record(dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    pid = "5f" + "1" * 21 + "b"
    page.goto(f"{live_server.url}/a/demo-critical-failures/?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID=t")
    # Straight to the items: consent and training are tested elsewhere.
    from annotate.models import Participation, ParticipationState

    Participation.objects.filter(annotator__pid=pid).update(state=ParticipationState.ANNOTATING)
    page.goto(f"{live_server.url}/a/demo-critical-failures/work/")
    page.wait_for_load_state("load")
    assert "/work/" in page.url
    body = page.locator("body").inner_text()
    assert "alert('s" in body, "the hostile goal and steps should be on the item page, as text"
    page.wait_for_timeout(200)
    assert dialogs == [], f"script ran: {dialogs}"
