"""Shared fixtures: staff accounts with each role, and clients logged in as them."""

from __future__ import annotations

import pytest
from django.test import Client

from core.roles import ROLE_ADMIN, ROLE_RESEARCHER
from core.services import user_create


def _flush_again_after_a_deadlock() -> None:
    """A transactional test's teardown empties the tables with one TRUNCATE; a request the live
    server is still finishing for a page that just closed (an autosave in flight) can hold row
    locks it then waits on, and PostgreSQL breaks the deadlock by failing the TRUNCATE (seen in
    CI under load). The flush is tried again, up to three times, once that request is done."""
    import time

    from django.core.management.base import CommandError
    from django.db import OperationalError
    from django.test.testcases import TransactionTestCase

    flush = TransactionTestCase._fixture_teardown  # type: ignore[attr-defined]
    if getattr(flush, "retries_deadlocks", False):
        return

    def fixture_teardown(self):
        for attempt in range(3):
            try:
                return flush(self)
            except (CommandError, OperationalError) as exc:
                if attempt == 2 or "deadlock detected" not in f"{exc} {exc.__cause__}":
                    raise
                time.sleep(0.5)

    fixture_teardown.retries_deadlocks = True  # type: ignore[attr-defined]
    TransactionTestCase._fixture_teardown = fixture_teardown  # type: ignore[attr-defined]


_flush_again_after_a_deadlock()


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Counters in the shared cache (rate limits of the annotator entry, ...) never carry over
    from one test to the next (study ids are reused after a test's rollback)."""
    from django.core.cache import cache

    from llm.capabilities import capabilities_store

    cache.clear()
    capabilities_store().forget_all_memos()  # what was learned of endpoints lives in the cache too
    from llm.retries import _cut_off

    _cut_off.clear()  # greedy requests remembered as cut off, per process


@pytest.fixture
def researcher(db):
    created = user_create(username="rita", role=ROLE_RESEARCHER, password="rita-Password-1")
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=created.username)


@pytest.fixture
def admin_user(db):
    created = user_create(username="ada", role=ROLE_ADMIN, password="ada-Password-1")
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=created.username)


@pytest.fixture
def researcher_client(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


@pytest.fixture
def admin_client_(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.fixture
def demo(db):
    from judging import demo as judging_demo
    from mining import demo as mining_demo

    mining_demo.load()
    judging_demo.load()


@pytest.fixture(scope="session")
def vllm():
    """The real vLLM server of the ``real_server`` tests (tests/real_servers.py): started once
    per session as a child process and ended with it, or REAL_VLLM_BASE_URL's server."""
    import os
    from pathlib import Path

    from tests.real_servers import RealServerMissing, VLLMProcess, running_vllm

    if os.environ.get("REAL_VLLM_BASE_URL"):
        yield running_vllm(os.environ["REAL_VLLM_BASE_URL"])
        return
    log = Path(os.environ.get("REAL_SERVERS_LOG_DIR", "var/real-servers/logs")) / f"vllm-{os.getpid()}.log"
    process = VLLMProcess(log)
    try:
        server = process.start()
    except RealServerMissing as exc:
        pytest.fail(str(exc))
    print(f"\nreal server: vLLM at {server.base_url} answered after {server.started_in_seconds} s")
    try:
        yield server
    finally:
        process.stop()


from tests.browser import browser, page  # noqa: E402,F401  (fixtures for browser tests)
from tests.ci_strict import pytest_runtest_makereport  # noqa: E402,F401  (CI=true: missing services fail)
from tests.metric_study import crafted, crafted_once  # noqa: E402,F401  (the crafted metric study)
from tests.schema_check import (  # noqa: E402,F401  (every API response checked against the schema)
    pytest_configure,
    pytest_runtest_call,
    pytest_terminal_summary,
)
