"""Request bodies cost nothing before the caller has earned them.

**Which body a request may send** is decided from its declared ``Content-Length`` before a
byte of the body is read (``body_refusal``, called by ``core.middleware.HostileRequestMiddleware``
before every other middleware's view hook, so before CSRF's check reads a form):

* a view marked with ``accepts_uploads(check)`` (the corpus upload page, the New study page
  and the study-creating API) takes up to ``UPLOAD_MAX_BYTES`` from a signed-in caller (by
  session, or by API token) whom ``check`` allows: the role the view itself asks for;
* any other request from a signed-in account takes up to ``DATA_UPLOAD_MAX_MEMORY_SIZE``
  (Django's limit for a body held in memory), and
* an anonymous request (the login page, the annotator's pages) up to
  ``ANONYMOUS_BODY_MAX_BYTES``.

A view marked with ``body_limit(SETTING)`` (Prolific's webhook) takes no more than that
setting's bytes from anyone, whatever the caller's own cap. Anything larger is a 400 naming the
body, unread. A body Django may hold in memory is never
written to disk (``FILE_UPLOAD_MAX_MEMORY_SIZE`` is at least the two small caps), so only an
authorised upload reaches a temporary file.

**Temporary files** of uploads are written to ``FILE_UPLOAD_TEMP_DIR`` (under ``VAR_DIR``) with
the process id in their name (``PidTemporaryFileUploadHandler``). Django deletes one when its
request ends; a process killed in the middle (a worker past its timeout, ``kill -9``) leaves
its file, and ``upload_temp_sweep`` removes the files of processes that are gone: at each
process start (config/wsgi.py) and, under the shipped gunicorn configuration, as soon as the
master sees a worker exit (config/gunicorn.conf.py).

**Slow bodies** are bounded by ``core/wsgi_body.py``; a body that did not arrive in time is
answered 408 here (``BodyTimeout``)."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import TemporaryUploadedFile, UploadedFile
from django.core.files.uploadhandler import TemporaryFileUploadHandler
from django.http import HttpRequest

from core.wsgi_body import BodyTimeout

__all__ = [
    "BodyTimeout",
    "PidTemporaryFileUploadHandler",
    "accepts_uploads",
    "body_limit",
    "body_refusal",
    "upload_temp_sweep",
]

UPLOAD_CHECK_ATTRIBUTE = "upload_check"
BODY_LIMIT_ATTRIBUTE = "body_limit_setting"
TEMP_PREFIX = "upload-"
_TEMP_NAME = re.compile(r"^upload-(\d+)-")


def accepts_uploads(check: Callable[[Any], bool]):
    """Mark a page view (a function) as one that takes an uploaded file from a user whom
    ``check(user)`` allows. A REST API view says the same with a class attribute
    ``upload_check = staticmethod(check)``."""

    def mark(view):
        setattr(view, UPLOAD_CHECK_ATTRIBUTE, check)
        return view

    return mark


def body_limit(setting: str):
    """Mark a page view (a function) whose bodies are capped at ``settings.<setting>`` bytes for
    every caller, below the caps by caller."""

    def mark(view):
        setattr(view, BODY_LIMIT_ATTRIBUTE, setting)
        return view

    return mark


def _marked(view_func: Any, attribute: str) -> Any:
    found = getattr(view_func, attribute, None)
    if found is None:  # a class-based view: as_view() keeps the class on the function
        found = getattr(getattr(view_func, "view_class", None) or getattr(view_func, "cls", None), attribute, None)
    return found


def _upload_check(view_func: Any) -> Callable[[Any], bool] | None:
    return _marked(view_func, UPLOAD_CHECK_ATTRIBUTE)


def declared_length(request: HttpRequest) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0  # Django reads nothing of a body whose length it cannot read


def _caller(request: HttpRequest) -> Any:
    """The signed-in account of a session or of an API token (``Authorization: Token``, read
    from the header alone), or None."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_active:
        return user
    if not request.META.get("HTTP_AUTHORIZATION"):
        return None
    from rest_framework.exceptions import AuthenticationFailed

    from core.authentication import ApiTokenAuthentication

    try:
        found = ApiTokenAuthentication().authenticate(request)  # type: ignore[arg-type]  # reads request.META only
    except AuthenticationFailed:
        return None  # the view answers 401 for it, once the body is small enough to be read
    return found[0] if found else None


def body_cap(request: HttpRequest, view_func: Any) -> tuple[int, str]:
    """The largest body this request may send, and the setting that says so."""
    user = _caller(request)
    if user is not None:
        check = _upload_check(view_func)
        if check is not None and check(user):
            return settings.UPLOAD_MAX_BYTES, "UPLOAD_MAX_BYTES"
        return settings.DATA_UPLOAD_MAX_MEMORY_SIZE, "DATA_UPLOAD_MAX_MEMORY_SIZE"
    return settings.ANONYMOUS_BODY_MAX_BYTES, "ANONYMOUS_BODY_MAX_BYTES"


def body_refusal(request: HttpRequest, view_func: Any) -> tuple[str, str] | None:
    """Why this request's body is refused unread, as (field, message): ``upload`` for a body
    with files, else ``body``. None: it may be read."""
    length = declared_length(request)
    limit_setting = _marked(view_func, BODY_LIMIT_ATTRIBUTE)
    if limit_setting is not None and length > getattr(settings, limit_setting):
        cap = getattr(settings, limit_setting)
        return "body", f"the request body is {length:,} bytes, larger than the limit of {cap:,} bytes ({limit_setting})"
    if length <= min(
        settings.ANONYMOUS_BODY_MAX_BYTES, settings.DATA_UPLOAD_MAX_MEMORY_SIZE, settings.UPLOAD_MAX_BYTES
    ):
        return None  # within every caller's cap: no need to know the caller
    cap, setting = body_cap(request, view_func)
    if length <= cap:
        return None
    field = "upload" if request.content_type == "multipart/form-data" else "body"
    message = f"the request body is {length:,} bytes, larger than the limit of {cap:,} bytes ({setting})"
    if setting != "UPLOAD_MAX_BYTES":
        if _upload_check(view_func) is None:
            message += "; this page takes no upload"
        else:
            message += "; an upload here needs a signed-in account with the page's role"
    return field, message


# --- temporary files ------------------------------------------------------------------


def upload_temp_dir() -> Path:
    path = Path(settings.FILE_UPLOAD_TEMP_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


class PidTemporaryUploadedFile(TemporaryUploadedFile):
    """Django's temporary uploaded file, named after the process that writes it."""

    def __init__(self, name, content_type, size, charset, content_type_extra=None):
        _, ext = os.path.splitext(name)
        file = tempfile.NamedTemporaryFile(
            prefix=f"{TEMP_PREFIX}{os.getpid()}-", suffix=".upload" + ext[:20], dir=upload_temp_dir()
        )
        UploadedFile.__init__(self, file, name, content_type, size, charset, content_type_extra)


class PidTemporaryFileUploadHandler(TemporaryFileUploadHandler):
    def new_file(self, *args, **kwargs):
        super(TemporaryFileUploadHandler, self).new_file(*args, **kwargs)
        self.file = PidTemporaryUploadedFile(
            self.file_name, self.content_type, 0, self.charset, self.content_type_extra
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def upload_temp_sweep(*, gone: int | None = None, directory: Path | None = None) -> list[str]:
    """Remove the temporary upload files of processes that no longer run (and every file of
    ``gone``, a worker the caller saw exit, whose id may already be reused). Returns the
    names removed."""
    folder = directory or Path(settings.FILE_UPLOAD_TEMP_DIR)
    removed: list[str] = []
    if not folder.is_dir():
        return removed
    for path in folder.iterdir():
        match = _TEMP_NAME.match(path.name)
        if match is None or not path.is_file():
            continue
        pid = int(match.group(1))
        if pid == gone or (pid != os.getpid() and not _alive(pid)):
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            removed.append(path.name)
    return removed
