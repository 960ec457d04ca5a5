"""First paint of the leaderboard and of a chart page for a new browser (issue 29, part 4).

The server is started as `make run` starts it (the local settings with DEBUG off, a fresh
VAR_DIR and SQLite database, migrate, the demo data, collectstatic, then `manage.py runserver
--noreload`; no Celery worker: the pages measured need none). Each measurement opens a new
Chromium context (an empty cache, as for a new user) holding the session cookie of a
researcher, loads the page, and reads first-contentful-paint
(``performance.getEntriesByType('paint')``), the load event, and the bytes that came over the
wire (``transferSize`` of the document and of every resource).

    .venv/bin/python bench/page_paint.py [--runs 5] [--pages /leaderboard/,/]

Each page is loaded once first, uncounted (the server's first request of a page pays its
imports). Prints a Markdown table: the median of the runs, the ratio of first paint to the 2 s
target, and the server's share (time to the first byte of the page)."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic"]
TARGET_MS = 2000.0
USERNAME, PASSWORD = "paint-bench", "paint-Bench-Password-1"

_MEASURE = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const paint = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint');
  const resources = performance.getEntriesByType('resource');
  return {
    fcp: paint ? paint.startTime : null,
    ttfb: nav ? nav.responseStart : null,
    load: nav ? nav.loadEventEnd : null,
    bytes: (nav ? nav.transferSize : 0) + resources.reduce((sum, r) => sum + r.transferSize, 0),
    plotly: resources.filter(r => r.name.includes('plotly')).map(r => [r.transferSize, r.decodedBodySize])[0] || null,
  };
}"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"manage.py {args[0]} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def session_cookie(env: dict[str, str]) -> str:
    """A researcher account and a logged-in session for it, made with Django's test client."""
    code = (
        "from core.roles import ROLE_RESEARCHER\n"
        "from core.services import user_create\n"
        "from django.contrib.auth import get_user_model\n"
        "from django.test import Client\n"
        f"if not get_user_model().objects.filter(username={USERNAME!r}).exists():\n"
        f"    user_create(username={USERNAME!r}, role=ROLE_RESEARCHER, password={PASSWORD!r})\n"
        f"user = get_user_model().objects.get(username={USERNAME!r})\n"
        "client = Client()\n"
        "client.force_login(user)\n"
        "print(client.cookies['sessionid'].value)\n"
    )
    return manage(env, "shell", "-c", code).strip().splitlines()[-1]


def start_server(var_dir: Path, port: int) -> tuple[subprocess.Popen, dict[str, str], str]:
    env = {**os.environ, "VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "config.django.base"}
    env.pop("DEBUG", None)
    env.pop("DATABASE_URL", None)
    manage(env, "migrate", "--noinput", "-v0")
    manage(env, "load_demo")
    manage(env, "collectstatic", "--noinput", "-v0")
    cookie = session_cookie(env)
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2)
            return server, env, cookie
        except OSError:
            time.sleep(0.3)
    server.terminate()
    raise SystemExit("the server did not answer within 60 s")


def measure(browser, base_url: str, cookie: str, path: str) -> dict:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": cookie, "url": base_url}])
    page = context.new_page()
    page.set_default_timeout(120_000)
    response = page.goto(base_url + path, wait_until="load")
    if response is None or response.status != 200 or "/login/" in page.url:
        raise SystemExit(f"{path}: got {response and response.status} at {page.url}")
    # With a blocking script the first paint can come after the load event: wait for it.
    page.wait_for_function("performance.getEntriesByType('paint').some(e => e.name === 'first-contentful-paint')")
    figures = page.evaluate(_MEASURE)
    context.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pages", default="/leaderboard/,/")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    var_dir = Path(tempfile.mkdtemp(prefix="how2-paint-"))
    port = free_port()
    server, _, cookie = start_server(var_dir, port)
    base_url = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            for path in args.pages.split(","):  # the server's first request of a page pays its imports
                measure(browser, base_url, cookie, path)
            print(f"{args.runs} cold loads per page (a new browser context each), median; target: first paint < 2 s\n")
            print(
                "| page | first contentful paint | ratio to 2 s | server (first byte) | load event "
                "| bytes transferred | plotly.js sent |"
            )
            print("|---|---|---|---|---|---|---|")
            for path in args.pages.split(","):
                runs = [measure(browser, base_url, cookie, path) for _ in range(args.runs)]
                fcp = statistics.median(r["fcp"] for r in runs)
                load = statistics.median(r["load"] for r in runs)
                ttfb = statistics.median(r["ttfb"] for r in runs)
                sent = statistics.median(r["bytes"] for r in runs)
                plotly = runs[0]["plotly"]
                plotly_text = (
                    "not loaded" if plotly is None else f"{plotly[0] / 1e6:.2f} MB of {plotly[1] / 1e6:.2f} MB"
                )
                print(
                    f"| `{path}` | {fcp:.0f} ms (runs {min(r['fcp'] for r in runs):.0f}–{max(r['fcp'] for r in runs):.0f}) "
                    f"| {fcp / TARGET_MS:.2f} | {ttfb:.0f} ms | {load:.0f} ms | {sent / 1e6:.2f} MB | {plotly_text} |"
                )
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=15)
        shutil.rmtree(var_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
