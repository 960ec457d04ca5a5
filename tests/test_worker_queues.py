"""Work goes to queues by kind (CELERY_QUEUE_IMPORTS / _RUNS / _PROLIFIC): a cluster runs each
kind on its own workers, and the System page says which queues have one.

The two-worker test is the set-up of docs/operations.md ("Several machines") on one machine:
a web process (a ``manage.py shell`` here) enqueues an upload's import and an LLM job through
the product's own services, and two worker processes with different hostnames, each
consuming one queue over Redis, take exactly their own kind of work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from celery import current_app
from django.conf import settings as django_settings
from django.db import connection
from django.urls import reverse

from config.settings.celery import DEFAULT_QUEUE, TASK_KINDS, task_routes
from core.workers import queues_by_name
from llm.models import LLMJob
from mining.models import CorpusImport, Document
from tests.scripted_llm import Reply, ScriptedLLM
from tests.services import REDIS_URL, celery_worker, require

BASE_DIR = Path(__file__).resolve().parent.parent


def test_every_task_of_the_product_has_a_kind_of_work():
    """A new task must be given a kind (a queue a cluster can put workers on); only the
    System page's ping is sent to each queue by name."""
    current_app.loader.import_default_modules()
    ours = {name for name in current_app.tasks if not name.startswith("celery.")}
    routed = {task for tasks in TASK_KINDS.values() for task in tasks}
    assert ours - routed == {"core.ping"}
    assert routed <= ours  # no route names a task that does not exist


def test_routes_follow_the_environment_and_default_to_the_one_queue():
    assert set(django_settings.TASK_QUEUES.values()) == {DEFAULT_QUEUE}
    routes = task_routes({"IMPORTS": "files", "RUNS": "llm", "PROLIFIC": DEFAULT_QUEUE})
    assert routes["mining.corpus_import_run"] == {"queue": "files"}
    assert routes["judging.judge_run_execute"] == {"queue": "llm"}
    assert routes["prolific.sync_all"] == {"queue": DEFAULT_QUEUE}


def test_a_process_started_with_queue_names_routes_each_task_to_its_queue():
    """What a real process does with the variables: Celery's own router, in a fresh interpreter."""
    code = (
        "import django; django.setup(); from config.celery import app; import json; "
        "print(json.dumps({t: app.amqp.router.route({}, t, (), {})['queue'].name for t in "
        "['llm.job_execute', 'mining.corpus_import_run', 'prolific.sync_study', 'core.ping']}))"
    )
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.django.test", CELERY_QUEUE_RUNS="gpu-runs")
    env["CELERY_QUEUE_IMPORTS"] = "web-host"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=BASE_DIR, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "llm.job_execute": "gpu-runs",
        "mining.corpus_import_run": "web-host",
        "prolific.sync_study": DEFAULT_QUEUE,
        "core.ping": DEFAULT_QUEUE,
    }


def test_the_system_page_names_each_queue_and_its_kinds(admin_client_, settings):
    settings.TASK_QUEUES = {"IMPORTS": "web-host", "RUNS": "runs", "PROLIFIC": "runs"}
    assert queues_by_name() == {DEFAULT_QUEUE: (), "web-host": ("imports",), "runs": ("runs", "prolific")}
    page = admin_client_.get(reverse("system")).content.decode()
    assert "<code>web-host</code>: imports" in page and "<code>runs</code>: runs, prolific" in page


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


ENQUEUE = """
import json
from django.core.files.uploadedfile import SimpleUploadedFile
from llm.request import LLMRequest
from llm.services import llm_job_create
from mining.corpus_services import corpus_upload_create

docs = [{"id": f"doc-{i}", "text": f"Step {i}: sand the board, then varnish it.", "url": ""} for i in range(3)]
body = "\\n".join(json.dumps(d) for d in docs).encode()
upload = corpus_upload_create(name="queued-corpus", upload=SimpleUploadedFile("docs.jsonl", body))
schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
job = llm_job_create(run="queued-run", role="llm_filter", concurrency=2, requests=[
    LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": f"q {i}"}], schema=schema) for i in range(4)])
print(json.dumps({"upload": upload.pk, "upload_status": upload.status, "job": job.pk}))
"""


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_two_workers_on_their_own_queues_each_take_only_their_kind_of_work(tmp_path):
    require(REDIS_URL, "Redis")
    if connection.vendor != "postgresql":
        pytest.skip("the workers and the web process share the test database over PostgreSQL")
    tag = uuid.uuid4().hex[:8]
    imports_queue, runs_queue = f"imports-{tag}", f"runs-{tag}"
    with ScriptedLLM(latency=0.05) as server:
        server.default = lambda body: Reply(json.dumps({"answer": 1}))
        env = {
            "CELERY_BROKER_URL": REDIS_URL,
            "CELERY_RESULT_BACKEND": REDIS_URL,
            "CELERY_QUEUE_IMPORTS": imports_queue,
            "CELERY_QUEUE_RUNS": runs_queue,
            "DATABASE_URL": _database_url(),
            "LLM_BASE_URL": server.base_url,
            "LLM_MODEL": "scripted-model",
            "LLM_API_KEY": "sk-test",
            "UPLOAD_BACKGROUND_MIN_RECORDS": "1",  # three documents: imported by a worker
        }
        files_dir, runs_dir = tmp_path / "files", tmp_path / "runs"
        files_dir.mkdir()
        runs_dir.mkdir()
        with (
            celery_worker(files_dir, env=env, queue=imports_queue),
            celery_worker(runs_dir, env=env, queue=runs_queue),
        ):
            web = subprocess.run(
                [sys.executable, "manage.py", "shell", "-c", ENQUEUE],
                env=dict(os.environ, DJANGO_SETTINGS_MODULE="config.django.test", **env),
                cwd=BASE_DIR,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert web.returncode == 0, web.stderr[-3000:]
            ids = json.loads(web.stdout.strip().splitlines()[-1])
            assert ids["upload_status"] == "queued"
            deadline = time.monotonic() + 90
            while not (
                CorpusImport.objects.get(pk=ids["upload"]).status == "done"
                and LLMJob.objects.get(pk=ids["job"]).status == "done"
            ):
                assert time.monotonic() < deadline, "the two kinds of work did not finish"
                time.sleep(0.2)
    assert Document.objects.filter(corpus__name="queued-corpus").count() == 3
    assert f"-{runs_queue}@" in LLMJob.objects.get(pk=ids["job"]).worker  # its worker's hostname
    files_log = (files_dir / f"worker-{imports_queue}.log").read_text()
    runs_log = (runs_dir / f"worker-{runs_queue}.log").read_text()
    # "Task <name>[<id>] received": what each worker was handed (its banner lists every task)
    assert "Task mining.corpus_import_run[" in files_log and "Task llm.job_execute[" not in files_log
    assert "Task llm.job_execute[" in runs_log and "Task mining.corpus_import_run[" not in runs_log
