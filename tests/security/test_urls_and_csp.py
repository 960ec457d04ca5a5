"""URLs are data, not code: only http(s) addresses from stored data become links (anything
else is shown as text), and every response carries a Content-Security-Policy that allows no
inline script, which no page of the product needs (charts are JSON blocks drawn by a static
file, form controls are bound by static files)."""

from __future__ import annotations

import json
import re
from collections import deque
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from core.link_urls import browser_form, http_url, page_url

# Each one is a script (or a page made of script) a browser would run if it were an href.
HOSTILE_URLS = [
    "javascript:alert(1)//",
    "JaVaScRiPt:alert(1)//",
    "  javascript:alert(1)//",
    "\tjavascript:alert(1)//",
    "\x01\x02javascript:alert(1)//",
    "java\tscript:alert(1)//",
    "java\nscript:alert(1)//",
    "java\r\nscript:alert(1)//",
    "&#106;avascript:alert(1)//",
    "&#x6A;avascript&#58;alert(1)//",
    "javascript&colon;alert(1)//",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "//evil.example/path",
    "/\\evil.example/path",
    "http:evil.example",
    "https://",
    "http://[::1",
    "http://exa\x00mple.com/",
    "file:///etc/passwd",
    "not a url",
    "",
    None,
]
# What a database can hold (PostgreSQL refuses NUL in text, and every importer refuses it
# before that): the hostile URLs the pages are tested with.
STORED_HOSTILE_URLS = [url for url in HOSTILE_URLS if url is not None and "\x00" not in url]
WEB_URLS = [
    "https://www.wikihow.com/Make-Tea",
    "http://example.com/a?b=c&d=e#f",
    "HTTPS://EXAMPLE.COM/",
    " https://example.com/padded ",
]


@pytest.mark.parametrize("value", HOSTILE_URLS)
def test_a_non_web_url_is_never_a_link(value):
    assert http_url(value) == ""


@pytest.mark.parametrize("value", WEB_URLS)
def test_an_http_or_https_url_is_a_link_as_the_browser_reads_it(value):
    assert http_url(value) == value.strip()


def test_tabs_and_newlines_inside_a_url_are_removed_as_the_browser_does():
    assert browser_form(" \thttps://exa\nmple.com/pa\tth\r\n ") == "https://example.com/path"


def test_a_path_on_this_site_is_a_page_link_but_a_scheme_relative_one_is_not():
    assert page_url("/studies/demo/") == "/studies/demo/"
    assert page_url("https://example.com/") == "https://example.com/"
    for value in ("//evil.example/", "/\\evil.example/", "javascript:alert(1)", "studies/demo/", "/a\x00b"):
        assert page_url(value) == "", value


class _Tags(HTMLParser):
    """Every start tag of a page with its attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {name: value or "" for name, value in attrs}))


def _tags(html: str) -> list[tuple[str, dict[str, str]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def _script_problems(html: str) -> list[str]:
    """What a strict policy would block: inline executable scripts, on...= handlers,
    javascript: links."""
    problems = []
    for tag, attrs in _tags(html):
        if tag == "script" and "src" not in attrs and attrs.get("type", "") != "application/json":
            problems.append(f"inline <script {attrs}>")
        problems += [f"<{tag} {name}=...>" for name in attrs if name.startswith("on")]
        if (
            tag in ("a", "area")
            and "href" in attrs
            and browser_form(attrs["href"]).lower().startswith(("javascript:", "data:", "vbscript:"))
        ):
            problems.append(f"<{tag} href={attrs['href']!r}>")
    return problems


def _hrefs(html: str) -> list[str]:
    return [attrs["href"] for tag, attrs in _tags(html) if tag == "a" and "href" in attrs]


@pytest.fixture
def hostile_procedures(db):
    from mining.models import Procedure, Topic

    topic = Topic.objects.get(slug="food-dining")
    return [
        Procedure.objects.create(
            topic=topic,
            goal=f"Make tea {i}",
            steps=["Boil water.", "Steep."],
            source_example_id=f"doc-{i}",
            source_url=url,
        )
        for i, url in enumerate(STORED_HOSTILE_URLS)
    ]


def test_a_procedures_hostile_source_url_is_shown_as_text_not_as_a_link(hostile_procedures, researcher_client):
    for procedure in hostile_procedures:
        html = researcher_client.get(reverse("procedure_detail", args=[procedure.pk])).content.decode()
        assert 'id="source-link"' not in html, procedure.source_url
        assert _script_problems(html) == [], procedure.source_url
        if procedure.source_url.strip():
            assert 'class="url-as-text"' in html


def test_a_procedures_web_source_url_is_a_link(researcher_client, db):
    from mining.models import Procedure, Topic

    topic = Topic.objects.get(slug="food-dining")
    procedure = Procedure.objects.create(
        topic=topic, goal="Fix a tap", steps=["Turn off the water."], source_url="https://www.wikihow.com/Fix-a-Tap"
    )
    html = researcher_client.get(reverse("procedure_detail", args=[procedure.pk])).content.decode()
    assert 'id="source-link" href="https://www.wikihow.com/Fix-a-Tap"' in html


def test_a_documents_hostile_url_is_shown_as_text_and_a_web_url_as_a_link(researcher_client, db):
    from mining.models import Corpus, Document

    corpus = Corpus.objects.create(name="hostile")
    documents = [
        Document.objects.create(corpus=corpus, doc_id=f"d{i}", url=url, text="Boil water.")
        for i, url in enumerate([u for u in STORED_HOSTILE_URLS if u] + ["https://example.com/tea"])
    ]
    for document in documents:
        html = researcher_client.get(reverse("document_detail", args=[corpus.pk, document.pk])).content.decode()
        assert _script_problems(html) == [], document.url
        if document.url == "https://example.com/tea":
            assert 'id="document-url" href="https://example.com/tea"' in html
        else:
            assert 'id="document-url"' not in html and 'class="url-as-text"' in html


def test_the_web_link_tag_escapes_what_it_shows_as_text():
    from django.template import Context, Template

    html = Template('{% load links %}{% web_link url "label" %}').render(Context({"url": 'javascript:alert("<b>")'}))
    assert "<b>" not in html and "&lt;b&gt;" in html and "href" not in html


def test_the_completion_page_links_to_prolific_only_with_a_web_url():
    from django.template.loader import render_to_string

    context = {"p": {"state": "completed"}, "code": "C0DE", "redirect_seconds": 3}
    good = render_to_string("annotate/done.html", {**context, "redirect_url": "https://app.prolific.com/x?cc=C0DE"})
    assert 'id="prolific-link" href="https://app.prolific.com/x?cc=C0DE"' in good and 'http-equiv="refresh"' in good
    bad = render_to_string("annotate/done.html", {**context, "redirect_url": "javascript:alert(1)//"})
    assert "prolific-link" not in bad and 'http-equiv="refresh"' not in bad and _script_problems(bad) == []


def test_a_confirmation_page_never_links_back_off_the_site():
    from django.template.loader import render_to_string

    html = render_to_string(
        "confirm.html",
        {"title": "t", "question": "q", "action": "/x/", "confirm_label": "Yes", "back_url": "javascript:alert(1)//"},
    )
    assert _hrefs(html)[-1] == "/"


# --- the chart fragments: data in a JSON block, never an inline script ---------------------


def _chart_blocks(html: str) -> list[dict]:
    blocks = re.findall(
        r'<script type="application/json" class="plotly-figure" data-target="[^"]+">(.*?)</script>', html, flags=re.S
    )
    return [json.loads(block) for block in blocks]


def test_a_chart_is_a_json_block_and_a_hostile_label_cannot_close_it():
    from judging.charts import how2score_bars

    label = "</script><script>alert(1)</script><!--"
    html = how2score_bars(
        [
            {
                "label": label,
                "how2score": 0.5,
                "how2score_percent": 50.0,
                "ci95": [0.4, 0.6],
                "ci95_percent": [40.0, 60.0],
                "n_judged": 10,
                "metrics": {"avg_gen_tokens": 90.0},
                "coverage": 1.0,
            }
        ]
    )
    assert html.count("<script") == 1 and html.count("</script>") == 1 and "<!--" not in html
    assert _script_problems(html) == []
    (block,) = _chart_blocks(html)
    assert block["figure"]["data"][0]["x"] == [label]
    assert block["config"]["displaylogo"] is False
    assert 'id="how2score-bars"' in html


# --- the policy on every response ------------------------------------------------------------


def _directives(header: str) -> dict[str, list[str]]:
    directives = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            directives[words[0]] = words[1:]
    return directives


def _assert_strict_policy(response, where: str) -> None:
    header = response.headers.get("Content-Security-Policy")
    assert header, f"{where}: no Content-Security-Policy"
    directives = _directives(header)
    scripts = directives.get("script-src", directives.get("default-src"))
    assert scripts == ["'self'"], f"{where}: script-src {scripts}"
    assert directives["object-src"] == ["'none'"] and directives["frame-ancestors"] == ["'none'"]
    assert "'unsafe-eval'" not in header and "'unsafe-inline'" not in " ".join(directives.get("default-src", []))


def test_anonymous_pages_and_errors_carry_the_policy(client, db):
    for path in ("/login/", "/no-such-page/", "/a/no-such-study/"):
        _assert_strict_policy(client.get(path), path)


@pytest.fixture
def demo_everywhere(db):
    from core.demo import demo_loaders

    for _, load in demo_loaders():
        load()


SKIP = ("/static/", "/vendor/", "/logout/", "/admin/logout/")


def test_every_page_a_crawl_reaches_as_admin_carries_the_policy_and_has_no_inline_script(demo_everywhere, admin_user):
    client = Client()
    client.force_login(admin_user)
    seen_paths: set[str] = set()
    queue = deque(["/", "/admin/", reverse("api-docs"), reverse("api-redoc")])
    visited: list[tuple[str, int]] = []
    while queue and len(visited) < 250:
        url = queue.popleft()
        path = urlsplit(url).path
        shape = re.sub(r"\d+", "N", path)  # one page of each kind: /procedures/1/ stands for all
        if shape in seen_paths or path.startswith(SKIP):
            continue
        seen_paths.add(shape)
        response = client.get(url)
        visited.append((url, response.status_code))
        assert response.status_code < 500, url
        _assert_strict_policy(response, url)
        if "text/html" not in response.headers.get("Content-Type", "") or response.status_code != 200:
            continue
        html = response.content.decode()
        assert _script_problems(html) == [], url
        for href in _hrefs(html):
            target = urljoin(url, href)
            if urlsplit(target).netloc in ("", "testserver") and target.startswith(("/", "http://testserver")):
                queue.append(urlsplit(target)._replace(scheme="", netloc="", fragment="").geturl())
    # The crawl reached every part of the product, not just the front page.
    reached = {path.strip("/").split("/")[0] for path in seen_paths}
    assert {"procedures", "corpora", "mining", "leaderboard", "studies", "admin", "api", "llm"} <= reached
    assert len(visited) > 60


def test_the_api_docs_load_their_script_from_a_url_not_inline(researcher_client):
    html = researcher_client.get(reverse("api-docs")).content.decode()
    assert _script_problems(html) == []
    (init,) = [
        attrs["src"]
        for tag, attrs in _tags(html)
        if tag == "script" and "script" in attrs.get("src", "") and "?" in attrs["src"]
    ]
    script = researcher_client.get(init)
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()
