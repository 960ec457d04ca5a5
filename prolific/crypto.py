"""Encryption at rest of saved Prolific tokens, by core/secrets_at_rest.py (Fernet with a key
derived from SECRET_KEY), so a database dump alone does not reveal a token. Changing
SECRET_KEY without keeping the old one in SECRET_KEY_FALLBACKS makes saved tokens unreadable:
they must be saved again."""

from __future__ import annotations

from django.views.decorators.debug import sensitive_variables

from core.secrets_at_rest import SecretUnreadable, secret_decrypt, secret_encrypt

_PURPOSE = b"how2everything-studio prolific tokens v1"


class TokenUnreadable(SecretUnreadable):
    """A saved token that cannot be decrypted (SECRET_KEY changed, or the row was altered)."""


@sensitive_variables("token")
def token_encrypt(token: str) -> str:
    return secret_encrypt(token, purpose=_PURPOSE)


def token_decrypt(stored: str) -> str:
    try:
        return secret_decrypt(stored, purpose=_PURPOSE)
    except SecretUnreadable as exc:
        raise TokenUnreadable(
            "the saved Prolific token can no longer be read (the server's SECRET_KEY changed?); save it again"
        ) from exc
