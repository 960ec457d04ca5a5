"""gunicorn's gthread worker with a deadline on request headers (config/gunicorn.conf.py).

gthread keeps a connection that has sent nothing in its poller, but once the first bytes of a
request arrive a thread reads the rest of the request line and headers with no time limit: a
client sending one header line every two seconds holds that thread for as long as it likes.
Here the thread gives a connection ``REQUEST_HEADER_TIMEOUT_SECONDS`` (10) from the moment it
takes it; if the headers are not in by then, the socket's reading side is shut and gunicorn
closes the connection. The application lifts the deadline when the request reaches it
(core/wsgi_body.py), where the body's own deadline takes over."""

from __future__ import annotations

import os

from gunicorn.workers.gthread import ThreadWorker

from core.wsgi_body import header_deadline_arm, header_deadline_disarm

REQUEST_HEADER_TIMEOUT_SECONDS = float(os.environ.get("REQUEST_HEADER_TIMEOUT_SECONDS", "10"))


class HeaderDeadlineWorker(ThreadWorker):
    def handle(self, conn):
        sock = conn.sock
        header_deadline_arm(sock, REQUEST_HEADER_TIMEOUT_SECONDS)
        try:
            return super().handle(conn)
        finally:
            header_deadline_disarm(sock)
