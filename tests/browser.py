"""Debian's Chromium driven by Playwright for the browser tests (never a downloaded browser)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM}; run `sh scripts/ensure_chromium.sh` (or `make test`)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests
    # make beside it are ordinary synchronous calls.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield instance
        instance.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()


def log_in(page, base_url: str, username: str, password: str) -> None:
    """Log in through the real login form."""
    page.goto(f"{base_url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/")


def demo_with_researcher(username: str = "rita", password: str = "rita-Password-1") -> None:
    """The demo data and a researcher account, for a browser test."""
    from core.roles import ROLE_RESEARCHER
    from core.services import user_create
    from judging import demo as judging_demo
    from mining import demo as mining_demo

    mining_demo.load()
    judging_demo.load()
    user_create(username=username, role=ROLE_RESEARCHER, password=password)
