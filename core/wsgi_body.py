"""A request body must arrive in time, or the thread reading it is given back.

A WSGI server hands a request to a thread (or a process) and the application reads the body
from the socket as it comes. A client that declares ``Content-Length: 100000`` and sends ten
bytes holds that thread for as long as it likes: six such connections once stopped every page
of a server with four sync workers until the server killed them.

``BodyDeadline`` wraps the WSGI application (config/wsgi.py). A request with a body gets a
deadline, ``grace_seconds + length / min_bytes_per_second`` from its start, and its
``wsgi.input`` reads no further past it: under gunicorn (which gives the application its
socket as ``gunicorn.socket``) each read waits at most until the deadline, then the socket's
reading side is shut so that nothing more of the body is waited for, and ``BodyTimeout`` is
raised (Django's request answers it 408 naming the body, core/middleware.py). Where the
server gives no socket (Django's development server) the deadline is checked between reads.

Pure: no Django."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable
from typing import Any


class BodyTimeout(OSError):
    """The request body did not arrive before its deadline."""

    field = "body"


class DeadlineInput:
    """``wsgi.input`` that reads nothing past a deadline."""

    def __init__(self, stream: Any, *, deadline: float, allowed: float, sock: socket.socket | None):
        self.stream = stream
        self.deadline = deadline
        self.allowed = allowed
        self.sock = sock
        self.expired = False

    def _expire(self) -> None:
        self.expired = True
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RD)
            except OSError:
                pass
        raise BodyTimeout(
            f"the request body did not arrive within {self.allowed:.0f} s "
            "(REQUEST_BODY_TIMEOUT_SECONDS plus its length at REQUEST_BODY_MIN_BYTES_PER_SECOND)"
        )

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        if self.expired:
            self._expire()
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self._expire()
        if self.sock is not None:
            self.sock.settimeout(remaining)
        try:
            return method(*args)
        except TimeoutError:
            self._expire()

    def read(self, *args: Any) -> bytes:
        return self._call(self.stream.read, *args)

    def readline(self, *args: Any) -> bytes:
        return self._call(self.stream.readline, *args)

    def readlines(self, *args: Any) -> list[bytes]:
        return self._call(self.stream.readlines, *args)

    def __iter__(self):
        while line := self.readline():
            yield line


class BodyDeadline:
    def __init__(self, app: Callable, *, grace_seconds: float, min_bytes_per_second: float):
        self.app = app
        self.grace_seconds = grace_seconds
        self.min_bytes_per_second = min_bytes_per_second

    def allowed_seconds(self, length: int) -> float:
        return self.grace_seconds + length / self.min_bytes_per_second

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length <= 0:
            return self.app(environ, start_response)
        sock = environ.get("gunicorn.socket")
        sock = sock if isinstance(sock, socket.socket) else None
        before = sock.gettimeout() if sock is not None else None
        allowed = self.allowed_seconds(length)
        body = DeadlineInput(environ["wsgi.input"], deadline=time.monotonic() + allowed, allowed=allowed, sock=sock)
        environ["wsgi.input"] = body
        try:
            return self.app(environ, start_response)
        finally:
            if sock is not None and not body.expired:
                try:
                    sock.settimeout(before)  # the response is written as the server would
                except OSError:
                    pass
