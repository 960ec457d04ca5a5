"""Prolific tokens and the client that uses them: a researcher's token saved encrypted
(``prolific_token_save``, ``prolific_token_clear``), the token a request on someone's behalf
uses (``prolific_token_for``: theirs, else PROLIFIC_API_TOKEN), and ``prolific_client``, a
client with that token that logs every exchange on the study; with the two helpers that note or
clear the last error on a study's link."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone

from annotate.models import Study
from core.secret_masking import secret_register
from prolific import constants as C
from prolific.client import Exchange, ProlificClient, ProlificError
from prolific.crypto import TokenUnreadable, token_decrypt, token_encrypt
from prolific.errors import ProlificInvalid
from prolific.models import ProlificCredential, ProlificRequest, ProlificStudyLink


def prolific_token_save(*, user: Any, token: Any) -> ProlificCredential:
    """Save (or replace) ``user``'s token, encrypted; only its last four characters are kept
    in the clear, to say which token is saved."""
    if not isinstance(token, str):
        raise ProlificInvalid("token", "must be text")
    token = token.strip()
    if not token:
        raise ProlificInvalid("token", "paste the API token created in Prolific's settings")
    if len(token) > C.TOKEN_MAX_LENGTH or any(ch.isspace() or ord(ch) < 33 or ord(ch) > 126 for ch in token):
        raise ProlificInvalid(
            "token", f"a Prolific token is at most {C.TOKEN_MAX_LENGTH} printable characters without spaces"
        )
    secret_register(token)  # masked by value in every log line and error report from now on
    credential, _ = ProlificCredential.objects.update_or_create(
        user=user, defaults={"token_encrypted": token_encrypt(token), "last4": token[-4:], "saved_at": timezone.now()}
    )
    return credential


def prolific_token_clear(*, user: Any) -> bool:
    deleted, _ = ProlificCredential.objects.filter(user=user).delete()
    return bool(deleted)


def prolific_token_for(user: Any) -> str:
    """The token a request on ``user``'s behalf uses: theirs, else PROLIFIC_API_TOKEN."""
    credential = ProlificCredential.objects.filter(user=user).first() if user is not None and user.pk else None
    if credential is not None:
        try:
            token = token_decrypt(credential.token_encrypted)
        except TokenUnreadable as exc:
            raise ProlificError("token_unreadable", str(exc)) from None
        secret_register(token)
        return token
    if settings.PROLIFIC_API_TOKEN:
        return settings.PROLIFIC_API_TOKEN
    raise ProlificError("no_token", "No Prolific API token is saved.")


def prolific_client(study: Study | None, user: Any) -> ProlificClient:
    """A client with ``user``'s token (theirs, else PROLIFIC_API_TOKEN); every exchange is
    logged on ``study`` when there is one (the workspace's webhook set-up has none)."""

    def log(exchange: Exchange) -> None:
        if study is None:
            return
        ProlificRequest.objects.create(
            study=study,
            method=exchange.method,
            path=exchange.path,
            attempt=exchange.attempt,
            status_code=exchange.status_code,
            request_excerpt=exchange.request_excerpt,
            response_excerpt=exchange.response_excerpt,
            error=exchange.error,
            seconds=exchange.seconds,
        )

    return ProlificClient(
        token=prolific_token_for(user),
        base_url=settings.PROLIFIC_API_URL,
        timeout=settings.PROLIFIC_TIMEOUT_SECONDS,
        max_attempts=settings.PROLIFIC_MAX_ATTEMPTS,
        retry_base=settings.PROLIFIC_RETRY_BASE_SECONDS,
        retry_max=settings.PROLIFIC_RETRY_MAX_SECONDS,
        on_exchange=log,
    )


def _note_error(link: ProlificStudyLink | None, exc: ProlificError) -> None:
    if link is not None and link.pk:
        ProlificStudyLink.objects.filter(pk=link.pk).update(last_error=str(exc)[:1000])


def _clear_error(link: ProlificStudyLink) -> None:
    if link.last_error:
        ProlificStudyLink.objects.filter(pk=link.pk).update(last_error="")
        link.last_error = ""
