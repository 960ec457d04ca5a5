"""The services' clock: one function, so a test can move time for every service at once."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    return timezone.now()
