"""The query parameters of the exports and reports, pages and API alike, are read by one
helper (core/query_params.py): ``include_test`` and ``format`` with a value the endpoint does
not accept are a 400 that names the parameter and the values it accepts, never ignored."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from annotate.participation.services import participation_consent, participation_test_start
from annotate.testing import annotate_next, annotator_start, study_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def study():
    """3 real annotators on 2 items, and a test participant's 2 annotations."""
    study = study_make(n_items=2, annotators_per_item=3)
    for pid in ("real-1", "real-2", "real-3"):
        p = annotator_start(study, pid)
        annotate_next(p, label=False)
        annotate_next(p, label=False)
    tester = participation_consent(participation=participation_test_start(study=study))
    annotate_next(tester, label=True)
    annotate_next(tester, label=True)
    return study


def _page_400(response, name: str, *accepted: str) -> str:
    assert response.status_code == 400, response.status_code
    text = response.content.decode()
    assert name in text and all(value in text for value in accepted), text
    return text


def _api_400(response, name: str, *accepted: str) -> str:
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert list(body) == ["code", "detail", name], body
    message = " ".join(body[name])
    assert all(value in message for value in accepted), message
    return message


# --------------------------------------------------------------------------- pages


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("value", ["banana", "2", "perhaps"])
def test_a_page_export_refuses_a_bad_include_test_naming_it(researcher_client, study, fmt, value):
    response = researcher_client.get(reverse("annotate:study_export", args=[study.slug, fmt]), {"include_test": value})
    _page_400(response, "include_test", "true", "false")


@pytest.mark.parametrize(("value", "n_lines"), [("1", 8), ("true", 8), ("yes", 8), ("0", 6), ("false", 6)])
def test_a_page_export_reads_include_test_as_the_api_does(researcher_client, study, value, n_lines):
    response = researcher_client.get(
        reverse("annotate:study_export", args=[study.slug, "jsonl"]), {"include_test": value}
    )
    assert response.status_code == 200
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert len(lines) == n_lines and all(json.loads(line)["annotator"] for line in lines)


@pytest.mark.parametrize(
    ("page", "accepted"),
    [
        ("report_annotators", ("csv",)),
        ("report_disagreements", ("csv",)),
        ("report_agreement", ("json", "judges.csv")),
        ("report_metric_agreement", ("json", "csv")),
    ],
)
def test_a_report_page_refuses_an_unknown_format_naming_it_and_its_formats(researcher_client, study, page, accepted):
    url = reverse(f"annotate:{page}", args=[study.slug])
    _page_400(researcher_client.get(url, {"format": "xml"}), "format", *accepted)
    assert researcher_client.get(url).status_code == 200
    for fmt in accepted:
        response = researcher_client.get(url, {"format": fmt})
        assert response.status_code == 200 and "attachment" in response["Content-Disposition"]


# --------------------------------------------------------------------------- the API


@pytest.mark.parametrize(
    "endpoint", ["items/", "annotations/", "participants/", "export/", "agreement", "report/", "metric-agreement"]
)
def test_every_study_endpoint_refuses_a_bad_include_test_naming_it_and_its_values(researcher_client, study, endpoint):
    response = researcher_client.get(f"/api/studies/{study.slug}/{endpoint}", {"include_test": "banana"})
    _api_400(response, "include_test", "true", "false")


def test_the_export_api_names_the_formats_it_accepts(researcher_client, study):
    _api_400(researcher_client.get(f"/api/studies/{study.slug}/export/", {"format": "xml"}), "format", "jsonl", "csv")


def test_the_agreement_api_reads_include_test_as_the_agreement_report_command_does(researcher_client, study):
    url = f"/api/studies/{study.slug}/agreement"
    assert researcher_client.get(url, {"bootstrap": 0}).json()["n_annotations"] == 6
    assert researcher_client.get(url, {"bootstrap": 0, "include_test": "false"}).json()["n_annotations"] == 6
    assert researcher_client.get(url, {"bootstrap": 0, "include_test": "1"}).json()["n_annotations"] == 8


@pytest.mark.parametrize("endpoint", ["report/", "metric-agreement"])
def test_a_report_without_test_participants_refuses_include_test_rather_than_ignore_it(
    researcher_client, study, endpoint
):
    url = f"/api/studies/{study.slug}/{endpoint}"
    assert researcher_client.get(url, {"include_test": "0", "bootstrap": 0}).status_code == 200
    message = _api_400(researcher_client.get(url, {"include_test": "1", "bootstrap": 0}), "include_test")
    assert "test participants" in message
