"""Annotators can flag an item as broken and say they are unsure (issue 31, part 5), and
switching "critical failures identified" back to "no critical failures" is never a trap."""

from __future__ import annotations

from typing import Any

import pytest

from annotate.models import Annotation
from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.testing import annotator_start, read_everything, study_make

pytestmark = pytest.mark.django_db

EMPTY_FAILURE = {"description": "", "L1_steps": [], "L2_steps": []}


@pytest.fixture
def ready():
    study = study_make(n_items=3)
    p = annotator_start(study, "pid-flags")
    a = assignment_next(participation=p)
    assert a is not None
    read_everything(p, a)
    return study, p, a


def test_switching_to_no_failures_drops_the_empty_failure_the_page_added(ready):
    study, p, a = ready
    answer = {"has_failure": False, "failures": [EMPTY_FAILURE], "comments": ""}
    result = annotation_submit(participation=p, public_id=a.public_id, answer=answer)
    assert result.created and result.annotation.has_failure is False
    assert result.annotation.failures == [] and result.annotation.answer["failures"] == []


def test_switching_to_no_failures_with_a_described_failure_is_still_refused(ready):
    from annotate.errors import SubmissionRejected

    study, p, a = ready
    answer = {
        "has_failure": False,
        "failures": [EMPTY_FAILURE, {"description": "typed", "L1_steps": [], "L2_steps": []}],
    }
    with pytest.raises(SubmissionRejected) as info:
        annotation_submit(participation=p, public_id=a.public_id, answer=answer)
    assert "failures" in {e.field for e in info.value.errors}
    assert not Annotation.objects.exists()


# --------------------------------------------------------------------------- storing a flag

BROKEN = {"flag": "broken", "reason": "unreadable", "note": "L2 is one garbled line."}


def _errors(p, a, answer):
    from annotate.errors import SubmissionRejected

    with pytest.raises(SubmissionRejected) as info:
        annotation_submit(participation=p, public_id=a.public_id, answer=answer)
    assert not Annotation.objects.exists()
    return {e.field: e.message for e in info.value.errors}


def test_a_broken_flag_submits_without_the_kinds_questions_and_is_stored(ready):
    study, p, a = ready
    result = annotation_submit(participation=p, public_id=a.public_id, answer={"flag": BROKEN, "comments": "odd"})
    ann = result.annotation
    assert result.created and ann.flag == "broken" and ann.broken
    assert ann.flag_reason == "unreadable" and ann.flag_note == "L2 is one garbled line."
    assert ann.has_failure is None and ann.failures == [] and ann.correct is None
    assert ann.comments == "odd" and "flag" not in ann.answer and ann.label == "flagged broken"


def test_a_broken_flag_keeps_what_was_answered_as_a_draft_would(ready):
    study, p, a = ready
    answer = {"flag": BROKEN, "has_failure": True, "failures": [{"description": "half", "L1_steps": [9]}]}
    ann = annotation_submit(participation=p, public_id=a.public_id, answer=answer).annotation
    assert ann.answer["has_failure"] is True and ann.answer["failures"][0]["description"] == "half"
    assert ann.has_failure is None and ann.failures == []  # the label is no label


def test_a_broken_flag_still_waits_for_the_minimum_time_and_the_steps():
    study = study_make(n_items=1, min_seconds=90)
    p = annotator_start(study, "pid-early-flag")
    a = assignment_next(participation=p)
    errors = _errors(p, a, {"flag": BROKEN})
    assert {"time", "steps", "goal"} <= set(errors)


def test_an_unsure_flag_needs_the_answer_and_keeps_its_note(ready):
    study, p, a = ready
    errors = _errors(p, a, {"flag": {"flag": "unsure"}})
    assert "has_failure" in errors
    answer = {"has_failure": False, "failures": [], "flag": {"flag": "unsure", "note": "  not my field  "}}
    ann = annotation_submit(participation=p, public_id=a.public_id, answer=answer).annotation
    assert ann.flag == "unsure" and ann.flag_reason == "" and ann.flag_note == "not my field"
    assert ann.has_failure is False and ann.label == "no_failure"


def test_a_null_flag_is_no_flag(ready):
    study, p, a = ready
    ann = annotation_submit(
        participation=p, public_id=a.public_id, answer={"has_failure": False, "failures": [], "flag": None}
    ).annotation
    assert ann.flag == "" and ann.flag_reason == "" and ann.flag_note == ""


@pytest.mark.parametrize(
    "flag, field",
    [
        ({"flag": "broken"}, "flag.reason"),
        ({"flag": "broken", "reason": "because"}, "flag.reason"),
        ({"flag": "broken", "reason": "other"}, "flag.note"),
        ({"flag": "broken", "reason": "other", "note": "x" * 501}, "flag.note"),
        ({"flag": "broken", "reason": "unreadable", "note": 5}, "flag.note"),
        ({"flag": "maybe"}, "flag.flag"),
        ({"flag": "unsure", "reason": "unreadable"}, "flag.reason"),
        ({"flag": "unsure", "colour": "red"}, "flag.colour"),
        ("broken", "flag"),
        ([BROKEN], "flag"),
    ],
)
def test_a_bad_flag_is_refused_naming_its_field_and_nothing_is_stored(ready, flag, field):
    study, p, a = ready
    errors = _errors(p, a, {"has_failure": False, "failures": [], "flag": flag})
    assert field in errors


def test_a_flag_note_of_exactly_the_limit_is_accepted(ready):
    study, p, a = ready
    note = "n" * 500
    ann = annotation_submit(
        participation=p, public_id=a.public_id, answer={"flag": {"flag": "broken", "reason": "other", "note": note}}
    ).annotation
    assert ann.flag_note == note


def test_a_draft_keeps_the_flag_as_typed_and_the_page_gets_it_back(ready):
    from annotate.models import Assignment
    from annotate.participation.drafts import assignment_save

    study, p, a = ready
    draft: dict[str, Any] = {
        "has_failure": None,
        "failures": [],
        "flag": {"flag": "broken", "reason": "nonsense", "note": "y" * 900},
    }
    assignment_save(participation=p, public_id=a.public_id, draft=draft, seq=1)
    stored = Assignment.objects.get(pk=a.pk).draft
    assert stored["flag"] == {"flag": "broken", "note": "y" * 500}
    assignment_save(participation=p, public_id=a.public_id, draft={"flag": {"flag": "nope"}}, seq=2)
    assert "flag" not in Assignment.objects.get(pk=a.pk).draft


# --------------------------------------------------------------------------- counting and agreement


def _flagged_study():
    """k = 3 on two items. item-1: a and b say has_failure, c flags it broken; item-2: all say
    no_failure, b unsure."""
    from annotate.testing import NO_FAILURE, ONE_FAILURE, annotate_next

    study = study_make(n_items=2, annotators_per_item=3, name="flags")
    answers: dict[str, list[dict[str, Any]]] = {
        "a": [ONE_FAILURE, NO_FAILURE],
        "b": [ONE_FAILURE, {**NO_FAILURE, "flag": {"flag": "unsure", "note": "hard one"}}],
        "c": [{"flag": BROKEN}, NO_FAILURE],
    }
    for pid, (first, second) in answers.items():
        p = annotator_start(study, pid)
        assert annotate_next(p, first).created
        assert annotate_next(p, second).created
    return study


def test_a_broken_flag_is_left_out_of_alpha_and_counted_apart_an_unsure_one_counts():
    from annotate.reports.selectors import study_agreement_report, study_annotation_rows
    from annotate.stats.agreement import agreement_report

    study = _flagged_study()
    report = study_agreement_report(study, bootstrap=0)
    assert (report["n_annotations"], report["n_excluded"], report["n_surplus"]) == (5, 0, 0)
    assert (report["n_broken"], report["n_unsure"]) == (1, 1)
    rows = study_annotation_rows(study)
    without = [r for r in rows if not r.broken]
    assert len(without) == 5 and sum(r.unsure for r in rows) == 1
    assert agreement_report(without, [], bootstrap=0)["alpha"] == report["alpha"]
    # item-1's counted labels are the two has_failure ones: a majority of 2 with no dissent
    assert report["human_majority"]["n_items"] == 2


def test_counted_numbers_agree_on_the_study_page_and_per_annotator():
    from annotate.studies.round_selectors import study_round_summaries
    from annotate.studies.selectors import study_annotators, study_progress_get

    study = _flagged_study()
    progress = study_progress_get(study)
    assert progress["annotations_main"] == 6 and progress["n_counted_annotations"] == 5
    assert (progress["annotations_broken"], progress["annotations_unsure"]) == (1, 1)
    (row,) = study_round_summaries(study)
    assert (row["n_annotations"], row["n_broken"], row["n_unsure"], row["n_excluded"]) == (5, 1, 1, 0)
    per = {r["pid"]: (r["n_main"], r["n_counted"], r["n_broken"], r["n_unsure"]) for r in study_annotators(study)}
    assert per == {"a": (2, 2, 0, 0), "b": (2, 2, 0, 1), "c": (2, 1, 1, 0)}


def test_the_broken_flag_still_fills_its_slot():
    from annotate.studies.selectors import study_progress_get

    study = _flagged_study()
    assert study_progress_get(study)["items_complete"] == 2  # k = 3 slots each, one of them broken


def test_the_export_carries_the_flag_and_its_report_matches_the_study(tmp_path):
    from annotate.reports.selectors import study_agreement_report
    from annotate.stats.agreement import agreement_report
    from annotate.stats.records import parse_annotation_lines
    from annotate.studies.exports import EXPORT_FIELDS, annotation_csv_lines, annotation_export, annotation_export_rows

    study = _flagged_study()
    path = tmp_path / "flags.jsonl"
    annotation_export(study=study, output=path)
    lines = path.read_text().splitlines()
    import json

    records = [json.loads(line) for line in lines]
    broken = [r for r in records if r["flag"] == "broken"]
    assert len(broken) == 1 and broken[0]["flag_reason"] == "unreadable" and broken[0]["has_failure"] is None
    assert broken[0]["flag_note"] == "L2 is one garbled line."
    assert sorted(r["flag"] for r in records) == ["", "", "", "", "broken", "unsure"]
    from_file = agreement_report(parse_annotation_lines(lines), [], bootstrap=0)
    from_study = study_agreement_report(study, bootstrap=0)
    for key in ("n_annotations", "n_broken", "n_unsure", "n_items", "alpha", "human_majority"):
        assert from_file[key] == from_study[key], key
    assert {"flag", "flag_reason", "flag_note"} <= set(EXPORT_FIELDS)
    header = next(iter(annotation_csv_lines(annotation_export_rows(study))))
    assert "flag,flag_reason,flag_note" in header


def test_a_broken_flag_on_an_attention_check_is_neither_a_pass_nor_a_miss():
    from annotate.models import Participation

    study = study_make(n_items=4, n_attention=2, attention_check_rate=0.5, attention_max_failures=0)
    p = annotator_start(study, "checked")
    seen = []
    while (a := assignment_next(participation=p)) is not None:
        read_everything(p, a)
        answer = {"flag": BROKEN} if a.role == "attention" else {"has_failure": False, "failures": []}
        ann = annotation_submit(participation=p, public_id=a.public_id, answer=answer).annotation
        seen.append((a.role, ann.correct))
    assert ("attention", None) in seen
    p = Participation.objects.get(pk=p.pk)
    assert (p.attention_failures, p.attention_passed) == (0, 0) and p.state != "screened_out"


def test_a_broken_flag_on_a_gold_item_earns_no_credit_and_blocks_nothing():
    from annotate.models import Qualification

    study = study_make(n_items=1, n_gold=2, gold_answers=[True, False], qualification_pass=1)
    p = annotator_start(study, "gold")
    first = assignment_next(participation=p)
    assert first is not None
    read_everything(p, first)
    assert annotation_submit(participation=p, public_id=first.public_id, answer={"flag": BROKEN}).created
    second = assignment_next(participation=p)
    assert second is not None
    read_everything(p, second)
    right: dict[str, Any] = {"has_failure": second.item.expected, "failures": []}
    if second.item.expected:
        right["failures"] = [{"description": "x", "L1_steps": [1], "L2_steps": []}]
    annotation_submit(participation=p, public_id=second.public_id, answer=right)
    q = Qualification.objects.get(annotator=p.annotator)
    assert (q.n_correct, q.n_total, q.passed) == (1, 2, True)


def test_the_study_page_lists_flagged_items_with_their_reasons(researcher_client):
    from django.urls import reverse

    study = _flagged_study()
    response = researcher_client.get(reverse("annotate:study_detail", args=[study.slug]))
    page = response.content.decode()
    assert response.status_code == 200
    flagged = response.context["flagged"]
    assert flagged["n_items"] == 2 and flagged["rows"][0]["item"].item_id == "item-1"
    assert flagged["rows"][0]["flags"][0]["reason"] == "The procedure is unreadable or empty"
    assert "L2 is one garbled line." in page and "hard one" in page
    assert "and 1 flagged broken left out" in page and "1 broken" in page


def test_the_agreement_page_says_how_many_broken_flags_were_left_out(researcher_client):
    import re

    from django.urls import reverse

    study = _flagged_study()
    html = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug])).content.decode()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
    assert "1 annotation flagged “This item is broken” left out" in text
    assert "1 flagged “I'm unsure” kept" in text or "1 flagged “I&#x27;m unsure” kept" in text


def test_the_api_gives_flags_per_item_and_filters_annotations_by_flag(researcher_client):
    study = _flagged_study()
    items = researcher_client.get(f"/api/studies/{study.slug}/items/").json()
    items = items.get("results", items)
    counts = {i["item_id"]: (i["n_broken"], i["n_unsure"]) for i in items}
    assert counts == {"item-1": (1, 0), "item-2": (0, 1)}
    broken = researcher_client.get(f"/api/studies/{study.slug}/annotations/?flag=broken").json()
    broken = broken.get("results", broken)
    assert [(a["flag"], a["flag_reason"], a["annotator"]) for a in broken] == [("broken", "unreadable", "c")]
    none = researcher_client.get(f"/api/studies/{study.slug}/annotations/?flag=none").json()
    assert len(none.get("results", none)) == 4
    assert researcher_client.get(f"/api/studies/{study.slug}/annotations/?flag=bogus").status_code == 400
    progress = researcher_client.get(f"/api/studies/{study.slug}/").json()["progress"]
    assert (progress["annotations_broken"], progress["annotations_unsure"], progress["n_counted_annotations"]) == (
        1,
        1,
        5,
    )
    (round_row,) = researcher_client.get(f"/api/studies/{study.slug}/rounds/").json()
    assert (round_row["n_broken"], round_row["n_unsure"]) == (1, 1)
    agreement = researcher_client.get(f"/api/studies/{study.slug}/agreement?bootstrap=0").json()
    assert (agreement["n_broken"], agreement["n_unsure"], agreement["n_annotations"]) == (1, 1, 5)


def test_a_broken_record_without_a_label_is_read_and_left_out():
    from annotate.stats.agreement import agreement_report
    from annotate.stats.records import parse_annotation_record

    def record(annotator, **extra):
        return {"item_id": "x", "annotator": annotator, "has_failure": True, "failures": [], **extra}

    rows = [
        parse_annotation_record(record("a")),
        parse_annotation_record(record("b", flag="unsure")),
        parse_annotation_record(record("c", has_failure=None, flag="broken")),
        parse_annotation_record(record("d", flag="broken", surplus=True)),  # surplus first: counted there once
    ]
    report = agreement_report(rows, [], bootstrap=0)
    assert (report["n_annotations"], report["n_surplus"], report["n_broken"], report["n_unsure"]) == (2, 1, 1, 1)
    from core.record_files import RecordError

    with pytest.raises(RecordError):
        parse_annotation_record(record("e", flag=3))
    with pytest.raises(RecordError):
        parse_annotation_record(record("f", has_failure=None))  # no label and no broken flag


# --------------------------------------------------------------------------- over HTTP, hostile


def _http_ready(pid: str, study=None):
    import json as _json

    from django.test import Client
    from django.urls import reverse

    from annotate.models import Assignment

    study = study or study_make(n_items=2)
    client = Client()
    response = client.get(
        reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": "se"}
    )
    assert response.status_code == 302
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    page = client.get(reverse("annotate:work", args=[study.slug]))
    a = Assignment.objects.get(annotator__pid=pid)
    read_everything(a.participation, a)

    def post(name, body):
        r = client.post(
            reverse(name, args=[study.slug, a.public_id]), data=_json.dumps(body), content_type="application/json"
        )
        return r.status_code, r.json()

    return study, a, post, page


def test_the_item_page_has_both_controls_with_the_reasons():
    study, a, post, page = _http_ready("pagecontrols")
    html = page.content.decode()
    for needle in (
        'id="flag-broken"',
        'id="flag-unsure"',
        'id="flag-reason"',
        'maxlength="500"',
        'value="goal_mismatch"',
    ):
        assert needle in html, needle


@pytest.mark.parametrize(
    "flag, field",
    [
        ({"flag": "broken", "reason": "other", "note": "z" * 501}, "flag.note"),
        ({"flag": "broken"}, "flag.reason"),
        ({"flag": "deleted"}, "flag.flag"),
        ({"flag": "unsure", "reason": 7}, "flag.reason"),
        (True, "flag"),
    ],
)
def test_over_http_a_bad_flag_is_a_400_naming_the_field_and_nothing_is_stored(flag, field):
    study, a, post, page = _http_ready("hostile")
    status, body = post("annotate:submit", {"answer": {"has_failure": False, "failures": [], "flag": flag}})
    assert status == 400 and body["ok"] is False
    assert field in {e["field"] for e in body["errors"]}
    assert not Annotation.objects.exists()


def test_over_http_a_nul_in_the_note_is_a_400_naming_the_path():
    study, a, post, page = _http_ready("nul")
    status, body = post(
        "annotate:submit", {"answer": {"flag": {"flag": "broken", "reason": "other", "note": "a\u0000b"}}}
    )
    assert status == 400 and any(e["field"].startswith("answer.flag") for e in body["errors"])
    assert not Annotation.objects.exists()


def test_over_http_a_flag_on_someone_elses_item_reaches_nothing():
    from django.test import Client
    from django.urls import reverse

    from annotate.models import Assignment

    study, a, post, page = _http_ready("owner")
    other = Client()
    other.get(
        reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": "intruder", "STUDY_ID": "st", "SESSION_ID": "s2"}
    )
    other.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    import json as _json

    for name, body in (
        ("annotate:submit", {"answer": {"flag": BROKEN}}),
        ("annotate:save", {"draft": {"flag": BROKEN}, "seq": 5}),
    ):
        r = other.post(
            reverse(name, args=[study.slug, a.public_id]), data=_json.dumps(body), content_type="application/json"
        )
        assert r.status_code == 404
    assert not Annotation.objects.exists() and Assignment.objects.get(pk=a.pk).draft == {}


def test_over_http_a_broken_flag_submits_and_moves_on():
    study, a, post, page = _http_ready("brokenhttp")
    status, body = post("annotate:save", {"draft": {"has_failure": None, "flag": BROKEN}, "seq": 1})
    assert status == 200 and body["draft_saved"]
    status, body = post("annotate:submit", {"answer": {"has_failure": None, "failures": [], "flag": BROKEN}})
    assert status == 200 and body["created"]
    assert Annotation.objects.get().flag == "broken"
