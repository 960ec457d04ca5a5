"""Preview mode, test participants and what an annotator is told (docs/annotation.md).

A researcher's preview walks every page of every kind and stores nothing (every annotate
model counted before and after), with a banner, the server's rules still applied to saves
and submits, and only for researchers. A test participant is stored but never counts toward
k (a real annotator still gets the slot) and is left out of progress, the agreement report,
exports (file, CSV, JSONL, command) unless asked. The consent page states the study's
numbers, and "item X of N" is right across a walk."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotate.errors import StudyFull
from annotate.kinds import kind_get
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION
from annotate.models import Annotation, Assignment, Participation
from annotate.participation.reservations import assignment_next
from annotate.participation.services import participation_test_start
from annotate.reports.selectors import study_agreement_report
from annotate.studies.exports import annotation_export_rows
from annotate.studies.selectors import study_progress_get
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import (
    NO_FAILURE,
    ONE_FAILURE,
    annotate_next,
    annotator_start,
    item_spec,
    read_everything,
    study_make,
)

pytestmark = pytest.mark.django_db

BANNER = "Preview — nothing is saved"


def _counts() -> dict[str, int]:
    return {model.__name__: model._default_manager.count() for model in apps.get_app_config("annotate").get_models()}


def _post_json(client: Client, url: str, body: dict):
    return client.post(url, data=json.dumps(body), content_type="application/json")


def _position(html: str) -> str | None:
    found = re.search(r'id="item-position">([^<]*)<', html)
    return found.group(1) if found else None


def _page_state(html: str) -> dict:
    found = re.search(r'<script id="page-state" type="application/json">(.*?)</script>', html, re.S)
    assert found, "no page state"
    return json.loads(found.group(1))


def _critical_failure_study(**settings):
    defaults: dict[str, Any] = dict(
        training_enabled=True,
        qualification_enabled=True,
        min_seconds=0,
        attention_check_rate=0.3,
        annotators_per_item=3,
        allow_other_pids=True,
    )
    defaults.update(settings)
    items = [item_spec(i) for i in range(1, 5)]
    items += [
        item_spec(1, role=ROLE_QUALIFICATION, expected=True),
        item_spec(2, role=ROLE_QUALIFICATION, expected=False),
    ]
    items += [item_spec(1, role=ROLE_ATTENTION, expected=False)]
    return study_create(name="Preview critical failure", items=items, settings=StudySettings(**defaults))


def _choice_study(**settings):
    kind = kind_get("multiple_choice")
    lines = [
        {
            "id": f"si-{n}",
            "task": "step_inference",
            "prompt": f"Prevent a cold {n}",
            "label": 0,
            "topic": "Health",
            "candidates": ["wash your hands", "wash your cat", "clap your hands", "eat your protein"],
            "source_procedure_ids": [1, 2, 3, 4],
        }
        for n in range(1, 4)
    ]
    defaults: dict[str, Any] = dict(
        training_enabled=False,
        qualification_enabled=False,
        min_seconds=0,
        attention_check_rate=0,
        items_per_page=2,
        allow_other_pids=True,
    )
    defaults.update(settings)
    return study_create(
        name="Preview choices",
        kind="multiple_choice",
        items=[kind.parse_record(x) for x in lines],
        settings=StudySettings(**defaults),
    )


def _faithfulness_study(**settings):
    kind = kind_get("constraint_faithfulness")
    line = {
        "id": "cf-1",
        "abstract_goal": "Make a cake",
        "specific_goal": "Make a vanilla cake",
        "constraint": "Vanilla",
        "constraint_type": "modifier",
        "topic": "Food",
        "steps": ["Preheat the oven.", "Mix.", "Bake."],
    }
    defaults: dict[str, Any] = dict(
        training_enabled=False,
        qualification_enabled=False,
        min_seconds=0,
        attention_check_rate=0,
        allow_other_pids=True,
    )
    defaults.update(settings)
    return study_create(
        name="Preview faithfulness",
        kind="constraint_faithfulness",
        items=[kind.parse_record(line)],
        settings=StudySettings(**defaults),
    )


def _read_all_events(html: str) -> list[dict]:
    """The events an annotator's page sends after ticking the goal box and opening every step."""
    steps = sorted(set(re.findall(r'data-step="([^"]+)"', html)))
    return [{"type": "goal_ack"}] + [{"type": "step_open", "target": s} for s in steps]


# --------------------------------------------------------------------------- preview


def test_previewing_a_critical_failure_study_walks_every_page_and_stores_nothing(researcher_client):
    study = _critical_failure_study(min_seconds=0)
    before = _counts()
    slug = study.slug
    consent = researcher_client.get(reverse("annotate:preview", args=[slug]))
    assert consent.status_code == 200 and BANNER in consent.content.decode()
    assert "I have read the guidelines" in consent.content.decode()
    assert researcher_client.post(reverse("annotate:preview", args=[slug]), {}).status_code == 400
    after_consent = researcher_client.post(reverse("annotate:preview", args=[slug]), {"agree": "yes"})
    assert after_consent.url == reverse("annotate:preview_training", args=[slug])
    intro = researcher_client.get(after_consent.url)
    assert BANNER in intro.content.decode() and "What is a critical failure?" in intro.content.decode()
    example = researcher_client.get(reverse("annotate:preview_training_example", args=[slug, 1]))
    assert BANNER in example.content.decode() and "Check my answer" in example.content.decode()
    checked = researcher_client.post(
        reverse("annotate:preview_training_example", args=[slug, 1]), {"answer": "critical"}
    )
    assert checked.status_code == 200 and 'id="feedback"' in checked.content.decode()
    # The qualification items come first (2), then 4 main items and the attention check the plan mixes in.
    first = researcher_client.get(reverse("annotate:preview_item", args=[slug, 1]))
    html = first.content.decode()
    assert first.status_code == 200 and BANNER in html and _position(html) == "question 1 of 2"
    state = _page_state(html)
    # Submitting before reading anything is refused with the annotator's own problems.
    refused = _post_json(researcher_client, state["submitUrl"], {"answer": NO_FAILURE, "submission_id": "x"})
    assert refused.status_code == 400
    assert {e["field"] for e in refused.json()["errors"]} >= {"goal", "steps"}
    # A hostile save is a 400 naming the field, as on the real page.
    bad = _post_json(researcher_client, state["saveUrl"], {"events": [{"type": "step_open", "target": "L9.9"}]})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "events[0].target"
    saved = _post_json(
        researcher_client,
        state["saveUrl"],
        {"events": _read_all_events(html), "seq": 1, "draft": {"has_failure": True}, "active_ms": 1000},
    )
    assert saved.status_code == 200 and saved.json()["steps_opened"] == 6 and saved.json()["goal_acknowledged"]
    accepted = _post_json(researcher_client, state["submitUrl"], {"answer": ONE_FAILURE, "submission_id": "x"})
    assert accepted.status_code == 200 and accepted.json()["correct"] is True
    assert accepted.json()["next"] == reverse("annotate:preview_item", args=[slug, 2])
    # Walk the rest: question 2 of 2, then items 1..N.
    seen = []
    number = 2
    while True:
        page = researcher_client.get(reverse("annotate:preview_item", args=[slug, number]))
        if page.status_code == 302:
            assert page.url == reverse("annotate:preview_done", args=[slug])
            break
        seen.append(_position(page.content.decode()))
        number += 1
    n = len(seen) - 1
    assert seen[0] == "question 2 of 2"
    assert seen[1:] == [f"item {k} of {n}" for k in range(1, n + 1)] and n == 5  # 4 main items and 1 check
    done = researcher_client.get(reverse("annotate:preview_done", args=[slug]))
    assert BANNER in done.content.decode() and study.completion_code in done.content.decode()
    assert 'http-equiv="refresh"' not in done.content.decode()
    assert _counts() == before


def test_a_preview_submit_before_the_minimum_seconds_shows_the_refusal(researcher_client):
    study = _critical_failure_study(min_seconds=90, training_enabled=False, qualification_enabled=False)
    before = _counts()
    html = researcher_client.get(reverse("annotate:preview_item", args=[study.slug, 1])).content.decode()
    state = _page_state(html)
    assert state["minSeconds"] == 90 and "Skip to the next page" in html
    _post_json(researcher_client, state["saveUrl"], {"events": _read_all_events(html)})
    refused = _post_json(researcher_client, state["submitUrl"], {"answer": NO_FAILURE, "submission_id": "x"})
    assert refused.status_code == 400
    assert [e["field"] for e in refused.json()["errors"]] == ["time"]
    assert "90 seconds" in refused.json()["message"]
    assert refused.json()["message"].startswith("Preview: an annotator's submit would be refused here.")
    # The answer's own rules too: a failure without linked steps.
    bad_answer = {
        "has_failure": True,
        "failures": [{"description": "", "L1_steps": [], "L2_steps": []}],
        "comments": "",
    }
    refused = _post_json(researcher_client, state["submitUrl"], {"answer": bad_answer, "submission_id": "x"})
    assert refused.status_code == 400 and len(refused.json()["errors"]) >= 2
    assert _counts() == before


@pytest.mark.parametrize(
    "make, answer",
    [
        (_choice_study, {"choice": 0}),
        (
            _faithfulness_study,
            {
                "specific_goal_ok": "yes",
                "meets_constraint": "yes",
                "steps_correct": "yes",
                "wrong_steps": [],
                "comments": "",
            },
        ),
    ],
)
def test_previewing_the_other_kinds_stores_nothing(researcher_client, make, answer):
    study = make()
    before = _counts()
    slug = study.slug
    consent = researcher_client.post(reverse("annotate:preview", args=[slug]), {"agree": "yes"})
    assert consent.url == reverse("annotate:preview_item", args=[slug, 1])  # no training for these kinds here
    number, pages = 1, 0
    while number:
        page = researcher_client.get(reverse("annotate:preview_item", args=[slug, number]))
        if page.status_code == 302:
            break
        html = page.content.decode()
        assert BANNER in html and _position(html)
        state = _page_state(html)
        entries = state["items"] if "items" in state else [state]
        for entry in entries:
            _post_json(
                researcher_client,
                entry["saveUrl"],
                {"events": _read_all_events(html) if "items" not in state else [], "seq": 1, "draft": answer},
            )
            result = _post_json(researcher_client, entry["submitUrl"], {"answer": answer, "submission_id": "x"})
            assert result.status_code == 200, result.content
            next_url = result.json()["next"]
        pages += 1
        number = int(next_url.rstrip("/").split("/")[-1]) if "/items/" in next_url else 0
    assert pages == (2 if study.kind == "multiple_choice" else 1)  # 3 choice items, 2 per page
    assert _counts() == before


def test_preview_is_for_researchers_only(researcher_client):
    study = _critical_failure_study()
    html = researcher_client.get(reverse("annotate:preview_item", args=[study.slug, 1])).content.decode()
    state = _page_state(html)
    urls = [
        reverse("annotate:preview", args=[study.slug]),
        reverse("annotate:preview_training", args=[study.slug]),
        reverse("annotate:preview_item", args=[study.slug, 1]),
        reverse("annotate:preview_done", args=[study.slug]),
    ]
    annotator = Client()
    annotator.get(reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": "curious"})
    for client in (Client(), annotator):
        for url in urls:
            response = client.get(url)
            assert response.status_code == 302 and "/login/" in response["Location"]
        for url in (state["saveUrl"], state["submitUrl"]):
            response = _post_json(client, url, {"answer": NO_FAILURE})
            assert response.status_code in (302, 401, 403) and b'"ok": true' not in response.content
    nobody = get_user_model().objects.create_user("norole", password="x-Password-1")
    client = Client()
    client.force_login(nobody)
    assert all(client.get(url).status_code == 403 for url in urls)
    assert _post_json(client, state["submitUrl"], {"answer": NO_FAILURE}).status_code == 403
    # The study page offers both ways in.
    page = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert "Preview as annotator" in page and "Start as a test participant" in page


# --------------------------------------------------------------------------- test participants


def test_a_test_participant_never_takes_a_real_annotators_slot():
    study = study_make(n_items=1, annotators_per_item=1)
    tester = participation_test_start(study=study)
    assert tester.is_test and tester.annotator.pid.startswith("test-")
    from annotate.participation.services import participation_consent

    participation_consent(participation=tester)
    reserved = assignment_next(participation=tester)
    assert reserved is not None and reserved.is_test
    # The test participant holds the only item, yet a real annotator still gets it.
    real = annotator_start(study, "real-1")
    theirs = assignment_next(participation=real)
    assert theirs is not None and theirs.item_id == reserved.item_id
    # Both submit: the real answer fills the slot (not surplus), the test one is stored, marked.
    read_everything(tester, reserved)
    from annotate.participation.submissions import annotation_submit

    test_answer = annotation_submit(participation=tester, public_id=reserved.public_id, answer=ONE_FAILURE).annotation
    read_everything(real, theirs)
    real_answer = annotation_submit(participation=real, public_id=theirs.public_id, answer=NO_FAILURE).annotation
    assert test_answer.is_test and not test_answer.surplus
    assert not real_answer.is_test and not real_answer.surplus
    progress = study_progress_get(study)
    assert progress["items_complete"] == 1 and progress["annotations_main"] == 1 and progress["participants"] == 1
    assert progress["test_participants"] == 1


def test_a_test_participant_gets_items_even_when_the_study_is_full():
    study = study_make(n_items=2, annotators_per_item=1)
    for pid in ("real-1", "real-2"):
        annotate_next(annotator_start(study, pid), label=False)
    with pytest.raises(StudyFull):  # full for real annotators: a new one is turned away
        annotator_start(study, "real-3")
    from annotate.participation.services import participation_consent

    tester = participation_consent(participation=participation_test_start(study=study))
    assert annotate_next(tester, label=True) is not None and annotate_next(tester, label=True) is not None
    assert Annotation.objects.filter(is_test=True).count() == 2 and not Annotation.objects.filter(surplus=True).exists()


def _study_with_a_tester(tmp_path):
    """3 real annotators agree on 2 items (no_failure); a test participant says has_failure on both."""
    study = study_make(n_items=2, annotators_per_item=3)
    for pid in ("real-1", "real-2", "real-3"):
        p = annotator_start(study, pid)
        annotate_next(p, label=False)
        annotate_next(p, label=False)
    from annotate.participation.services import participation_consent

    tester = participation_consent(participation=participation_test_start(study=study))
    annotate_next(tester, label=True)
    annotate_next(tester, label=True)
    return study, tester


def test_a_test_participant_is_left_out_of_agreement_exports_and_commands_by_default(researcher_client, tmp_path):
    study, tester = _study_with_a_tester(tmp_path)
    pid = tester.annotator.pid
    assert Annotation.objects.filter(study=study).count() == 8
    report = study_agreement_report(study, bootstrap=0)
    assert report["n_annotations"] == 6 and report["n_annotators"] == 3
    assert pid not in report["leave_one_out"]
    with_test = study_agreement_report(study, bootstrap=0, include_test=True)
    assert with_test["n_annotations"] == 8 and pid in with_test["leave_one_out"]
    rows = list(annotation_export_rows(study))
    assert len(rows) == 6 and all(r["annotator"] != pid and r["is_test"] is False for r in rows)
    with_tests = list(annotation_export_rows(study, include_test=True))
    assert len(with_tests) == 8 and sum(r["is_test"] for r in with_tests) == 2
    # The web exports.
    csv_default = b"".join(
        researcher_client.get(reverse("annotate:study_export", args=[study.slug, "csv"])).streaming_content
    )
    assert pid.encode() not in csv_default and len(csv_default.decode().strip().splitlines()) == 7
    jsonl = (
        b"".join(
            researcher_client.get(
                reverse("annotate:study_export", args=[study.slug, "jsonl"]), {"include_test": "1"}
            ).streaming_content
        )
        .decode()
        .splitlines()
    )
    assert len(jsonl) == 8 and sum(json.loads(line)["annotator"] == pid for line in jsonl) == 2
    # The commands.
    out = tmp_path / "a.jsonl"
    call_command("export_annotations", "--study", study.slug, "--output", str(out))
    assert len(out.read_text().splitlines()) == 6
    call_command("export_annotations", "--study", study.slug, "--output", str(out), "--include-test")
    assert len(out.read_text().splitlines()) == 8
    report_file = tmp_path / "r.json"
    call_command("agreement_report", "--study", study.slug, "--bootstrap", "0", "--output", str(report_file))
    assert pid not in json.loads(report_file.read_text())["leave_one_out"]
    call_command(
        "agreement_report", "--study", study.slug, "--bootstrap", "0", "--output", str(report_file), "--include-test"
    )
    assert pid in json.loads(report_file.read_text())["leave_one_out"]
    # The annotators report leaves them out; the study page lists them, marked.
    annotators_page = researcher_client.get(reverse("annotate:report_annotators", args=[study.slug])).content.decode()
    assert pid not in annotators_page
    page = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    row = re.search(rf'<tr class="test-participant"><td><code>{pid}</code> <span class="badge"[^>]*>test</span>', page)
    assert row is not None
    assert study_progress_get(study)["annotations_main"] == 6
    assert re.search(r'id="test-participants">1<', page)


def test_the_study_page_starts_a_test_participant_in_this_browser(researcher_client):
    study = study_make(n_items=2)
    from annotate.studies.services import study_update

    study_update(study=study, is_open=False)  # a closed study can still be tried
    response = researcher_client.post(reverse("annotate:study_test_participant", args=[study.slug]))
    assert response.status_code == 302 and response.url == reverse("annotate:consent", args=[study.slug])
    p = Participation.objects.get(study=study)
    assert p.is_test
    consent = researcher_client.get(response.url).content.decode()
    assert "Test participant" in consent and p.annotator.pid in consent
    assert researcher_client.post(response.url, {"agree": "yes"}).status_code == 302
    work = researcher_client.get(reverse("annotate:work", args=[study.slug])).content.decode()
    assert _position(work) == "item 1 of 2"
    assert Assignment.objects.get(participation=p).is_test
    # Annotators cannot start one.
    assert Client().post(reverse("annotate:study_test_participant", args=[study.slug])).status_code == 302
    assert Participation.objects.count() == 1


# --------------------------------------------------------------------------- what an annotator is told


def test_the_consent_page_states_the_studys_numbers(researcher_client):
    study = study_make(n_items=20, max_items_per_annotator=12, min_seconds=45, payment_per_item=Decimal("0.50"))
    client = Client()
    response = client.get(reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": "reader-1"})
    page = client.get(response["Location"]).content.decode()
    text = re.sub(r"<[^>]+>", "", page)
    assert "12 items to label" in text
    assert "at least 45 seconds" in text
    assert "Pay: 6.00 USD for 12 items (0.50 USD per item)" in text
    # 12 items at max(45 s, the kind's 90 s) = 18 minutes.
    assert "Expected time: about 18 minutes (about 90 seconds per item)" in text
    # The preview states the same.
    preview = re.sub(
        r"<[^>]+>", "", researcher_client.get(reverse("annotate:preview", args=[study.slug])).content.decode()
    )
    assert "12 items to label" in preview and "6.00 USD" in preview
    # Without a payment, the page says where the pay is.
    unpaid = study_make(n_items=3, name="Unpaid", min_seconds=200)
    response = client.get(reverse("annotate:entry", args=[unpaid.slug]), {"PROLIFIC_PID": "reader-1"})
    text = re.sub(r"<[^>]+>", "", client.get(response["Location"]).content.decode())
    assert "3 items to label" in text and "as stated on Prolific" in text
    assert "at least 200 seconds" in text and "about 10 minutes" in text  # 3 × 200 s


def test_item_x_of_n_counts_main_items_and_checks_across_a_walk():
    study = study_make(n_items=6, n_attention=2, attention_check_rate=0.25, annotators_per_item=1)
    client = Client()
    client.get(reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": "walker-1"})
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    p = Participation.objects.get(annotator__pid="walker-1")
    seen, roles = [], []
    while True:
        response = client.get(reverse("annotate:work", args=[study.slug]))
        if response.status_code == 302:
            break
        seen.append(_position(response.content.decode()))
        a = Assignment.objects.get(participation=p, status="reserved")
        roles.append(a.role)
        read_everything(p, a)
        from annotate.participation.submissions import annotation_submit

        annotation_submit(
            participation=p,
            public_id=a.public_id,
            answer=NO_FAILURE
            if a.role == ROLE_MAIN
            else {**NO_FAILURE, "has_failure": True, "failures": ONE_FAILURE["failures"]},
        )
    n = len(seen)
    assert roles.count(ROLE_ATTENTION) >= 1 and roles.count(ROLE_MAIN) == 6
    assert seen == [f"item {k} of {n}" for k in range(1, n + 1)]
    # With a limit per annotator, N is the limit.
    limited = study_make(n_items=6, name="Limited", max_items_per_annotator=3, annotators_per_item=1)
    client.get(reverse("annotate:entry", args=[limited.slug]), {"PROLIFIC_PID": "walker-1"})
    client.post(reverse("annotate:consent", args=[limited.slug]), {"agree": "yes"})
    assert _position(client.get(reverse("annotate:work", args=[limited.slug])).content.decode()) == "item 1 of 3"


def test_the_completion_page_has_a_copy_button_without_inline_script():
    study = study_make(n_items=1)
    client = Client()
    client.get(reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": "done-1"})
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    client.get(reverse("annotate:work", args=[study.slug]))
    p = Participation.objects.get(annotator__pid="done-1")
    annotate_next(p, label=False)
    assert assignment_next(participation=p) is None
    page = client.get(reverse("annotate:done", args=[study.slug])).content.decode()
    assert 'id="copy-code"' in page and "annotate/copy_code.js" in page and study.completion_code in page
    assert not re.search(
        r"<script>(?!\s*</script>)|<script(?![^>]*src=)[^>]*>\s*\S", page.replace('<script id="page-state"', "")
    )
    assert " onclick=" not in page


def test_hostile_values_in_the_preview_are_400s_naming_the_field(researcher_client):
    study = _critical_failure_study(training_enabled=False, qualification_enabled=False)
    before = _counts()
    html = researcher_client.get(reverse("annotate:preview_item", args=[study.slug, 1])).content.decode()
    state = _page_state(html)
    cases = [
        (state["saveUrl"], '{"active_ms": NaN}', "active_ms"),
        (state["saveUrl"], '{"seq": 99999999999999999999, "draft": {}}', "seq"),
        (state["saveUrl"], '{"events": "all"}', "events"),
        (state["submitUrl"], '{"answer": {"comments": "a\\u0000b"}}', "answer.comments"),
        (state["submitUrl"], '{"answer": ' + "[" * 40 + "]" * 40 + "}", None),
        (state["submitUrl"], "not json", None),
    ]
    for url, body, field in cases:
        response = researcher_client.post(url, data=body, content_type="application/json")
        assert response.status_code == 400, (body, response.content)
        if field:
            assert field in json.dumps(response.json()), (body, response.json())
    # Page numbers out of range go to the first page or the end, never a 500.
    assert researcher_client.get(reverse("annotate:preview_item", args=[study.slug, 0])).status_code == 302
    far = researcher_client.get(reverse("annotate:preview_item", args=[study.slug, 99]))
    assert far.status_code == 302 and far.url == reverse("annotate:preview_done", args=[study.slug])
    assert (
        _post_json(
            researcher_client, reverse("annotate:preview_submit", args=[study.slug, 99]), {"answer": NO_FAILURE}
        ).status_code
        == 409
    )
    assert researcher_client.get(reverse("annotate:preview_training_example", args=[study.slug, 99])).status_code == 302
    # A number beyond any database integer is no page at all (the project's bounded int converter).
    for name in ("preview_item", "preview_save", "preview_submit", "preview_training_example"):
        response = researcher_client.get(reverse(f"annotate:{name}", args=[study.slug, 10**30]))
        assert response.status_code == 404
    assert _counts() == before
