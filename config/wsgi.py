"""The WSGI application: Django's, with a deadline on request bodies (core/wsgi_body.py).
Each process that loads it first removes temporary upload files of processes that are gone
(a worker killed in the middle of an upload, core/request_bodies.py), and loads what the
first request would otherwise wait for: the URL configuration with every view module, and the
LLM client, which the URL configuration leaves to its first use so that commands start fast.
A web process loads them here, and no reward call waits for them."""

import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.django.base")
django_application = get_wsgi_application()

from core.request_bodies import upload_temp_sweep  # noqa: E402 - needs the settings loaded
from core.wsgi_body import BodyDeadline  # noqa: E402
from llm import client as _llm_client  # noqa: E402, F401 - loaded before the first request

upload_temp_sweep()
get_resolver().url_patterns  # noqa: B018 - imports the URL configuration and its views
application = BodyDeadline(
    django_application,
    grace_seconds=settings.REQUEST_BODY_TIMEOUT_SECONDS,
    min_bytes_per_second=settings.REQUEST_BODY_MIN_BYTES_PER_SECOND,
)
