"""The production web server: ``gunicorn -c config/gunicorn.conf.py config.wsgi``.

* ``gthread`` workers (config/gunicorn_worker.py): each process serves ``GUNICORN_THREADS``
  requests at once, and a connection that has sent nothing yet waits in the process's poller,
  not in a thread. Its headers must then arrive within ``REQUEST_HEADER_TIMEOUT_SECONDS`` and
  its body keep pace (core/wsgi_body.py), and the body's size is checked against the caller
  before a byte is read (core/request_bodies.py): a slow client holds one thread for seconds,
  never a worker.
* A worker that exits (killed, or past ``timeout``) has its temporary upload files removed
  by the master at once (``child_exit``); every worker removes those of gone processes when
  it starts (config/wsgi.py).
* A worker, once it has loaded the application (with the URL configuration and the LLM
  client, config/wsgi.py), freezes what it loaded (``post_worker_init``, core/gc_freeze.py), so that no full garbage collection of it
  stalls the worker's threads.

docs/operations.md says how to run it and what a buffering proxy in front adds."""

import os

from config.env import var_dir
from config.settings.uploads import UPLOAD_TEMP_DIRNAME

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", "4"))
worker_class = "config.gunicorn_worker.HeaderDeadlineWorker"  # gthread, with a deadline on headers
threads = int(os.environ.get("GUNICORN_THREADS", "8"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
graceful_timeout = 30
keepalive = 5
# Request line and headers: gunicorn's own limits (4094 bytes, 100 fields of 8190 bytes).


def _sweep(gone=None):
    from core.request_bodies import upload_temp_sweep

    removed = upload_temp_sweep(gone=gone, directory=var_dir() / UPLOAD_TEMP_DIRNAME)
    return removed


def on_starting(server):
    for name in _sweep():
        server.log.info("removed the temporary upload file %s of a process that is gone", name)


def post_worker_init(worker):
    """The application is loaded (config/wsgi.py: with the URL configuration and the LLM
    client): keep all of it out of the garbage collector's full passes (core/gc_freeze.py: a
    73–86 ms pause of the whole worker each, otherwise)."""
    from core.gc_freeze import freeze_loaded_objects

    frozen = freeze_loaded_objects()
    worker.log.debug("worker %s: %s objects loaded at start frozen", worker.pid, frozen)


def child_exit(server, worker):
    for name in _sweep(gone=worker.pid):
        server.log.info("removed the temporary upload file %s of worker %s, which exited", name, worker.pid)
