"""The studies REST API (annotate/studies/apis.py, item_apis.py, annotate/reports/apis.py): every
endpoint for each role (researcher by session
and by token, anonymous 401, a logged-in account without the role 403); the list's filters,
progress and pages; a study created from an uploaded file (a bad line is a 400 naming the
file, line and field, and nothing is stored) and from judged generations (the same items as
``create_study --from-judge``); detail and settings; rounds; items and annotations with their
filters; the export equal to ``export_annotations``' file; participants and their release;
the results report equal to the study page; hostile values; the OpenAPI schema."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotate.models import Annotation, Assignment, AssignmentStatus, Participation, Study, StudyItem
from annotate.participation.reservations import assignment_next
from annotate.studies.services import study_update
from annotate.testing import ONE_FAILURE, annotate_next, annotator_start, study_make
from core.services import api_token_create

pytestmark = pytest.mark.django_db


def _jsonl(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _record(n, **extra):
    return {
        "item_id": f"w{n}",
        "topic": "Travel & Tourism",
        "goal": f"Goal {n}",
        "reference_steps": ["a", "b"],
        "candidate_steps": ["c", "d"],
        **extra,
    }


def _names(response, field: str) -> bool:
    """Whether a 400 names ``field``: a serializer's {field: [...]} or the strict JSON
    parser's {"field": field, ...} (core/parsers.py)."""
    body = response.json()
    return field in body or body.get("field") == field


@pytest.fixture
def token_client(researcher) -> Client:
    secret = api_token_create(user=researcher, label="script").secret
    return Client(HTTP_AUTHORIZATION=f"Token {secret}")


@pytest.fixture
def nobody_client(db) -> Client:
    user = get_user_model().objects.create_user("norole", password="no-Role-Password-1")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def world(db):
    """A critical-failure study (k = 2, 3 main items, 2 gold items) where two annotators have
    each labelled two main items (one has_failure, one no_failure) and a third holds a
    reservation. (Attention checks come at seeded random places: none here, so the counts
    are exact.)"""
    study = study_make(
        name="API world",
        n_items=3,
        annotators_per_item=2,
        n_gold=2,
        gold_answers=[False, False],
        qualification_pass=1,
        payment_per_item=Decimal("1.00"),
    )
    done = {}
    for pid in ("ann-one", "ann-two"):
        p = annotator_start(study, pid)
        annotate_next(p, label=False)
        annotate_next(p, label=False)  # both gold items answered right
        done[pid] = p
        for label in (True, False):
            annotate_next(p, label=label)
    holder = annotator_start(study, "ann-holder")
    annotate_next(holder, label=False)
    annotate_next(holder, label=False)
    held = assignment_next(participation=holder)
    return {"study": study, "participants": done, "holder": holder, "held": held}


def _slug_urls(slug: str) -> list[str]:
    return [
        f"/api/studies/{slug}/",
        f"/api/studies/{slug}/rounds/",
        f"/api/studies/{slug}/items/",
        f"/api/studies/{slug}/annotations/",
        f"/api/studies/{slug}/export/?format=jsonl",
        f"/api/studies/{slug}/export/?format=csv",
        f"/api/studies/{slug}/participants/",
        f"/api/studies/{slug}/report/",
    ]


# -- roles -----------------------------------------------------------------------------------


def test_every_read_endpoint_answers_researchers_by_session_and_by_token(
    world, researcher_client, token_client, admin_client_
):
    for url in ["/api/studies/"] + _slug_urls(world["study"].slug):
        for client in (researcher_client, token_client, admin_client_):
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)


def test_writes_answer_researchers_by_session_as_well_as_by_token(world, researcher_client):
    study, holder = world["study"], world["holder"]
    response = researcher_client.patch(
        f"/api/studies/{study.slug}/", data=json.dumps({"is_open": False}), content_type="application/json"
    )
    assert response.status_code == 200 and response.json()["status"] == "closed"
    response = researcher_client.post(
        f"/api/studies/{study.slug}/rounds/", data=json.dumps({"instructions": "R2."}), content_type="application/json"
    )
    assert response.status_code == 201
    response = researcher_client.post(
        f"/api/studies/{study.slug}/participants/{holder.pk}/release/",
        data=json.dumps({"confirm": "yes"}),
        content_type="application/json",
    )
    assert response.status_code == 200 and response.json()["released"] == 1
    upload = SimpleUploadedFile("items.jsonl", _jsonl([_record(1)]))
    response = researcher_client.post("/api/studies/", {"name": "By session", "items_file": upload})
    assert response.status_code == 201


def test_anonymous_callers_get_401_and_accounts_without_the_role_get_403(world, nobody_client):
    study, holder = world["study"], world["holder"]
    calls: list[tuple[str, str, dict[str, Any] | None]] = [
        ("get", url, None) for url in ["/api/studies/"] + _slug_urls(study.slug)
    ]
    calls += [
        ("post", "/api/studies/", {"name": "x", "judge": "j", "n_judged": 1}),
        ("patch", f"/api/studies/{study.slug}/", {"is_open": False}),
        ("post", f"/api/studies/{study.slug}/rounds/", {"instructions": "New."}),
        ("post", f"/api/studies/{study.slug}/participants/{holder.pk}/release/", {"confirm": "yes"}),
    ]
    for method, url, body in calls:
        kwargs: dict[str, Any] = (
            {"data": json.dumps(body), "content_type": "application/json"} if body is not None else {}
        )
        anonymous = getattr(Client(), method)(url, **kwargs)
        assert anonymous.status_code == 401, (method, url)
        assert anonymous["WWW-Authenticate"].startswith("Token")
        assert getattr(nobody_client, method)(url, **kwargs).status_code == 403, (method, url)
        bad_token = getattr(Client(HTTP_AUTHORIZATION="Token not-a-token"), method)(url, **kwargs)
        assert bad_token.status_code == 401
    # Nothing was changed by any of them.
    assert Study.objects.count() == 1 and Study.objects.get().is_open
    assert Assignment.objects.get(pk=world["held"].pk).status == AssignmentStatus.RESERVED


# -- the list --------------------------------------------------------------------------------


def test_the_list_gives_progress_toward_k_with_coverage(world, token_client):
    body = token_client.get("/api/studies/").json()
    assert body["count"] == 1
    row = body["results"][0]
    assert row["slug"] == world["study"].slug and row["status"] == "open"
    progress = row["progress"]
    # 3 main items, k = 2: each of two annotators labelled two main items -> 4 of 6 slots.
    assert progress["items"] == 3 and progress["k"] == 2
    assert progress["annotations"] == 4 and progress["annotations_done"] == 4
    assert progress["participants"] == 3
    coverage = progress["coverage"]
    assert coverage["slots"] == 6 and coverage["slots_filled"] == 4 and coverage["n"] == 6
    assert coverage["share"] == pytest.approx(4 / 6)
    low, high = coverage["ci95"]
    assert low < 4 / 6 < high


def test_the_list_filters_by_kind_status_and_name_and_is_paged(researcher_client):
    for n in range(51):
        study_make(name=f"Batch {n:02d}", n_items=1)
    closed = study_make(name="Closed pilot about tea", n_items=1)
    study_update(study=closed, is_open=False)
    first = researcher_client.get("/api/studies/").json()
    assert first["count"] == 52 and len(first["results"]) == 50 and first["next"]
    second = researcher_client.get(first["next"]).json()
    assert len(second["results"]) == 2
    assert [r["slug"] for r in researcher_client.get("/api/studies/?status=closed").json()["results"]] == [closed.slug]
    assert researcher_client.get("/api/studies/?status=open").json()["count"] == 51
    assert [r["slug"] for r in researcher_client.get("/api/studies/?search=tea").json()["results"]] == [closed.slug]
    assert researcher_client.get("/api/studies/?kind=multiple_choice").json()["count"] == 0
    assert researcher_client.get("/api/studies/?kind=critical_failure").json()["count"] == 52
    bad = researcher_client.get("/api/studies/?kind=nonsense")
    assert bad.status_code == 400 and "kind" in bad.json()
    bad = researcher_client.get("/api/studies/?status=half")
    assert bad.status_code == 400 and "status" in bad.json()


# -- create ----------------------------------------------------------------------------------


def test_a_study_is_created_from_an_uploaded_items_file(token_client):
    upload = SimpleUploadedFile(
        "items.jsonl",
        _jsonl(
            [
                _record(1),
                _record(2),
                _record(3, qualification={"has_failure": True, "explanation": "x"}),
            ]
        ),
    )
    response = token_client.post(
        "/api/studies/",
        {"name": "File study", "items_file": upload, "annotators_per_item": 2, "payment_per_item": "0.50"},
    )
    assert response.status_code == 201, response.content
    body = response.json()
    study = Study.objects.get(slug=body["slug"])
    assert body["item_counts"] == {"main": 2, "attention": 0, "qualification": 1}
    assert study.annotators_per_item == 2 and study.payment_per_item == Decimal("0.50")
    # Fields left out keep the page's defaults (not a form's unticked box).
    assert study.training_enabled and study.qualification_enabled and not study.allow_other_pids
    assert body["entry_url"].endswith(
        "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    assert StudyItem.objects.get(study=study, item_id="w1").source == {"file": "items.jsonl", "line": 1}
    assert body["progress"]["coverage"]["slots"] == 4


def test_a_bad_items_file_is_a_400_naming_file_line_and_field_and_stores_nothing(token_client, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    upload = SimpleUploadedFile("items.jsonl", _jsonl([_record(1)]) + b'{"item_id": "w2"}\n' + b"not json\n")
    response = token_client.post("/api/studies/", {"name": "Bad file", "items_file": upload})
    assert response.status_code == 400
    body = response.json()
    assert "items.jsonl, line 2, field 'goal': is required" in body["items_file"]
    assert any(problem.startswith("items.jsonl, line 3") for problem in body["items_file"])
    assert "nothing was created" in body["detail"]
    assert not Study.objects.exists() and not StudyItem.objects.exists()
    uploads = tmp_path / "uploads" / "studies"
    assert not uploads.exists() or not any(p.is_file() for p in uploads.rglob("*"))


def test_the_services_refusals_name_their_field(token_client):
    upload = SimpleUploadedFile("items.jsonl", _jsonl([_record(1)]))
    response = token_client.post(
        "/api/studies/", {"name": "No gold", "items_file": upload, "qualification_enabled": "on"}
    )
    assert response.status_code == 400 and "qualification_enabled" in response.json()
    response = token_client.post("/api/studies/", data=json.dumps({"name": "Nothing"}), content_type="application/json")
    assert response.status_code == 400 and "items_file" in response.json()
    assert not Study.objects.exists()


def test_a_study_is_created_from_judged_generations_with_the_commands_items(token_client, demo):
    response = token_client.post(
        "/api/studies/",
        data=json.dumps(
            {
                "name": "From the judge",
                "judge": "How2Judge",
                "n_judged": 5,
                "seed": 3,
                "annotators_per_item": 3,
                "qualification_enabled": "off",
                "training_enabled": False,
            }
        ),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    api_study = Study.objects.get(slug=response.json()["slug"])
    assert response.json()["item_counts"]["main"] == 5 and not api_study.training_enabled
    call_command(
        "create_study",
        "--name",
        "By command",
        "--from-judge",
        "How2Judge",
        "--sample",
        "5",
        "--seed",
        "3",
        "--slug",
        "by-command",
        stdout=io.StringIO(),
    )
    command_study = Study.objects.get(slug="by-command")

    def items(study):
        return list(
            study.items.order_by("role", "position").values_list("item_id", "goal", "candidate_steps", "source")
        )

    assert items(api_study) == items(command_study)


def test_create_refuses_an_unknown_judge_and_a_missing_sample_size(token_client, demo):
    response = token_client.post(
        "/api/studies/",
        data=json.dumps({"name": "x", "judge": "Nobody", "n_judged": 5}),
        content_type="application/json",
    )
    assert response.status_code == 400 and "Nobody" in response.json()["judge"][0]
    response = token_client.post(
        "/api/studies/", data=json.dumps({"name": "x", "judge": "How2Judge"}), content_type="application/json"
    )
    assert response.status_code == 400 and "n_judged" in response.json()
    assert not Study.objects.exists()


@pytest.fixture
def judged_runs(db):
    """Two models' generations of 6 procedures judged by "jx": model m-a's in a judge run,
    m-b's outside any run (tests/judged_world.py)."""
    from judging.models import GenerationRun, JudgeRun, Judgment, LanguageModel
    from tests import judged_world

    procedures = judged_world.procedures(6)
    judged_world.judge_model("m-a", procedures, [True, False] * 3, judge="jx")
    judged_world.judge_model("m-b", procedures, [False, True] * 3, judge="jx")
    model = LanguageModel.objects.create(name="m-a")
    generation_run = GenerationRun.objects.create(
        name="m-a-bench", language_model=model, prompt_file="p", prompt_hash="h"
    )
    run = JudgeRun.objects.create(
        name="m-a-jx", generation_run=generation_run, judge="jx", prompt_file="p", prompt_hash="h"
    )
    Judgment.objects.filter(generation__model="m-a").update(run=run)
    return run


def test_judged_generations_are_selected_by_judge_run_topic_and_model(token_client, judged_runs):
    body = {"name": "Run A", "judge_runs": [judged_runs.pk], "n_judged": 50, "qualification_enabled": "off"}
    response = token_client.post("/api/studies/", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    study = Study.objects.get(slug=response.json()["slug"])
    assert study.items.count() == 6 and {i.source["model"] for i in study.items.all()} == {"m-a"}
    # The page's item gathering (annotate/studies/imports.py) with the same selection.
    from annotate.studies.item_sources import study_items_gather

    gathered = study_items_gather(kind="critical_failure", judge="jx", n_judged=50, judge_runs=[judged_runs.pk])
    assert list(study.items.order_by("position").values_list("item_id", flat=True)) == [i.item_id for i in gathered]
    by_model = token_client.post(
        "/api/studies/",
        data=json.dumps(
            {"name": "Model B", "judge": "jx", "models": ["m-b"], "topics": ["home-garden"], "n_judged": 4}
        ),
        content_type="application/json",
    )
    assert by_model.status_code == 201, by_model.content
    rows = Study.objects.get(slug=by_model.json()["slug"]).items.all()
    assert len(rows) == 4 and {i.source["model"] for i in rows} == {"m-b"}
    refused: list[tuple[dict[str, Any], str]] = [
        ({"judge_runs": [999999]}, "judge_runs"),
        ({"judge_runs": [judged_runs.pk], "judge": "other"}, "judge"),
        ({"judge": "jx", "models": ["m-z"]}, "models"),
        ({"judge": "jx", "topics": ["nowhere"]}, "topics"),
        ({"judge_runs": ["one"]}, "judge_runs"),
        ({"judge_runs": 5}, "judge_runs"),
        ({"topics": ["home-garden"]}, "topics"),
    ]
    for wrong, field in refused:
        response = token_client.post(
            "/api/studies/", data=json.dumps({"name": "Bad", "n_judged": 2, **wrong}), content_type="application/json"
        )
        assert response.status_code == 400 and field in response.json(), (wrong, response.content)
    assert Study.objects.count() == 2


@pytest.mark.parametrize(
    "field, value",
    [
        ("annotators_per_item", 10**30),
        ("annotators_per_item", "three"),
        ("annotators_per_item", [3]),
        ("name", {"x": 1}),
        ("name", ["a"]),
        ("name", "x" * 201),
        ("n_judged", -1),
        ("n_judged", 2**70),
        ("seed", 2**64),
        ("lease_minutes", 10**12),
        ("payment_per_item", "NaN"),
        ("payment_per_item", "1e999"),
        ("attention_check_rate", 5),
        ("slug", "Not A Slug"),
        ("kind", "poetry"),
        ("training_enabled", "maybe"),
        ("qualification_enabled", "sometimes"),
        ("prolific_study_id", "has space"),
        ("completion_code", "x" * 65),
    ],
)
def test_hostile_create_values_are_a_400_naming_the_field(token_client, demo, field, value):
    body = {"name": "Hostile", "judge": "How2Judge", "n_judged": 2, field: value}
    response = token_client.post("/api/studies/", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    assert _names(response, field), response.json()
    assert not Study.objects.exists()


def test_a_nul_character_in_a_body_or_a_parameter_is_a_400_naming_it(world, token_client, demo):
    response = token_client.post(
        "/api/studies/",
        data=json.dumps({"name": "a\x00b", "judge": "How2Judge", "n_judged": 2}),
        content_type="application/json",
    )
    assert response.status_code == 400 and _names(response, "name")
    response = token_client.get(f"/api/studies/{world['study'].slug}/items/?search=a%00b")
    assert response.status_code == 400 and "search" in response.content.decode()
    assert Study.objects.count() == 1 + Study.objects.exclude(pk=world["study"].pk).count()


def test_a_large_items_file_is_handed_to_a_worker(token_client, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.UPLOAD_BACKGROUND_MIN_BYTES = 10
    upload = SimpleUploadedFile("big.jsonl", _jsonl([_record(n) for n in range(1, 6)]))
    response = token_client.post(
        "/api/studies/", {"name": "Big file", "items_file": upload, "qualification_enabled": "off"}
    )
    assert response.status_code == 202, response.content
    job = response.json()
    assert job["status"] == "queued" and job["url"].endswith(f"/api/studies/imports/{job['id']}/")
    assert not Study.objects.exists()
    # The worker's step (the task calls it): the study is created with the request's settings.
    from annotate.studies.imports import study_import_run

    study_import_run(study_import_id=job["id"])
    status = token_client.get(f"/api/studies/imports/{job['id']}/").json()
    assert status["status"] == "done" and status["study"]
    study = Study.objects.get(slug=status["study"])
    assert study.items.count() == 5 and not study.qualification_enabled and study.name == "Big file"
    assert token_client.get("/api/studies/imports/999999/").status_code == 404


# -- detail, settings, rounds ----------------------------------------------------------------


def test_the_detail_gives_the_study_pages_progress_with_n_and_intervals(world, researcher_client, token_client):
    study = world["study"]
    body = token_client.get(f"/api/studies/{study.slug}/").json()
    page = researcher_client.get(reverse("annotate:study_detail", args=[study.slug]))
    progress = body["progress"]
    for key, value in page.context["progress"].items():
        assert progress[key] == (pytest.approx(value) if isinstance(value, float) else value), key
    # Items by slots filled: w/ k = 2, two annotators each labelled two of the three items.
    assert sum(progress["items_by_annotations"].values()) == 3
    assert progress["items_by_annotations"]["2"] == progress["items_complete"]
    assert progress["states"] == page.context["progress"]["states"] and progress["participants"] == 3
    attention = progress["attention_checks"]
    assert attention["n"] == page.context["progress"]["attention_total"]
    if attention["n"]:
        assert attention["share"] == pytest.approx(page.context["progress"]["attention_pass_rate"])
        assert attention["ci95"][0] <= attention["share"] <= attention["ci95"][1]
    qualification = progress["qualification"]
    assert qualification["n"] == 3 and qualification["share"] == 1.0 and qualification["ci95"][1] == 1.0
    assert body["item_counts"] == {"main": 3, "attention": 0, "qualification": 2}
    assert body["completion_code"] == study.completion_code and body["screened_out_code"] == study.screened_out_code
    assert progress["hourly_pay"] == pytest.approx(page.context["progress"]["hourly_pay"])


def test_settings_are_edited_with_the_study_pages_rules(world, token_client):
    study = world["study"]
    url = f"/api/studies/{study.slug}/"
    response = token_client.patch(
        url,
        data=json.dumps({"is_open": False, "payment_per_item": "0.30", "min_annotations_for_majority": 3}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "closed" and response.json()["payment_per_item"] == "0.30"
    study.refresh_from_db()
    assert not study.is_open and study.payment_per_item == Decimal("0.30") and study.min_annotations_for_majority == 3
    # A field left out is left as it is; null clears the payment.
    response = token_client.patch(url, data=json.dumps({"payment_per_item": None}), content_type="application/json")
    study.refresh_from_db()
    assert response.status_code == 200 and study.payment_per_item is None and not study.is_open
    for body, field in [
        ({"min_annotations_for_majority": 1}, "min_annotations_for_majority"),
        ({"min_annotations_for_majority": 2**70}, "min_annotations_for_majority"),
        ({"is_open": "perhaps"}, "is_open"),
        ({"prolific_study_id": "bad id!"}, "prolific_study_id"),
        ({"payment_per_item": -1}, "payment_per_item"),
        ({"annotators_per_item": 5}, "annotators_per_item"),
        ({"name": "renamed"}, "name"),
    ]:
        response = token_client.patch(url, data=json.dumps(body), content_type="application/json")
        assert response.status_code == 400 and _names(response, field), (body, response.content)
    response = token_client.patch(url, data=json.dumps([1, 2]), content_type="application/json")
    assert response.status_code == 400
    study.refresh_from_db()
    assert study.annotators_per_item == 2 and study.name == "API world" and study.min_annotations_for_majority == 3
    assert (
        token_client.patch("/api/studies/no-such-study/", data="{}", content_type="application/json").status_code == 404
    )


def test_rounds_are_listed_and_a_new_round_is_started(world, token_client, researcher_client):
    study = world["study"]
    rounds = token_client.get(f"/api/studies/{study.slug}/rounds/").json()
    assert [r["round"] for r in rounds] == [1] and rounds[0]["n_annotations"] == 4
    page_rounds = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).context["rounds"]
    assert rounds[0]["alpha"] == page_rounds[0]["alpha"] and rounds[0]["alpha_n"] == page_rounds[0]["alpha_n"]
    assert rounds[0]["alpha_ci95"] == (list(page_rounds[0]["alpha_ci95"]) if page_rounds[0]["alpha_ci95"] else None)
    blank = token_client.post(
        f"/api/studies/{study.slug}/rounds/", data=json.dumps({"instructions": "  "}), content_type="application/json"
    )
    assert blank.status_code == 400 and "instructions" in blank.json()
    wrong = token_client.post(
        f"/api/studies/{study.slug}/rounds/", data=json.dumps({"instructions": 7}), content_type="application/json"
    )
    assert wrong.status_code == 400 and "instructions" in wrong.json()
    response = token_client.post(
        f"/api/studies/{study.slug}/rounds/",
        data=json.dumps({"instructions": "Round two: name the step."}),
        content_type="application/json",
    )
    assert response.status_code == 201
    new = Study.objects.get(slug=response.json()["slug"])
    assert new.round == 2 and new.first_round_id == study.pk and response.json()["first_round"] == study.slug
    assert new.guideline_version.instructions == "Round two: name the step."
    assert [r["round"] for r in token_client.get(f"/api/studies/{new.slug}/rounds/").json()] == [1, 2]


# -- items and annotations -------------------------------------------------------------------


def test_items_are_filtered_by_role_done_and_search(world, token_client):
    url = f"/api/studies/{world['study'].slug}/items/"
    everything = token_client.get(url).json()
    assert everything["count"] == 5
    main = token_client.get(url + "?role=main").json()["results"]
    assert [i["item_id"] for i in main] == ["item-1", "item-2", "item-3"]
    filled = {i["item_id"]: i["n_filled"] for i in main}
    assert sum(filled.values()) == 4 and all(i["k"] == 2 for i in main)
    done = token_client.get(url + "?done=true").json()["results"]
    assert {i["item_id"] for i in done} == {k for k, n in filled.items() if n >= 2}
    assert all(i["done"] for i in done)
    not_done = token_client.get(url + "?done=false").json()["results"]
    assert {i["item_id"] for i in not_done} == {k for k, n in filled.items() if n < 2}
    gold = token_client.get(url + "?role=qualification").json()["results"]
    assert [i["item_id"] for i in gold] == ["gold-1", "gold-2"] and gold[0]["done"] is None
    assert [i["item_id"] for i in token_client.get(url + "?search=item-2").json()["results"]] == ["item-2"]
    held = token_client.get(url + f"?item_id={world['held'].item.item_id}").json()["results"][0]
    assert held["n_reserved"] == 1
    for query, field in [("role=boss", "role"), ("done=perhaps", "done")]:
        response = token_client.get(url + "?" + query)
        assert response.status_code == 400 and field in response.json()
    assert token_client.get("/api/studies/no-such-study/items/").status_code == 404


def test_annotations_are_filtered_by_item_participant_label_and_time(world, token_client):
    study = world["study"]
    url = f"/api/studies/{study.slug}/annotations/"
    everything = token_client.get(url).json()
    assert everything["count"] == Annotation.objects.filter(study=study).count() == 10
    one = world["participants"]["ann-one"]
    mine = token_client.get(url + f"?participant={one.pk}").json()["results"]
    assert (
        len(mine) == 4
        and {a["annotator"] for a in mine} == {"ann-one"}
        and {a["participant"] for a in mine} == {one.pk}
    )
    assert token_client.get(url + "?annotator=ann-two").json()["count"] == 4
    failures = token_client.get(url + "?label=has_failure").json()["results"]
    assert len(failures) == 2 and all(a["has_failure"] and a["label"] == "has_failure" for a in failures)
    assert failures[0]["failures"] == ONE_FAILURE["failures"]
    item_id = failures[0]["item_id"]
    assert all(a["item_id"] == item_id for a in token_client.get(url + f"?item={item_id}").json()["results"])
    assert token_client.get(url + "?source=qualification").json()["count"] == 6
    times = sorted(Annotation.objects.filter(study=study).values_list("submitted_at", flat=True))
    middle = times[5].isoformat().replace("+00:00", "Z")
    after = token_client.get(url, {"submitted_after": middle}).json()["count"]
    before = token_client.get(url, {"submitted_before": middle}).json()["count"]
    assert after + before == 10 and after >= 1 and before >= 1
    for query, field in [
        ({"submitted_after": "yesterday"}, "submitted_after"),
        ({"participant": "1" + "0" * 30}, "participant"),
        ({"participant": "x"}, "participant"),
        ({"label": "maybe"}, "label"),
        ({"choice": "99999999999999999999"}, "choice"),
        ({"excluded": "2"}, "excluded"),
    ]:
        response = token_client.get(url, query)
        assert response.status_code == 400 and field in response.json(), (query, response.content)


# -- the export ------------------------------------------------------------------------------


def test_the_jsonl_export_is_byte_for_byte_the_commands_file(world, token_client, tmp_path):
    study = world["study"]
    output = tmp_path / "annotations.jsonl"
    call_command("export_annotations", "--study", study.slug, "--output", str(output), stdout=io.StringIO())
    response = token_client.get(f"/api/studies/{study.slug}/export/?format=jsonl")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert b"".join(response.streaming_content) == output.read_bytes()
    default = token_client.get(f"/api/studies/{study.slug}/export/")
    assert b"".join(default.streaming_content) == output.read_bytes()


def test_the_csv_export_is_the_pages_csv_with_formula_cells_neutralised(world, token_client, researcher_client):
    study = world["study"]
    Annotation.objects.filter(study=study).update(comments='=HYPERLINK("http://x")')
    response = token_client.get(f"/api/studies/{study.slug}/export/?format=csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    api_csv = b"".join(response.streaming_content)
    page_csv = b"".join(
        researcher_client.get(reverse("annotate:study_export", args=[study.slug, "csv"])).streaming_content
    )
    assert api_csv == page_csv
    rows = list(csv.DictReader(io.StringIO(api_csv.decode())))
    assert len(rows) == 10 and all(r["comments"].startswith("'=") for r in rows)
    for fmt in ("xlsx", "json", "a%00b"):
        bad = token_client.get(f"/api/studies/{study.slug}/export/?format={fmt}")
        assert bad.status_code == 400 and "format" in bad.content.decode()
    assert token_client.get("/api/studies/no-such-study/export/?format=csv").status_code == 404


# -- participants ----------------------------------------------------------------------------


def test_participants_are_listed_with_the_study_pages_counts_and_filtered_by_state(world, token_client):
    url = f"/api/studies/{world['study'].slug}/participants/"
    rows = token_client.get(url).json()["results"]
    assert [r["pid"] for r in rows] == ["ann-one", "ann-two", "ann-holder"]
    by_pid = {r["pid"]: r for r in rows}
    assert by_pid["ann-one"]["n_main"] == 2 and by_pid["ann-holder"]["n_reserved"] == 1
    assert by_pid["ann-holder"]["state"] == "annotating"
    assert token_client.get(url + "?state=returned").json()["count"] == 0
    assert token_client.get(url + "?state=annotating").json()["count"] == 3
    assert [r["pid"] for r in token_client.get(url + "?search=holder").json()["results"]] == ["ann-holder"]
    assert token_client.get(url + "?state=gone").status_code == 400


def test_release_needs_confirmation_frees_the_slots_and_refuses_twice(world, token_client):
    study, holder, held = world["study"], world["holder"], world["held"]
    url = f"/api/studies/{study.slug}/participants/{holder.pk}/release/"
    for body in ({}, {"confirm": "no"}, {"confirm": True}):
        response = token_client.post(url, data=json.dumps(body), content_type="application/json")
        assert response.status_code == 400 and "confirm" in response.json()
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.RESERVED
    response = token_client.post(url, data=json.dumps({"confirm": "yes"}), content_type="application/json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (
        body["released"] == 1 and body["participant"]["state"] == "returned" and body["participant"]["n_reserved"] == 0
    )
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.RELEASED
    again = token_client.post(url, data=json.dumps({"confirm": "yes"}), content_type="application/json")
    assert again.status_code == 409 and "already returned" in again.json()["detail"]
    assert (
        token_client.post(
            f"/api/studies/{study.slug}/participants/99999999999999999999/release/",
            data=json.dumps({"confirm": "yes"}),
            content_type="application/json",
        ).status_code
        == 404
    )
    other = study_make(name="Other", n_items=1)
    assert (
        token_client.post(
            f"/api/studies/{other.slug}/participants/{holder.pk}/release/",
            data=json.dumps({"confirm": "yes"}),
            content_type="application/json",
        ).status_code
        == 404
    )


def test_release_of_a_finished_participant_with_nothing_reserved_is_a_409(world, token_client):
    p = world["participants"]["ann-one"]
    Participation.objects.filter(pk=p.pk).update(state="completed")
    response = token_client.post(
        f"/api/studies/{world['study'].slug}/participants/{p.pk}/release/",
        data=json.dumps({"confirm": "yes"}),
        content_type="application/json",
    )
    assert response.status_code == 409 and "nothing to release" in response.json()["detail"]
    assert Participation.objects.get(pk=p.pk).state == "completed"


# -- test participants ---------------------------------------------------------------------


def test_test_participants_are_left_out_unless_include_test(world, token_client, tmp_path):
    from annotate.participation.services import participation_consent, participation_test_start

    study = world["study"]
    tester = participation_consent(participation=participation_test_start(study=study))
    for label in (False, False, True):  # two gold items (answered right), then a main item
        annotate_next(tester, label=label)
    assert Annotation.objects.filter(is_test=True).count() == 3
    base = f"/api/studies/{study.slug}"
    assert token_client.get(f"{base}/annotations/").json()["count"] == 10
    with_test = token_client.get(f"{base}/annotations/?include_test=1").json()
    assert with_test["count"] == 13 and sum(a["is_test"] for a in with_test["results"]) == 3
    pids = [r["pid"] for r in token_client.get(f"{base}/participants/").json()["results"]]
    assert tester.annotator.pid not in pids
    rows = token_client.get(f"{base}/participants/?include_test=true").json()["results"]
    assert [r["is_test"] for r in rows if r["pid"] == tester.annotator.pid] == [True]
    items = {i["item_id"]: i for i in token_client.get(f"{base}/items/?role=main").json()["results"]}
    items_all = {i["item_id"]: i for i in token_client.get(f"{base}/items/?role=main&include_test=1").json()["results"]}
    assert sum(i["n_annotations"] for i in items_all.values()) == sum(i["n_annotations"] for i in items.values()) + 1
    # Never toward k, whichever way the list is read.
    assert [i["n_filled"] for i in items_all.values()] == [i["n_filled"] for i in items.values()]
    detail = token_client.get(f"{base}/").json()["progress"]
    assert detail["test_participants"] == 1 and detail["participants"] == 3 and detail["coverage"]["slots_filled"] == 4
    for flag, option in ((False, []), (True, ["--include-test"])):
        output = tmp_path / f"export-{flag}.jsonl"
        call_command(
            "export_annotations", "--study", study.slug, "--output", str(output), *option, stdout=io.StringIO()
        )
        url = f"{base}/export/?format=jsonl" + ("&include_test=1" if flag else "")
        assert b"".join(token_client.get(url).streaming_content) == output.read_bytes()
    for url in (f"{base}/annotations/?include_test=perhaps", f"{base}/export/?include_test=2"):
        response = token_client.get(url)
        assert response.status_code == 400 and "include_test" in response.json()


# -- the report ------------------------------------------------------------------------------


def test_the_report_gives_the_study_pages_numbers_with_n_and_intervals(world, token_client, researcher_client):
    study = world["study"]
    report = token_client.get(f"/api/studies/{study.slug}/report/").json()
    page = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).context
    assert report["kind"] == "critical_failure" and report["k"] == 2
    assert report["rounds"][0]["alpha"] == page["rounds"][0]["alpha"]
    assert report["rounds"][0]["n_annotations"] == page["rounds"][0]["n_annotations"]
    assert report["qualification"]["share"] == page["progress"]["qualification_pass_rate"]
    assert report["qualification"]["n"] == page["progress"]["qualification_total"]
    assert report["attention_checks"]["n"] == page["progress"]["attention_total"]
    assert report["median_active_seconds"]["value"] == page["progress"]["median_active_seconds"]
    assert report["median_active_seconds"]["n"] == 4
    assert report["hourly_pay"] == page["progress"]["hourly_pay"]
    assert report["agreement_url"].endswith(f"/api/studies/{study.slug}/agreement/")
    # A critical-failure study's results are its agreement reports: no results of its own, and
    # no other kind's.
    assert report["results_name"] is None
    assert not {"choice_results", "faithfulness_results", "rubric_results"} & set(report)


def test_the_report_of_a_multiple_choice_study_is_table_2_with_intervals(token_client, researcher_client):
    from annotate.kinds.multiple_choice.testing import step_inference_study
    from annotate.participation.submissions import annotation_submit

    study = step_inference_study(n_items=3)
    for pid, choices in (("mc-a", [0, 0, 1]), ("mc-b", [0, 2, 1])):
        p = annotator_start(study, pid)
        for choice in choices:
            a = assignment_next(participation=p)
            assert a is not None
            annotation_submit(participation=p, public_id=a.public_id, answer={"choice": choice}, submission_id="t")
    report = token_client.get(f"/api/studies/{study.slug}/report/").json()
    page = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).context
    results = report["choice_results"]["step_inference"]
    expected = page["choice_results"]["step_inference"]
    for key, value in expected.items():
        assert results[key] == value, key
    assert results["yield_estimate"]["n"] == expected["complete_items"] == 3
    assert results["yield_estimate"]["successes"] == len(expected["gold"]) == 1
    assert results["human_accuracy_estimate"]["n"] == 6 and results["human_accuracy_estimate"]["successes"] == 3
    low, high = results["human_accuracy_estimate"]["ci95"]
    assert low < 0.5 < high
    assert report["agreement_url"] is None


def test_the_report_of_a_constraint_faithfulness_study_equals_the_page_with_intervals(token_client, researcher_client):
    from annotate.kinds.constraint_faithfulness.testing import vanilla_cake_faithfulness_study
    from annotate.participation.submissions import annotation_submit

    study = vanilla_cake_faithfulness_study(n_items=4)
    for pid, q3 in (("cf-a", ["yes", "yes", "no", "yes"]), ("cf-b", ["yes", "no", "no", "not_sure"])):
        p = annotator_start(study, pid)
        for answer in q3:
            a = assignment_next(participation=p)
            assert a is not None
            wrong = [{"step": 2, "error_types": ["wrong_order"]}] if answer == "no" else []
            annotation_submit(
                participation=p,
                public_id=a.public_id,
                submission_id="t",
                answer={
                    "specific_goal_ok": "yes",
                    "meets_constraint": "yes",
                    "steps_correct": answer,
                    "wrong_steps": wrong,
                    "comments": "",
                },
            )
    report = token_client.get(f"/api/studies/{study.slug}/report/").json()["faithfulness_results"]
    page = json.loads(
        json.dumps(
            researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).context["faithfulness_results"]
        )
    )
    for key, value in page.items():
        if key != "accuracy":
            assert report[key] == value, key
    for ctype, cells in page["accuracy"].items():
        for question, cell in cells.items():
            ours = report["accuracy"][ctype][question]
            assert {k: ours[k] for k in cell} == cell
            if cell["items"]:
                low, high = ours["ci95"]
                assert low <= cell["accuracy"] <= high
            else:
                assert ours["ci95"] is None
    steps = report["questions"]["steps_correct"]
    assert steps["kappa_items"] == 4 and steps["alpha_ci95"] is not None


def test_the_lists_read_the_same_number_of_queries_whatever_their_size(token_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries(study, n_annotators: int) -> dict[str, int]:
        for n in range(n_annotators):
            p = annotator_start(study, f"{study.slug}-{n}")
            annotate_next(p, label=n % 2 == 0)
            annotate_next(p, label=False)
        counts = {}
        for url in ["/api/studies/"] + _slug_urls(study.slug):
            with CaptureQueriesContext(connection) as captured:
                response = token_client.get(url)
                if response.streaming:
                    b"".join(response.streaming_content)
            assert response.status_code == 200, url
            counts[url.replace(study.slug, "S")] = len(captured)
        return counts

    token_client.get("/api/studies/")  # the token's first use records it (one write, once)
    small = queries(study_make(name="Small", n_items=4, annotators_per_item=2), 2)
    large = queries(study_make(name="Large", n_items=12, annotators_per_item=3), 9)
    assert large == small


# -- the schema ------------------------------------------------------------------------------

NEW_PATHS = [
    "/api/studies/",
    "/api/studies/imports/{id}/",
    "/api/studies/{slug}/",
    "/api/studies/{slug}/rounds/",
    "/api/studies/{slug}/items/",
    "/api/studies/{slug}/annotations/",
    "/api/studies/{slug}/export/",
    "/api/studies/{slug}/participants/",
    "/api/studies/{slug}/participants/{id}/release/",
    "/api/studies/{slug}/report/",
]

API_MODULES = (
    "studies/apis.py",
    "studies/api_serializers.py",
    "studies/create_serializers.py",
    "studies/api_fields.py",
    "studies/item_apis.py",
    "studies/participant_apis.py",
    "reports/apis.py",
)


def test_the_openapi_schema_has_every_studies_path_and_validates_without_warnings(researcher_client):
    from drf_spectacular.drainage import GENERATOR_STATS
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.validation import validate_schema

    GENERATOR_STATS.reset()
    with GENERATOR_STATS.silence():
        schema = SchemaGenerator().get_schema(request=None, public=True)
    messages = list(GENERATOR_STATS._warn_cache) + list(GENERATOR_STATS._error_cache)
    GENERATOR_STATS.reset()
    validate_schema(schema)
    # Ours: anything raised while reading the studies API modules, and enum naming trouble of the
    # choice sets only these views use (the kinds, roles and states have override names).
    ours = [
        m
        for m in messages
        if any(f"annotate/{name}" in m for name in API_MODULES)
        or any(
            f'"{field}"' in m or f"({field.title()}Enum)" in m
            for field in ("kind", "role", "source", "state", "qualification_enabled")
        )
    ]
    assert ours == []
    for path in NEW_PATHS:
        assert path in schema["paths"], path
    create = schema["paths"]["/api/studies/"]["post"]
    assert {"application/json", "multipart/form-data"} <= set(create["requestBody"]["content"])
    assert create["requestBody"]["content"]["application/json"]["examples"]
    assert "patch" in schema["paths"]["/api/studies/{slug}/"]
    served = researcher_client.get("/api/schema/?format=json")
    assert served.status_code == 200 and all(path in served.json()["paths"] for path in NEW_PATHS)
