"""A logging filter that masks secrets in every record: the message with its arguments, the
formatted traceback and the stack. Every handler of LOGGING (config/django/base.py) carries
it, and the Celery worker's handlers get it too (config/celery.py)."""

from __future__ import annotations

import logging


class SecretMaskingFilter(logging.Filter):
    """Rewrites the record in place (never drops it): ``scheme://user:password@`` becomes
    ``scheme://user:********@``, and known secret values of this process become
    ``********``."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            from core.error_reports import mask
        except Exception:  # settings not configured (a bare script): URL credentials only
            from core.secret_masking import mask_url_credentials as mask
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler's own error report
            return True
        masked = mask(message)
        if masked != message:
            record.msg, record.args = masked, ()
        if record.exc_info and not record.exc_text:
            # The formatter uses exc_text when set: format the traceback here, masked.
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask(record.exc_text)
        if record.stack_info:
            record.stack_info = mask(record.stack_info)
        return True
