"""The address of the client that sent a request.

``REMOTE_ADDR`` unless ``TRUST_PROXY_HEADERS`` says a reverse proxy stands in front of the
server; then the right-most entry of ``X-Forwarded-For``, the one that proxy appended (entries
to its left came from the client and may be forged). Used to count failed logins per
address (AXES_CLIENT_IP_CALLABLE)."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def _address(value: object) -> str | None:
    """``value`` as a normalised IP address, or None (the address is stored in an IP column)."""
    try:
        return str(ipaddress.ip_address(str(value).strip()))
    except ValueError:
        return None


def client_ip(request: HttpRequest) -> str | None:
    meta = getattr(request, "META", {}) or {}
    if getattr(settings, "TRUST_PROXY_HEADERS", False):
        forwarded = str(meta.get("HTTP_X_FORWARDED_FOR", "")).rsplit(",", 1)[-1]
        address = _address(forwarded)
        if address:
            return address
    return _address(meta.get("REMOTE_ADDR", ""))
