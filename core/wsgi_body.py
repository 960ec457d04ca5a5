"""A request must arrive in time, or the thread reading it is given back.

A WSGI server hands a connection to a thread (or a process), and the request's headers and
body are read from the socket as they come. A client that sends them slowly holds that thread
for as long as it likes: six connections that declared ``Content-Length: 100000`` and sent ten
bytes once stopped every page of a server with four sync workers, and forty that sent one byte
a second, or one header line every two seconds, stopped one with 32 threads.

* **The body keeps pace** (``BodyDeadline``, wrapping the WSGI application in config/wsgi.py).
  After a grace of ``grace_seconds`` it must keep up an average of ``min_bytes_per_second``:
  the first ``r`` bytes must have arrived ``grace + r / rate`` seconds after the request
  began. The body is read in pieces of at most 64 KiB, each with its own deadline from that
  rule; a piece whose deadline passes while its thread waits is cut off by ``WATCHDOG``, which
  shuts the socket's reading side (gunicorn gives the application its socket as
  ``gunicorn.socket``), and ``BodyTimeout`` is raised (Django's request answers it 408 naming
  the body, core/middleware.py). A body trickled at a byte a second is therefore cut off after
  the grace, whatever length it declared. Where the server gives no socket (Django's
  development server) the deadline is checked between pieces only.
* **An unread body is not waited for.** When the application answers without reading the
  whole body (a refusal, or a chunked body, which Django never reads), the socket's reading
  side is shut once the answer is made, so the server does not wait for the rest of the body,
  and the answer says ``Connection: close`` (so a client does not reuse the connection).
* **Headers arrive in time** (``header_deadline_arm``, used by the gunicorn worker of
  config/gunicorn_worker.py): a connection's request line and headers must arrive within
  ``REQUEST_HEADER_TIMEOUT_SECONDS`` of the thread taking it, or its reading side is shut and
  gunicorn closes it.

Pure: no Django."""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

PIECE_BYTES = 64 * 1024


class BodyTimeout(OSError):
    """The request body did not arrive in time."""

    field = "body"


def shut_reading(sock: socket.socket | None) -> None:
    """Stop reading from ``sock``: a read waiting on it returns at once with nothing more."""
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RD)
    except OSError:
        pass  # already closed


class Watchdog:
    """One thread per process that runs callbacks at their deadlines (monotonic seconds);
    a callback disarmed before its deadline never runs."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, Callable[[], None]] = {}
        self._tokens = itertools.count()
        self._pid = 0

    def arm(self, at: float, callback: Callable[[], None]) -> int:
        with self._cond:
            if self._pid != os.getpid():  # first use, or a forked child: a thread of its own
                self._heap, self._armed, self._pid = [], {}, os.getpid()
                threading.Thread(target=self._run, name="request-deadlines", daemon=True).start()
            token = next(self._tokens)
            self._armed[token] = callback
            heapq.heappush(self._heap, (at, token))
            if self._heap[0][1] == token:
                self._cond.notify()
            return token

    def disarm(self, token: int) -> None:
        with self._cond:
            self._armed.pop(token, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                at, token = self._heap[0]
                wait = at - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                callback = self._armed.pop(token, None)
            if callback is not None:
                try:
                    callback()
                except Exception:  # noqa: BLE001 - a failed cut-off must not stop the others
                    pass


WATCHDOG = Watchdog()

# The header deadline of each connection a thread is reading, by socket (config/gunicorn_worker.py).
_header_tokens: dict[int, int] = {}


def header_deadline_arm(sock: socket.socket, seconds: float) -> int:
    token = WATCHDOG.arm(time.monotonic() + seconds, lambda: shut_reading(sock))
    _header_tokens[id(sock)] = token
    return token


def header_deadline_disarm(sock: Any) -> None:
    token = _header_tokens.pop(id(sock), None)
    if token is not None:
        WATCHDOG.disarm(token)


class DeadlineInput:
    """``wsgi.input`` read in pieces, each of which must arrive by its deadline."""

    def __init__(
        self, stream: Any, *, length: int, grace: float, rate: float, started: float, sock: socket.socket | None
    ):
        self.stream = stream
        self.length = length
        self.grace = grace
        self.rate = rate
        self.started = started
        self.sock = sock
        self.received = 0
        self.expired = False

    def _expire(self) -> None:
        self.expired = True
        shut_reading(self.sock)
        raise BodyTimeout(
            f"the request body did not arrive in time: {self.received:,} of {self.length:,} bytes after "
            f"{time.monotonic() - self.started:.0f} s (REQUEST_BODY_TIMEOUT_SECONDS, then at least "
            f"REQUEST_BODY_MIN_BYTES_PER_SECOND on average)"
        )

    def _cut_off(self) -> None:  # in the watchdog's thread
        self.expired = True
        shut_reading(self.sock)

    def _piece(self, method: Callable[[int], bytes], size: int) -> bytes:
        if self.expired:
            self._expire()
        at = self.started + self.grace + (self.received + size) / self.rate
        if time.monotonic() >= at:
            self._expire()
        token = WATCHDOG.arm(at, self._cut_off) if self.sock is not None else None
        try:
            data = method(size)
        except OSError:
            if self.expired:
                self._expire()
            raise
        finally:
            if token is not None:
                WATCHDOG.disarm(token)
        if self.expired:
            self._expire()
        self.received += len(data)
        return data

    def read(self, size: int | None = -1) -> bytes:
        wanted = self.length - self.received if size is None or size < 0 else size
        parts = []
        while wanted > 0:
            data = self._piece(self.stream.read, min(wanted, PIECE_BYTES))
            if not data:
                break
            parts.append(data)
            wanted -= len(data)
        return b"".join(parts)

    def readline(self, size: int | None = -1) -> bytes:
        limit = PIECE_BYTES if size is None or size < 0 else min(size, PIECE_BYTES)
        return self._piece(self.stream.readline, limit)

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line


class BodyDeadline:
    def __init__(self, app: WSGIApplication, *, grace_seconds: float, min_bytes_per_second: float):
        self.app = app
        self.grace_seconds = grace_seconds
        self.min_bytes_per_second = min_bytes_per_second

    def allowed_seconds(self, length: int) -> float:
        """The longest a body of ``length`` bytes may take, kept up at the lowest rate."""
        return self.grace_seconds + length / self.min_bytes_per_second

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        sock = sock if isinstance(sock, socket.socket) else None
        if sock is not None:
            header_deadline_disarm(sock)  # the request line and headers are in
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        body = None
        if length > 0:
            body = DeadlineInput(
                environ["wsgi.input"],
                length=length,
                grace=self.grace_seconds,
                rate=self.min_bytes_per_second,
                started=time.monotonic(),
                sock=sock,
            )
            environ["wsgi.input"] = body
        try:
            return self.app(environ, start_response)
        finally:
            if chunked or (body is not None and body.received < length):
                # Answered without the rest: do not wait for it, and say that the connection
                # ends (gunicorn's response, whose start_response this is, can be told so).
                shut_reading(sock)
                close = getattr(getattr(start_response, "__self__", None), "force_close", None)
                if callable(close):
                    close()
