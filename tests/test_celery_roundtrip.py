"""A task enqueued by the web process runs in a real Celery worker process: through the
embedded (file-system) broker, through Redis and through RabbitMQ."""

from __future__ import annotations

import os
import re
import uuid

import pytest
from celery import Celery
from django.test import override_settings
from django.urls import reverse

from tests.services import RABBITMQ_URL, REDIS_URL, celery_worker, require

pytestmark = pytest.mark.integration


def _messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


@pytest.mark.django_db
def test_system_page_ping_runs_in_a_worker_through_the_embedded_broker(admin_client_, tmp_path, settings):
    assert settings.CELERY_BROKER_URL == "filesystem://"
    with celery_worker(tmp_path) as worker:
        response = admin_client_.post(reverse("system"), follow=True)
    (message,) = _messages(response)
    assert message.startswith("A worker answered"), message
    found = re.search(r"process (\d+)", message)
    assert found is not None, message
    pid = int(found.group(1))
    assert pid == worker.pid != os.getpid()


@pytest.mark.django_db
@override_settings(WORKER_PING_TIMEOUT_SECONDS=1)
def test_system_page_says_clearly_when_no_worker_answers(admin_client_):
    response = admin_client_.post(reverse("system"), follow=True)
    (message,) = _messages(response)
    assert message.startswith("No Celery worker answered")


def _round_trip(tmp_path, broker_url: str, backend_url: str) -> None:
    queue = f"test-{uuid.uuid4().hex[:8]}"
    client = Celery("web-process", broker=broker_url, backend=backend_url, set_as_current=False)
    env = {"CELERY_BROKER_URL": broker_url, "CELERY_RESULT_BACKEND": backend_url}
    try:
        with celery_worker(tmp_path, env=env, queue=queue) as worker:
            answer = client.send_task("core.ping", queue=queue).get(timeout=30)
    finally:
        client.close()
    assert answer["pid"] == worker.pid != os.getpid()


def test_task_round_trip_through_redis(tmp_path):
    require(REDIS_URL, "Redis")
    _round_trip(tmp_path, REDIS_URL, REDIS_URL)


def test_task_round_trip_through_rabbitmq(tmp_path):
    require(RABBITMQ_URL, "RabbitMQ")
    _round_trip(tmp_path, RABBITMQ_URL, "rpc://")
