"""In Chromium: a stored ``javascript:`` URL (and its disguises) runs no script when a
researcher opens and clicks it, and the product's pages work under the Content-Security-Policy
with no violation: the charts draw, the annotation page's script runs, the leaderboard's
filters submit, the API docs and the Django admin render."""

from __future__ import annotations

import pytest

from core.roles import ROLE_ADMIN
from core.services import user_create
from tests.browser import demo_with_researcher, log_in
from tests.test_mining_runs import miner  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE_URLS = [
    "javascript:alert(1)//",
    "JAVASCRIPT:alert(2)//",
    " \tjavascript:alert(3)//",
    "java\tscript:alert(4)//",
    "java\nscript:alert(5)//",
    "&#106;avascript:alert(6)//",
    "data:text/html,<script>alert(7)</script>",
]

# Installed before any page script runs (an init script is not subject to the page's
# policy); each violation is reported to the test at once, so none is lost on navigation.
WATCH_VIOLATIONS = """
document.addEventListener('securitypolicyviolation', (e) => {
  window.__reportCspViolation(e.violatedDirective + ' ' + e.blockedURI);
});
"""


class Watch:
    """Dialogs (alert, confirm, prompt) and CSP violations of a page, from its console and
    from the browser's securitypolicyviolation events."""

    def __init__(self, page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.events: list[str] = []
        page.on("dialog", self._dialog)
        page.expose_binding("__reportCspViolation", lambda source, text: self.events.append(text))
        page.on(
            "console",
            lambda message: self.console.append(message.text) if "Content Security Policy" in message.text else None,
        )
        page.add_init_script(WATCH_VIOLATIONS)

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def violations(self) -> list[str]:
        return self.console + self.events

    def clear(self) -> None:
        self.console.clear()
        self.events.clear()

    def assert_clean(self, where: str) -> None:
        assert self.violations() == [], where + ": " + " | ".join(self.violations())
        assert self.dialogs == [], where


@pytest.fixture
def watch(page):
    return Watch(page)


def _link_protocols(page) -> list[str]:
    """The protocol of every link on the page, as Chromium parsed its href."""
    return page.evaluate("[...document.querySelectorAll('a[href], area[href]')].map(a => a.protocol)")


def test_a_hostile_stored_url_runs_no_script_when_a_researcher_opens_and_clicks_it(live_server, page, watch):
    from mining.models import Corpus, Document, Procedure, Topic

    demo_with_researcher()
    topic = Topic.objects.order_by("id").first()
    assert topic is not None
    corpus = Corpus.objects.create(name="hostile urls")
    pages = []
    for i, url in enumerate(HOSTILE_URLS):
        procedure = Procedure.objects.create(
            topic=topic,
            goal=f"Hostile goal {i}",
            steps=["One.", "Two."],
            source_example_id=f"hostile-{i}",
            source_url=url,
        )
        document = Document.objects.create(corpus=corpus, doc_id=f"hostile-{i}", url=url, text="Some text.")
        pages += [
            (f"/procedures/{procedure.pk}/", "#source-link"),
            (f"/corpora/{corpus.pk}/documents/{document.pk}/", "#document-url"),
        ]
    log_in(page, live_server.url, "rita", "rita-Password-1")
    for path, link in pages:
        page.goto(live_server.url + path)
        assert page.locator(".url-as-text").count() == 1, path
        assert set(_link_protocols(page)) <= {"http:", "https:"}, path
        if page.locator(link).count():  # never, but if a link were drawn, click it
            page.locator(link).click()
            page.wait_for_timeout(300)
            page.goto(live_server.url + path)
        page.locator(".url-as-text").click()
        page.wait_for_timeout(100)
    watch.assert_clean("hostile urls")
    # The watch sees a dialog when there is one.
    page.evaluate("setTimeout(() => alert('control'), 0)")
    page.wait_for_timeout(300)
    assert watch.dialogs == ["control"]


def test_a_web_source_url_stays_a_link(live_server, page, watch):
    from mining.models import Procedure, Topic

    demo_with_researcher()
    topic = Topic.objects.order_by("id").first()
    assert topic is not None
    procedure = Procedure.objects.create(
        topic=topic,
        goal="Fix a tap",
        steps=["Turn."],
        source_example_id="tap",
        source_url="https://www.wikihow.com/Fix-a-Tap",
    )
    log_in(page, live_server.url, "rita", "rita-Password-1")
    page.goto(f"{live_server.url}/procedures/{procedure.pk}/")
    assert page.locator("#source-link").get_attribute("href") == "https://www.wikihow.com/Fix-a-Tap"
    watch.assert_clean("procedure page")


def test_the_policy_blocks_an_injected_inline_script_and_the_watch_reports_it(live_server, page, watch):
    demo_with_researcher()
    log_in(page, live_server.url, "rita", "rita-Password-1")
    page.evaluate(
        "document.body.appendChild(Object.assign(document.createElement('script'), {textContent: 'alert(9)'}))"
    )
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<img src=x onerror=alert(10)>')")
    page.wait_for_timeout(500)
    assert watch.dialogs == []
    assert any("script-src" in v for v in watch.events) and len(watch.events) >= 2
    assert any("Content Security Policy" in text for text in watch.console)


def _wait_charts(page, *ids: str) -> None:
    for chart in ids:
        page.wait_for_selector(f"#{chart} .main-svg")


def test_the_chart_pages_draw_their_charts_with_no_policy_violation(live_server, page, watch):
    from annotate import demo as annotate_demo
    from mining.models import Corpus, Document, Topic

    demo_with_researcher()
    annotate_demo.load()
    log_in(page, live_server.url, "rita", "rita-Password-1")
    page.goto(f"{live_server.url}/leaderboard/")
    _wait_charts(page, "how2score-bars", "topic-heatmap")
    page.select_option("#basis", "all")  # the filter submits itself (static/js/autosubmit.js)
    page.wait_for_url("**basis=all**")
    _wait_charts(page, "how2score-bars")
    page.goto(f"{live_server.url}/studies/{annotate_demo.DEMO_AGREEMENT_SLUG}/agreement/")
    _wait_charts(page, "alpha-rounds", "judge-agreement")
    page.goto(f"{live_server.url}/studies/{annotate_demo.DEMO_AGREEMENT_SLUG}/annotators/")
    _wait_charts(page, "annotator-scatter")
    page.goto(f"{live_server.url}/")
    _wait_charts(page, "procedures-per-topic")
    corpus = Corpus.objects.create(name="charted")
    Document.objects.create(corpus=corpus, doc_id="d1", topic=Topic.objects.order_by("id").first(), text="Text.")
    page.goto(f"{live_server.url}/corpora/{corpus.pk}/")
    _wait_charts(page, "documents-per-topic")
    watch.assert_clean("chart pages")


def test_the_metric_agreement_chart_draws_with_no_policy_violation(live_server, page, watch, tmp_path):
    from core.roles import ROLE_RESEARCHER
    from tests.metric_study import crafted_study

    study = crafted_study(tmp_path)
    user_create(username="rita", role=ROLE_RESEARCHER, password="rita-Password-1")
    log_in(page, live_server.url, "rita", "rita-Password-1")
    page.goto(f"{live_server.url}/studies/{study.slug}/metrics/")
    _wait_charts(page, "metric-agreement-chart")  # two panels (make_subplots)
    watch.assert_clean("metric agreement page")


def test_the_mining_run_page_draws_its_funnel_with_no_policy_violation(live_server, page, watch, miner):
    from mining.run_services import mining_run_create
    from mining.runner import mining_run_execute
    from tests.scripted_miner import document_text
    from tests.test_mining_runs import config, make_corpus

    user_create(username="ada", role=ROLE_ADMIN, password="ada-Password-1")
    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Prepare item {i}")) for i in range(3)])
    run = mining_run_create(config_text=config("csp-run"), source="run.yaml", corpus_name=corpus.name, start=False)
    assert mining_run_execute(run_id=run.pk) == "done"
    log_in(page, live_server.url, "ada", "ada-Password-1")
    page.goto(f"{live_server.url}/mining/runs/{run.pk}/")
    _wait_charts(page, "mining-funnel")
    watch.assert_clean("mining run page")


def test_the_annotation_page_script_runs_under_the_policy(live_server, page, watch):
    from annotate.testing import study_make

    study = study_make(n_items=1, annotators_per_item=1, min_seconds=600, name="CSP study")
    page.goto(
        f"{live_server.url}/a/{study.slug}/?PROLIFIC_PID=5f1e2d3c4b5a69788796a5b4"
        f"&STUDY_ID=prolific-study&SESSION_ID=csp-session"
    )
    page.get_by_label("I have read the guidelines and agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    page.locator("#goal-text").wait_for()
    # Opening a step is the page's own script at work: its progress label counts it.
    page.get_by_label(
        "I've read the goal and understand that my assessment should focus on how well L2 achieves the goal."
    ).check()
    page.locator("button.step").first.click()
    page.wait_for_function("() => document.getElementById('step-progress-label').textContent.startsWith('1/')")
    page.get_by_label("No critical failures identified", exact=True).check()
    page.wait_for_function("() => document.getElementById('save-status').textContent === 'All changes saved'")
    watch.assert_clean("annotation page")


def test_the_api_docs_and_the_admin_work_under_the_policy(live_server, page, watch):
    user_create(username="ada", role=ROLE_ADMIN, password="ada-Password-1")
    log_in(page, live_server.url, "ada", "ada-Password-1")
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock")
    page.goto(f"{live_server.url}/api/redoc/")
    page.wait_for_selector(".redoc-wrap .api-content")
    page.locator("input[placeholder='Search...']").fill("procedures")  # search runs in a blob: worker
    page.wait_for_selector("[data-role='search:results'] li, .search-results li, [role='search'] ~ * li", timeout=5000)
    # Redoc always asks for its maker's logo from the internet; the policy blocks it (only
    # this site's images load), and Redoc hides the missing image. Nothing else is refused.
    page.wait_for_timeout(300)
    assert [v for v in watch.violations() if "cdn.redoc.ly" not in v] == []
    watch.clear()
    page.goto(f"{live_server.url}/admin/")
    page.locator("#content-main").get_by_role("link", name="Procedures", exact=True).click()
    page.wait_for_selector("#changelist")
    page.goto(f"{live_server.url}/admin/auth/user/add/")
    page.wait_for_selector("#user_form")
    watch.assert_clean("api docs and admin")
