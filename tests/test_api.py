"""The REST API: topics and procedures with filters and pagination, and the OpenAPI schema."""

from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.django_db


def test_topics_lists_the_fourteen_topics_with_counts(researcher_client, demo):
    topics = researcher_client.get("/api/topics/").json()
    assert len(topics) == 14
    crime = next(t for t in topics if t["slug"] == "crime-law")
    assert crime["name"] == "Crime & Law" and crime["n_procedures"] == 1 and crime["n_bench"] == 1


def test_topic_detail_by_slug(researcher_client, demo):
    response = researcher_client.get("/api/topics/science-math-technology/")
    assert response.status_code == 200
    assert response.json()["n_procedures"] == 2  # Table 7's particle trajectory and Table 18's PCR


def test_procedures_filter_by_topic_and_split(researcher_client, demo):
    body = researcher_client.get("/api/procedures/?topic=science-math-technology&split=bench").json()
    assert body["count"] == 2
    assert {p["topic"] for p in body["results"]} == {"science-math-technology"}
    assert researcher_client.get("/api/procedures/?split=train").json()["count"] == 0


def test_procedures_are_paginated(researcher_client, demo):
    first = researcher_client.get("/api/procedures/?page_size=5").json()
    assert first["count"] == 17
    assert len(first["results"]) == 17 or first["next"]  # default page size is 50
    assert researcher_client.get("/api/procedures/?page=2").status_code == 404


def test_procedure_detail_keeps_step_order(researcher_client, demo):
    from mining.models import Procedure

    procedure = Procedure.objects.get(source_example_id="paper-t7-crime-law")
    body = researcher_client.get(f"/api/procedures/{procedure.pk}/").json()
    assert body["steps"][3] == "Wait 30 days for co-owners to express their desire to purchase your share."
    assert body["resources"][0] == "notary"


def test_bad_split_filter_is_a_clear_400(researcher_client, demo):
    response = researcher_client.get("/api/procedures/?split=validation")
    assert response.status_code == 400
    assert "split" in response.json()


def test_openapi_schema_describes_the_endpoints(researcher_client):
    response = researcher_client.get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["openapi"].startswith("3.")
    assert "/api/procedures/" in schema["paths"] and "/api/topics/{slug}/" in schema["paths"]
    params = {p["name"] for p in schema["paths"]["/api/procedures/"]["get"]["parameters"]}
    assert {"topic", "split", "search", "page"} <= params


def test_api_docs_page_uses_bundled_assets(researcher_client):
    html = researcher_client.get("/api/docs/").content.decode()
    assert "swagger-ui" in html
    assert "cdn.jsdelivr" not in html and "unpkg.com" not in html
