"""The data manager (issue 31, part 4): one table per study of items and their annotations,
searched, filtered, sorted and paged in the database, with bulk actions (exclude, restore, add
to a round, export the selection) and items added to a running study, from the page and the API."""

from __future__ import annotations

import io
import json

import pytest

from annotate.kinds.multiple_choice.testing import step_inference_study
from annotate.models import Annotation, Study, StudyItem
from annotate.participation.reservations import assignment_next
from annotate.participation.selectors import study_full
from annotate.participation.submissions import annotation_submit
from annotate.reports.selectors import study_human_majority
from annotate.studies.data_selectors import SORT_CHOICES, data_page, data_query_clean
from annotate.studies.exports import annotation_export_rows
from annotate.testing import (
    NO_FAILURE,
    ONE_FAILURE,
    annotate_next,
    annotator_start,
    judged_generation_study,
    read_everything,
    study_make,
)
from core.app_errors import InvalidInput
from tests.judged_world import judge_model, procedures

pytestmark = pytest.mark.django_db

UNSURE = {"flag": "unsure", "note": "hard to tell"}
BROKEN = {"flag": "broken", "reason": "unreadable", "note": ""}


def _label_all(study: Study, pid: str, label) -> None:
    """``pid`` answers every item: ``label(item)`` gives the has_failure, or the answer dict."""
    p = annotator_start(study, pid)
    while (a := assignment_next(participation=p)) is not None:
        read_everything(p, a)
        answer = label(a.item)
        if isinstance(answer, bool):
            answer = ONE_FAILURE if answer else NO_FAILURE
        annotation_submit(participation=p, public_id=a.public_id, answer=answer, submission_id="t")


@pytest.fixture
def world():
    """Four judged generations (judge labels alternate), three annotators each answering all:
    ``as-judge`` as the judge did, ``always-yes`` and ``yes-unsure`` has_failure every time
    (the latter unsure on the first item, broken on the second). Items the judge calls
    has_failure are unanimous; the others split, their majority has_failure against the judge."""
    judge_model("model-a", procedures(4), [True, False, True, False], judge="how2judge")
    study = judged_generation_study(name="Data", annotators_per_item=3, judge="how2judge", n=4)
    _label_all(study, "as-judge", lambda item: item.source["judge_label"] == "has_failure")
    _label_all(study, "always-yes", lambda item: True)
    first = list(StudyItem.objects.filter(study=study).order_by("position").values_list("item_id", flat=True)[:2])

    def third(item):
        if item.item_id == first[0]:
            return {**ONE_FAILURE, "flag": UNSURE}
        if item.item_id == first[1]:
            return {**NO_FAILURE, "flag": BROKEN}
        return True

    _label_all(study, "yes-unsure", third)
    return study


def _ids(study, **params) -> set[str]:
    query = data_query_clean(study, {**params, "page_size": 200})
    return {i.item_id for i in data_page(study, query).rows}


def _by_judge(study, label: str) -> set[str]:
    return {i.item_id for i in StudyItem.objects.filter(study=study) if i.source["judge_label"] == label}


def test_each_filter_selects_the_items_it_names(world):
    study = world
    has, no = _by_judge(study, "has_failure"), _by_judge(study, "no_failure")
    first, second = StudyItem.objects.filter(study=study).order_by("position")[:2]
    assert _ids(study) == has | no and len(has) == len(no) == 2
    assert _ids(study, judge_label="has_failure") == has
    assert _ids(study, judge_label="none") == set()
    assert _ids(study, status="complete") == has | no and _ids(study, status="open") == set()
    assert _ids(study, annotator="AS-JUDGE") == has | no  # a PID in any case
    assert _ids(study, flag="unsure") == {first.item_id}
    assert _ids(study, flag="broken") == {second.item_id}
    assert _ids(study, flag="any") == {first.item_id, second.item_id}
    assert _ids(study, flag="none") == (has | no) - {first.item_id, second.item_id}
    assert _ids(study, topic="Home & Garden") == has | no
    assert _ids(study, q=first.item_id) == {first.item_id}
    assert _ids(study, q="DO TASK") == has | no  # the goal, any case
    # Unanimous: every counted answer the same. The broken flag is not counted: the second item
    # is unanimous when the judge said has_failure (2 yes), split otherwise (1 no, 1 yes).
    assert _ids(study, agreement="unanimous") == has
    assert _ids(study, agreement="split") == no


def test_the_judge_agreement_filters_use_the_agreement_reports_majority(world):
    study = world
    decided = study_human_majority(study).decided()
    judge = {i.item_id: i.source["judge_label"] == "has_failure" for i in StudyItem.objects.filter(study=study)}
    agrees = {item for item, label in decided.items() if judge[item] == label}
    disagrees = {item for item, label in decided.items() if judge[item] != label}
    assert agrees and disagrees
    assert _ids(study, agreement="judge_agrees") == agrees
    assert _ids(study, agreement="judge_disagrees") == disagrees
    assert _ids(study, agreement="too_few") == set()  # every item has 2 or more counted answers


def test_every_sort_pages_through_every_item_once(world):
    every = sorted(StudyItem.objects.filter(study=world).values_list("item_id", flat=True))
    for sort in SORT_CHOICES:
        seen = []
        for page in (1, 2):
            query = data_query_clean(world, {"sort": sort, "page": page, "page_size": 3})
            seen += [i.item_id for i in data_page(world, query).rows]
        assert sorted(seen) == every, sort


def test_sorting_by_disagreement_puts_split_items_first(world):
    rows = data_page(world, data_query_clean(world, {"sort": "-disagreement"})).rows
    assert [r.n_minority for r in rows] == sorted((r.n_minority for r in rows), reverse=True)
    assert rows[0].agreement == "split" and rows[-1].agreement == "unanimous"


HOSTILE = [
    ({"sort": "goal; drop table"}, "sort"),
    ({"page": "abc"}, "page"),
    ({"page": "0"}, "page"),
    ({"page": "99"}, "page"),
    ({"page": "9" * 40}, "page"),
    ({"page_size": "100000"}, "page_size"),
    ({"page_size": "-1"}, "page_size"),
    ({"status": "done"}, "status"),
    ({"flag": "maybe"}, "flag"),
    ({"agreement": "some"}, "agreement"),
    ({"judge_label": "yes"}, "judge_label"),
    ({"role": "boss"}, "role"),
    ({"topic": "Nowhere"}, "topic"),
    ({"annotator": "nobody"}, "annotator"),
    ({"q": "x" * 500}, "q"),
]


def test_hostile_parameters_are_a_400_naming_the_parameter(world, researcher_client):
    for params, name in HOSTILE:
        response = researcher_client.get(f"/api/studies/{world.slug}/data/", params)
        assert response.status_code == 400, (params, response.content)
        assert name in response.json(), params
        page = researcher_client.get(f"/studies/{world.slug}/data/", params)
        assert page.status_code == 400, params
        assert f"<code>{name}</code>" in page.content.decode(), params


def test_a_kind_without_labels_has_no_label_columns_and_refuses_label_filters(researcher_client):
    study = step_inference_study(n_items=2)
    body = researcher_client.get(f"/api/studies/{study.slug}/data/").json()
    assert body["labels"] is False and body["count"] == 2
    assert body["results"][0]["agreement"] is None and body["results"][0]["majority"] is None
    for params, name in (({"agreement": "split"}, "agreement"), ({"sort": "disagreement"}, "sort")):
        response = researcher_client.get(f"/api/studies/{study.slug}/data/", params)
        assert response.status_code == 400 and name in response.json()
    page = researcher_client.get(f"/studies/{study.slug}/data/").content.decode()
    assert 'name="agreement"' not in page and 'name="judge_label"' not in page


def test_the_api_page_has_rows_with_their_answers(world, researcher_client):
    body = researcher_client.get(f"/api/studies/{world.slug}/data/", {"sort": "item_id", "page_size": 3}).json()
    assert body["count"] == 4 and body["pages"] == 2 and len(body["results"]) == 3
    row = body["results"][0]
    assert row["k"] == 3 and row["n_annotations"] == 3 and len(row["annotations"]) == 3
    assert {a["annotator"] for a in row["annotations"]} == {"as-judge", "always-yes", "yes-unsure"}


# --------------------------------------------------------------------------- bulk actions


def _act(client, study, body, query=""):
    return client.post(
        f"/api/studies/{study.slug}/data/actions/{query}", json.dumps(body), content_type="application/json"
    )


def test_exclude_leaves_the_answers_out_of_the_majority_and_restore_brings_them_back(world, researcher_client):
    study = world
    split = sorted(_ids(study, agreement="judge_disagrees"))
    before = study_human_majority(study).decided()
    response = _act(
        researcher_client, study, {"action": "exclude", "items": split, "annotator": "always-yes", "reason": "spammer"}
    )
    assert response.status_code == 200, response.content
    assert response.json()["counts"] == {"excluded": len(split)}
    excluded = Annotation.objects.filter(excluded=True)
    assert {a.exclusion_reason for a in excluded} == {"researcher: spammer"}
    assert _ids(study, agreement="judge_disagrees") == set()  # now 1 no_failure vs 1 has_failure: a tie
    assert study_human_majority(study).decided() != before
    # An exclusion for failed attention checks is not a researcher's: restore leaves it.
    Annotation.objects.filter(annotator__pid="as-judge", item__item_id=split[0]).update(
        excluded=True, exclusion_reason="failed_attention_checks"
    )
    response = _act(researcher_client, study, {"action": "restore", "items": split})
    assert response.json()["counts"] == {"restored": len(split)}
    assert list(Annotation.objects.filter(excluded=True).values_list("exclusion_reason", flat=True)) == [
        "failed_attention_checks"
    ]


def test_exclude_needs_a_reason_and_changes_nothing_without_one(world, researcher_client):
    response = _act(researcher_client, world, {"action": "exclude", "items": list(_ids(world))})
    assert response.status_code == 400 and "reason" in response.json()
    assert not Annotation.objects.filter(excluded=True).exists()


BAD_ACTIONS = [
    ({"action": "shred", "items": ["x"]}, "action"),
    ({"action": "restore", "items": ["not-an-item"]}, "items"),
    ({"action": "restore"}, "items"),
    ({"action": "add_to_round", "all_matching": True, "round": "seven"}, "round"),
    ({"action": "add_to_round", "all_matching": True, "round": 9}, "round"),
    ({"action": "export", "all_matching": True, "format": "xml"}, "format"),
]


def test_a_bad_action_request_is_a_400_naming_the_field(world, researcher_client):
    for body, name in BAD_ACTIONS:
        response = _act(researcher_client, world, body)
        assert response.status_code == 400, (body, response.content)
        assert name in response.json(), body
    assert Study.objects.count() == 1 and not Annotation.objects.filter(excluded=True).exists()


def test_all_matching_acts_on_every_item_the_filters_select(world, researcher_client):
    response = _act(
        researcher_client,
        world,
        {"action": "exclude", "all_matching": True, "reason": "unsure rater", "annotator": "yes-unsure"},
        query="?flag=unsure",
    )
    assert response.json()["items"] == 1 and response.json()["counts"] == {"excluded": 1}
    assert Annotation.objects.get(excluded=True).flag == "unsure"


def test_export_of_the_selection_is_the_study_export_of_those_items(world, researcher_client):
    chosen = sorted(_ids(world, agreement="judge_disagrees"))
    response = _act(researcher_client, world, {"action": "export", "items": chosen})
    assert response.status_code == 200 and response["Content-Type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    expected = [r for r in annotation_export_rows(world) if r["item_id"] in chosen]
    assert lines == json.loads(json.dumps(expected)) and len(lines) == 3 * len(chosen)
    csv = _act(researcher_client, world, {"action": "export", "items": chosen, "format": "csv"})
    assert b"".join(csv.streaming_content).decode().count("\n") == len(lines) + 1


def test_add_to_a_new_round_then_to_that_round(world, researcher_client):
    items = sorted(_ids(world))
    response = _act(researcher_client, world, {"action": "add_to_round", "items": items[:2], "round": "new"})
    assert response.status_code == 200, response.content
    counts = response.json()["counts"]
    assert counts["round"] == 2 and counts["added"] == 2
    second = Study.objects.get(slug=counts["study"])
    assert second.first_round == world and second.guideline_version == world.guideline_version
    assert set(second.items.values_list("item_id", flat=True)) == set(items[:2])
    response = _act(researcher_client, world, {"action": "add_to_round", "items": items[1:4], "round": 2})
    assert response.json()["counts"] == {"round": 2, "study": second.slug, "added": 2, "skipped": 1}
    assert sorted(second.items.values_list("item_id", flat=True)) == items[:4]
    assert not Annotation.objects.filter(study=second).exists()


def test_the_page_runs_an_action_and_comes_back_with_the_same_filters(world, researcher_client):
    target = sorted(_ids(world))[0]
    response = researcher_client.post(
        f"/studies/{world.slug}/data/actions/?status=complete",
        {"action": "exclude", "items": [target], "reason": "checked by hand"},
    )
    assert response.status_code == 302 and response["Location"].endswith("?status=complete")
    assert Annotation.objects.filter(item__item_id=target, excluded=True).count() == 3
    refused = researcher_client.post(f"/studies/{world.slug}/data/actions/", {"action": "exclude", "items": [target]})
    assert refused.status_code == 400 and "reason" in refused.content.decode()


# --------------------------------------------------------------------------- adding items


def _items_file(*ids: str, goal: str = "Make tea.") -> io.BytesIO:
    lines = [
        {
            "item_id": i,
            "topic": "Food",
            "goal": goal,
            "reference_steps": ["Boil.", "Pour."],
            "candidate_steps": ["Pour."],
        }
        for i in ids
    ]
    upload = io.BytesIO("".join(json.dumps(line) + "\n" for line in lines).encode())
    upload.name = "more.jsonl"
    return upload


def test_items_added_to_a_running_study_get_k_annotators(researcher_client):
    study = study_make(n_items=2, annotators_per_item=2)
    for pid in ("p1", "p2"):
        p = annotator_start(study, pid)
        while annotate_next(p, label=True) is not None:
            pass
    assert study_full(study)
    response = researcher_client.post(f"/api/studies/{study.slug}/data/items/", {"items_file": _items_file("new-1")})
    assert response.status_code == 201, response.content
    assert response.json()["added"] == ["new-1"] and response.json()["items_total"] == 3
    new = StudyItem.objects.get(study=study, item_id="new-1")
    assert new.position == 3 and new.role == "main"
    got = [assignment_next(participation=annotator_start(study, pid)) for pid in ("p4", "p5")]
    assert [a.item.item_id if a is not None else None for a in got] == ["new-1", "new-1"]
    assert study_full(study)  # k = 2: the new item's two places are taken


def test_an_item_id_the_study_has_is_a_409_and_nothing_is_added(researcher_client):
    study = study_make(n_items=2)
    response = researcher_client.post(
        f"/api/studies/{study.slug}/data/items/", {"items_file": _items_file("x-1", "item-1")}
    )
    assert response.status_code == 409 and "items" in response.json()
    assert study.items.count() == 2


def test_a_bad_line_is_a_400_naming_its_line_and_field(researcher_client):
    study = study_make(n_items=1)
    upload = io.BytesIO(
        b'{"item_id": "a", "goal": "g", "reference_steps": ["x"], "candidate_steps": ["y"]}\n{"item_id": "b"}\n'
    )
    upload.name = "bad.jsonl"
    response = researcher_client.post(f"/api/studies/{study.slug}/data/items/", {"items_file": upload})
    assert response.status_code == 400
    assert any("line 2" in p and "goal" in p for p in response.json()["items_file"])
    assert study.items.count() == 1


def test_judged_generations_added_are_never_the_studys_own(world, researcher_client):
    judge_model("model-b", procedures(2, prefix="more"), [True, False], judge="how2judge")
    response = researcher_client.post(
        f"/api/studies/{world.slug}/data/items/",
        json.dumps({"judge": "how2judge", "n_judged": 50}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert len(response.json()["added"]) == 2 and world.items.count() == 6
    again = researcher_client.post(
        f"/api/studies/{world.slug}/data/items/",
        json.dumps({"judge": "how2judge", "n_judged": 5}),
        content_type="application/json",
    )
    assert again.status_code == 409 and "already in the study" in again.json()["judge"][0]
    unknown = researcher_client.post(
        f"/api/studies/{world.slug}/data/items/",
        json.dumps({"judge": "nobody", "n_judged": 5}),
        content_type="application/json",
    )
    assert unknown.status_code == 400 and "judge" in unknown.json()


def test_the_page_adds_items_and_shows_item_text_as_text(researcher_client):
    study = study_make(n_items=1)
    response = researcher_client.post(
        f"/studies/{study.slug}/data/items/", {"items_file": _items_file("x-1", goal="<script>alert(1)</script>")}
    )
    assert response.status_code == 302
    page = researcher_client.get(f"/studies/{study.slug}/data/").content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    refused = researcher_client.post(f"/studies/{study.slug}/data/items/", {"items_file": _items_file("x-1")})
    assert refused.status_code == 409 and "already in the study" in refused.content.decode()


def test_a_qualification_item_cannot_join_a_started_study():
    from annotate.kinds.base import ROLE_QUALIFICATION, ItemSpec
    from annotate.studies.data_services import study_items_add

    study = study_make(n_items=1)
    annotator_start(study, "p1")
    spec = ItemSpec("gold-9", "t", "g", ["a"], ["b"], role=ROLE_QUALIFICATION, expected=True, explanation="e")
    with pytest.raises(InvalidInput) as info:
        study_items_add(study=study, items=[spec])
    assert "items" in info.value.fields and study.items.count() == 1


def test_the_schema_documents_the_data_manager(researcher_client):
    schema = researcher_client.get("/api/schema/?format=json").json()
    data = schema["paths"]["/api/studies/{slug}/data/"]["get"]
    names = {p["name"] for p in data["parameters"]}
    assert {
        "q",
        "topic",
        "judge_label",
        "agreement",
        "annotator",
        "status",
        "flag",
        "sort",
        "page",
        "page_size",
    } <= names
    assert "post" in schema["paths"]["/api/studies/{slug}/data/actions/"]
    assert "post" in schema["paths"]["/api/studies/{slug}/data/items/"]


def test_send_to_review_rejects_through_the_review_service_and_accept_puts_it_back(world, researcher_client):
    from annotate.review.models import AnnotationReview

    chosen = sorted(_ids(world, agreement="judge_disagrees"))
    short = _act(
        researcher_client,
        world,
        {"action": "review", "items": chosen, "decision": "reject", "reason": "too short", "annotator": "always-yes"},
    )
    assert short.status_code == 400 and "reason" in short.json()
    assert not AnnotationReview.objects.exists()
    message = "Your answers contradict the instructions on every item we checked by hand, " * 2
    response = _act(
        researcher_client,
        world,
        {
            "action": "review",
            "items": chosen,
            "decision": "reject",
            "reason": message,
            "rejection_category": "FAILED_INSTRUCTIONS",
            "annotator": "always-yes",
        },
    )
    assert response.status_code == 200, response.content
    assert response.json()["counts"] == {"reject": len(chosen)}
    rejected = Annotation.objects.filter(review="reject")
    assert {a.annotator.pid for a in rejected} == {"always-yes"} and all(a.excluded for a in rejected)
    assert _ids(world, agreement="judge_disagrees") == set()  # left out of the counted answers
    _act(researcher_client, world, {"action": "review", "items": chosen, "decision": "accept"})
    assert not Annotation.objects.filter(excluded=True).exists()
    assert AnnotationReview.objects.count() == 4 * len(chosen)
