"""Real services for integration tests: reachability checks and a Celery worker process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
RABBITMQ_URL = os.environ.get("TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")


def run_coroutine(coroutine):
    """``asyncio.run`` in a thread of its own, as the executor runs its loop: the session's
    browser (Playwright's synchronous API) keeps an event loop running in the test thread."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def reachable(url: str, timeout: float = 1.0) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout):
            return True
    except OSError:
        return False


def require(url: str, what: str) -> None:
    if not reachable(url):
        pytest.skip(
            f"{what} is not reachable at {urlsplit(url).hostname}:{urlsplit(url).port}; "
            f"start it to run this integration test"
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def celery_worker(tmp_path: Path, env: dict[str, str] | None = None, queue: str = "celery", ready_timeout: float = 60):
    """Start ``celery -A config worker`` (solo pool: tasks run in the worker's own process)
    and wait until it says it is ready. Stops it with SIGTERM afterwards."""
    log = tmp_path / f"worker-{queue}.log"
    child_env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.django.test", **(env or {}))
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--pool",
                "solo",
                "--loglevel",
                "INFO",
                "-Q",
                queue,
                "--hostname",
                f"test-{os.getpid()}-{queue}@%h",
            ],
            cwd=BASE_DIR,
            env=child_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + ready_timeout
        while b"ready." not in log.read_bytes():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the Celery worker did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield worker
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
