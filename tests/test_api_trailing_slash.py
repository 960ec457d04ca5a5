"""One spelling for every API path (issue 28, F-12): each path of the schema ends with a slash,
the five that began without it answer at their old spelling too (an alias of the same view, left
out of the schema), and any other path sent without its slash is redirected by a 308, which keeps
the method and the body."""

from __future__ import annotations

import pytest
import yaml
from django.test import Client

pytestmark = pytest.mark.sqlite

OLD_SPELLINGS = ("/api/reward", "/api/leaderboard", "/api/leaderboard/compare")


def test_every_path_of_the_schema_ends_with_a_slash(researcher_client):
    schema = yaml.safe_load(researcher_client.get("/api/schema/").content)
    paths = list(schema["paths"])
    assert len(paths) > 50
    assert [path for path in paths if not path.endswith("/")] == []
    assert {"/api/reward/", "/api/leaderboard/", "/api/leaderboard/compare/"} <= set(paths)
    assert {"/api/studies/{slug}/agreement/", "/api/studies/{slug}/metric-agreement/"} <= set(paths)


@pytest.mark.parametrize("old", OLD_SPELLINGS)
def test_an_old_spelling_answers_as_the_path_with_its_slash(researcher_client, old):
    method = researcher_client.post if old == "/api/reward" else researcher_client.get
    kwargs = {"data": [], "content_type": "application/json"} if old == "/api/reward" else {"data": {"judge": "nobody"}}
    before, after = method(old, **kwargs), method(old + "/", **kwargs)
    assert before.status_code == after.status_code != 308
    assert before.json() == after.json()


def test_the_study_reports_keep_their_old_spelling(researcher_client):
    for report in ("agreement", "metric-agreement"):
        old = researcher_client.get(f"/api/studies/no-such-study/{report}")
        new = researcher_client.get(f"/api/studies/no-such-study/{report}/")
        assert old.status_code == new.status_code == 404


def test_a_path_without_its_slash_is_redirected_with_its_method_and_query(researcher_client):
    response = researcher_client.get("/api/topics?search=egg&page=1")
    assert response.status_code == 308
    assert response["Location"] == "/api/topics/?search=egg&page=1"
    assert researcher_client.get(response["Location"]).status_code == 200


def test_a_post_without_the_slash_keeps_its_method_and_body_through_the_redirect(admin_client_):
    body = {"name": "slash-model", "endpoint": "role:generate"}
    response = admin_client_.post("/api/judging/models", body, content_type="application/json")
    assert response.status_code == 308 and response["Location"] == "/api/judging/models/"
    followed = admin_client_.post("/api/judging/models", body, content_type="application/json", follow=True)
    assert followed.status_code == 201, followed.content
    assert followed.json()["name"] == "slash-model"


def test_the_redirect_asks_for_no_login_and_no_csrf_token(db):
    # A token client's POST gets the 308 (never the login page, never a CSRF 403); the
    # endpoint it points at then answers 401 for want of credentials.
    client = Client(enforce_csrf_checks=True)
    assert client.post("/api/reward", [], content_type="application/json").status_code == 401  # the alias
    redirected = client.post("/api/judging/models", {}, content_type="application/json")
    assert redirected.status_code == 308
    assert client.post("/api/judging/models/", {}, content_type="application/json").status_code == 401


def test_a_path_that_names_nothing_either_way_is_the_api_json_404(researcher_client):
    response = researcher_client.get("/api/no-such-thing")
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "detail": "Not found."}
