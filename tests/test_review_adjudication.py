"""Review and adjudication (issue 31, part 1): a researcher accepts, rejects (with Prolific's
reason and category) or corrects annotations one by one or in bulk, and settles disagreements
into gold labels that calibration, exports and later studies' qualification items read."""

from __future__ import annotations

import pytest

from annotate.models import Annotation
from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.review.models import AnnotationReview, GoldLabel
from annotate.review.selectors import gold_agreement, human_labels, review_counts
from annotate.review.services import REVIEW_EXCLUSION_REASON, annotation_review, gold_label_set
from annotate.studies.selectors import annotations_counted
from annotate.testing import NO_FAILURE, ONE_FAILURE, annotator_start, read_everything, study_make
from core.app_errors import Conflict, InvalidInput, NotFound

pytestmark = pytest.mark.django_db

REASON = (
    "Your answers were submitted without reading the procedures: each failure you described names a step that "
    "the procedure does not have."
)
FAILURE = {"description": "Step two skips boiling the water.", "L1_steps": [1], "L2_steps": [2]}


@pytest.fixture
def study():
    """Two items, three annotators: item-1 split 2-1 (p1, p2 say has_failure), item-2 all no_failure."""
    study = study_make(n_items=2, annotators_per_item=3)
    for pid, says in (("p1", {"item-1"}), ("p2", {"item-1"}), ("p3", set())):
        label_items(study, pid, says)
    return study


def label_items(study, pid, has_failure_items):
    """``pid`` labels every item it is given: has_failure on the items named, else no_failure."""
    p = annotator_start(study, pid)
    while (a := assignment_next(participation=p)) is not None:
        read_everything(p, a)
        answer = ONE_FAILURE if a.item.item_id in has_failure_items else NO_FAILURE
        annotation_submit(participation=p, public_id=a.public_id, answer=answer, submission_id="t")


def _annotation(study, pid, item_id="item-1"):
    return Annotation.objects.get(study=study, annotator__pid=pid, item__item_id=item_id)


def test_a_rejection_needs_a_100_character_reason_and_a_category_naming_the_fields(study, researcher):
    a = _annotation(study, "p1")
    with pytest.raises(InvalidInput) as info:
        annotation_review(
            study=study, annotation_ids=[a.pk], decision="reject", reviewer=researcher, reason="too short"
        )
    assert set(info.value.fields) == {"reason", "rejection_category"}
    with pytest.raises(InvalidInput) as info:
        annotation_review(
            study=study,
            annotation_ids=[a.pk],
            decision="reject",
            reviewer=researcher,
            reason=REASON,
            rejection_category="NOT_A_CATEGORY",
        )
    assert set(info.value.fields) == {"rejection_category"}
    assert not AnnotationReview.objects.exists()


def test_a_rejected_annotation_leaves_the_counted_set_and_an_accept_puts_it_back(study, researcher):
    a = _annotation(study, "p1")
    before = annotations_counted(Annotation.objects.filter(study=study)).count()
    annotation_review(
        study=study,
        annotation_ids=[a.pk],
        decision="reject",
        reviewer=researcher,
        reason=REASON,
        rejection_category="LOW_EFFORT",
    )
    a.refresh_from_db()
    assert a.review == "reject" and a.excluded and a.exclusion_reason == REVIEW_EXCLUSION_REASON
    assert annotations_counted(Annotation.objects.filter(study=study)).count() == before - 1
    annotation_review(study=study, annotation_ids=[a.pk], decision="accept", reviewer=researcher)
    a.refresh_from_db()
    assert a.review == "accept" and not a.excluded and a.exclusion_reason == ""
    assert [r.decision for r in a.reviews.order_by("created_at", "pk")] == ["reject", "accept"]  # the history stays


def test_an_accept_never_lifts_an_exclusion_for_another_reason(study, researcher):
    a = _annotation(study, "p1")
    Annotation.objects.filter(pk=a.pk).update(excluded=True, exclusion_reason="failed_attention_checks")
    annotation_review(study=study, annotation_ids=[a.pk], decision="accept", reviewer=researcher)
    a.refresh_from_db()
    assert a.excluded and a.exclusion_reason == "failed_attention_checks"


def test_a_correction_counts_with_the_corrected_answer_and_keeps_the_original(study, researcher):
    a = _annotation(study, "p3")
    correction = {"has_failure": True, "failures": [FAILURE], "comments": "The water is never boiled."}
    annotation_review(study=study, annotation_ids=a.pk, decision="correct", reviewer=researcher, answer=correction)
    a.refresh_from_db()
    assert a.review == "correct" and a.has_failure is True and a.failures == [FAILURE]
    assert a.submitted_answer["has_failure"] is False and a.submitted_answer["failures"] == []
    review = a.reviews.get()
    assert review.reviewer == researcher and review.corrected_answer["has_failure"] is True
    annotation_review(study=study, annotation_ids=[a.pk], decision="accept", reviewer=researcher)
    a.refresh_from_db()
    assert a.has_failure is False and a.submitted_answer is None  # accepting restores the annotator's own


def test_a_correction_is_checked_by_the_kinds_rules_naming_the_field(study, researcher):
    a = _annotation(study, "p3")
    bad = {"has_failure": True, "failures": [{"description": "x", "L1_steps": [99], "L2_steps": []}]}
    with pytest.raises(InvalidInput) as info:
        annotation_review(study=study, annotation_ids=[a.pk], decision="correct", reviewer=researcher, answer=bad)
    assert any(field.startswith("answer.failures") for field in info.value.fields)
    for hostile in (float("nan"), "text", [1], {"has_failure": float("inf")}, {"flag": {"flag": "broken"}}):
        with pytest.raises(InvalidInput):
            annotation_review(
                study=study, annotation_ids=[a.pk], decision="correct", reviewer=researcher, answer=hostile
            )
    a.refresh_from_db()
    assert a.review == "" and a.has_failure is False


def test_bulk_accept_and_refusals_of_ids_outside_the_study(study, researcher):
    ids = list(Annotation.objects.filter(study=study, item__item_id="item-2").values_list("pk", flat=True))
    reviews = annotation_review(study=study, annotation_ids=ids, decision="accept", reviewer=researcher)
    assert len(reviews) == 3 and review_counts(study)["accept"] == 3
    other = study_make(n_items=1, name="Other")
    with pytest.raises(NotFound):
        annotation_review(study=other, annotation_ids=ids, decision="accept", reviewer=researcher)
    for bad in ([], ["1; drop"], [True], "x", None, list(range(1, 600))):
        with pytest.raises((InvalidInput, NotFound)):
            annotation_review(study=study, annotation_ids=bad, decision="accept", reviewer=researcher)
    with pytest.raises(InvalidInput) as info:
        annotation_review(study=study, annotation_ids=ids, decision="correct", reviewer=researcher, answer={})
    assert "annotation_ids" in info.value.fields
    with pytest.raises(InvalidInput) as info:
        annotation_review(study=study, annotation_ids=ids, decision="approve", reviewer=researcher)
    assert "decision" in info.value.fields


def test_a_broken_flagged_annotation_cannot_be_corrected(study, researcher):
    a = _annotation(study, "p3")
    Annotation.objects.filter(pk=a.pk).update(flag="broken")
    with pytest.raises(Conflict):
        annotation_review(
            study=study,
            annotation_ids=[a.pk],
            decision="correct",
            reviewer=researcher,
            answer={"has_failure": False, "failures": []},
        )


def test_a_gold_label_settles_an_item_with_a_note_and_keeps_its_history(study, researcher):
    item = study.items.get(item_id="item-1")
    gold = gold_label_set(
        item=item,
        answer={"has_failure": False, "failures": []},
        note="The tea is made; p1 misread step 2.",
        adjudicator=researcher,
    )
    assert gold.has_failure is False and gold.adjudicator == researcher
    assert gold.settled.count() == 3
    with pytest.raises(InvalidInput) as info:
        gold_label_set(item=item, answer={"has_failure": True, "failures": []}, note="", adjudicator=researcher)
    assert {"note", "answer.failures"} <= set(info.value.fields)
    gold = gold_label_set(
        item=item,
        answer={"has_failure": True, "failures": [FAILURE]},
        note="On a second reading: step 2.",
        adjudicator=researcher,
        settled=[_annotation(study, "p1").pk],
    )
    assert gold.has_failure is True and len(gold.history) == 1 and gold.history[0]["answer"]["has_failure"] is False
    assert GoldLabel.objects.count() == 1 and gold.settled.count() == 1
    with pytest.raises(InvalidInput) as info:
        gold_label_set(
            item=item,
            answer={"has_failure": False},
            note="n",
            adjudicator=researcher,
            settled=[_annotation(study, "p1", "item-2").pk],
        )
    assert "settled" in info.value.fields


def test_agreement_with_gold_per_annotator_beside_the_majority_with_n_and_interval(study, researcher):
    gold_label_set(
        item=study.items.get(item_id="item-1"),
        answer={"has_failure": False, "failures": []},
        note="No failure.",
        adjudicator=researcher,
    )
    report = gold_agreement(study)
    assert report["n_gold_items"] == 1
    p1, p3 = report["annotators"]["p1"], report["annotators"]["p3"]
    assert p1["gold"]["successes"] == 0 and p1["gold"]["n"] == 1 and p1["gold"]["ci95"] is not None
    assert p3["gold"]["share"] == 1.0
    # p3's others (p1, p2) both say has_failure: p3 disagrees with the leave-one-out majority
    assert p3["majority"]["n"] == 1 and p3["majority"]["share"] == 0.0
    # p1's others split 1-1: no majority to compare with
    assert p1["majority"]["n"] == 0 and p1["n_no_majority"] == 1


def test_human_labels_for_calibration_come_from_the_source_chosen(study, researcher):
    gold_label_set(
        item=study.items.get(item_id="item-1"),
        answer={"has_failure": False, "failures": []},
        note="No failure.",
        adjudicator=researcher,
    )
    majority = {"item-1": True, "item-2": False}
    assert human_labels(study, "majority", majority) == majority
    assert human_labels(study, "gold", majority) == {"item-1": False}
    assert human_labels(study, "gold_or_majority", majority) == {"item-1": False, "item-2": False}


def test_the_leaderboards_calibration_selector_takes_gold_labels_when_asked(demo, researcher):
    from annotate.reports.selectors import calibration_from_studies
    from annotate.testing import judged_generation_study, label_as_the_judge
    from judging.models import Judgment

    study = judged_generation_study(name="Calibrated", annotators_per_item=2, n=6)
    label_as_the_judge(study, ("a1", "a2"))  # the majority agrees with the judge everywhere
    item = study.items.order_by("position").first()
    assert item is not None
    judged = Judgment.objects.get(pk=item.source["judgment_id"])
    successes = [not j.has_failure for j in Judgment.objects.filter(judge="How2Judge")]
    by_majority = calibration_from_studies("How2Judge", successes)
    assert by_majority is not None
    assert by_majority["tnr"] == 1.0 and by_majority["tpr"] == 1.0
    flipped = (
        {"has_failure": False, "failures": []} if judged.has_failure else {"has_failure": True, "failures": [FAILURE]}
    )
    gold_label_set(item=item, answer=flipped, note="The judge is wrong here.", adjudicator=researcher)
    by_gold = calibration_from_studies("How2Judge", successes, human_source="gold")
    assert by_gold is not None
    assert by_gold["n_labelled"] == 1
    mixed = calibration_from_studies("How2Judge", successes, human_source="gold_or_majority")
    assert mixed is not None
    assert mixed["n_labelled"] == by_majority["n_labelled"] and (mixed["tpr"], mixed["tnr"]) != (1.0, 1.0)


def test_the_leaderboard_page_and_api_calibrate_against_the_gold_when_asked(demo, researcher, researcher_client):
    from annotate.testing import judged_generation_study, label_as_the_judge
    from judging.models import Judgment

    study = judged_generation_study(name="Calibrated board", annotators_per_item=2, n=6)
    label_as_the_judge(study, ("a1", "a2"))
    item = study.items.order_by("position").first()
    assert item is not None
    judged = Judgment.objects.get(pk=item.source["judgment_id"])
    flipped = (
        {"has_failure": False, "failures": []} if judged.has_failure else {"has_failure": True, "failures": [FAILURE]}
    )
    gold_label_set(item=item, answer=flipped, note="The judge is wrong here.", adjudicator=researcher)

    def calibrated(human: str | None) -> tuple[dict, dict]:
        query = {"judge": "How2Judge", "basis": "all"} | ({"human": human} if human else {})
        board = researcher_client.get("/api/leaderboard/", query).json()
        row = next(r for r in board["rows"] if r["model"] == judged.generation.model)
        return board, row["calibrated"]

    board, by_majority = calibrated(None)
    assert board["calibration_human_source"] == "majority" and (by_majority["tpr"], by_majority["tnr"]) == (1.0, 1.0)
    board, by_gold = calibrated("gold")
    assert board["calibration_human_source"] == "gold" and by_gold["n_labelled"] == 1
    _, mixed = calibrated("gold_or_majority")
    assert mixed["n_labelled"] == by_majority["n_labelled"] and (mixed["tpr"], mixed["tnr"]) != (1.0, 1.0)
    refused = researcher_client.get("/api/leaderboard/", {"judge": "How2Judge", "human": "crowd"})
    assert refused.status_code == 400 and "human" in refused.json()
    page = researcher_client.get("/leaderboard/", {"judge": "How2Judge", "human": "gold"}).content.decode()
    assert '<option value="gold" title="the adjudicated gold labels only" selected>' in page
    assert "estimated against the adjudicated gold labels only" in page


def test_every_kind_is_reviewed_corrected_and_settled_through_its_own_rules(researcher, researcher_client):
    """Multiple choice: a correction and a gold label are checked by the kind's rules (a choice
    among the item's options), agreement with gold is the kind's known-answer check, and there is
    no majority column (its answers carry no has_failure)."""
    from annotate.kinds.multiple_choice.testing import step_inference_study

    study = step_inference_study(n_items=1, annotators_per_item=2)
    for pid, choice in (("m1", 0), ("m2", 2)):
        p = annotator_start(study, pid)
        a = assignment_next(participation=p)
        assert a is not None
        annotation_submit(participation=p, public_id=a.public_id, answer={"choice": choice})
    m2 = Annotation.objects.get(study=study, annotator__pid="m2")
    with pytest.raises(InvalidInput) as info:
        annotation_review(
            study=study, annotation_ids=[m2.pk], decision="correct", reviewer=researcher, answer={"choice": 9}
        )
    assert "answer.choice" in info.value.fields
    annotation_review(
        study=study, annotation_ids=[m2.pk], decision="correct", reviewer=researcher, answer={"choice": 1}
    )
    m2.refresh_from_db()
    assert m2.submitted_answer is not None
    assert m2.answer["choice"] == 1 and m2.submitted_answer["answer"]["choice"] == 2 and m2.has_failure is None
    gold = gold_label_set(item=m2.item, answer={"choice": 0}, note="Boiling comes first.", adjudicator=researcher)
    assert gold.has_failure is None and gold.answer["choice"] == 0
    report = gold_agreement(study)
    assert report["majority_compared"] is False and report["judges"] == {}
    assert report["annotators"]["m1"]["gold"]["share"] == 1.0 and report["annotators"]["m2"]["gold"]["share"] == 0.0
    assert report["annotators"]["m1"]["majority"] is None
    page = researcher_client.get(f"/studies/{study.slug}/review/").content.decode()
    assert 'id="gold-agreement-annotators"' in page and 'id="gold-agreement-judges"' not in page
    item_page = researcher_client.get(f"/studies/{study.slug}/review/items/q1/")
    assert item_page.status_code == 200 and b"Boiling comes first." in item_page.content


# --------------------------------------------------------------------------- qualification items of a later study


def test_a_later_study_takes_gold_labelled_items_as_qualification_items_graded_by_the_gold(
    study, researcher, researcher_client
):
    from annotate.kinds.base import ROLE_QUALIFICATION

    gold_label_set(
        item=study.items.get(item_id="item-1"),
        answer={"has_failure": True, "failures": [FAILURE]},
        note="Step 2 never boils the water.",
        adjudicator=researcher,
    )
    later = study_make(n_items=2, name="Later")  # no qualification test yet
    r = researcher_client.post(
        f"/api/studies/{later.slug}/gold-qualification/", {"from_study": study.slug}, content_type="application/json"
    )
    assert r.status_code == 200 and r.json()["added"] == [f"{study.slug}/item-1"]
    item = later.items.get(role=ROLE_QUALIFICATION)
    later.refresh_from_db()
    assert later.qualification_enabled and later.qualification_pass == 1  # turned on: every gold item right
    assert item.expected is True and item.explanation == "Step 2 never boils the water."
    assert item.candidate_steps == study.items.get(item_id="item-1").candidate_steps
    again = researcher_client.post(
        f"/api/studies/{later.slug}/gold-qualification/", {"from_study": study.slug}, content_type="application/json"
    )
    assert again.json()["skipped"] == [f"{study.slug}/item-1"] and again.json()["added"] == []
    # an annotator of the later study meets it as a qualification item, graded against the gold label
    p = annotator_start(later, "newcomer")
    a = assignment_next(participation=p)
    assert a is not None and a.item.pk == item.pk
    read_everything(p, a)
    graded = annotation_submit(participation=p, public_id=a.public_id, answer=ONE_FAILURE).annotation
    assert graded.correct is True
    # refusals: itself, no gold, once entered
    r = researcher_client.post(
        f"/api/studies/{later.slug}/gold-qualification/", {"from_study": later.slug}, content_type="application/json"
    )
    assert r.status_code == 400 and "from_study" in r.json()
    assert (
        researcher_client.post(
            f"/api/studies/{study.slug}/gold-qualification/", {"from_study": 7}, content_type="application/json"
        ).status_code
        == 400
    )


# --------------------------------------------------------------------------- exports


def test_exports_carry_the_review_the_original_answer_and_the_gold_label(study, researcher, researcher_client):
    from annotate.studies.exports import annotation_csv_lines, annotation_export_rows

    a = _annotation(study, "p3")
    correction = {"has_failure": True, "failures": [FAILURE], "comments": ""}
    annotation_review(study=study, annotation_ids=[a.pk], decision="correct", reviewer=researcher, answer=correction)
    gold_label_set(
        item=a.item, answer={"has_failure": True, "failures": [FAILURE]}, note="Step 2.", adjudicator=researcher
    )
    rows = {(r["item_id"], r["annotator"]): r for r in annotation_export_rows(study)}
    row = rows[("item-1", "p3")]
    assert (
        row["review"] == "correct"
        and row["has_failure"] is True
        and row["submitted_answer"]["has_failure"] is False
        and row["submitted_answer"]["answer"]["failures"] == []
    )
    assert row["gold_has_failure"] is True and row["gold_note"] == "Step 2." and row["gold_answer"]["failures"]
    assert rows[("item-2", "p3")]["gold_answer"] is None and rows[("item-2", "p3")]["review"] == ""
    header = next(iter(annotation_csv_lines([])))
    assert "gold_answer" in header and "submitted_answer" in header
    listed = researcher_client.get(f"/api/studies/{study.slug}/annotations/", {"item": "item-1"}).json()
    mine = [r for r in listed["results"] if r["annotator"] == "p3"][0]
    assert mine["review"] == "correct" and mine["submitted_answer"]["answer"]["has_failure"] is False


# --------------------------------------------------------------------------- the API


def test_the_api_reviews_in_bulk_rejects_with_the_reason_and_shows_the_history(study, researcher_client):
    ids = list(Annotation.objects.filter(study=study, item__item_id="item-2").values_list("pk", flat=True))
    url = f"/api/studies/{study.slug}/reviews/"
    r = researcher_client.post(url, {"annotation_ids": ids, "decision": "accept"}, content_type="application/json")
    assert r.status_code == 201 and len(r.json()["reviews"]) == 3
    r = researcher_client.post(
        url,
        {"annotation_ids": ids[:1], "decision": "reject", "reason": "short", "rejection_category": "LOW_EFFORT"},
        content_type="application/json",
    )
    assert r.status_code == 400 and "reason" in r.json()
    r = researcher_client.post(
        url,
        {"annotation_ids": ids[:1], "decision": "reject", "reason": REASON, "rejection_category": "LOW_EFFORT"},
        content_type="application/json",
    )
    assert r.status_code == 201
    history = researcher_client.get(f"/api/studies/{study.slug}/annotations/{ids[0]}/reviews/").json()
    assert [h["decision"] for h in history["history"]] == ["accept", "reject"]
    assert history["annotation"]["excluded"] is True and history["history"][1]["reason"] == REASON
    listed = researcher_client.get(url, {"status": "reject"}).json()
    assert listed["count"] == 1 and listed["counts"]["reject"] == 1 and listed["counts"]["unreviewed"] == 3


@pytest.mark.parametrize(
    "body",
    [
        [1, 2],
        {"annotation_ids": "all", "decision": "accept"},
        {"annotation_ids": [1], "decision": {"x": 1}},
        {"annotation_ids": [1], "decision": "accept", "surprise": 1},
        {"annotation_ids": [1], "decision": "reject", "reason": 5, "rejection_category": "LOW_EFFORT"},
        {"annotation_ids": [1], "decision": "accept", "reason": "x" * 5000},
    ],
)
def test_hostile_review_bodies_get_a_400_naming_the_field(study, researcher_client, body):
    r = researcher_client.post(f"/api/studies/{study.slug}/reviews/", body, content_type="application/json")
    assert r.status_code == 400, r.content
    assert set(r.json()) - {"code", "detail", "what_to_do"}, r.json()


def test_the_api_sets_a_gold_label_and_reports_agreement_with_it(study, researcher_client):
    url = f"/api/studies/{study.slug}/gold/"
    r = researcher_client.post(
        url,
        {"item_id": "item-1", "answer": {"has_failure": False, "failures": []}, "note": "No failure."},
        content_type="application/json",
    )
    assert r.status_code == 200 and r.json()["has_failure"] is False and len(r.json()["settled"]) == 3
    r = researcher_client.post(
        url, {"item_id": "item-1", "answer": {"has_failure": "yes"}, "note": ""}, content_type="application/json"
    )
    assert r.status_code == 400 and "note" in r.json() and "answer.has_failure" in r.json()
    r = researcher_client.post(url, {"item_id": "nope", "answer": {}, "note": "x"}, content_type="application/json")
    assert r.status_code == 404
    assert researcher_client.get(url).json()["results"][0]["item_id"] == "item-1"
    report = researcher_client.get(f"/api/studies/{study.slug}/gold-agreement/").json()
    assert report["n_gold_items"] == 1 and report["annotators"]["p3"]["gold"]["n"] == 1
    agreement = researcher_client.get(f"/api/studies/{study.slug}/agreement/", {"human": "gold", "bootstrap": 0})
    assert agreement.status_code == 200 and agreement.json()["calibration_human_source"] == "gold"
    assert researcher_client.get(f"/api/studies/{study.slug}/agreement/", {"human": "vibes"}).status_code == 400
    assert researcher_client.delete(url + "?item_id=item-1").status_code == 204
    assert researcher_client.delete(url + "?item_id=item-1").status_code == 404


# --------------------------------------------------------------------------- the pages


def test_the_review_pages_accept_reject_correct_and_settle_from_the_browser_forms(study, researcher_client):
    page = researcher_client.get(f"/studies/{study.slug}/review/")
    assert page.status_code == 200 and b"review-bulk-form" in page.content
    ids = [
        str(pk) for pk in Annotation.objects.filter(study=study, item__item_id="item-2").values_list("pk", flat=True)
    ]
    short = researcher_client.post(
        f"/studies/{study.slug}/review/bulk",
        {"annotation_ids": ids, "decision": "reject", "reason": "short", "rejection_category": "LOW_EFFORT"},
    )
    assert short.status_code == 400 and b"reason" in short.content and not AnnotationReview.objects.exists()
    done = researcher_client.post(f"/studies/{study.slug}/review/bulk", {"annotation_ids": ids, "decision": "accept"})
    assert done.status_code == 302 and review_counts(study)["accept"] == 3
    item_url = f"/studies/{study.slug}/review/items/item-1/"
    assert researcher_client.get(item_url).status_code == 200
    p3 = _annotation(study, "p3")
    bad = researcher_client.post(
        item_url, {"form": "review", "annotation_id": p3.pk, "decision": "correct", "answer": "{not json"}
    )
    assert bad.status_code == 400 and b"not JSON" in bad.content
    fixed = researcher_client.post(
        item_url,
        {
            "form": "review",
            "annotation_id": p3.pk,
            "decision": "correct",
            "answer": '{"has_failure": true, "failures": [{"description": "No boiling.", "L1_steps": [1], "L2_steps": [2]}]}',
        },
    )
    assert fixed.status_code == 302
    p3.refresh_from_db()
    assert p3.review == "correct" and p3.has_failure is True
    gold = researcher_client.post(
        item_url, {"form": "gold", "answer": '{"has_failure": false, "failures": []}', "note": "Settled: no failure."}
    )
    assert gold.status_code == 302 and GoldLabel.objects.get().note == "Settled: no failure."
    shown = researcher_client.get(item_url).content.decode()
    assert "Settled: no failure." in shown and "the annotator's own answer" in shown
    disagreements = researcher_client.get(f"/studies/{study.slug}/disagreements/").content.decode()
    assert "gold: no_failure · review" in disagreements and "Adjudicate" in disagreements  # item-2 has none
    agreement = researcher_client.get(f"/studies/{study.slug}/agreement/", {"human": "gold_or_majority"})
    assert agreement.status_code == 200 and b'id="gold-agreement-annotators"' in agreement.content
    assert b"the gold label where an item has one" in agreement.content


# --------------------------------------------------------------------------- into the Prolific review

from tests.test_prolific import _complete, _published, prolific, token_saved  # noqa: E402, F401


def test_a_participant_with_a_rejected_annotation_is_rejected_on_prolific_with_the_reason_and_category(
    prolific,
    researcher,
    token_saved,  # noqa: F811
):
    from decimal import Decimal

    from prolific import constants as PC
    from prolific.review_services import prolific_review

    study = study_make(n_items=2, annotators_per_item=3, payment_per_item=Decimal("0.20"))
    link = _published(study, researcher)
    careless = _complete(study, link, "careless")
    _complete(study, link, "careful")
    for pid in ("careless", "careful"):
        prolific.add_submission(link.prolific_id, pid, PC.AWAITING_REVIEW)
    rejected = Annotation.objects.filter(participation=careless).first()
    assert rejected is not None
    annotation_review(
        study=study,
        annotation_ids=[rejected.pk],
        decision="reject",
        reviewer=researcher,
        reason=REASON,
        rejection_category="LOW_EFFORT",
    )

    result = prolific_review(study=study, user=researcher)
    assert (result.approved, result.rejected, result.rejected_in_review) == (1, 1, 1)
    assert prolific.status_of("careless") == PC.REJECTED and prolific.status_of("careful") == PC.APPROVED
    reject = [c for c in prolific.calls("POST", "/transition/") if c["body"].get("action") == "REJECT"]
    assert len(reject) == 1
    assert reject[0]["body"] == {"action": "REJECT", "message": REASON, "rejection_category": "LOW_EFFORT"}
