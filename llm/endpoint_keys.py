"""API keys of endpoint records, encrypted at rest by core/secrets_at_rest.py (Fernet with a
key derived from SECRET_KEY; SECRET_KEY_FALLBACKS still decrypt). A key is decrypted only
when a request is about to be sent (or tested), and is then masked in logs and error reports."""

from __future__ import annotations

from django.views.decorators.debug import sensitive_variables

from core.secrets_at_rest import SecretUnreadable, secret_decrypt, secret_encrypt

_PURPOSE = b"how2everything-studio llm endpoint api keys v1"


class StoredKeyUnreadable(SecretUnreadable):
    """The stored key cannot be decrypted: SECRET_KEY changed without the old one in
    SECRET_KEY_FALLBACKS."""


@sensitive_variables("plaintext")
def api_key_encrypt(plaintext: str) -> str:
    return secret_encrypt(plaintext, purpose=_PURPOSE)


def api_key_decrypt(token: str) -> str:
    try:
        return secret_decrypt(token, purpose=_PURPOSE)
    except SecretUnreadable as exc:
        raise StoredKeyUnreadable(
            "the stored API key cannot be decrypted (SECRET_KEY changed?): enter the key again on the endpoint's page"
        ) from exc


def api_key_last4(plaintext: str) -> str:
    """What pages show of a stored key: its last four characters, or fewer of a short key
    (never more than a quarter of it)."""
    shown = min(4, len(plaintext) // 4)
    return plaintext[-shown:] if shown else ""
