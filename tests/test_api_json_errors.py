"""Every refusal under /api/ is JSON, and a JSON body with a key twice is refused (issue 28,
F-12: a 60 MB body to PATCH /api/studies/{slug}/ got an HTML 400 page; duplicate keys were
taken, the last one winning)."""

from __future__ import annotations

import pytest
from django.conf import settings

from annotate.testing import study_make

pytestmark = pytest.mark.django_db


def test_a_body_over_the_limit_is_a_json_400_that_says_so(researcher_client):
    study = study_make(n_items=1)
    body = '{"name": "' + "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10) + '"}'
    response = researcher_client.patch(f"/api/studies/{study.slug}/", body, content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    assert "larger than" in response.json()["detail"]


def test_a_key_given_twice_in_one_object_is_refused_naming_it(admin_client_):
    from llm.models import EndpointRecord

    body = '{"name": "first", "base_url": "http://127.0.0.1:9/v1", "model": "m", "name": "second"}'
    response = admin_client_.post("/api/llm/endpoints/", body, content_type="application/json")
    assert response.status_code == 400 and "name" in response.json(), response.content[:300]
    assert "appears twice" in response.json()["detail"]
    assert not EndpointRecord.objects.filter(name__in=["first", "second"]).exists()
    nested = '{"draft": {"verdict": "ok", "verdict": "no"}}'
    from core.strict_json import StrictJSONError, loads

    with pytest.raises(StrictJSONError) as caught:
        loads(nested)
    assert caught.value.field == "draft.verdict"
