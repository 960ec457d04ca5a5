"""CI=true: a test skipped because a service it needs is missing fails instead.

The integration and browser tests skip where PostgreSQL, Redis, RabbitMQ or Chromium is not
there, which is right on a laptop and wrong in CI, where a green run must have proved them.
tests/conftest.py installs the hook below; scripts/run_tests.py's preflight fails the command
before the tests start when a service is missing under CI=true."""

from __future__ import annotations

import os

import pytest

# The reasons the skip sites give for a missing service (tests/services.py `require`, the
# Redis-backed parameters of the LLM limit tests, tests/browser.py). Other skips (vLLM
# installed, no embedding model, a PostgreSQL-only test on the SQLite pass) stay skips.
MISSING_SERVICE_REASONS = ("is not reachable", "Chromium not found at")


def ci_strict(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    return environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing_service_reason(report: pytest.TestReport) -> str | None:
    """The skip reason when ``report`` is a skip for a missing service, else None."""
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return None
    reason = str(report.longrepr[2])
    return reason if any(marker in reason for marker in MISSING_SERVICE_REASONS) else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if hasattr(report, "wasxfail") or not ci_strict():
        return
    reason = missing_service_reason(report)
    if reason is not None:
        report.outcome = "failed"
        report.longrepr = f"CI=true: a service this test needs is missing, so it fails instead of skipping: {reason}"
