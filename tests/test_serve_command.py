"""`make run`'s command: migrates, loads the demo, prints a random admin password once,
serves the web app beside a Celery worker, and stops both on Ctrl-C; a second run
reuses what exists."""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.services import BASE_DIR, free_port

pytestmark = pytest.mark.integration


class Server:
    def __init__(self, var_dir: Path, port: int):
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")
        }
        env.update(VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="config.django.base", PYTHONUNBUFFERED="1")
        self.log = var_dir / f"serve-{time.monotonic_ns()}.log"
        self.base = f"http://127.0.0.1:{port}"
        with open(self.log, "wb") as out:
            # A new session, so Ctrl-C can be simulated the way a terminal sends it: to the whole group.
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "serve", "--port", str(port)],
                cwd=BASE_DIR,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_until_serving(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited early:\n{self.output()[-3000:]}")
            if " ready." in self.output():
                try:
                    with urllib.request.urlopen(f"{self.base}/login/", timeout=2) as response:
                        if response.status == 200:
                            return
                except OSError:
                    pass
            time.sleep(0.3)
        raise AssertionError(f"serve did not come up:\n{self.output()[-3000:]}")

    def ctrl_c(self, timeout: float = 40) -> int:
        os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(timeout=timeout)


def _log_in(base: str, username: str, password: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/login/").read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert csrf is not None, page
    token = csrf.group(1)
    data = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token}).encode()
    request = urllib.request.Request(f"{base}/login/", data=data, headers={"Referer": f"{base}/login/"})
    opener.open(request).read()
    return opener


def _processes_matching(pattern: str) -> list[str]:
    result = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return result.stdout.split()


def test_serve_runs_the_demo_and_stops_cleanly_then_reuses_what_exists(tmp_path):
    port = free_port()
    first = Server(tmp_path, port)
    try:
        first.wait_until_serving()
        out = first.output()
        shown = re.search(r"password: (\S+)", out)
        assert shown is not None, out
        password = shown.group(1)
        assert len(password) >= 12
        assert "17 procedures created" in out

        opener = _log_in(first.base, "admin", password)
        home = opener.open(f"{first.base}/").read().decode()
        assert "Procedures per topic" in home and "Travel &amp; Tourism" in home
        procedures = opener.open(f"{first.base}/procedures/?topic=religion").read().decode()
        assert "decanates" in procedures
        worker_tag = f"local-{first.process.pid}@"
        assert _processes_matching(worker_tag), "the Celery worker is not running"
    finally:
        code = first.ctrl_c()
    assert code == 0, first.output()[-2000:]
    assert "Stopped." in first.output()
    assert not _processes_matching(worker_tag), "the worker outlived Ctrl-C"
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{first.base}/login/", timeout=2)

    second = Server(tmp_path, port)
    try:
        second.wait_until_serving()
        out = second.output()
        assert "Admin account 'admin' exists" in out
        assert "password:" not in out
        assert "0 procedures created, 17 already present" in out
        _log_in(second.base, "admin", password).open(f"{second.base}/").read()
    finally:
        assert second.ctrl_c() == 0
