"""The test command itself (scripts/run_tests.py): its static checks report each exit code,
and under CI=true a missing service fails the run instead of skipping the tests that need it."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.services import free_port

BASE_DIR = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def run_tests():
    spec = importlib.util.spec_from_file_location("run_tests_under_test", BASE_DIR / "scripts" / "run_tests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nothing_there(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Every service pointed at a closed port or a missing file."""
    return {
        "TEST_DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/test",
        "TEST_REDIS_URL": f"redis://127.0.0.1:{free_port()}/15",
        "TEST_RABBITMQ_URL": f"amqp://guest:guest@127.0.0.1:{free_port()}//",
        "CHROMIUM_PATH": str(tmp_path / "no-chromium"),
        **extra,
    }


def test_under_ci_the_preflight_fails_and_names_every_missing_service(run_tests, tmp_path, capsys):
    environ = _nothing_there(tmp_path, CI="true")
    assert run_tests.preflight(environ) is False
    out = capsys.readouterr().out
    for name in ("PostgreSQL", "Redis", "RabbitMQ", "Chromium"):
        assert f"preflight: {name} is missing" in out, name
    assert environ["TEST_REDIS_URL"].split("//")[1].split("/")[0] in out
    assert str(tmp_path / "no-chromium") in out
    assert "CI=true and PostgreSQL, Redis, RabbitMQ, Chromium are missing" in out
    assert "the test command fails" in out


def test_without_ci_the_preflight_reports_and_lets_the_tests_skip(run_tests, tmp_path, capsys):
    for ci in ({}, {"CI": "false"}):
        assert run_tests.preflight(_nothing_there(tmp_path, **ci)) is True
        out = capsys.readouterr().out
        assert "preflight: Redis is missing" in out and "will be skipped" in out


def test_the_preflight_names_only_what_is_missing(run_tests, tmp_path):
    chromium = tmp_path / "chromium"
    chromium.write_text("#!/bin/sh\n")
    chromium.chmod(0o755)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        environ = _nothing_there(
            tmp_path,
            CI="true",
            CHROMIUM_PATH=str(chromium),
            TEST_REDIS_URL=f"redis://127.0.0.1:{port}/15",
            TEST_RABBITMQ_URL=f"amqp://guest:guest@127.0.0.1:{port}//",
        )
        missing = run_tests.missing_services(environ)
    assert list(missing) == ["PostgreSQL"]


def test_each_static_check_is_reported_with_its_exit_code_and_a_failure_fails_the_command(
    run_tests, monkeypatch, capsys
):
    monkeypatch.setattr(
        run_tests,
        "static_checks",
        lambda: {
            "clean": [[sys.executable, "-c", "pass"]],
            "broken": [[sys.executable, "-c", "pass"], [sys.executable, "-c", "raise SystemExit(3)"]],
        },
    )
    results = run_tests.run_static_checks(("clean", "broken"))
    assert results == {"clean": 0, "broken": 3}
    out = capsys.readouterr().out
    assert "===== clean: exit code 0" in out and "===== broken: exit code 3" in out
    assert run_tests._summary(results) == 1
    assert run_tests._summary({"clean": 0}) == 0


def test_work_run_beside_prints_its_output_when_waited_for_and_its_own_error_is_a_failure(
    run_tests, monkeypatch, capsys
):
    monkeypatch.setattr(run_tests, "static_checks", lambda: {"clean": [[sys.executable, "-c", "print('checked')"]]})

    def broken(out):
        print("started", file=out, flush=True)
        raise RuntimeError("no such tool")

    finish_checks = run_tests.run_beside("static checks", lambda out: run_tests.run_static_checks(("clean",), out=out))
    finish_broken = run_tests.run_beside("the broken part", broken)
    assert capsys.readouterr().out == ""  # nothing shows while they run
    assert finish_checks() == {"clean": 0}
    assert finish_broken() == {"the broken part": 1}
    out = capsys.readouterr().out
    assert out.index("static checks, run beside") < out.index("checked") < out.index("===== clean: exit code 0")
    assert "the broken part could not run: RuntimeError('no such tool')" in out and "started" in out


def test_the_enabled_static_checks_exist(run_tests):
    assert set(run_tests.ENABLED_CHECKS) <= set(run_tests.static_checks())
    assert {"ruff", "lint-imports", "mypy"} <= set(run_tests.ENABLED_CHECKS)


def _run_skipping_tests(tmp_path: Path, ci: str | None) -> tuple[str, int]:
    (tmp_path / "test_skips.py").write_text(
        textwrap.dedent("""
        import pytest

        def test_needs_redis():
            pytest.skip("Redis is not reachable at 127.0.0.1:1; start it to run this integration test")

        @pytest.mark.skipif(True, reason="Redis is not reachable")
        def test_marked_for_redis():
            pass

        def test_needs_chromium():
            pytest.skip("Chromium not found at /nowhere/chromium; run `sh scripts/ensure_chromium.sh`")

        def test_covers_machines_without_vllm():
            pytest.skip("vLLM is installed here; these tests cover machines without it")
    """)
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.ci_strict",
            "-p",
            "no:django",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "--rootdir",
            str(tmp_path),
            "-c",
            str(tmp_path / "pytest.ini"),
            str(tmp_path / "test_skips.py"),
        ],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.stdout, out.returncode


def test_under_ci_a_skip_for_a_missing_service_is_a_failure(tmp_path):
    out, code = _run_skipping_tests(tmp_path, "true")
    # A skip in the setup phase (a skipif mark, a fixture) turns into an error, one in the test into a failure.
    assert out.strip().splitlines()[-1].startswith("2 failed, 1 skipped, 1 error"), out
    assert code == 1
    assert "FAILED" in out and "test_needs_redis" in out and "CI=true: a service this test needs is missing" in out
    assert "SKIPPED" in out and "vLLM is installed here" in out


def test_without_ci_a_skip_for_a_missing_service_stays_a_skip(tmp_path):
    out, code = _run_skipping_tests(tmp_path, None)
    assert out.strip().splitlines()[-1].startswith("4 skipped"), out
    assert code == 0


def test_with_postgresql_the_suite_runs_once_there_and_only_the_sqlite_marked_tests_on_sqlite(run_tests):
    passes = run_tests.plan_passes(postgres=None, sqlite_only=False, pg_url="postgres://pg/test")
    assert [(label.split()[0], env, args) for label, env, args in passes] == [
        ("SQLite", {}, ["-m", "sqlite and not real_server"]),
        ("PostgreSQL", {"DATABASE_URL": "postgres://pg/test"}, []),
    ]


def test_without_postgresql_or_when_asked_the_whole_suite_runs_on_sqlite(run_tests):
    for postgres, sqlite_only in (("OperationalError: refused", False), (None, True)):
        passes = run_tests.plan_passes(postgres=postgres, sqlite_only=sqlite_only, pg_url="postgres://pg/test")
        assert passes == [("SQLite (whole suite)", {}, [])]


def test_the_suite_uses_one_worker_per_cpu_and_one_more_unless_told(run_tests):
    assert run_tests.test_workers({}) == (os.cpu_count() or 1) + 1
    assert run_tests.test_workers({"TEST_WORKERS": "3"}) == 3
    assert run_tests.test_workers({"TEST_WORKERS": "0"}) == 1
    assert run_tests.test_workers({"TEST_WORKERS": "many"}) == (os.cpu_count() or 1) + 1
    assert run_tests.parallel_args(1) == []
    assert run_tests.parallel_args(2) == ["-n", "2", "--dist", "worksteal"]


# Modules whose tests are all marked sqlite, and modules with none marked: the selection of
# the SQLite pass is checked on them (collecting the whole suite took a minute of a worker).
SQLITE_MODULES = ("test_known_answer_migration.py", "test_llm_workers.py", "test_bulk_insert.py", "test_demo.py")
UNMARKED_MODULES = ("test_llm_limits.py", "test_mining_walk_stages.py")


def test_every_test_marked_sqlite_is_collected_by_the_sqlite_pass_and_some_are():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "sqlite and not real_server",
            *(f"tests/{name}" for name in (*SQLITE_MODULES, "test_permissions.py", *UNMARKED_MODULES)),
        ],
        cwd=BASE_DIR,
        env=dict(os.environ, DJANGO_SETTINGS_MODULE="config.django.test"),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    collected = [line for line in out.stdout.splitlines() if "::" in line]
    files = {line.split("::")[0] for line in collected}
    # Migrations, the worker beside the web process, bulk inserts, the demo and every page.
    for name in (*SQLITE_MODULES, "test_permissions.py"):
        assert f"tests/{name}" in files, sorted(files)
    for name in UNMARKED_MODULES:  # what the PostgreSQL pass alone runs
        assert f"tests/{name}" not in files, sorted(files)


def test_a_transactional_teardown_flushes_again_after_a_deadlock_and_not_after_anything_else(monkeypatch):
    """tests/conftest.py: the flush that a deadlock broke (a live-server request still finishing)
    is tried again; any other failure stays a failure."""
    import django.test.testcases as testcases
    from django.core.management.base import CommandError
    from django.db import OperationalError

    import tests.conftest as conftest

    calls = []

    def flaky(self):
        calls.append(1)
        if len(calls) == 1:
            raise CommandError("Database couldn't be flushed.") from OperationalError("deadlock detected")
        return "flushed"

    monkeypatch.setattr(testcases.TransactionTestCase, "_fixture_teardown", flaky)
    monkeypatch.setattr("time.sleep", lambda seconds: None)
    conftest._flush_again_after_a_deadlock()
    teardown = testcases.TransactionTestCase._fixture_teardown  # type: ignore[attr-defined]
    assert teardown(object()) == "flushed" and len(calls) == 2

    def broken(self):
        raise CommandError("Database couldn't be flushed.") from OperationalError("relation does not exist")

    monkeypatch.setattr(testcases.TransactionTestCase, "_fixture_teardown", broken)
    conftest._flush_again_after_a_deadlock()
    with pytest.raises(CommandError):
        testcases.TransactionTestCase._fixture_teardown(object())  # type: ignore[attr-defined]
