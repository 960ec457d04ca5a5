"""API token secrets: how they are made, recognised and hashed. Pure Python: no Django.

A secret is ``h2e_`` followed by 43 URL-safe characters (256 random bits). Only its SHA-256
digest is stored; with that much randomness a plain hash cannot be reversed by guessing, so
no slow password hash is needed (and every API request can afford the check)."""

from __future__ import annotations

import hashlib
import secrets

SECRET_PREFIX = "h2e_"
SECRET_RANDOM_BYTES = 32
# Characters of the secret kept in clear to tell tokens apart ("h2e_" and 8 more).
SHOWN_PREFIX_LENGTH = len(SECRET_PREFIX) + 8
# Longer strings are refused before hashing: no legitimate secret comes close.
MAX_SECRET_LENGTH = 200


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(SECRET_RANDOM_BYTES)


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def secret_prefix(secret: str) -> str:
    return secret[:SHOWN_PREFIX_LENGTH]
