"""Secrets stored in the database (LLM endpoint API keys, researchers' Prolific tokens),
encrypted at rest.

Fernet (AES-128-CBC with an HMAC-SHA256 tag) with a key derived from SECRET_KEY by HKDF, one
derivation per ``purpose``, so a key of one kind can never be read as another; keys derived
from SECRET_KEY_FALLBACKS still decrypt, so rotating SECRET_KEY the way Django documents it
keeps stored secrets readable. A secret is decrypted only when it is about to be used, and
every decrypted secret is registered with the log and error-report masking
(core/secret_masking.py), so a line that quotes it shows it masked."""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.views.decorators.debug import sensitive_variables

from core.secret_masking import secret_register


class SecretUnreadable(RuntimeError):
    """A stored secret cannot be decrypted: SECRET_KEY changed without the old one in
    SECRET_KEY_FALLBACKS, or the stored value was altered."""


def _fernet_for(secret_key: str, purpose: bytes) -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(secret_key.encode("utf-8"))
    return Fernet(base64.urlsafe_b64encode(derived))


def _fernet(purpose: bytes) -> MultiFernet:
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet([_fernet_for(str(key), purpose) for key in keys])


@sensitive_variables("plaintext")
def secret_encrypt(plaintext: str, *, purpose: bytes) -> str:
    return _fernet(purpose).encrypt(plaintext.encode("utf-8")).decode("ascii")


@sensitive_variables("plaintext")
def secret_decrypt(stored: str, *, purpose: bytes) -> str:
    try:
        plaintext = _fernet(purpose).decrypt(stored.encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError) as exc:  # UnicodeError is a ValueError
        raise SecretUnreadable("the stored secret cannot be decrypted (SECRET_KEY changed?)") from exc
    secret_register(plaintext)
    return plaintext
