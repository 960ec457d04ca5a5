"""Rubrics: a study kind defined as data. A rubric is checked strictly (every problem names its
path, hostile sizes refused, YAML read safely), stored from a file through the API, the page or
the command, and its kind then goes like a built-in one: a study of it, an annotator's answers
checked per question (``answer.<id>``), one export column per question, alpha per question at
its level of measurement in the report API, and known answers scoring attention checks."""

from __future__ import annotations

import csv
import io
import json
from typing import Literal

import krippendorff
import numpy as np
import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from annotate.kinds import kind_choices, kind_get
from annotate.kinds.base import ROLE_ATTENTION, ItemRecordError
from annotate.kinds.rubric.definition import rubric_kind
from annotate.kinds.rubric.schema import (
    MAX_OPTIONS,
    MAX_QUESTIONS,
    MAX_SOURCE_BYTES,
    RubricError,
    answer_check,
    rubric_from_text,
    rubric_parse,
)
from annotate.kinds.rubric.services import rubric_kinds_forget
from annotate.models import Annotation, Assignment, Rubric, Study

RUBRIC_YAML = """
key: clarity_check
title: Clarity check
instructions: Read the goal and the steps, then answer every question.
questions:
  - id: complete
    type: yes_no
    prompt: Does the procedure reach the goal?
    required: true
  - id: clear
    type: likert
    prompt: How clear are the steps?
    required: true
    scale: {min: 1, max: 5, labels: {1: unusable, 5: perfectly clear}}
  - id: audience
    type: multiple_choice
    prompt: Who could follow it?
    required: false
    options: [anyone, a hobbyist, an expert]
  - id: notes
    type: free_text
    prompt: Anything else?
    required: false
    max_length: 200
  - id: unsafe_steps
    type: step_links
    prompt: Which steps are unsafe?
    required: false
"""

ITEMS = [
    {"item_id": f"p-{n}", "topic": "Food", "goal": f"Goal {n}", "candidate_steps": ["Boil water.", "Steep.", "Pour."]}
    for n in range(1, 5)
] + [
    {
        "item_id": "check-1",
        "goal": "Tie a shoe",
        "candidate_steps": ["Cross the laces.", "Pull tight."],
        "role": "attention",
        "known_answer": {"complete": "yes", "clear": 5},
    }
]

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _forget_rubric_kinds():
    """Rubric kinds registered by one test are gone before the next (its rows are rolled back)."""
    rubric_kinds_forget()
    yield
    rubric_kinds_forget()


def _rubric_data(**changes) -> dict:
    data = yaml.safe_load(RUBRIC_YAML)
    data.update(changes)
    return data


def _problems(data) -> dict[str, list[str]]:
    with pytest.raises(RubricError) as caught:
        rubric_parse(data)
    return caught.value.by_path()


# -- the schema ------------------------------------------------------------------------------


def test_a_rubric_with_every_question_type_is_read_from_yaml_and_json_alike():
    rubric = rubric_from_text(RUBRIC_YAML)
    assert [(q.id, q.type, q.required) for q in rubric.questions] == [
        ("complete", "yes_no", True),
        ("clear", "likert", True),
        ("audience", "multiple_choice", False),
        ("notes", "free_text", False),
        ("unsafe_steps", "step_links", False),
    ]
    clear = rubric.question("clear")
    assert clear is not None and clear.scale_points == [
        (1, "unusable"),
        (2, ""),
        (3, ""),
        (4, ""),
        (5, "perfectly clear"),
    ]
    assert rubric_from_text(json.dumps(rubric.as_dict()), name="r.json") == rubric  # the stored shape reads again


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        (lambda d: d.update(key="Bad Key"), "key", "lower-case letters"),
        (lambda d: d.update(key="k" * 33), "key", "at most 32"),
        (lambda d: d.pop("title"), "title", "is required"),
        (lambda d: d.update(instructions=7), "instructions", "must be text"),
        (lambda d: d.update(colour="red"), "colour", "is not a rubric field"),
        (lambda d: d.update(questions=[]), "questions", "non-empty list"),
        (lambda d: d["questions"][0].update(type="slider"), "questions[0].type", "must be one of"),
        (lambda d: d["questions"][0].update(required="yes"), "questions[0].required", "true or false"),
        (lambda d: d["questions"][0].update(prompt=""), "questions[0].prompt", "must not be empty"),
        (lambda d: d["questions"][0].update(scale={"min": 1, "max": 3}), "questions[0].scale", "not a rubric field"),
        (lambda d: d["questions"][1].update(id="complete"), "questions[1].id", "repeats the id"),
        (lambda d: d["questions"][1].update(id="2x"), "questions[1].id", "lower-case letters"),
        (lambda d: d["questions"][1].pop("scale"), "questions[1].scale", "is required for a likert"),
        (lambda d: d["questions"][1]["scale"].update(max=1), "questions[1].scale.max", "must be greater than min"),
        (lambda d: d["questions"][1]["scale"].update(min=1.5), "questions[1].scale.min", "whole number"),
        (lambda d: d["questions"][1]["scale"].update(max=50), "questions[1].scale.max", "at most 11 points"),
        (lambda d: d["questions"][1]["scale"].update(labels={9: "x"}), "questions[1].scale.labels.9", "a value of"),
        (lambda d: d["questions"][2].update(options=["a"]), "questions[2].options", "at least 2"),
        (lambda d: d["questions"][2].update(options=["a", "a"]), "questions[2].options[1]", "repeats"),
        (lambda d: d["questions"][2].update(options=["a", 3]), "questions[2].options[1]", "non-empty text"),
        (lambda d: d["questions"][2].pop("options"), "questions[2].options", "is required for a multiple_choice"),
        (lambda d: d["questions"][3].update(max_length=0), "questions[3].max_length", "from 1 to"),
        (lambda d: d["questions"][4].update(options=["a", "b"]), "questions[4].options", "not a rubric field"),
    ],
)
def test_every_refusal_names_the_path_of_the_problem(change, path, message):
    data = _rubric_data()
    change(data)
    problems = _problems(data)
    assert path in problems, problems
    assert any(message in problem for problem in problems[path]), problems


def test_hostile_rubrics_are_refused_by_size_and_yaml_never_builds_objects():
    many = [{"id": f"q{n}", "type": "yes_no", "prompt": "?", "required": True} for n in range(MAX_QUESTIONS + 1)]
    assert "must have at most 30 questions" in _problems(_rubric_data(questions=many))["questions"][0]
    options = [f"o{n}" for n in range(MAX_OPTIONS + 1)]
    data = _rubric_data()
    data["questions"][2]["options"] = options
    assert "at most 20 options" in _problems(data)["questions[2].options"][0]
    data = _rubric_data(title="t" * 201)
    assert "at most 200 characters" in _problems(data)["title"][0]
    data = _rubric_data()
    data["questions"][0]["prompt"] = "p" * 1001
    assert "at most 1000 characters" in _problems(data)["questions[0].prompt"][0]
    with pytest.raises(RubricError, match=f"at most {MAX_SOURCE_BYTES} bytes"):
        rubric_from_text("x" * (MAX_SOURCE_BYTES + 1))
    # A tag that would build a Python object is not read (safe_load), so nothing runs.
    with pytest.raises(RubricError, match="file: not valid YAML"):
        rubric_from_text("key: !!python/object/apply:os.system ['echo hacked']\n")
    with pytest.raises(RubricError, match="rubric: must be a mapping"):
        rubric_from_text("- a list\n- not a rubric\n")
    assert len(_problems({str(n): n for n in range(500)})) <= 50  # one refusal lists a bounded number
    # Deep nesting never reaches a parser's recursion (the crawler's 500 brackets crashed it):
    # by brackets, as JSON or YAML flow style, and by indentation, which only YAML has.
    for deep in ("[" * 500, "{" * 40 + "}" * 40, "a: [" * 33 + "]" * 33):
        with pytest.raises(RubricError, match="file: is nested more than 32 levels deep"):
            rubric_from_text(deep)
    indented = "".join(f"{' ' * depth}k{depth}:\n" for depth in range(600))  # 183 KB, 600 levels
    with pytest.raises(RubricError, match="file: is nested more than 32 levels deep"):
        rubric_from_text(indented)


def test_answers_are_checked_per_question_type_and_required_flag():
    rubric = rubric_from_text(RUBRIC_YAML)
    good = {"complete": "no", "clear": 4, "audience": "an expert", "notes": " fine ", "unsafe_steps": [3, 1]}
    cleaned, problems = answer_check(rubric, good, 3)
    assert problems == []
    assert cleaned == {"complete": "no", "clear": 4, "audience": "an expert", "notes": "fine", "unsafe_steps": [1, 3]}
    # The optional questions may stay unanswered; no step linked is an answer.
    cleaned, problems = answer_check(rubric, {"complete": "yes", "clear": 1, "unsafe_steps": []}, 3)
    assert problems == [] and cleaned["unsafe_steps"] == [] and cleaned["audience"] is None
    bad = {"complete": "maybe", "clear": 6, "audience": "nobody", "notes": "x" * 201, "unsafe_steps": [4], "extra": 1}
    _, problems = answer_check(rubric, bad, 3)
    assert [path for path, _ in problems] == [
        "answer.complete",
        "answer.clear",
        "answer.audience",
        "answer.notes",
        "answer.unsafe_steps",
        "answer.extra",
    ]
    _, problems = answer_check(rubric, {"clear": 3}, 3)
    assert problems == [("answer.complete", "an answer is required")]


def test_an_items_known_answer_is_checked_against_the_questions():
    kind = rubric_kind(rubric_from_text(RUBRIC_YAML))
    spec = kind.parse_record(ITEMS[-1])
    assert spec.role == ROLE_ATTENTION and spec.expected == {"complete": "yes", "clear": 5}
    for known, field in [
        ({"clear": 9}, "known_answer.clear"),
        ({"notes": "x"}, "known_answer.notes"),
        ({"nope": "yes"}, "known_answer.nope"),
        ({"unsafe_steps": [3]}, "known_answer.unsafe_steps"),  # beyond the item's two steps
    ]:
        with pytest.raises(ItemRecordError) as caught:
            kind.parse_record({**ITEMS[-1], "known_answer": known})
        assert caught.value.field == field
    with pytest.raises(ItemRecordError) as caught:
        kind.parse_record({**ITEMS[-1], "known_answer": None})
    assert caught.value.field == "known_answer"  # an attention item needs one


# -- stored, a study of it, answers, export, agreement ---------------------------------------


def _create_by_api(client: Client) -> dict:
    upload = SimpleUploadedFile("clarity.yaml", RUBRIC_YAML.encode(), content_type="application/yaml")
    response = client.post("/api/rubrics/", {"file": upload})
    assert response.status_code == 201, response.content
    return response.json()


def _study_by_api(client: Client, kind: str, **fields) -> Study:
    upload = SimpleUploadedFile(
        "items.jsonl", "\n".join(json.dumps(i) for i in ITEMS).encode(), content_type="application/jsonl"
    )
    body = {
        "name": "Rubric study",
        "kind": kind,
        "items_file": upload,
        "min_seconds": 0,
        "training_enabled": "false",
        "qualification_enabled": "off",
        "attention_check_rate": 0,
        "allow_other_pids": "true",
        "annotators_per_item": 3,
        **fields,
    }
    response = client.post("/api/studies/", body)
    assert response.status_code == 201, response.content
    return Study.objects.get(slug=response.json()["slug"])


def _enter(client: Client, study: Study, pid: str) -> None:
    response = client.get(
        reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": f"s-{pid}"}
    )
    assert response.status_code == 302, response.content
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})


def _page_state(html: str) -> dict:
    return json.loads(html.split('id="page-state" type="application/json">')[1].split("</script>")[0])


def _submit(client: Client, url: str, answer) -> tuple[int, dict]:
    response = client.post(
        url, data=json.dumps({"answer": answer, "submission_id": "s"}), content_type="application/json"
    )
    return response.status_code, response.json()


# Planted answers: three annotators on four items.
PLANTED = {
    "a1": {
        "p-1": {"complete": "yes", "clear": 5, "audience": "anyone", "unsafe_steps": []},
        "p-2": {"complete": "no", "clear": 2, "audience": "an expert", "unsafe_steps": [2]},
        "p-3": {"complete": "yes", "clear": 4, "audience": "anyone", "unsafe_steps": []},
        "p-4": {"complete": "no", "clear": 1, "audience": "a hobbyist", "unsafe_steps": [1, 3]},
    },
    "a2": {
        "p-1": {"complete": "yes", "clear": 4, "audience": "anyone", "unsafe_steps": []},
        "p-2": {"complete": "no", "clear": 2, "audience": "a hobbyist", "unsafe_steps": [2]},
        "p-3": {"complete": "no", "clear": 3, "audience": "anyone", "unsafe_steps": [1]},
        "p-4": {"complete": "no", "clear": 2, "audience": "a hobbyist", "unsafe_steps": [1, 3]},
    },
    "a3": {
        "p-1": {"complete": "yes", "clear": 5, "audience": "a hobbyist", "unsafe_steps": []},
        "p-2": {"complete": "yes", "clear": 1, "audience": "an expert", "unsafe_steps": [2]},
        "p-3": {"complete": "yes", "clear": 5, "audience": "anyone", "unsafe_steps": []},
        "p-4": {"complete": "no", "clear": 1, "audience": "a hobbyist", "unsafe_steps": [3]},
    },
}


def _package_alpha(question: str, level: Literal["nominal", "ordinal"]) -> float:
    items = ["p-1", "p-2", "p-3", "p-4"]
    values: dict = {}
    rows = []
    for annotator in ("a1", "a2", "a3"):
        row = []
        for item in items:
            value = PLANTED[annotator][item][question]
            value = ",".join(map(str, value)) if isinstance(value, list) else value
            row.append(values.setdefault(value, value if isinstance(value, int) else len(values)))
        rows.append(row)
    return float(krippendorff.alpha(reliability_data=np.array(rows, dtype=float), level_of_measurement=level))


def test_a_rubric_from_a_yaml_file_goes_from_the_api_to_alpha_per_question(researcher_client):
    created = _create_by_api(researcher_client)
    assert created["kind"] == "rubric:clarity_check" and created["created_by"] == "rita"
    assert Rubric.objects.get().definition["questions"][1]["scale"] == {
        "min": 1,
        "max": 5,
        "labels": {"1": "unusable", "5": "perfectly clear"},
    }
    assert ("rubric:clarity_check", "Clarity check") in kind_choices()
    listed = researcher_client.get("/api/rubrics/").json()
    assert [r["key"] for r in listed] == ["clarity_check"]
    study = _study_by_api(researcher_client, created["kind"])
    assert study.kind == "rubric:clarity_check" and study.items.count() == 5
    study.full_clean()  # the kind field takes the rubric's kind without a migration

    clients = {pid: Client() for pid in PLANTED}
    for pid, client in clients.items():
        _enter(client, study, pid)
    first = clients["a1"]
    page = first.get(reverse("annotate:work", args=[study.slug]))
    html = page.content.decode()
    assert page.status_code == 200 and 'id="question-clear"' in html and "perfectly clear" in html
    state = _page_state(html)
    # A missing required answer is refused, naming answer.<id>; nothing is stored.
    status, body = _submit(first, state["submitUrl"], {"clear": 3})
    assert status == 400 and [e["field"] for e in body["errors"]] == ["answer.complete"]
    assert "question 1" in body["errors"][0]["message"]
    assert not Annotation.objects.exists()

    for pid, client in clients.items():
        while True:
            page = client.get(reverse("annotate:work", args=[study.slug]))
            if page.status_code == 302:
                break
            state = _page_state(page.content.decode())
            item_id = Assignment.objects.get(public_id=state["assignment"]).item.item_id
            status, body = _submit(
                client, state["submitUrl"], {**PLANTED[pid][item_id], "notes": f"{pid} on {item_id}"}
            )
            assert status == 200 and body["ok"], body
    assert Annotation.objects.filter(study=study).count() == 12

    # The export: one column per question after the shared ones, then the known answer (CSV and
    # JSONL alike); no other kind's columns.
    export = researcher_client.get(reverse("annotate:study_export", args=[study.slug, "csv"]))
    table = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    columns = ["answer.complete", "answer.clear", "answer.audience", "answer.notes", "answer.unsafe_steps"]
    assert list(table[0])[-6:] == [*columns, "expected_answer"]
    assert not {"has_failure", "failures", "choice", "expected_choice", "expected_has_failure"} & set(table[0])
    row = next(r for r in table if r["annotator"] == "a2" and r["item_id"] == "p-4")
    assert [row[c] for c in columns] == ["no", "2", "a hobbyist", "a2 on p-4", "[1, 3]"] or [
        row[c] for c in columns
    ] == ["no", "2", "a hobbyist", "a2 on p-4", "[1,3]"]
    jsonl = researcher_client.get(reverse("annotate:study_export", args=[study.slug, "jsonl"]))
    lines = [json.loads(line) for line in b"".join(jsonl.streaming_content).decode().splitlines()]
    assert all(line["answer.clear"] == line["answer"]["clear"] for line in lines)
    items = researcher_client.get(f"/api/studies/{study.slug}/items/", {"role": "attention"}).json()["results"]
    assert [(i["item_id"], i["expected_answer"]) for i in items] == [("check-1", {"complete": "yes", "clear": 5})]

    # The report API: alpha per question at its level, equal to the krippendorff package's.
    report = researcher_client.get(f"/api/studies/{study.slug}/report/").json()
    results = {q["id"]: q for q in report["rubric_results"]["questions"]}
    assert results["complete"]["level"] == "nominal"
    assert results["complete"]["alpha"] == pytest.approx(_package_alpha("complete", "nominal"))
    assert results["clear"]["level"] == "ordinal"
    assert results["clear"]["alpha"] == pytest.approx(_package_alpha("clear", "ordinal"))
    assert results["clear"]["alpha"] != pytest.approx(_package_alpha("clear", "nominal"))
    assert results["audience"]["alpha"] == pytest.approx(_package_alpha("audience", "nominal"))
    assert results["unsafe_steps"]["level"] == "nominal"
    assert results["unsafe_steps"]["alpha"] == pytest.approx(_package_alpha("unsafe_steps", "nominal"))
    assert all(results[q]["alpha_n"] == 4 for q in ("complete", "clear", "audience", "unsafe_steps"))
    # Each alpha carries its interval as every kind's does (the BCa bootstrap over its 4 items),
    # or says why it has none; the interval holds the point.
    for q in ("complete", "clear", "audience", "unsafe_steps"):
        shown = results[q]
        assert shown["alpha_interval"]["approximate"] is True, shown  # 4 items: under the bootstrap's 100
        if shown["alpha"] is not None and shown["alpha_ci95"] is not None:
            assert shown["alpha_ci95"][0] <= shown["alpha"] <= shown["alpha_ci95"][1], shown
        else:
            assert shown["alpha_ci95_not_estimable"] or shown["alpha_undefined"], shown
    assert results["notes"]["level"] is None and results["notes"]["alpha"] is None
    assert "not computed" in results["notes"]["not_computed"]
    assert report["rubric_results"]["n_answers"] == 12

    # The study page shows the same table.
    detail = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert 'id="rubric-alpha-clear"' in detail and f"{results['clear']['alpha']:.3f}" in detail


def test_a_known_answer_scores_an_attention_check_right_or_wrong(researcher_client):
    from annotate.participation.reservations import assignment_next
    from annotate.participation.submissions import annotation_submit
    from annotate.testing import annotator_start

    kind = _create_by_api(researcher_client)["kind"]
    study = _study_by_api(researcher_client, kind, attention_check_rate=0.5, annotators_per_item=1)
    scored = {}
    for pid, right in (("right", True), ("wrong", False)):
        p = annotator_start(study, pid)
        while (a := assignment_next(participation=p)) is not None:
            clear = 5 if (a.role != ROLE_ATTENTION or right) else 2
            answer = {"complete": "yes", "clear": clear}
            annotation_submit(participation=p, public_id=a.public_id, answer=answer, submission_id=f"{pid}-{a.pk}")
            if a.role == ROLE_ATTENTION:
                scored[pid] = Annotation.objects.get(assignment=a).correct
            else:
                assert Annotation.objects.get(assignment=a).correct is None  # main items have no known answer
            p.refresh_from_db()
            if p.excluded or pid in scored:
                break
    assert scored == {"right": True, "wrong": False}


def test_a_bad_rubric_is_refused_by_the_api_naming_the_path_and_nothing_is_stored(researcher_client):
    data = _rubric_data()
    data["questions"][1]["scale"]["max"] = 0
    response = researcher_client.post("/api/rubrics/", data, content_type="application/json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "rubric_invalid" and body["questions[1].scale.max"] == ["must be greater than min"]
    bad_yaml = SimpleUploadedFile("r.yaml", b"key: [unclosed\n", content_type="application/yaml")
    response = researcher_client.post("/api/rubrics/", {"file": bad_yaml})
    assert response.status_code == 400 and "not valid YAML" in response.json()["file"][0]
    assert not Rubric.objects.exists()
    _create_by_api(researcher_client)
    again = SimpleUploadedFile("clarity.yaml", RUBRIC_YAML.encode(), content_type="application/yaml")
    response = researcher_client.post("/api/rubrics/", {"file": again})
    assert response.status_code == 400 and "exists" in response.json()["key"][0]
    assert Client().post("/api/rubrics/", _rubric_data(), content_type="application/json").status_code in (401, 403)
    schema = researcher_client.get("/api/schema/").content.decode()
    assert "/api/rubrics/" in schema


def test_the_new_rubric_page_and_the_command_store_a_rubric_or_show_each_problem_by_path(researcher_client, tmp_path):
    page = researcher_client.post(reverse("annotate:rubric_new"), {"text": RUBRIC_YAML.replace("max: 5", "max: 0")})
    html = page.content.decode()
    assert page.status_code == 400 and "<code>questions[1].scale.max</code>: must be greater than min" in html
    hostile = RUBRIC_YAML.replace("Clarity check", "<script>alert(1)</script>")
    page = researcher_client.post(reverse("annotate:rubric_new"), {"text": hostile})
    assert page.status_code == 302
    listing = researcher_client.get(reverse("annotate:rubric_list")).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in listing and "<script>alert(1)" not in listing
    new_study = researcher_client.get(reverse("annotate:study_new")).content.decode()
    assert 'value="rubric:clarity_check"' in new_study

    path = tmp_path / "other.json"
    path.write_text(json.dumps(_rubric_data(key="other_rubric")))
    out = io.StringIO()
    call_command("rubric_create", str(path), stdout=out)
    assert "--kind rubric:other_rubric" in out.getvalue()
    assert kind_get("rubric:other_rubric").label == "Clarity check"
    items = tmp_path / "items.jsonl"
    items.write_text("\n".join(json.dumps(i) for i in ITEMS))
    out = io.StringIO()
    call_command(
        "create_study", "--name", "By command", "--items", str(items), "--kind", "rubric:other_rubric", stdout=out
    )
    assert Study.objects.get(name="By command").items.count() == 5
    path.write_text(json.dumps(_rubric_data(key="third", questions="none")))
    with pytest.raises(CommandError, match="questions: must be a non-empty list"):
        call_command("rubric_create", str(path))
    assert not Rubric.objects.filter(key="third").exists()


def test_a_rubric_stored_by_another_process_is_found_by_key(researcher):
    """A rubric row this process never registered (created by another web or Celery worker) is
    found when its kind is asked for."""
    data = rubric_parse(_rubric_data(key="elsewhere")).as_dict()
    Rubric.objects.create(key="elsewhere", title="Elsewhere", definition=data)
    assert kind_get("rubric:elsewhere").label == "Clarity check"
