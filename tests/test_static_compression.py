"""Static files and plotly.js are sent gzip-compressed under content-hashed names with
far-future caching, and only pages that draw a chart load plotly (issue 29, part 4)."""

from __future__ import annotations

import gzip
import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from core.static_finders import plotly_package_data

pytestmark = pytest.mark.django_db

COMPRESSED_MANIFEST = "whitenoise.storage.CompressedManifestStaticFilesStorage"
PLOTLY_HASHED = re.compile(r'src="(/static/vendor/plotly\.min\.[0-9a-f]{12}\.js)"')
CSS_HASHED = re.compile(r'href="(/static/css/app\.[0-9a-f]{12}\.css)"')
FAR_FUTURE = "max-age=315360000, public, immutable"


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.fixture
def collected(settings, tmp_path, researcher, demo) -> Client:
    """collectstatic as `make run` and production run it (the base settings' storage), then a
    new client: WhiteNoise indexes STATIC_ROOT when its middleware starts."""
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {"BACKEND": COMPRESSED_MANIFEST}}
    call_command("collectstatic", interactive=False, verbosity=0)
    client = Client()
    client.force_login(researcher)
    return client


def test_plotly_is_sent_gzipped_under_a_hashed_name_cached_for_ever(collected):
    page = collected.get(reverse("home")).content.decode()
    found, package = PLOTLY_HASHED.search(page), plotly_package_data()
    assert found is not None and package is not None
    url = found.group(1)
    original = (package / "plotly.min.js").read_bytes()

    response = collected.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip" and "Accept-Encoding" in response["Vary"]
    assert response["Cache-Control"] == FAR_FUTURE
    body = _body(response)
    assert gzip.decompress(body) == original
    assert len(body) < 0.4 * len(original)  # 4.8 MB -> about 1.4 MB

    plain = collected.get(url)  # a client that does not accept gzip gets the file as it is
    assert "Content-Encoding" not in plain and _body(plain) == original


def test_a_static_file_is_sent_gzipped_under_its_hashed_name_and_briefly_under_its_plain_one(collected):
    page = collected.get(reverse("home")).content.decode()
    found = CSS_HASHED.search(page)
    assert found is not None
    url = found.group(1)
    response = collected.get(url, HTTP_ACCEPT_ENCODING="gzip")
    assert response["Content-Encoding"] == "gzip" and response["Cache-Control"] == FAR_FUTURE
    css = gzip.decompress(_body(response))
    assert b"{" in css
    # The unhashed name may change content at the next deploy: cached for a minute, not for ever.
    plain = collected.get("/static/css/app.css", HTTP_ACCEPT_ENCODING="gzip")
    assert plain.status_code == 200 and "immutable" not in plain["Cache-Control"]
    assert gzip.decompress(_body(plain)) == css


def test_only_pages_that_draw_a_chart_load_plotly(researcher_client, db):
    from judging import demo as judging_demo
    from mining import demo as mining_demo

    # No judgment yet: the leaderboard has no chart, so no plotly.
    assert "plotly" not in researcher_client.get(reverse("leaderboard")).content.decode()
    mining_demo.load()
    judging_demo.load()
    for name in ("home", "leaderboard"):
        page = researcher_client.get(reverse(name)).content.decode()
        assert 'class="plotly-figure"' in page, name
        assert '<script src="/static/vendor/plotly.min.js" defer></script>' in page, name
    for name in ("procedure_list", "account", "judging_runs"):
        page = researcher_client.get(reverse(name)).content.decode()
        assert "plotly" not in page, name
