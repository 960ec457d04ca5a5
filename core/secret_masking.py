"""Masking secrets in text: URL credentials and known secret values. Pure Python: no Django.

Used by every log handler (core/log_filters.py) and by the error reports, the technical 500
page included (core/error_reports.py), so a broker URL such as
``redis://:hunter2@redis:6379/0`` is written as ``redis://:********@redis:6379/0`` wherever
it would otherwise appear: a setting, a request's environment, a local variable of a
traceback, an exception's message, a log line.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

MASK = "********"

# A URL's scheme and authority up to its *last* "@" (a password may hold an unescaped "@";
# the greedy class backtracks to the last one). The authority ends at "/", "?", "#",
# whitespace, a quote or an angle bracket, so a URL inside a repr or an HTML page is cut
# where it ends.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#\s'\"<>]*)@")

# The credential of an HTTP Authorization header written out in text ("Authorization: Token
# abc", "'Authorization': 'Bearer abc'", a header dict's repr): the scheme stays, the credential
# is masked whatever its length (Prolific's API takes "Authorization: Token <token>").
_AUTHORIZATION = re.compile(
    r"(?P<head>\bAuthorization['\"]?\s*[:=]\s*['\"]?(?:Token|Bearer|Basic)\s+)(?P<credential>[^\s'\"<>,;)}\]]+)",
    re.IGNORECASE,
)

# Secrets shorter than this are not masked by value: masking a short password by value would
# hide every occurrence of a common word ("postgres"); such a password is still masked where it
# stands in a URL.
MIN_KNOWN_SECRET_LENGTH = 12


def _mask_userinfo(match: re.Match[str]) -> str:
    userinfo = match.group("userinfo")
    if not userinfo:
        return match.group(0)
    user, colon, password = userinfo.partition(":")
    if colon:
        if not password:
            return match.group(0)
        return f"{match.group('scheme')}{user}:{MASK}@"
    # No colon: the whole user part may be a token (https://<token>@host).
    return f"{match.group('scheme')}{MASK}@"


def mask_url_credentials(text: str) -> str:
    """``scheme://user:password@host`` becomes ``scheme://user:********@host`` (and a bare
    ``scheme://token@host`` becomes ``scheme://********@host``) everywhere in ``text``."""
    if "://" not in text:
        return text
    return _URL_USERINFO.sub(_mask_userinfo, text)


def url_password(value: str) -> str | None:
    """The password (or bare token) of a URL with credentials, else None."""
    match = _URL_USERINFO.search(value)
    if not match or not match.group("userinfo"):
        return None
    user, colon, password = match.group("userinfo").partition(":")
    return (password or None) if colon else (user or None)


def secret_variants(secrets: Iterable[str]) -> list[str]:
    """The secrets worth masking by value, with their HTML-escaped forms (the technical 500
    page escapes what it shows), longest first so a secret containing another is masked
    whole."""
    variants: set[str] = set()
    for secret in secrets:
        if not isinstance(secret, str) or len(secret) < MIN_KNOWN_SECRET_LENGTH:
            continue
        variants.add(secret)
        variants.add(html.escape(secret))
    return sorted(variants, key=len, reverse=True)


def mask_authorization(text: str) -> str:
    """``Authorization: Token abc`` (or Bearer, Basic; quoted or not) becomes
    ``Authorization: Token ********`` everywhere in ``text``."""
    if "authorization" not in text.lower():
        return text
    return _AUTHORIZATION.sub(lambda m: f"{m.group('head')}{MASK}", text)


def mask_secrets(text: str, known: Iterable[str] = ()) -> str:
    """Mask URL credentials and Authorization headers, then every known secret value (as
    prepared by :func:`secret_variants`), in ``text``."""
    masked = mask_authorization(mask_url_credentials(text))
    for secret in known:
        if secret in masked:
            masked = masked.replace(secret, MASK)
    return masked


# Secret values that exist only at run time, never in a setting or the environment (an
# LLM API key stored encrypted in the database, once decrypted): registered by the code
# that decrypts them, masked like known secrets by every log handler and error report.
_registered: set[str] = set()
_registered_variants: tuple[str, ...] = ()


def secret_register(value: str) -> None:
    """Mask ``value`` (and its HTML-escaped form) wherever this process writes a log line
    or an error report from now on. Values shorter than MIN_KNOWN_SECRET_LENGTH are left
    out, as for known secrets."""
    global _registered_variants
    if isinstance(value, str) and len(value) >= MIN_KNOWN_SECRET_LENGTH and value not in _registered:
        _registered.add(value)
        _registered_variants = tuple(secret_variants(list(_registered)))  # readers see one whole tuple


def registered_secrets() -> tuple[str, ...]:
    return _registered_variants
