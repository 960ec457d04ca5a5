"""A running import whose worker was killed says so: its heartbeat (core/heartbeats.py) stops,
and the next page that shows it settles it failed. A live worker's import stays running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.urls import reverse

from annotate.models import StudyImport
from annotate.studies.imports import STUDY_IMPORT_HEARTBEAT
from core.heartbeats import STALLED_MESSAGE, heartbeat, heartbeat_alive, stalled_settle
from mining.constants import CORPUS_IMPORT_HEARTBEAT
from mining.models import CorpusImport

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db

# A worker process that holds a heartbeat and nothing else, as an import's worker does while
# its transaction runs: beats every 0.1 s, each beat living 2 s.
WORKER = """
import sys, time, django
django.setup()
from core.heartbeats import heartbeat
with heartbeat(sys.argv[1], every=0.1, ttl=2.0):
    print("beating", flush=True)
    time.sleep(120)
"""


def _worker(key: str) -> subprocess.Popen:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.django.test"}
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER, key], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "beating"
    return process


def _wait_until_gone(key: str, seconds: float = 10.0) -> None:
    """The killed worker's last beat lives out its 2 s."""
    deadline = time.monotonic() + seconds
    while heartbeat_alive(key) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not heartbeat_alive(key)


def test_a_heartbeat_is_renewed_while_the_work_runs_and_gone_after():
    with heartbeat("unit:1", every=0.05, ttl=0.5):
        time.sleep(1.5)  # three lifetimes: only the renewals keep it
        assert heartbeat_alive("unit:1")
    assert not heartbeat_alive("unit:1")


def test_a_killed_workers_corpus_upload_is_settled_failed_by_its_page(admin_client_):
    job = CorpusImport.objects.create(corpus_name="web", file_name="x/docs.jsonl", original_name="docs.jsonl")
    key = f"{CORPUS_IMPORT_HEARTBEAT}:{job.pk}"
    worker = _worker(key)
    try:
        CorpusImport.objects.filter(pk=job.pk).update(status="running")
        page = admin_client_.get(reverse("corpus_import_detail", args=[job.pk])).content.decode()
        job.refresh_from_db()
        assert job.status == "running" and 'http-equiv="refresh"' in page
        os.kill(worker.pid, signal.SIGKILL)  # kill -9: no finally, no outcome written
        worker.wait(timeout=10)
        _wait_until_gone(key)
        assert admin_client_.get(reverse("corpus_list")).status_code == 200  # the list settles it too
        job.refresh_from_db()
        assert job.status == "failed" and job.error == STALLED_MESSAGE and job.finished_at is not None
        page = admin_client_.get(reverse("corpus_import_detail", args=[job.pk])).content.decode()
        assert "killed or restarted" in page and 'http-equiv="refresh"' not in page
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)


def test_a_killed_workers_study_import_is_settled_failed_by_its_page(researcher_client):
    job = StudyImport.objects.create(
        study_name="Big", kind="critical_failure", file_name="x/items.jsonl", original_name="items.jsonl", options={}
    )
    key = f"{STUDY_IMPORT_HEARTBEAT}:{job.pk}"
    worker = _worker(key)
    try:
        StudyImport.objects.filter(pk=job.pk).update(status="running")
        researcher_client.get(reverse("annotate:study_import", args=[job.pk]))
        job.refresh_from_db()
        assert job.status == "running"
    finally:
        worker.kill()
        worker.wait(timeout=10)
    _wait_until_gone(key)
    api = researcher_client.get(reverse("api-study-import", args=[job.pk])).json()
    assert api["status"] == "failed" and "killed or restarted" in api["error"]  # the API settles it too
    page = researcher_client.get(reverse("annotate:study_import", args=[job.pk])).content.decode()
    assert "killed or restarted" in page


def test_settling_leaves_finished_and_queued_rows_alone():
    rows = {
        status: CorpusImport.objects.create(corpus_name=status, file_name="f", original_name="f", status=status)
        for status in ("queued", "done", "failed")
    }
    assert stalled_settle(CorpusImport, key_prefix=CORPUS_IMPORT_HEARTBEAT) == 0
    assert {row.status for row in CorpusImport.objects.all()} == set(rows)


def test_with_a_per_process_cache_nothing_is_settled(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    job = CorpusImport.objects.create(corpus_name="web", file_name="f", original_name="f", status="running")
    assert stalled_settle(CorpusImport, key_prefix=CORPUS_IMPORT_HEARTBEAT) == 0
    job.refresh_from_db()
    assert job.status == "running"  # a worker's heartbeat could not be seen from here
