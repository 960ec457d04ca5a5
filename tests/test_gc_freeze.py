"""Long-lived processes freeze what they loaded at start (core/gc_freeze.py): a gunicorn
worker after loading the application, which loads the URL configuration (config/wsgi.py;
``post_worker_init`` of config/gunicorn.conf.py), a Celery worker when it starts (config/celery.py). Without it a
full garbage collection walks every object Django and the apps loaded (73 ms in a web
process, docs/benchmarks.md), and every thread of the process waits for it. Each is checked
in a fresh interpreter, which runs the hook as the server or the worker does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

_FULL_COLLECTION = """
import gc, json, sys, time
def full_collection_ms():
    best = None
    for _ in range(3):
        started = time.perf_counter()
        gc.collect()
        took = (time.perf_counter() - started) * 1000
        best = took if best is None else min(best, took)
    return best
"""

_GUNICORN = (
    _FULL_COLLECTION
    + """
import runpy, types, logging
import config.wsgi
views_loaded = "judging.reward_apis" in sys.modules  # by the application, before any request
before = full_collection_ms()
conf = runpy.run_path("config/gunicorn.conf.py")
conf["post_worker_init"](types.SimpleNamespace(pid=0, log=logging.getLogger("gunicorn.error")))
print(json.dumps({"frozen": gc.get_freeze_count(), "before_ms": before, "after_ms": full_collection_ms(),
                  "views_loaded": views_loaded}))
"""
)

_CELERY = (
    _FULL_COLLECTION
    + """
import django
from config.celery import load_the_llm_executors
django.setup()  # Celery's Django fixup has done it by the time worker_init reaches the handler
load_the_llm_executors()
print(json.dumps({"frozen": gc.get_freeze_count(), "executors_loaded": "llm.executors" in sys.modules}))
"""
)


def _probe(code: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["DJANGO_SETTINGS_MODULE"] = "config.django.base"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_gunicorn_worker_freezes_the_application_and_its_views_once_loaded():
    found = _probe(_GUNICORN)
    assert found["views_loaded"], "config.wsgi loads the URL configuration before the first request"
    assert found["frozen"] > 100_000, found  # Django, the apps, the views, the client: about 200,000 objects
    # The same interpreter, before and after: a full collection skips what start-up loaded.
    assert found["after_ms"] < found["before_ms"] / 5, found


def test_a_celery_worker_freezes_what_it_loaded_when_it_starts():
    found = _probe(_CELERY)
    assert found["executors_loaded"]
    assert found["frozen"] > 100_000, found
