"""Where the product's LLM requests may go: never to the machine's own or its network's private
services unless an admin named the host.

An endpoint record, a registered model or a run configuration names a base URL, and the
product then sends requests there from the server, with a key and a body it chooses, and
reports what came back. Without a rule that is a way to reach what only the server can reach:
its own admin pages, Redis on ``[::1]:6379``, a cloud's metadata service at
``169.254.169.254``, and to map which ports are open by the difference between "cannot connect"
and "HTTP 404". So before a client is made for a base URL, its host is resolved and refused
when any address it resolves to is loopback, private, link-local (the metadata services),
shared (100.64/10), multicast, reserved or unspecified — unless the host, or ``host:port``, is
listed in ``OUTBOUND_ALLOWED_HOSTS`` (comma-separated; ``127.0.0.1:8000`` for a local vLLM,
``localhost``, ``10.0.0.5``, ``gpu-box.internal``). A host that does not resolve is left to the
request itself ("cannot connect"). Redirects are never followed (the clients say so), so a
public URL cannot send a request on to a private one. What this does not stop: a name that
resolves to a public address when checked and to a private one a moment later (DNS
rebinding) — docs/security.md says so."""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from django.conf import settings

from core.app_errors import InvalidInput

# Numeric forms that getaddrinfo also reads as IPv4 ("2130706433", "0x7f.1") resolve like any
# name, so they are checked by what they resolve to.


def allowed_hosts() -> list[str]:
    """``OUTBOUND_ALLOWED_HOSTS`` as lowercase entries (``host`` or ``host:port``)."""
    raw = getattr(settings, "OUTBOUND_ALLOWED_HOSTS", []) or []
    return [entry.strip().lower() for entry in raw if entry and entry.strip()]


def _entry(entry: str) -> tuple[str, str]:
    """(host, port or "") of an allowed-hosts entry: ``host``, ``host:port``, ``[v6]``,
    ``[v6]:port`` or a bare IPv6 address."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else ""
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, port
    return entry, ""


def _listed(host: str, port: int, allowed: Iterable[str]) -> bool:
    host = host.lower().strip("[]")
    return any(name == host and port_text in ("", str(port)) for name, port_text in map(_entry, allowed))


def _not_public(address: str) -> str | None:
    """Why ``address`` is not a public internet address, or None when it is."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for attribute, words in (
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local (metadata services live there)"),
        ("is_unspecified", "unspecified"),
        ("is_multicast", "multicast"),
        ("is_reserved", "reserved"),
        ("is_private", "private"),
    ):
        if getattr(ip, attribute):
            return words
    if isinstance(ip, ipaddress.IPv4Address) and ip in ipaddress.ip_network("100.64.0.0/10"):
        return "shared (carrier-grade NAT)"
    return None


def destination_problem(url: str, allowed: Iterable[str] | None = None) -> str | None:
    """Why requests may not go to ``url``, or None when they may."""
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        return None  # the URL's own checks (base_url_problem) name what is wrong with it
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    allowed = allowed_hosts() if allowed is None else [entry.strip().lower() for entry in allowed]
    if _listed(host, port, allowed):
        return None
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        return None  # does not resolve: the request will say it cannot connect
    for address in sorted(resolved):
        why = _not_public(str(address))
        if why is not None:
            shown = host if host == address else f"{host} ({address})"
            return (
                f"{shown} is a {why} address, which the server does not send requests to unless an admin lists "
                f"the host in OUTBOUND_ALLOWED_HOSTS (e.g. {host}:{port} for a local server)"
            )
    return None


def destination_check(url: str, *, field: str = "base_url") -> None:
    """Refuse ``url`` as a destination (``InvalidInput`` naming ``field``)."""
    problem = destination_problem(url)
    if problem is not None:
        raise InvalidInput(f"{field}: {problem}", {field: problem})


_TAG = re.compile(r"<[^>]{0,2000}>")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: The most of a target's own words kept in an error the product stores and shows.
TARGET_WORDS_MAX = 300


def target_words(text: object, limit: int = TARGET_WORDS_MAX) -> str:
    """What an endpoint answered, as it may be stored and shown: markup removed (an HTML error
    page becomes its text), control characters dropped, whitespace collapsed, at most
    ``limit`` characters. A target's page is never reflected whole into run errors or the
    endpoint API."""
    words = _CONTROL.sub(" ", _TAG.sub(" ", str(text or "")))
    words = " ".join(words.split())
    return words if len(words) <= limit else words[: limit - 1].rstrip() + "…"
