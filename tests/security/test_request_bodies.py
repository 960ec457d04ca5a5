"""A request body costs nothing before its caller has earned it (core/request_bodies.py).

Each refused request below declares a large body but carries only a few bytes: Django's test
client reads its body from a payload that refuses to be read past what it holds, so a view,
a middleware or CSRF's check that began to read the declared body would fail the request
instead of answering the 400 the test expects. The same rules against a real gunicorn with the
shipped configuration, slow bodies and a worker killed mid-upload: tests/test_gunicorn_bodies.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from core.request_bodies import upload_temp_sweep

BOUNDARY = "x-boundary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"
HUGE = 300 * (1 << 20)  # 300 MiB, as the attack declared


def _named(response) -> str:
    """The one field a refusal names (the error body: code, detail, then the field's problems)."""
    body = response.json()
    assert body["code"] == "invalid_input", body
    (field,) = [key for key in body if key not in ("code", "detail")]
    return field


def _declared(client: Client, path: str, length: int, content_type: str = MULTIPART, **extra):
    """POST a body that says it is ``length`` bytes long and is ten."""
    return client.generic("POST", path, b"0123456789", content_type=content_type, CONTENT_LENGTH=str(length), **extra)


def _field(response) -> str:
    if response["Content-Type"].startswith("application/json"):
        return _named(response)
    page = response.content.decode()
    return page.split("<strong>", 1)[1].split("</strong>", 1)[0]


@pytest.fixture
def open_study(db):
    from annotate.testing import study_make

    return study_make(n_items=2, annotators_per_item=1)


@pytest.mark.sqlite
@pytest.mark.django_db
def test_anonymous_bodies_over_their_cap_are_refused_unread_on_every_url(open_study, settings):
    paths = ["/login/", f"/a/{open_study.slug}/consent/", "/api/studies/", "/api/reward", "/no/such/page/"]
    for path in paths:
        response = _declared(Client(), path, HUGE)
        if path == "/no/such/page/":  # no view: nothing reads the body, and the page is a 404
            assert response.status_code == 404
            continue
        assert response.status_code == 400, (path, response.status_code)
        assert _field(response) == "upload"
        assert "ANONYMOUS_BODY_MAX_BYTES" in response.content.decode(), path
    # A JSON body is a "body", and the cap is the same.
    response = _declared(
        Client(), "/api/reward", settings.ANONYMOUS_BODY_MAX_BYTES + 1, content_type="application/json"
    )
    assert response.status_code == 400 and _named(response) == "body"
    # At the cap, the body is read (here, ten bytes where more were promised: the view's own 400).
    response = Client().post("/login/", {"username": "a", "password": "b"})
    assert response.status_code == 200


@pytest.mark.django_db
def test_a_signed_in_account_sends_large_bodies_only_where_its_role_takes_uploads(
    researcher_client, admin_client_, settings
):
    settings.UPLOAD_MAX_BYTES = 1 << 30
    # A page without uploads: Django's in-memory limit, and the refusal says why.
    response = _declared(researcher_client, reverse("annotate:study_list"), HUGE)
    assert response.status_code == 400 and _field(response) == "upload"
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in response.content.decode()
    assert "this page takes no upload" in response.content.decode()
    # The corpus upload page takes uploads from admins only: a researcher's is refused unread.
    response = _declared(researcher_client, reverse("corpus_upload"), HUGE)
    assert response.status_code == 400
    assert "needs a signed-in account with the page&#x27;s role" in response.content.decode()
    # An admin may send it: the body is then read (and this one holds ten bytes of the
    # 300 MiB it promised, which the test client's payload refuses: proof that it was read).
    with pytest.raises(AssertionError, match="Cannot read more than the available bytes"):
        _declared(admin_client_, reverse("corpus_upload"), HUGE)
    # The study API's POST takes an items file from a researcher, up to UPLOAD_MAX_BYTES.
    settings.UPLOAD_MAX_BYTES = 1000
    response = _declared(researcher_client, "/api/studies/", 5000)
    assert response.status_code == 400 and _named(response) == "upload"
    assert "UPLOAD_MAX_BYTES" in response.json()["detail"]


@pytest.mark.django_db
def test_an_api_token_counts_as_its_account_before_the_body_is_read(researcher, settings):
    from core.services import api_token_create

    settings.UPLOAD_MAX_BYTES = 1 << 30
    secret = api_token_create(user=researcher).secret
    # A token caller may send the study API an items file larger than an anonymous body ...
    with pytest.raises(AssertionError, match="Cannot read more than the available bytes"):
        _declared(Client(), "/api/studies/", 1 << 20, HTTP_AUTHORIZATION=f"Token {secret}")
    # ... and a wrong token is anonymous: refused unread, the anonymous cap named.
    response = _declared(Client(), "/api/studies/", 1 << 20, HTTP_AUTHORIZATION="Token not-a-token")
    assert response.status_code == 400 and "ANONYMOUS_BODY_MAX_BYTES" in response.json()["detail"]
    # A real upload through the token: the study is created from its items file.
    lines = b"".join(
        b'{"item_id": "i%d", "topic": "Food & Dining", "goal": "Bake bread", '
        b'"reference_steps": ["Mix", "Bake"], "candidate_steps": ["Mix", "Bake"], "pad": "%s"}\n' % (i, b"p" * 300)
        for i in range(1000)
    )
    assert len(lines) > settings.ANONYMOUS_BODY_MAX_BYTES
    response = Client().post(
        "/api/studies/",
        {
            "name": "Token study",
            "kind": "critical_failure",
            "annotators_per_item": 2,
            "items_file": SimpleUploadedFile("items.jsonl", lines),
        },
        HTTP_AUTHORIZATION=f"Token {secret}",
    )
    assert response.status_code in (201, 202), response.content[:500]


@pytest.mark.django_db
def test_an_authorised_upload_over_the_memory_limit_goes_to_a_temporary_file_named_after_its_process(
    admin_client_, settings, tmp_path, monkeypatch
):
    from mining.models import Corpus

    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "upload-tmp")
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024
    seen: list[str] = []
    from core import request_bodies

    original = request_bodies.PidTemporaryUploadedFile.__init__

    def remember(self, *args, **kwargs):
        original(self, *args, **kwargs)
        seen.append(Path(self.file.name).name)

    monkeypatch.setattr(request_bodies.PidTemporaryUploadedFile, "__init__", remember)
    lines = b"".join(b'{"id": "d%d", "text": "How to bake bread, step by step %d"}\n' % (i, i) for i in range(200))
    response = admin_client_.post(
        reverse("corpus_upload"),
        {
            "name": "web",
            "description": "",
            "id_field": "id",
            "text_field": "text",
            "url_field": "url",
            "topic_field": "topic",
            "file": SimpleUploadedFile("docs.jsonl", lines),
        },
    )
    assert response.status_code == 302, response.content.decode().split("<main", 1)[-1][:800]
    assert Corpus.objects.get(name="web").documents.count() == 200
    assert len(seen) == 1 and seen[0].startswith(f"upload-{os.getpid()}-")
    assert list((tmp_path / "upload-tmp").iterdir()) == []  # deleted when the request ended


def test_the_sweep_removes_the_files_of_processes_that_are_gone(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        names = {
            "dead": f"upload-{gone.pid}-abc.upload.jsonl",
            "alive": f"upload-{alive.pid}-def.upload",
            "mine": f"upload-{os.getpid()}-ghi.upload",
            "other": "notes.txt",
        }
        for name in names.values():
            (tmp_path / name).write_bytes(b"x" * 100)
        assert upload_temp_sweep(directory=tmp_path) == [names["dead"]]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([names["alive"], names["mine"], names["other"]])
        # A worker the caller saw exit: its files go even if its id now names another process.
        assert upload_temp_sweep(directory=tmp_path, gone=alive.pid) == [names["alive"]]
        assert upload_temp_sweep(directory=tmp_path / "missing") == []
    finally:
        alive.kill()
        alive.wait()


def test_a_stalled_or_trickled_body_is_cut_off_by_the_rate_rule_and_its_socket_stops_reading():
    import socket
    import threading
    import time

    from core.wsgi_body import BodyDeadline, BodyTimeout

    seen: dict = {}

    def no_start(status: str, headers: list[tuple[str, str]], exc_info: object = None, /) -> Callable[[bytes], object]:
        return lambda data: None

    def app(environ, start_response):
        body = environ["wsgi.input"]
        started = time.monotonic()
        try:
            seen["read"] = body.read()
        except BodyTimeout as exc:
            seen["waited"] = time.monotonic() - started
            seen["message"] = str(exc)
            seen["received"] = body.received
        return [b""]

    # 0.5 s of grace, then 1,000 bytes a second on average: 110 bytes by 0.61 s at the latest.
    wrapped = BodyDeadline(app, grace_seconds=0.5, min_bytes_per_second=1000)
    assert wrapped.allowed_seconds(110) == pytest.approx(0.61)
    for trickle in (False, True):
        seen.clear()
        server_side, client_side = socket.socketpair()
        stop = threading.Event()
        with server_side, client_side:
            client_side.sendall(b"0123456789")  # ten of the 110 bytes declared

            def drip():
                while trickle and not stop.wait(0.05):  # then a byte every 50 ms: 20 bytes/s
                    try:
                        client_side.sendall(b"x")
                    except OSError:
                        return

            dripper = threading.Thread(target=drip, daemon=True)
            dripper.start()
            environ = {
                "CONTENT_LENGTH": "110",
                "wsgi.input": server_side.makefile("rb"),
                "gunicorn.socket": server_side,
            }
            wrapped(environ, no_start)
            stop.set()
            dripper.join()
            assert "read" not in seen, seen
            assert 0.4 < seen["waited"] < 2.0, seen  # cut off at 0.61 s, not after the 5 s the drip needs
            assert seen["received"] < 110
            assert "REQUEST_BODY_MIN_BYTES_PER_SECOND" in seen["message"]
            assert server_side.recv(10) == b""  # its reading side is shut: nothing more is waited for
    # A body that keeps pace is read whole, and the socket stays as it was.
    server_side, client_side = socket.socketpair()
    with server_side, client_side:
        server_side.settimeout(7.0)
        client_side.sendall(b"x" * 110)

        def reads(environ, start_response):
            return [environ["wsgi.input"].read(110)]

        environ = {"CONTENT_LENGTH": "110", "wsgi.input": server_side.makefile("rb"), "gunicorn.socket": server_side}
        in_time = BodyDeadline(reads, grace_seconds=0.5, min_bytes_per_second=1000)
        assert in_time(environ, no_start) == [b"x" * 110]
        assert server_side.gettimeout() == 7.0
        client_side.sendall(b"next")
        assert server_side.recv(10) == b"next"  # read whole: the connection goes on
