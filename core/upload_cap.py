"""The one cap on the size of an uploaded request body (``UPLOAD_MAX_BYTES``).

Django streams every file of a multipart body to a temporary file as soon as anything reads
``request.POST`` (the hostile-request middleware does, for every URL, anonymous annotator
pages included). ``CappedUploadHandler`` comes first among ``FILE_UPLOAD_HANDLERS``: it refuses
a body whose declared length is over the cap before a byte of it is read or stored. (Django
reads no more than the declared length, and nothing of a body that declares none.) ``core.middleware.HostileRequestMiddleware`` answers the
refusal with a 400 naming the upload. The limits of the importers (config/settings/uploads.py)
apply to what an upload decompresses to; this one bounds the upload itself."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler


class UploadTooLarge(RequestDataTooBig):
    """A request body over ``UPLOAD_MAX_BYTES``."""

    field = "upload"


class CappedUploadHandler(FileUploadHandler):
    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        cap = settings.UPLOAD_MAX_BYTES
        if content_length and content_length > cap:
            raise UploadTooLarge(
                f"the request body is {content_length:,} bytes, over the limit of {cap:,} bytes (UPLOAD_MAX_BYTES)"
            )
        return None  # the other handlers go on as usual

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler makes the file
