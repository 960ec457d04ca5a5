"""The production server as shipped (config/gunicorn.conf.py, config/wsgi.py) against the
attacks that once stopped it: bodies declared huge by anonymous callers, slow and stalled
bodies, and a worker killed in the middle of an upload.

A real gunicorn (gthread, 2 workers of the shipped 8 threads) serves the test database; the clients are raw sockets, so a body can be sent as slowly as an
attacker would. REQUEST_BODY_TIMEOUT_SECONDS is 4 here: a stalled ten-byte body of a 50,000
byte request is given back after 4 s plus 50,000 bytes at 64 KiB/s, about 4.8 s. A page
answered in less than that (with a second to spare) did not wait for any stalled body."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from tests.services import BASE_DIR, free_port

pytestmark = pytest.mark.django_db(transaction=True)

BODY_SECONDS = 4
HEADER_SECONDS = 2
ALLOWED = BODY_SECONDS + 50_000 / (64 * 1024)  # the deadline of a 50,000 byte body


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@contextmanager
def gunicorn(tmp_path: Path):
    port = free_port()
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="config.django.test",
        DATABASE_URL=_database_url(),
        VAR_DIR=str(var_dir),
        SECRET_KEY=settings.SECRET_KEY,  # the sessions this test signs are read there
        HOW2_VAR_DIR_PER_WORKER="1",
        GUNICORN_BIND=f"127.0.0.1:{port}",
        GUNICORN_WORKERS="2",
        REQUEST_BODY_TIMEOUT_SECONDS=str(BODY_SECONDS),
        REQUEST_HEADER_TIMEOUT_SECONDS=str(HEADER_SECONDS),
    )
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.conf.py", "config.wsgi"],
            cwd=BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gunicorn did not start:\n{log.read_text()[-3000:]}")
            try:
                if _get(port, "/login/", timeout=5)[0] == 200:
                    break
            except OSError:
                time.sleep(0.3)
        yield port, var_dir / "upload-tmp", log
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _status(data: bytes) -> int:
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0


def _read_response(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (each request here says
    ``Connection: close``)."""
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _get(port: int, path: str, timeout: float = 10) -> tuple[int, float]:
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = _read_response(sock)
    return _status(data), time.monotonic() - started


def _start_body(
    port: int, path: str, length: int, first: bytes, content_type: str, cookie: str = "", close: bool = True
) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    connection = "Connection: close\r\n" if close else ""  # HTTP/1.1 keeps a connection open unless told
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\n{cookie}{connection}\r\n"
    )
    sock.sendall(head.encode() + first)
    return sock


def _stall(port: int, n: int) -> list[socket.socket]:
    """``n`` connections that declare a 50,000 byte form and send ten bytes of it."""
    return [_start_body(port, "/login/", 50_000, b"username=x", "application/x-www-form-urlencoded") for _ in range(n)]


def _answers(connections: list[socket.socket]) -> list[bytes]:
    answers = []
    for sock in connections:
        with sock:
            answers.append(_read_response(sock))
    return answers


def test_slow_and_stalled_bodies_hold_a_thread_until_their_deadline_never_a_worker(tmp_path):
    with gunicorn(tmp_path) as (port, upload_dir, _):
        # The attack as reported: six connections declare 50,000 bytes and send ten. Each
        # holds one thread of sixteen; pages are answered at once meanwhile.
        started = time.monotonic()
        stalled = _stall(port, 6)
        time.sleep(0.5)
        for _ in range(3):
            status, took = _get(port, "/login/")
            assert status == 200 and took < ALLOWED - 1, took
        # Each stalled body is answered 408, naming the body, once its deadline passes.
        answers = _answers(stalled)
        waited = time.monotonic() - started
        assert [_status(a) for a in answers] == [408] * 6, [a[:200] for a in answers]
        assert all(b"REQUEST_BODY_TIMEOUT_SECONDS" in a for a in answers)
        assert ALLOWED - 0.5 < waited < 2 * ALLOWED + 3, waited
        print(f"six stalled bodies: 408 after {waited:.1f} s (deadline {ALLOWED:.1f} s)")

        # More stalled bodies than threads: a page waits, but only for deadlines. A worker
        # takes connections into its own queue, so in the worst case 24 stalled bodies sit in
        # one worker's queue ahead of the page: three rounds of eight.
        stalled = _stall(port, 24)
        time.sleep(0.5)
        status, took = _get(port, "/login/", timeout=60)
        assert status == 200 and took < 3 * ALLOWED + 3, took
        print(f"24 stalled bodies: a page answered after {took:.1f} s")
        assert {_status(a) for a in _answers(stalled)} == {408}
        # Every thread is free again at once.
        status, took = _get(port, "/login/")
        assert status == 200 and took < ALLOWED - 1, took
        assert not upload_dir.exists() or list(upload_dir.iterdir()) == []


def _trickle(sock: socket.socket, piece: bytes, every: float, stop: threading.Event) -> threading.Thread:
    """Send ``piece`` every ``every`` seconds until the server stops listening (or ``stop``)."""

    def run() -> None:
        while not stop.wait(every):
            try:
                sock.sendall(piece)
            except OSError:
                return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _closed_within(sock: socket.socket, seconds: float) -> tuple[bytes, float]:
    """What the server sent before closing the connection, and when it closed it."""
    started = time.monotonic()
    sock.settimeout(seconds)
    try:
        data = _read_response(sock)
    except TimeoutError:
        data = b"(still open)"
    return data, time.monotonic() - started


def test_trickled_headers_trickled_bodies_and_trickled_chunks_are_cut_off(tmp_path):
    stop = threading.Event()
    with gunicorn(tmp_path) as (port, _, _):
        started = time.monotonic()
        slow_headers, slow_bodies, slow_chunks = [], [], []
        for _ in range(8):
            # One header line every half second: never a whole request.
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            _trickle(sock, b"X-Slow: yes\r\n", 0.5, stop)
            slow_headers.append(sock)
            # A declared body sent a byte every 0.3 s (3 bytes/s, under any sane minimum rate).
            sock = _start_body(port, "/login/", 50_000, b"u", "application/x-www-form-urlencoded")
            _trickle(sock, b"x", 0.3, stop)
            slow_bodies.append(sock)
            # A chunked body, one one-byte chunk every 0.3 s, which Django never reads.
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(
                b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n5\r\nab=cd\r\n"
            )
            _trickle(sock, b"1\r\nx\r\n", 0.3, stop)
            slow_chunks.append(sock)
        time.sleep(0.5)
        # Twenty-four slow connections, sixteen threads: a page waits, but only for deadlines.
        status, took = _get(port, "/login/", timeout=60)
        assert status == 200 and took < 2 * ALLOWED + 3, took
        try:
            header_ends = [_closed_within(sock, 30) for sock in slow_headers]
            body_ends = [_closed_within(sock, 30) for sock in slow_bodies]
            chunk_ends = [_closed_within(sock, 30) for sock in slow_chunks]
        finally:
            stop.set()
            for sock in slow_headers + slow_bodies + slow_chunks:
                sock.close()
        since = time.monotonic() - started
        # Headers: closed without an answer once their deadline passed (plus the wait for a thread).
        assert all(data != b"(still open)" and not data.startswith(b"HTTP/1.1 200") for data, _ in header_ends)
        # Bodies: 408 at the rate rule, long before their 50,000 bytes would have come (4.6 hours).
        assert [_status(data) for data, _ in body_ends] == [408] * 8, [d[:120] for d, _ in body_ends]
        # Chunks: answered (CSRF's 403: Django reads no chunked body) and closed, not drained.
        assert all(_status(data) == 403 for data, _ in chunk_ends), [d[:120] for d, _ in chunk_ends]
        assert since < 3 * ALLOWED + 10, since
        print(f"24 trickling connections: a page answered after {took:.1f} s; all cut off within {since:.1f} s")
        status, took = _get(port, "/login/")
        assert status == 200 and took < ALLOWED - 1, took


def test_an_anonymous_huge_body_is_refused_from_its_headers_and_nothing_reaches_the_disk(tmp_path):
    with gunicorn(tmp_path) as (port, upload_dir, _):
        content_type = "multipart/form-data; boundary=b"
        for path in ("/login/", "/api/studies/"):
            started = time.monotonic()
            # A client that would keep the connection: the refusal says it ends, and it does.
            sock = _start_body(port, path, 300 * (1 << 20), b"--b\r\n", content_type, close=False)
            with sock:
                answer = _read_response(sock)
            assert _status(answer) == 400, answer[:300]
            assert b"ANONYMOUS_BODY_MAX_BYTES" in answer
            assert b"\r\nConnection: close\r\n" in answer.split(b"\r\n\r\n", 1)[0] + b"\r\n"
            assert time.monotonic() - started < 5  # the 300 MiB were never waited for
        assert not upload_dir.exists() or list(upload_dir.iterdir()) == []


def test_a_worker_killed_mid_upload_leaves_no_temporary_file_behind(tmp_path, admin_user):
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session["_auth_user_id"] = str(admin_user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = admin_user.get_session_auth_hash()
    session.create()
    cookie = f"Cookie: sessionid={session.session_key}\r\n"
    with gunicorn(tmp_path) as (port, upload_dir, log):
        head = b'--b\r\nContent-Disposition: form-data; name="file"; filename="docs.jsonl"\r\n\r\n'
        sent = head + b'{"id": "d", "text": "x"}\n' * 200_000  # about 5 MB of a declared 50 MB
        sock = _start_body(port, "/corpora/new/", 50 * (1 << 20), sent, "multipart/form-data; boundary=b", cookie)
        with sock:
            deadline = time.monotonic() + 20
            while not (upload_dir.exists() and any(upload_dir.iterdir())):
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.1)
            (spooled,) = list(upload_dir.iterdir())
            pid = int(spooled.name.split("-")[1])
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 20
            while spooled.exists():
                assert time.monotonic() < deadline, f"{spooled.name} is still there:\n{log.read_text()[-3000:]}"
                time.sleep(0.1)
        assert f"removed the temporary upload file {spooled.name}" in log.read_text()
        # The master started another worker, and the site answers.
        assert _get(port, "/login/")[0] == 200
