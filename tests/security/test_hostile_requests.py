"""The checks that hold for every URL (core/middleware.py) and every REST API body
(core/parsers.py): a NUL in a parameter, a path integer beyond the database's keys, and JSON
that is not JSON (NaN, Infinity, nesting, NUL, giant integers) are answered 400/404, naming
the field, before any view or database sees them."""

from __future__ import annotations

import json

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_a_nul_in_a_query_parameter_is_a_400_naming_it(researcher_client, demo):
    response = researcher_client.get("/procedures/", {"q": "oil\x00"})
    assert response.status_code == 400
    assert "<strong>q</strong>: must not contain a NUL character" in response.content.decode()


def test_a_nul_in_a_form_field_is_a_400_naming_it(admin_client_):
    response = admin_client_.post("/corpora/new/", {"name": "corpus\x00one"})
    assert response.status_code == 400
    assert "name" in response.content.decode()


def test_a_nul_in_an_api_parameter_is_a_json_400_naming_it(researcher_client, demo):
    response = researcher_client.get("/api/procedures/", {"search": "a\x00b"})
    assert response.status_code == 400
    assert "search" in response.json() and response.json()["code"] == "invalid_input"


def test_an_api_address_that_matches_nothing_is_a_json_404_and_a_page_address_the_page(researcher_client):
    for method, path in [
        ("post", "/api/studies/x/participants/-1/release/"),
        ("post", "/api/judging/generation-runs/1/zzz/"),
        ("get", "/api/no-such-thing/"),
    ]:
        response = getattr(researcher_client, method)(path)
        assert response.status_code == 404 and response["Content-Type"] == "application/json", path
        assert response.json() == {"code": "not_found", "detail": "Not found."}
    assert Client().get("/api/no-such-thing/").json() == {"code": "not_found", "detail": "Not found."}  # anonymous too
    page = researcher_client.get("/no-such-page/")
    assert page.status_code == 404 and "There is nothing at this address." in page.content.decode()


def test_a_path_integer_beyond_64_bits_is_not_found_not_an_overflow(researcher_client, demo):
    for path in ("/procedures/99999999999999999999/", "/api/procedures/99999999999999999999/"):
        assert researcher_client.get(path).status_code == 404, path
    # within range but absent: the ordinary 404
    assert researcher_client.get("/procedures/9223372036854775807/").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('[{"goal": "g", "reference_steps": ["a"], "completion": "1. a", "weight": NaN}]', "[0].weight"),
        ('[{"goal": "g", "reference_steps": ["a"], "completion": "1. a", "weight": Infinity}]', "[0].weight"),
        ('{"goal": "g", "n": 1' + "0" * 40 + "}", "n"),
        (json.dumps({"goal": "a\u0000b"}), "goal"),
        ('{"goal": ' + "[" * 5000 + "]" * 5000 + "}", "body"),
        ("{not json", "body"),
    ],
)
def test_a_hostile_api_body_is_a_400_naming_the_field(researcher, body, field):
    from core.services import api_token_create

    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher).secret}")
    response = client.post("/api/reward", data=body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    answer = response.json()
    assert answer["code"] == "parse_error" and list(answer) == ["code", "detail", field], answer
    assert answer["detail"].startswith(f"{field}: "), answer
